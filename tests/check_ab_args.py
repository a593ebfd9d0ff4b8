#!/usr/bin/env python3
"""The A/B bench tools refuse a --var whose text their JSON lines would print broken (TAP output):
a quote, a backslash or a control character in a label, directory or configuration exits 2 with a
message naming --var, before any device is opened and with nothing on stdout; a --layers name the
tool has no layer for (conv1 is not a 3x3 layer) exits 2 the same way, naming it, rather than
measuring nothing.

usage: check_ab_args.py CONV3X3_AB GEMM_DTYPE_AB GEMM_EPILOGUE_AB
"""
import subprocess
import sys

BAD = ['a"b=|', 'a=dir\\x|', 'a=|MWI=8"', 'a\tb=|', 'x=|builtin|MWI=4\x01']
BAD_GEMM = ['f32:MWI=8"', 'f32@/tmp/a\\b', 'f32\n']


def check(tool, value):
    r = subprocess.run([tool, '--var', value], capture_output=True, text=True, timeout=60)
    ok = r.returncode == 2 and '--var' in r.stderr and 'JSON' in r.stderr and not r.stdout
    return ok, f'rc {r.returncode}, stderr {r.stderr.strip()!r}, stdout {r.stdout[:80]!r}'


def check_layers(tool, value):
    r = subprocess.run([tool, '--layers', value], capture_output=True, text=True, timeout=60)
    ok = r.returncode == 2 and "--layers: no layer 'conv1'" in r.stderr and not r.stdout
    return ok, f'rc {r.returncode}, stderr {r.stderr.strip()!r}, stdout {r.stdout[:80]!r}'


def main():
    conv, gemm, epilogue = sys.argv[1:4]
    cases = [(conv, v) for v in BAD] + [(epilogue, v) for v in BAD[:2]] + [(gemm, v) for v in BAD_GEMM]
    layer_cases = ['conv1', 'l1.3x3,conv1', 'conv1,l1.3x3']
    print(f'1..{len(cases) + len(layer_cases)}')
    failed = 0
    for n, (tool, value) in enumerate(cases, 1):
        ok, what = check(tool, value)
        name = f'{tool.rsplit("/", 1)[-1]} --var {value!r}'
        print(('ok' if ok else 'not ok') + f' {n} - {name}' + ('' if ok else f': {what}'))
        failed += not ok
    for n, value in enumerate(layer_cases, len(cases) + 1):
        ok, what = check_layers(conv, value)
        print(('ok' if ok else 'not ok') + f' {n} - conv3x3_ab --layers {value!r}' + ('' if ok else f': {what}'))
        failed += not ok
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
