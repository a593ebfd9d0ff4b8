#!/usr/bin/env python3
"""Re-run, once, the sanitizer-build tests that failed only because LeakSanitizer itself crashed.

    lsan_retry.py BUILD_DIR

LeakSanitizer's leak check at exit sometimes dies in its own thread tracer ("Tracer caught
signal 11 ... LeakSanitizer has encountered a fatal error"), a known intermittent fault of the
sanitizer runtime with many threads alive (PoCL's workers), after the test itself has passed.
A test qualifies for one re-run only when all of these hold in BUILD_DIR/meson-logs/testlog.json:
it failed, its TAP output has passing cases and no failing one, its output holds that fatal
error, and it reports no leak. The re-run's log is BUILD_DIR/meson-logs/testlog-retry.json,
which count_tests.py reads after the first log (its results replace the first run's); each
re-run is printed, so nothing is retried silently. Exit status: 0 (the counting decides).
"""
import json
import os
import re
import subprocess
import sys

FATAL = 'LeakSanitizer has encountered a fatal error'
LEAK = 'ERROR: LeakSanitizer: detected memory leaks'


def main():
    build = sys.argv[1]
    log = os.path.join(build, 'meson-logs', 'testlog.json')
    retry_log = os.path.join(build, 'meson-logs', 'testlog-retry.json')
    if os.path.exists(retry_log):
        os.remove(retry_log)
    if not os.path.exists(log):
        return 0
    names = []
    for line in open(log):
        test = json.loads(line)
        out = (test.get('stdout') or '') + (test.get('stderr') or '')
        if test['result'] in ('OK', 'EXPECTEDFAIL', 'SKIP'):
            continue
        if re.search(r'^not ok \d+', out, re.M) or not re.search(r'^ok \d+', out, re.M):
            continue
        if FATAL in out and LEAK not in out:
            names.append(test['name'])
    if not names:
        return 0
    print('lsan_retry: LeakSanitizer crashed after these tests passed; running them once more: %s'
          % ', '.join(names), flush=True)
    subprocess.run(['meson', 'test', '-C', build, '--print-errorlogs', '--timeout-multiplier', '3',
                    '--logbase', 'testlog-retry'] + names)
    return 0


if __name__ == '__main__':
    sys.exit(main())
