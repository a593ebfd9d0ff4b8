#!/usr/bin/env python3
"""Count test cases across meson test logs (TAP subtests; a test program that
fails without reporting a failing case counts as one failure) and print the
closing line 'N passed, N failed'. Exits 1 when anything failed."""
import json
import re
import sys


def main():
    passed = failed = 0
    for path in sys.argv[1:]:
        build = path.split('/meson-logs/')[0]
        for line in open(path):
            test = json.loads(line)
            stdout = test.get('stdout') or ''
            ok = len(re.findall(r'^ok \d+', stdout, re.M))
            not_ok = len(re.findall(r'^not ok \d+', stdout, re.M))
            if test['result'] not in ('OK', 'EXPECTEDFAIL', 'SKIP') and not_ok == 0:
                not_ok = 1
                print('%s: %s %s' % (build, test['name'], test['result']))
            if ok == 0 and not_ok == 0 and test['result'] == 'OK':
                ok = 1  # a plain (non-TAP) test that passed
            passed += ok
            failed += not_ok
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
