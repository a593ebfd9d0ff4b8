#!/usr/bin/env python3
"""Count test cases across meson test logs (TAP subtests; a test program that
fails without reporting a failing case counts as one failure) and pytest's junit
XML files, and print the closing line 'N passed, N failed'. With --started EPOCH (the second the
test command began), the suite's wall time is printed on its own line just before it. A file named but
missing counts as one failure (its suite did not run), except a "-retry.json" log of
tools/lsan_retry.py, whose entries replace the same tests' earlier results. Exits 1 when
anything failed."""
import json
import os
import re
import sys
import time
import xml.etree.ElementTree as ET


def count_junit(path):
    """(passed, failed) of a pytest junit XML file; skipped cases count as neither."""
    passed = failed = 0
    for case in ET.parse(path).getroot().iter('testcase'):
        outcome = {child.tag for child in case}
        if outcome & {'failure', 'error'}:
            failed += 1
            print('%s: %s::%s failed' % (path, case.get('classname'), case.get('name')))
        elif 'skipped' not in outcome:
            passed += 1
    return passed, failed


def main():
    passed = failed = 0
    args = sys.argv[1:]
    started = None
    if len(args) >= 2 and args[0] == '--started':
        started = float(args[1])
        args = args[2:]
    meson = {}  # (build, test name) -> (ok, not ok, result): a later log's entry replaces an earlier one
    for path in args:
        optional = path.endswith('-retry.json')  # tools/lsan_retry.py's re-runs, when there were any
        if not os.path.exists(path):
            if not optional:
                print('%s: missing (its suite did not run)' % path)
                failed += 1
            continue
        if path.endswith('.xml'):
            p, f = count_junit(path)
            passed += p
            failed += f
            continue
        build = path.split('/meson-logs/')[0]
        for line in open(path):
            test = json.loads(line)
            stdout = test.get('stdout') or ''
            ok = len(re.findall(r'^ok \d+', stdout, re.M))
            not_ok = len(re.findall(r'^not ok \d+', stdout, re.M))
            if test['result'] not in ('OK', 'EXPECTEDFAIL', 'SKIP') and not_ok == 0:
                not_ok = 1
            if ok == 0 and not_ok == 0 and test['result'] == 'OK':
                ok = 1  # a plain (non-TAP) test that passed
            if optional and (build, test['name']) in meson:
                print('%s: %s re-run after a LeakSanitizer crash: %s' % (build, test['name'], test['result']))
            meson[(build, test['name'])] = (ok, not_ok, test['result'])
    for (build, name), (ok, not_ok, result) in meson.items():
        if not_ok and result not in ('OK', 'EXPECTEDFAIL', 'SKIP'):
            print('%s: %s %s' % (build, name, result))
        passed += ok
        failed += not_ok
    if started is not None:
        wall = time.time() - started
        print('suite wall time: %d s (%d min %02d s)' % (wall, wall // 60, wall % 60))
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
