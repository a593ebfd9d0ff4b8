#!/usr/bin/env python3
"""Run one MPI test through mpirun and check its exit status and output.

usage: mpi_test.py MPIRUN [--expect-rc 0|nonzero|N] [--expect REGEX]... [--reject REGEX]...
                          [--env NAME=VALUE]... [--timeout S] [--max-memory GIB] -- MPIRUN-ARGS...

Every --expect must match somewhere in stdout+stderr, no --reject may; the exit status must be
as given. --env settings are exported to every rank (mpirun -x). A run past --timeout fails:
the point of the fault tests is that nothing hangs. --max-memory limits the address space of
mpirun and its ranks (RLIMIT_AS), so that a test of sizes too large for memory fails with a
refused allocation, not the OOM killer, when the tool does not refuse them first."""
import os
import re
import resource
import subprocess
import sys


def main(argv):
    mpirun, args = argv[1], argv[2:]
    expect_rc, expects, rejects, env_sets, timeout, max_memory = '0', [], [], [], 60.0, None
    while args and args[0] != '--':
        opt, value = args[0], args[1]
        args = args[2:]
        if opt == '--expect-rc':
            expect_rc = value
        elif opt == '--expect':
            expects.append(value)
        elif opt == '--reject':
            rejects.append(value)
        elif opt == '--env':
            env_sets.append(value)
        elif opt == '--timeout':
            timeout = float(value)
        elif opt == '--max-memory':
            max_memory = int(float(value) * 2**30)
        else:
            sys.exit(f'mpi_test.py: unknown option {opt}')
    run_args = args[1:]
    env = dict(os.environ)
    exports = []
    for setting in env_sets:
        name, _, value = setting.partition('=')
        env[name] = value
        exports += ['-x', name]
    # Forward the test environment (cache dirs, PoCL threads) and the --env settings to every rank.
    for name in ('TSR_CACHE_DIR', 'TSR_TUNING_DB', 'POCL_MAX_PTHREAD_COUNT'):
        if name in env:
            exports += ['-x', name]
    cmd = [mpirun, '--oversubscribe', '--bind-to', 'none'] + exports + run_args
    print('+', ' '.join(cmd), flush=True)
    try:
        limit = (lambda: resource.setrlimit(resource.RLIMIT_AS, (max_memory, max_memory))) if max_memory else None
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                              preexec_fn=limit)
    except subprocess.TimeoutExpired as e:
        print((e.stdout or b'').decode(errors='replace'))
        print(f'FAIL: mpirun still running after {timeout} s (a hang)')
        return 1
    out = proc.stdout.decode(errors='replace')
    print(out)
    failures = []
    if expect_rc == 'nonzero':
        if proc.returncode == 0:
            failures.append('exit status 0, expected a failure')
    elif proc.returncode != int(expect_rc):
        failures.append(f'exit status {proc.returncode}, expected {expect_rc}')
    for pattern in expects:
        if not re.search(pattern, out):
            failures.append(f'no output matches {pattern!r}')
    for pattern in rejects:
        if re.search(pattern, out):
            failures.append(f'output matches {pattern!r}')
    for failure in failures:
        print('FAIL:', failure)
    if not failures:
        print('PASS')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
