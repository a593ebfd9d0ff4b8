#!/usr/bin/env python3
"""Count test cases across meson test logs (TAP subtests; a test program that
fails without reporting a failing case counts as one failure) and pytest's junit
XML files, and print the closing line 'N passed, N failed'. Before it, the ten slowest tests (meson
tests by their own seconds, and each pytest file's summed seconds, with the build folder they ran
in) on a few lines, then the ten costliest C tests by CPU seconds (tests/harness.c's closing
line), so that a CI log records where the suite's time went; with --started EPOCH (the
second the test command began), the suite's wall time on its own line just before the closing line. A file named but
missing counts as one failure (its suite did not run), except a "-retry.json" log of
tools/lsan_retry.py, whose entries replace the same tests' earlier results. Exits 1 when
anything failed."""
import json
import os
import re
import sys
import time
import xml.etree.ElementTree as ET


def count_junit(path, seconds):
    """(passed, failed) of a pytest junit XML file; skipped cases count as neither. Adds each test
    file's summed case seconds to `seconds` ({(place, name): seconds})."""
    passed = failed = 0
    place = os.path.dirname(path) or '.'
    for case in ET.parse(path).getroot().iter('testcase'):
        module = (case.get('classname') or case.get('name') or '?').split('::')[0]
        key = (place, 'pytest ' + module.rsplit('.', 1)[-1])
        try:
            seconds[key] = seconds.get(key, 0.0) + float(case.get('time') or 0)
        except ValueError:
            pass
        outcome = {child.tag for child in case}
        if outcome & {'failure', 'error'}:
            failed += 1
            print('%s: %s::%s failed' % (path, case.get('classname'), case.get('name')))
        elif 'skipped' not in outcome:
            passed += 1
    return passed, failed


def slowest_lines(seconds, count=10, per_line=4, label='slowest tests', unit='s'):
    """The `count` slowest entries of {(place, name): seconds}, `per_line` to a line."""
    top = sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0]))[:count]
    items = ['%s %.0f %s (%s)' % (name[len('tessera / '):] if name.startswith('tessera / ') else name, secs, unit, place)
             for (place, name), secs in top]
    return ['%s: %s' % (label, ', '.join(items[i:i + per_line])) for i in range(0, len(items), per_line)]


def main():
    passed = failed = 0
    args = sys.argv[1:]
    started = None
    if len(args) >= 2 and args[0] == '--started':
        started = float(args[1])
        args = args[2:]
    meson = {}  # (build, test name) -> (ok, not ok, result): a later log's entry replaces an earlier one
    seconds = {}  # (build, test name) -> seconds (a later log's entry replaces an earlier one)
    cpu = {}  # (build, test name) -> CPU seconds, from the harness's closing "# W s (C CPU-s): end" line
    for path in args:
        optional = path.endswith('-retry.json')  # tools/lsan_retry.py's re-runs, when there were any
        if not os.path.exists(path):
            if not optional:
                print('%s: missing (its suite did not run)' % path)
                failed += 1
            continue
        if path.endswith('.xml'):
            p, f = count_junit(path, seconds)
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
            seconds[(build, test['name'])] = float(test.get('duration') or 0)
            ends = re.findall(r'^# [0-9.]+ s \(([0-9.]+) CPU-s\): end', stdout, re.M)
            if ends:
                cpu[(build, test['name'])] = sum(float(c) for c in ends)
    for (build, name), (ok, not_ok, result) in meson.items():
        if not_ok and result not in ('OK', 'EXPECTEDFAIL', 'SKIP'):
            print('%s: %s %s' % (build, name, result))
        passed += ok
        failed += not_ok
    for line in slowest_lines(seconds):
        print(line)
    # the same by CPU seconds (the C tests' harness reports them): on a loaded machine, or beside the
    # warm-up and the other test process, a test's wall seconds say little about its own cost
    for line in slowest_lines(cpu, label='costliest tests', unit='CPU-s'):
        print(line)
    if started is not None:
        wall = time.time() - started
        print('suite wall time: %d s (%d min %02d s)' % (wall, wall // 60, wall % 60))
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
