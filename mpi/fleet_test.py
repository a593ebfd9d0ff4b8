#!/usr/bin/env python3
"""Run one fleet test (tessera report --mpi / tune --mpi) through mpirun, then check its results.

usage: fleet_test.py TESSERA MPIRUN|- [--expect-rc 0|nonzero|N] [--expect REGEX]... [--reject REGEX]...
                     [--env NAME=VALUE]... [--timeout S] [--fresh PATH]... [--warm ARGS] [--seed-db SRC DST]
                     [--report DIR NDEVICES] [--cases ID,...] [--fleet-db FILE KEY-REGEX]... -- MPIRUN-ARGS...

--fresh PATH     removed before the run.
--warm ARGS      `TESSERA ARGS` (split at spaces) run once before the run, unchecked and untimed: it
                 compiles the programs the ranks will use, so that no rank is silent for a cold
                 compile (seconds) in a run whose idle rank must outlive TSR_MPI_TIMEOUT on
                 heartbeats; the run then tests the heartbeats, not the compiler's speed.
--seed-db        SRC copied to DST before the run (a database the run must merge into, not lose).
--report DIR N   DIR/report.json holds N devices, and `tessera report --merge DIR/ranks/rank-*/report.json`
                 gives DIR's report.json and report.md byte for byte.
--cases IDS      with --report: every device of DIR's report has rows of exactly these cases (the
                 ranks ran `report --cases IDS`). With TSR_TEST_LONG=1 (the long tier) the ranks' own
                 --cases are dropped: they report the whole suite, and this check is left out.
--fleet-db F RE  the database F has a device whose key matches RE, with entries; every seeded
                 device is still there; `tessera tune --import F` into a fresh database takes it.
Every --expect must match stdout+stderr, no --reject may; the exit status must be as given, and the
run must end within --timeout (nothing may hang)."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def fail(message, output=''):
    print(output)
    print('FAIL: ' + message)
    sys.exit(1)


def check_report(tessera, out_dir, ndevices, env, cases):
    with open(os.path.join(out_dir, 'report.json'), 'rb') as f:
        merged = f.read()
    devices = json.loads(merged)['devices']
    if len(devices) != ndevices:
        fail(f'{out_dir}/report.json has {len(devices)} devices, not {ndevices}')
    for device in devices if cases else ():
        ran = sorted({row.get('case') for row in device.get('results', [])})
        if ran != sorted(cases):
            fail(f'{out_dir}/report.json: a device has rows of {ran}, not of --cases {sorted(cases)}')
    ranks = sorted(glob.glob(os.path.join(out_dir, 'ranks', 'rank-*', 'report.json')))
    check = os.path.join(out_dir, 'merge-check')
    shutil.rmtree(check, ignore_errors=True)
    cmd = [tessera, 'report', '--merge'] + ranks + ['--out', check]
    print('+', ' '.join(cmd), flush=True)
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    # the merge's own exit status says whether a device failed; its output is what is compared
    for name in ('report.json', 'report.md'):
        with open(os.path.join(out_dir, name), 'rb') as a, open(os.path.join(check, name), 'rb') as b:
            if a.read() != b.read():
                fail(f'{out_dir}/{name} differs from report --merge of {" ".join(ranks)}',
                     proc.stdout.decode(errors='replace'))
    print(f'ok: {out_dir}/report.json ({ndevices} devices) is report --merge of {len(ranks)} rank reports, byte for byte')


def check_db(tessera, path, key_res, seeded, env):
    with open(path) as f:
        devices = json.load(f)['devices']
    for key_re in key_res:
        hits = [k for k, v in devices.items() if re.search(key_re, k) and any(v['ops'].values())]
        if not hits:
            fail(f'{path}: no device matching {key_re!r} with entries (devices: {list(devices)})')
    for key in seeded:
        if key not in devices:
            fail(f'{path}: the seeded device {key!r} was lost')
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [tessera, 'tune', '--import', path, '--db', os.path.join(tmp, 'db.json')]
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        text = proc.stdout.decode(errors='replace')
        if proc.returncode != 0 or 'merged' not in text:
            fail(f'tessera tune --import {path} refused it', text)
    print(f'ok: {path} has {len(devices)} devices and tessera tune --import takes it')


def main(argv):
    tessera, mpirun, args = argv[1], argv[2], argv[3:]
    expect_rc, expects, rejects, env_sets, timeout = '0', [], [], [], 120.0
    fresh, seed, report, dbs, warm, cases = [], None, None, {}, None, None
    while args and args[0] != '--':
        opt = args[0]
        if opt in ('--seed-db', '--report', '--fleet-db'):
            a, b = args[1], args[2]
            args = args[3:]
            if opt == '--seed-db':
                seed = (a, b)
            elif opt == '--report':
                report = (a, int(b))
            else:
                dbs.setdefault(a, []).append(b)
            continue
        value = args[1]
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
        elif opt == '--fresh':
            fresh.append(value)
        elif opt == '--warm':
            warm = value.split()
        elif opt == '--cases':
            cases = value.split(',')
        else:
            sys.exit(f'fleet_test.py: unknown option {opt}')
    env = dict(os.environ)
    exports = []
    for setting in env_sets:
        name, _, value = setting.partition('=')
        env[name] = value
        exports += ['-x', name]
    for name in ('TSR_CACHE_DIR', 'TSR_TUNING_DB', 'POCL_MAX_PTHREAD_COUNT', 'TMPDIR'):
        if name in env:
            exports += ['-x', name]
    for path in fresh:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    seeded = []
    if seed:
        shutil.copyfile(seed[0], seed[1])
        with open(seed[1]) as f:
            seeded = list(json.load(f)['devices'])
    if warm:
        print('+ (warm-up) ' + ' '.join([tessera] + warm), flush=True)
        subprocess.run([tessera] + warm, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout)
    if os.environ.get('TSR_TEST_LONG') == '1':
        kept = []
        for a in args:
            if kept and kept[-1] == '--cases':
                kept.pop()
            else:
                kept.append(a)
        args, cases = kept, None
    # MPIRUN "-": the command alone, without mpirun (a singleton: a fleet of one)
    cmd = args[1:] if mpirun == '-' else [mpirun, '--oversubscribe', '--bind-to', 'none'] + exports + args[1:]
    print('+', ' '.join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        fail(f'still running after {timeout} s: a hang', (e.stdout or b'').decode(errors='replace'))
    out = proc.stdout.decode(errors='replace')
    rc = proc.returncode
    if expect_rc == 'nonzero' and rc == 0 or expect_rc != 'nonzero' and rc != int(expect_rc):
        fail(f'exit status {rc}, expected {expect_rc}', out)
    for pattern in expects:
        if not re.search(pattern, out):
            fail(f'no match for {pattern!r}', out)
    for pattern in rejects:
        if re.search(pattern, out):
            fail(f'unexpected match for {pattern!r}', out)
    print(out)
    if report:
        check_report(tessera, report[0], report[1], env, cases)
    for path, key_res in dbs.items():
        check_db(tessera, path, key_res, seeded, env)
    print(f'ok: exit status {rc}')


if __name__ == '__main__':
    main(sys.argv)
