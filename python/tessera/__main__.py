"""python -m tessera ARGS: the tessera CLI (devices, demo, bench, tune, report, ...)."""
import os
import sys

from ._tools import cli_path


def main():
    path = cli_path()
    os.execv(path, [path] + sys.argv[1:])


if __name__ == '__main__':
    main()
