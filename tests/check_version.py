#!/usr/bin/env python3
"""One version string (TAP output): meson.build's project version is the source of truth, and
include/tessera.h's TSR_VERSION_STRING (which the CLI's `tessera version` and every file tessera
writes carry), the Python package's version() and the CLI's output must all say the same.
pyproject.toml takes its version from meson.build (dynamic = ['version'], meson-python).

usage: check_version.py SOURCE_ROOT [TESSERA_CLI]
"""
import pathlib
import re
import subprocess
import sys


def main():
    root = pathlib.Path(sys.argv[1])
    cli = sys.argv[2] if len(sys.argv) > 2 else None
    checks = []
    meson = re.search(r"project\([^)]*?version\s*:\s*'([^']+)'", (root / "meson.build").read_text(), re.S)
    truth = meson.group(1) if meson else None
    checks.append(("meson.build's project version is set", truth is not None, truth))
    header = re.search(r'#define\s+TSR_VERSION_STRING\s+"([^"]*)"', (root / "include" / "tessera.h").read_text())
    checks.append(("include/tessera.h TSR_VERSION_STRING", header is not None and header.group(1) == truth,
                   header.group(1) if header else None))
    pyproject = (root / "pyproject.toml").read_text()
    dynamic = re.search(r"^dynamic\s*=\s*\[[^\]]*'version'", pyproject, re.M) is not None
    literal = re.search(r"^version\s*=", pyproject, re.M) is not None
    checks.append(("pyproject.toml takes the version from meson.build (dynamic, no literal)", dynamic and not literal,
                   "dynamic" if dynamic else "missing"))
    py = None
    for path in sorted((root / "python" / "tessera").rglob("*.py")):
        m = re.search(r"def version\(\):(?:\s*\"\"\"[^\"]*\"\"\")?\s*return\s+'([^']*)'", path.read_text())
        if m:
            py = m.group(1)
    checks.append(("python/tessera version()", py == truth, py))
    if cli:
        out = subprocess.run([cli, "version"], capture_output=True, text=True, timeout=60).stdout.strip()
        checks.append(("`tessera version`", out == "tessera %s" % truth, out))
    print("1..%d" % len(checks))
    failed = 0
    for i, (what, ok, got) in enumerate(checks, start=1):
        if ok:
            print("ok %d - %s: %s" % (i, what, got))
        else:
            failed += 1
            print("not ok %d - %s: %r, but meson.build says %r" % (i, what, got, truth))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
