#!/usr/bin/env python3
"""Two builds' bench/conv3x3_ab side by side: old and new tessera (library and kernels) on
ResNet-50's 3x3 layers, one process per build and round, alternating (old first in even rounds),
each with the same configuration override; medians over rounds of the per-call process CPU time
(PoCL's threads included) and wall time.

    python3 bench/conv3x3_two_builds.py OLD_BUILD NEW_BUILD [--rounds 5] [--batch 8,1]
        [--config3 CONFIG] [--configs CONFIG] [--json FILE]

OLD_BUILD, NEW_BUILD: meson build directories with bench/conv3x3_ab (e.g. a `git archive main`
tree built aside). --config3 is forced on the stride-1 layers, --configs on the strided ones."""
import argparse
import json
import os
import statistics
import subprocess
import time

STRIDE1 = 'l1.3x3,l2.3x3,l3.3x3,l4.3x3'
STRIDED = 'l2.3x3s2,l3.3x3s2,l4.3x3s2'


def run(build, batch, layers, config, calls):
    out = subprocess.run([os.path.join(build, 'bench', 'conv3x3_ab'), '--batch', str(batch), '--rounds', '1',
                          '--calls', str(calls), '--layers', layers, '--var', 'x=|' + config],
                         check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        d = json.loads(line)
        if 'layer' in d:
            rows[d['layer']] = (d['x']['cpu_us'], d['x']['wall_us'], d['shape'])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('old')
    ap.add_argument('new')
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--batch', default='8,1')
    ap.add_argument('--config3', default='ALGO=2 MWI=4 VW=16 STAGE=2 WGM=4 WGN=1')
    ap.add_argument('--configs', default='ALGO=2 MWI=4 VW=16 STAGE=2 WGM=3 WGN=1')
    ap.add_argument('--json')
    args = ap.parse_args()
    result = {'load_before': os.getloadavg(), 'rounds': args.rounds, 'config3': args.config3,
              'configs': args.configs, 'old': args.old, 'new': args.new, 'rows': []}
    for batch in [int(b) for b in args.batch.split(',')]:
        calls = 2 if batch >= 8 else 6
        samples = {}
        for r in range(args.rounds):
            order = ('old', 'new') if r % 2 == 0 else ('new', 'old')
            for which in order:
                build = args.old if which == 'old' else args.new
                for layers, config in ((STRIDE1, args.config3), (STRIDED, args.configs)):
                    for name, (cpu, wall, shape) in run(build, batch, layers, config, calls).items():
                        samples.setdefault((name, shape), {'old': [], 'new': []})[which].append((cpu, wall))
            time.sleep(0.2)
        for (name, shape), s in samples.items():
            row = {'layer': name, 'shape': shape, 'batch': batch}
            for which in ('old', 'new'):
                row[which + '_cpu_us'] = statistics.median(c for c, _ in s[which])
                row[which + '_wall_us'] = statistics.median(w for _, w in s[which])
                row[which + '_cpu_samples'] = [c for c, _ in s[which]]
            row['new_over_old_cpu'] = row['old_cpu_us'] / row['new_cpu_us']  # > 1: new faster
            result['rows'].append(row)
            print('batch %d %-9s %-26s old %9.0f us  new %9.0f us CPU  new/old speed %.3f' %
                  (batch, name, shape, row['old_cpu_us'], row['new_cpu_us'], row['new_over_old_cpu']), flush=True)
    result['load_after'] = os.getloadavg()
    print('load %.2f -> %.2f' % (result['load_before'][0], result['load_after'][0]))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)


if __name__ == '__main__':
    main()
