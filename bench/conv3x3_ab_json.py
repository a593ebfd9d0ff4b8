#!/usr/bin/env python3
"""Runs build/bench/conv3x3_ab once per batch size and writes its per-layer lines, with the load
average before and after each run and the CPU's name, into one JSON file:

    python3 bench/conv3x3_ab_json.py --json docs/data/FILE.json --batches 1,8 -- \\
        --rounds 7 --layers l1.3x3,l2.3x3 --var 'A=|builtin' --var 'B=|ALGO=2 STAGE=7'

Arguments after `--` go to conv3x3_ab as they are (`--batch` is this script's); batch 1 runs
`--calls 5`, larger batches `--calls 2` unless given. Prints each layer's CPU time per call and
every variant's speed over the first one."""
import argparse
import json
import os
import subprocess
import sys


def load():
    with open('/proc/loadavg') as f:
        return [float(v) for v in f.read().split()[:3]]


def cpu_name():
    with open('/proc/cpuinfo') as f:
        for line in f:
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
    return 'unknown'


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--json', required=True)
    ap.add_argument('--batches', default='1,8')
    ap.add_argument('--binary', default='build/bench/conv3x3_ab')
    ap.add_argument('rest', nargs=argparse.REMAINDER)
    a = ap.parse_args()
    rest = a.rest[1:] if a.rest[:1] == ['--'] else a.rest
    out = {'cpu': cpu_name(), 'cores': os.cpu_count(), 'runs': []}
    for b in [int(v) for v in a.batches.split(',')]:
        cmd = [a.binary, '--batch', str(b)] + rest
        if '--calls' not in rest:
            cmd += ['--calls', '5' if b == 1 else '2']
        before = load()
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        after = load()
        lines = [json.loads(l) for l in res.stdout.splitlines() if l.startswith('{')]
        out['runs'].append({'command': cmd, 'load_before': before, 'load_after': after, 'lines': lines})
        print(f'batch {b}: load {before[0]:.2f} -> {after[0]:.2f}')
        for d in lines:
            if 'layer' not in d:
                continue
            labels = [k for k, v in d.items() if isinstance(v, dict)]
            base = d[labels[0]]['cpu_us']
            print(' ', d['layer'], ' '.join(f"{k} {d[k]['cpu_us']:.0f} us ({base / d[k]['cpu_us']:.2f}x)" for k in labels))
    with open(a.json, 'w') as f:
        json.dump(out, f, indent=1)
        f.write('\n')


if __name__ == '__main__':
    sys.exit(main())
