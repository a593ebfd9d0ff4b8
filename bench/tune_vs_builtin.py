#!/usr/bin/env python3
"""A fresh tune's picks against the built-in entries, re-timed side by side (issue 39's target:
every class of `tessera tune --op all` on a fresh database at >= 0.97x today's built-in entry).

  python3 bench/tune_vs_builtin.py --tune --db /tmp/fresh.json --rounds 7 \\
      --json docs/data/tune-vs-builtin.json

With --tune it first runs `tessera tune` (every op, the default budget) into --db, which must not
exist, with empty tessera and PoCL caches, and records its wall time and the load; without it --db
is a database such a tune wrote. Then:
  1. the pick of every class the database holds an entry for (`tessera tune --show --db DB`: the
     entry of that very class, not a fallback) and what the device runs without it (`--show` with
     an empty database: the built-in entry, else the built-in default);
  2. for every class whose pick differs, one process (build/bench/class_ab) sets the class's own
     problem up (the tuner's fixture), checks both configurations against the reference and times
     them in alternation, --rounds rounds of a median of --runs runs each, and gives per class the
     median of the per-round ratios pick / built-in with their minimum and maximum (the spread).
     The inner lookups (conv's im2col GEMM) see an empty database on both sides.
Writes JSON (per class: configurations, per-round rates, ratio median/min/max, relative errors) and
prints a markdown table. On a shared machine ratios move by 5-20% between rounds: the median of the
per-round ratios (each round's two sides ran back to back) is the number, the range its spread.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load():
    return os.getloadavg()


def show(exe, device, db):
    """{(op, class): (config, entry) } from `tessera tune --show`: entry is the 'op/class' whose
    configuration the class runs (None for a built-in default)."""
    out = subprocess.run([exe, 'tune', '--show', '--op', 'all', '--device', device, '--db', db],
                         check=True, capture_output=True, text=True).stdout.splitlines()
    rows = {}
    for i, line in enumerate(out):
        if not line or line[0] == ' ' or line.startswith(('device ', 'tuning database')):
            continue
        words = line.split()
        if len(words) < 3:
            continue
        first = next((k for k, w in enumerate(words) if '=' in w), None)
        if first is None:
            continue
        config = ' '.join(words[first:])
        nxt = out[i + 1] if i + 1 < len(out) and out[i + 1].startswith(' ') else ''
        m = re.search(r'entry (\S+)/(\S+) for', nxt)
        entry = f'{m.group(1)}/{m.group(2)}' if m else None
        source = 'database' if m and not nxt.strip().startswith('built-in') else ('built-in entry' if m else 'built-in default')
        rows[(words[0], words[1])] = {'config': config, 'entry': entry, 'source': source}
    return rows


def fresh_tune(exe, device, db, work, op, budget):
    if os.path.exists(db):
        sys.exit(f'--tune: {db} exists; a fresh tune needs a database that does not')
    env = dict(os.environ, TSR_CACHE_DIR=os.path.join(work, 'tsr-cache'), POCL_CACHE_DIR=os.path.join(work, 'pocl'),
               XDG_CACHE_HOME=os.path.join(work, 'xdg'), MESA_SHADER_CACHE_DIR=os.path.join(work, 'mesa'))
    env.pop('TSR_TUNING_DB', None)
    cmd = ['/usr/bin/time', '-f', 'TIME %e %U %S', exe, 'tune', '--device', device, '--op', op, '--db', db, '--seed', '1']
    if budget:
        cmd += ['--budget', str(budget)]
    load_start = load()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    load_end = load()
    m = re.search(r'TIME (\S+) (\S+) (\S+)', out.stderr)
    if out.returncode != 0:
        sys.exit(f'the tune failed:\n{out.stdout}\n{out.stderr}')
    return {'command': ' '.join(cmd[3:]), 'wall_s': float(m.group(1)), 'cpu_s': float(m.group(2)) + float(m.group(3)),
            'load_start': load_start, 'load_end': load_end, 'table': out.stdout}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--db', required=True, help='the fresh tune\'s database (with --tune: written here)')
    ap.add_argument('--tune', action='store_true', help='run the fresh tune first')
    ap.add_argument('--tune-op', default='all', help='with --tune: the op to tune (default: all, the target)')
    ap.add_argument('--tune-budget', type=float, help='with --tune: its --budget (default: the tuner\'s)')
    ap.add_argument('--exe', default=os.path.join(ROOT, 'build/tools/tessera'))
    ap.add_argument('--class-ab', default=os.path.join(ROOT, 'build/bench/class_ab'))
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--rounds', type=int, default=7)
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--classes', help='comma-separated op/class to keep (default: every class the database tuned)')
    ap.add_argument('--json', required=True)
    args = ap.parse_args()
    if args.rounds < 5:
        sys.exit('--rounds: at least 5')
    work = tempfile.mkdtemp(prefix='tune-vs-builtin-')
    try:
        result = {'device_selector': args.device, 'rounds': args.rounds, 'runs': args.runs}
        if args.tune:
            result['tune'] = fresh_tune(args.exe, args.device, args.db, work, args.tune_op, args.tune_budget)
            print(result['tune']['table'])
        empty = os.path.join(work, 'empty.json')
        picks, builtin = show(args.exe, args.device, args.db), show(args.exe, args.device, empty)
        keep = set(args.classes.split(',')) if args.classes else None
        todo, same = [], []
        for (op, cls), p in sorted(picks.items()):
            if p['source'] != 'database' or p['entry'] != f'{op}/{cls}':
                continue  # not tuned by this database (a fallback, or the built-in)
            if keep is not None and f'{op}/{cls}' not in keep:
                continue
            b = builtin.get((op, cls))
            if not b:
                continue
            row = {'op': op, 'class': cls, 'pick': p['config'], 'builtin': b['config'], 'builtin_source': b['source']}
            (same if p['config'] == b['config'] else todo).append(row)
        tsv = os.path.join(work, 'classes.tsv')
        with open(tsv, 'w') as f:
            for r in todo:
                f.write(f"{r['op']}\t{r['class']}\t{r['pick']}\t{r['builtin']}\n")
        env = dict(os.environ, TSR_TUNING_DB=empty)
        result['load_start'] = load()
        start = time.monotonic()
        out = subprocess.run([args.class_ab, '--device', args.device, '--rounds', str(args.rounds),
                              '--runs', str(args.runs), tsv], env=env, capture_output=True, text=True)
        result['ab_wall_s'] = time.monotonic() - start
        result['load_end'] = load()
        timed = {}
        for line in out.stdout.splitlines():
            if line.startswith('{'):
                d = json.loads(line)
                timed[(d['op'], d['class'])] = d
        classes = []
        for r in todo:
            d = timed.get((r['op'], r['class']), {'error': 'no result from class_ab: ' + out.stderr[-300:]})
            classes.append(dict(r, **{k: v for k, v in d.items() if k not in ('op', 'class', 'a', 'b')}))
        for r in same:
            classes.append(dict(r, ratio_median=1.0, ratio_min=1.0, ratio_max=1.0, note='the pick is the built-in configuration'))
        classes.sort(key=lambda c: (c['op'], c['class']))
        result['classes'] = classes
        ratios = [c['ratio_median'] for c in classes if 'ratio_median' in c]
        result['summary'] = {'classes': len(classes), 'timed': len(todo), 'same_as_builtin': len(same),
                             'errors': sum('error' in c for c in classes),
                             'min_ratio_median': min(ratios) if ratios else None,
                             'below_0.97': [f"{c['op']}/{c['class']}" for c in classes if c.get('ratio_median', 0) < 0.97]}
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)
            f.write('\n')
        print(f"load {result['load_start'][0]:.1f} -> {result['load_end'][0]:.1f}; {args.rounds} rounds of a median of "
              f"{args.runs} runs per side, alternating\n")
        print('| op | class | problem | pick / built-in (median of rounds) | min | max | built-in |')
        print('|---|---|---|---:|---:|---:|---|')
        for c in classes:
            if 'error' in c:
                print(f"| {c['op']} | {c['class']} | | error: {c['error']} | | | |")
            else:
                print(f"| {c['op']} | {c['class']} | {c.get('problem', '')} | {c['ratio_median']:.3f} | "
                      f"{c['ratio_min']:.3f} | {c['ratio_max']:.3f} | {c['builtin_source']} |")
        print(f"\n{len(classes)} classes ({len(same)} picked the built-in configuration); lowest median ratio "
              f"{result['summary']['min_ratio_median']}; below 0.97: {result['summary']['below_0.97'] or 'none'}")
        return 1 if out.returncode not in (0, 1) else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
