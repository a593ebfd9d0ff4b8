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

With --targets it records issue 39's targets in one JSON file instead (only --after is needed):

  python3 bench/tune_speed.py --targets --after build/tools/tessera --reference-evals 256 \\
      --rusticl rusticl --json OUT.json

  1. the 64-evaluation GEMM `large` tune (anneal, seed 1, cold caches; --repeat N: N such runs), its wall time and log phases,
     and the same with TSR_TUNE_AHEAD=0 (nothing compiled ahead) for comparison (--no-ablation: not);
  2. with --reference-evals N, an N-evaluation run of the same, and both winners re-timed side by
     side at the class's problem (`tessera bench gemm --sizes 2048`, alternating, --retime rounds);
  3. `tessera tune` over every op on a fresh database and cold caches: wall time, and per class the
     tuner's own side-by-side duel of its pick against the entry the device ran before (built-in);
  4. with --rusticl SEL, `tessera tune --device SEL --budget 60` on a fresh database: wall time.
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


def fresh_env(work, tag, extra=None):
    cache, pocl = (os.path.join(work, f'{tag}-{n}') for n in ('cache', 'pocl'))
    for d in (cache, pocl):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    db = os.path.join(work, f'{tag}-db.json')
    if os.path.exists(db):
        os.unlink(db)
    env = dict(os.environ, TSR_CACHE_DIR=cache, POCL_CACHE_DIR=pocl, TSR_TUNING_DB=db)
    env.update(extra or {})
    return env


def log_rows(path):
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def phases(rows):
    out = {}
    for r in rows:
        for key in ('first_run_s', 'timed_s', 'check_s', 'duel_s'):
            if key in r:
                out[key] = round(out.get(key, 0) + r[key], 1)
    return out


def timed_tune(exe, env, args, log, dry_run=True):
    if os.path.exists(log):
        os.unlink(log)
    load = os.getloadavg()
    start = time.monotonic()
    proc = subprocess.run([exe, 'tune'] + (['--dry-run'] if dry_run else []) + ['--log', log] + args, env=env,
                          capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f'tessera tune {" ".join(args)} failed:\n{proc.stdout}\n{proc.stderr}')
    return wall, proc.stdout, log_rows(log), load


def gemm64(exe, work, evals, ahead):
    env = fresh_env(work, f'gemm{evals}-{ahead}', None if ahead else {'TSR_TUNE_AHEAD': '0'})
    log = os.path.join(work, f'gemm{evals}-{ahead}.jsonl')
    wall, out, rows, load = timed_tune(exe, env, ['--op', 'gemm', '--classes', 'large', '--evals', str(evals),
                                                   '--strategy', 'anneal', '--budget', '36000', '--seed', '1'], log)
    line = next(l for l in out.splitlines() if l.startswith('gemm '))
    ahead_rows = [r for r in rows if r['outcome'] == 'ahead']
    cand = [r for r in rows if 'first_run_s' in r]
    first = sorted(r['first_run_s'] for r in cand)
    return {'evals': evals, 'compile_ahead': ahead, 'wall_s': round(wall, 1), 'load_at_start': load,
            'load_at_end': os.getloadavg(), 'config': re.search(r'(MWI=.*)$', line).group(1).strip(),
            'tune_line': line, 'phases_s': phases(rows),
            'first_run_median_s': round(first[len(first) // 2], 3) if first else None,
            'compiled_ahead': sum(1 for r in cand if r.get('ahead')),
            'ahead': ahead_rows[0] if ahead_rows else None,
            'duels': [{k: r[k] for k in ('config', 'against', 'gflops', 'runs', 'rounds', 'duel_s') if k in r}
                      for r in rows if r['outcome'] == 'duel']}


def tune_all(exe, work, device=None, budget=None, dry_run=True):
    tag = 'all-' + (device or 'default')
    env = fresh_env(work, tag)
    log = os.path.join(work, tag + '.jsonl')
    args = (['--device', device] if device else []) + (['--budget', str(budget)] if budget else []) + ['--seed', '1']
    wall, out, rows, load = timed_tune(exe, env, args, log, dry_run)
    classes = []
    header = False
    for line in out.splitlines():
        if line.startswith('op '):
            header = True
            continue
        f = line.split()
        if not header or len(f) < 13 or not re.search(r'\s\d+\.\d+x\s', line) or ' classes in ' in line:
            continue
        op, cls = f[0], f[1]
        crow = [r for r in rows if r.get('op') == op and r.get('class') == cls]
        entry = next((r for r in crow if r.get('seed') == 'current entry'), None)
        entry_duel = None
        if entry:
            entry_duel = next((r for r in crow if r['outcome'] == 'duel' and r.get('against') == entry['config']), None)
        row = {'op': op, 'class': cls, 'line': line.strip(), 'evaluations': sum(1 for r in crow if 'first_run_s' in r)}
        m = re.search(r'\s(\d+\.\d+)x\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+\.\d+)\s+(\S.*)$', line)
        if m:
            row.update({'gain': float(m.group(1)), 'seconds': float(m.group(6)), 'best_config': m.group(7).strip()})
        if entry is None:
            row['vs_entry'] = 'no built-in entry other than the default'
        elif row.get('best_config') == entry['config']:
            row['vs_entry'] = {'kept_the_entry': True, 'ratio': 1.0,
                               'duel_gflops': entry_duel['gflops'] if entry_duel else None}
        elif entry_duel:
            # [the pick, the entry] side by side: the pick replaced the entry only by winning
            g = entry_duel['gflops']
            row['vs_entry'] = {'duel_gflops': g, 'ratio': round(g[0] / g[1], 3) if g[1] else None}
        elif entry['outcome'] == 'slower':
            row['vs_entry'] = 'entry stopped as clearly slower beside the incumbent'
        else:
            row['vs_entry'] = 'the pick is the entry, or the entry lost the duel with the default'
        classes.append(row)
    summary = next((l for l in out.splitlines() if ' classes in ' in l), '')
    return {'device': device or 'default', 'budget': budget, 'wall_s': round(wall, 1), 'load_at_start': load,
            'load_at_end': os.getloadavg(), 'summary': summary, 'phases_s': phases(rows), 'classes': classes,
            'table': out}


def targets(args):
    exe = os.path.abspath(args.after)
    work = tempfile.mkdtemp(prefix='tune-targets-')
    result = {'machine_load_at_start': os.getloadavg(), 'gemm': [], 'retime': {}, 'all': None, 'rusticl': None}
    runs = [(64, True)] * args.repeat + ([] if args.no_ablation else [(64, False)])
    if args.reference_evals:
        runs.append((args.reference_evals, True))
    for evals, ahead in runs:
        g = gemm64(exe, work, evals, ahead)
        result['gemm'].append(g)
        print(f"gemm large {evals} evals, compile ahead {'on' if ahead else 'off'}: {g['wall_s']} s "
              f"({g['phases_s']}), winner {g['config']}", flush=True)
    winners = sorted({g['config'] for g in result['gemm']})
    if len(winners) > 1 or args.reference_evals:
        rates = {c: [] for c in winners}
        for _ in range(args.retime):
            for c in winners:
                rates[c].append(bench(exe, work, c, sizes=args.retime_size, device=args.device)[1][0]['gflops'])
        result['retime'] = {c: {'median_gflops': round(statistics.median(v), 1), 'all': v} for c, v in rates.items()}
        print('re-timed side by side:', {c: v['median_gflops'] for c, v in result['retime'].items()}, flush=True)
    result['all'] = tune_all(exe, work, device=None if args.device == 'cpu' else args.device,
                             dry_run=not args.keep_db)
    if args.keep_db:  # for bench/tune_vs_builtin.py --db: the picks re-timed against the built-in entries
        shutil.copyfile(os.path.join(work, 'all-default-db.json'), args.keep_db)
    print(f"tune (every op): {result['all']['wall_s']} s; {result['all']['summary']}", flush=True)
    for c in result['all']['classes']:
        print(f"  {c['op']:9} {c['class']:9} gain {c.get('gain')}  vs entry: {c['vs_entry']}")
    if args.rusticl:
        result['rusticl'] = tune_all(exe, work, device=args.rusticl, budget=60)
        print(f"rusticl tune --budget 60: {result['rusticl']['wall_s']} s", flush=True)
    result['machine_load_at_end'] = os.getloadavg()
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--targets', action='store_true', help="record issue 39's targets (see above)")
    ap.add_argument('--reference-evals', type=int, default=0, help='--targets: a run with this many evaluations')
    ap.add_argument('--retime-size', default='2048', help='--targets: the size winners are re-timed at')
    ap.add_argument('--no-ablation', action='store_true', help='--targets: no run without compiling ahead')
    ap.add_argument('--keep-db', help='--targets: copy the database the tune over every op wrote here')
    ap.add_argument('--repeat', type=int, default=1, help='--targets: 64-evaluation runs with compiling ahead (each cold)')
    ap.add_argument('--rusticl', help='--targets: a rusticl device selector to time `tune --budget 60` on')
    ap.add_argument('--before', help='tessera executable before the change')
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
    if args.targets:
        return targets(args)
    if not args.before:
        ap.error('--before is required (except with --targets)')
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
