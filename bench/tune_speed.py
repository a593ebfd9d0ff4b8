#!/usr/bin/env python3
"""How long a 64-evaluation GEMM tune takes, before and after a change, and how fast its winner is.

Runs `tessera tune --op gemm --classes large --evals 64 --dry-run` with two builds in alternation
(each run with an empty tessera binary cache and an empty PoCL kernel cache: a tune compiles
new programs, so a cold cache is the honest case), then re-times every winner side by side in one
sequence of alternating `tessera bench gemm --sizes 1024 --no-peers` runs (TSR_CONFIG_GEMM set to
the winner), and optionally times `tessera bench gemm --no-peers` with each build the same way.
Writes a JSON file and prints a markdown table.

  python3 bench/tune_speed.py --before ../base/build/tools/tessera --after build/tools/tessera \\
      --rounds 2 --json docs/data/tune-speed.json

On a shared machine runs differ by 20-40%: compare the two builds within one run of this script.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time


def tune(exe, work, tag, seed, evals, device):
    cache, pocl, log = (os.path.join(work, f'{tag}-{n}') for n in ('cache', 'pocl', 'log.jsonl'))
    for d in (cache, pocl):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    if os.path.exists(log):
        os.unlink(log)
    env = dict(os.environ, TSR_CACHE_DIR=cache, POCL_CACHE_DIR=pocl, TSR_TUNING_DB=os.path.join(work, 'db.json'))
    start = time.monotonic()
    out = subprocess.run([exe, 'tune', '--device', device, '--op', 'gemm', '--classes', 'large', '--evals', str(evals),
                          '--budget', '3600', '--dry-run', '--seed', str(seed), '--log', log],
                         env=env, check=True, capture_output=True, text=True).stdout
    wall = time.monotonic() - start
    line = next(l for l in out.splitlines() if l.startswith('gemm '))
    config = re.search(r'(MWI=.*)$', line).group(1).strip()
    rows = [json.loads(l) for l in open(log)]
    phases = {}
    for r in rows:
        for key in ('first_run_s', 'settle_s', 'timed_s', 'check_s', 'duel_s'):
            if key in r:
                phases[key] = phases.get(key, 0) + r[key]
    return {'build': tag, 'wall_s': round(wall, 1), 'config': config, 'tune_line': line,
            'phases_s': {k: round(v, 1) for k, v in phases.items()},
            'outcomes': {o: sum(1 for r in rows if r['outcome'] == o) for o in {r['outcome'] for r in rows}}}


def bench(exe, work, config=None, sizes='1024', budget=None, device='cpu'):
    path = os.path.join(work, 'bench.json')
    env = dict(os.environ, TSR_CACHE_DIR=os.path.join(work, 'bench-cache'), TSR_TUNING_DB=os.path.join(work, 'db.json'))
    if config:
        env['TSR_CONFIG_GEMM'] = config
    cmd = [exe, 'bench', 'gemm', '--device', device, '--no-peers', '--json', path]
    if sizes:
        cmd += ['--sizes', sizes]
    if budget:
        cmd += ['--budget', str(budget)]
    start = time.monotonic()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    wall = time.monotonic() - start
    return wall, json.load(open(path))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--before', required=True, help='tessera executable before the change')
    ap.add_argument('--after', required=True, help='tessera executable after the change')
    ap.add_argument('--rounds', type=int, default=2, help='tunes per build, alternating')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--evals', type=int, default=64)
    ap.add_argument('--retime', type=int, default=5, help='alternating re-timing rounds of the winners')
    ap.add_argument('--bench-rounds', type=int, default=0, help='alternating runs of `bench gemm --no-peers` per build')
    ap.add_argument('--bench-sizes', help='--sizes for those runs (default: the op\'s default sizes)')
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--json', help='write the results here')
    args = ap.parse_args()
    exes = {'before': os.path.abspath(args.before), 'after': os.path.abspath(args.after)}
    work = tempfile.mkdtemp(prefix='tune-speed-')
    result = {'machine_load_at_start': os.getloadavg(), 'tunes': [], 'retime': {}, 'bench': []}
    for r in range(args.rounds):
        for tag in (('before', 'after') if r % 2 == 0 else ('after', 'before')):
            t = tune(exes[tag], work, tag, args.seed, args.evals, args.device)
            t['load'] = os.getloadavg()[0]
            result['tunes'].append(t)
            print(f"{tag:6} {t['wall_s']:7.1f} s  {t['config']}  {t['phases_s']}", flush=True)
    winners = sorted({t['config'] for t in result['tunes']})
    rates = {c: [] for c in winners}
    for _ in range(args.retime):
        for c in winners:
            rates[c].append(bench(exes['after'], work, c, device=args.device)[1][0]['gflops'])
    result['retime'] = {c: {'median_gflops': round(statistics.median(v), 1), 'all': v} for c, v in rates.items()}
    for _ in range(args.bench_rounds):
        for tag in ('before', 'after'):
            wall, rows = bench(exes[tag], work, sizes=args.bench_sizes, device=args.device)
            result['bench'].append({'build': tag, 'wall_s': round(wall, 1),
                                    'rows': {r['shape']: [round(r['gflops'], 1), r['runs']] for r in rows}})
            print(f"bench {tag:6} {wall:6.1f} s", flush=True)
    print('\n| build | tune wall (s) | winner | winner re-timed, GFLOP/s at 1024³ (median of %d) |' % args.retime)
    print('|---|---:|---|---:|')
    for t in result['tunes']:
        print(f"| {t['build']} | {t['wall_s']} | `{t['config']}` | {result['retime'][t['config']]['median_gflops']} |")
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
