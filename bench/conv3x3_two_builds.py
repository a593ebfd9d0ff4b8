#!/usr/bin/env python3
"""Two builds' bench/conv3x3_ab side by side: old and new tessera (library and kernels) on
ResNet-50's 3x3 layers, one process per build and round, alternating (old first in even rounds),
each with the same configuration override; medians over rounds of the per-call process CPU time
(PoCL's threads included) and wall time.

    python3 bench/conv3x3_two_builds.py OLD_BUILD NEW_BUILD [--rounds 5] [--batch 8,1]
        [--config3 CONFIG] [--configs CONFIG] [--bench conv1x1_gemm] [--weights kept] [--json FILE]

OLD_BUILD, NEW_BUILD: meson build directories with bench/conv3x3_ab (e.g. a `git archive main`
tree built aside). --config3 is forced on the stride-1 layers, --configs on the strided ones
("builtin": none). --bench conv1x1_gemm times ResNet-50's 1x1 layers instead (bench/conv1x1_gemm,
--config3 then the GEMM configuration, "builtin" by default there). Each row prints both speeds,
old over new: by CPU time (less sensitive to other jobs) and by wall time (what a caller waits:
a core left idle by uneven work shows only there), the wall one with its range over rounds."""
import argparse
import json
import os
import statistics
import subprocess
import time

STRIDE1 = 'l1.3x3,l2.3x3,l3.3x3,l4.3x3'
STRIDED = 'l2.3x3s2,l3.3x3s2,l4.3x3s2'


def run(build, batch, layers, config, calls, bench, weights):
    if bench == 'conv1x1_gemm':
        cmd = [os.path.join(build, 'bench', bench), '--batch', str(batch), '--rounds', '1', '--calls', str(calls),
               '--cfg', config]
    else:
        cmd = [os.path.join(build, 'bench', bench), '--batch', str(batch), '--rounds', '1', '--calls', str(calls),
               '--layers', layers, '--var', 'x=|' + config]
    cmd += ['--weights', weights]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        d = json.loads(line)
        if 'layer' not in d:
            continue
        if bench == 'conv1x1_gemm':
            c = d['c0']  # (builds before cpu_us was printed: from the per-all-cores rate)
            cpu = c['cpu_us'] if 'cpu_us' in c else 2.0 * c['us'] * c['gflops'] / c['cpu_gflops_2']
            rows[d['layer']] = (cpu, c['us'], d['gemm'])
        else:
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
    ap.add_argument('--bench', default='conv3x3_ab', choices=('conv3x3_ab', 'conv1x1_gemm'))
    ap.add_argument('--weights', default='per-call', choices=('per-call', 'kept'),
                    help='kept: the weight buffers marked constant, as a network runs them')
    ap.add_argument('--json')
    args = ap.parse_args()
    if args.bench == 'conv1x1_gemm' and args.config3 == ap.get_default('config3'):
        args.config3 = 'builtin'
    # conv1x1_gemm runs every 1x1 layer in one process with --config3
    groups = ((None, args.config3),) if args.bench == 'conv1x1_gemm' else ((STRIDE1, args.config3),
                                                                            (STRIDED, args.configs))
    result = {'load_before': os.getloadavg(), 'bench': args.bench, 'weights': args.weights, 'rounds': args.rounds, 'config3': args.config3,
              'configs': args.configs, 'old': args.old, 'new': args.new, 'rows': []}
    for batch in [int(b) for b in args.batch.split(',')]:
        calls = 2 if batch >= 8 else 6
        samples = {}
        for r in range(args.rounds):
            order = ('old', 'new') if r % 2 == 0 else ('new', 'old')
            for which in order:
                build = args.old if which == 'old' else args.new
                for layers, config in groups:
                    for name, (cpu, wall, shape) in run(build, batch, layers, config, calls, args.bench, args.weights).items():
                        samples.setdefault((name, shape), {'old': [], 'new': []})[which].append((cpu, wall))
            time.sleep(0.2)
        for (name, shape), s in samples.items():
            row = {'layer': name, 'shape': shape, 'batch': batch}
            for which in ('old', 'new'):
                row[which + '_cpu_us'] = statistics.median(c for c, _ in s[which])
                row[which + '_wall_us'] = statistics.median(w for _, w in s[which])
                row[which + '_cpu_samples'] = [c for c, _ in s[which]]
                row[which + '_wall_samples'] = [w for _, w in s[which]]
            row['new_over_old_cpu'] = row['old_cpu_us'] / row['new_cpu_us']  # > 1: new faster
            walls = [o[1] / n[1] for o, n in zip(s['old'], s['new'])]  # per round, in its order
            row['new_over_old_wall'] = statistics.median(walls)
            row['new_over_old_wall_range'] = [min(walls), max(walls)]
            result['rows'].append(row)
            print('batch %d %-14s %-26s CPU old %8.0f new %8.0f us speed %.3f | wall old %8.0f new %8.0f us '
                  'speed %.3f (%.2f-%.2f)' %
                  (batch, name, shape, row['old_cpu_us'], row['new_cpu_us'], row['new_over_old_cpu'],
                   row['old_wall_us'], row['new_wall_us'], row['new_over_old_wall'], min(walls), max(walls)),
                  flush=True)
    result['load_after'] = os.getloadavg()
    print('load %.2f -> %.2f' % (result['load_before'][0], result['load_after'][0]))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)


if __name__ == '__main__':
    main()
