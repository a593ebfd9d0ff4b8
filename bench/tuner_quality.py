#!/usr/bin/env python3
"""Tuner quality: one exhaustive search over a bounded GEMM space, then each
strategy under budgets of 5%, 10% and 20% of that space with several seeds.
Scores are GFLOP/s from each candidate's 25th-percentile time (what the tuner
ranks by). Reports best-found / exhaustive-best, judged on the exhaustive run's own
measurements of the configuration each strategy picked (so timing noise between
runs does not decide the score), and on the strategy's own measurement.
Usage: bench/tuner_quality.py [--build DIR] [--seeds N] [--class CLS] [--space SPEC]"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

DEFAULT_SPACE = 'MWI=4,6,8 VW=8,16 NVW=1,2 KU=2,4 WGM=1,2 WGN=1 KWG=8 SA=0 SB=0 PACKA=0,1 PACKB=1'


def tune(exe, cls, space, strategy, log, evals=None, seed=None):
    cmd = [exe, 'tune', '--op', 'gemm', '--classes', cls, '--space', space, '--strategy', strategy,
           '--dry-run', '--log', log, '--budget', '3600']
    if evals:
        cmd += ['--evals', str(evals)]
    if seed:
        cmd += ['--seed', str(seed)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [json.loads(line) for line in open(log)]
    os.unlink(log)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default='build')
    ap.add_argument('--seeds', type=int, default=5)
    ap.add_argument('--class', dest='cls', default='large')
    ap.add_argument('--space', default=DEFAULT_SPACE)
    args = ap.parse_args()
    exe = os.path.join(args.build, 'tools', 'tessera')
    work = tempfile.mkdtemp(prefix='tsr-tuner-quality-')
    log = os.path.join(work, 'log.jsonl')

    exhaustive = tune(exe, args.cls, args.space, 'exhaustive', log)
    table = {r['config']: r['gflops_q25'] for r in exhaustive if r['outcome'] == 'ok'}
    size = len(exhaustive)
    best_cfg = max(table, key=table.get)
    best = table[best_cfg]
    print('space: %s' % args.space)
    print('exhaustive: %d legal configurations, best %.1f GFLOP/s (%s)' % (size, best, best_cfg))
    print()
    print('| strategy | budget | evaluations | best found / exhaustive best (median, min over %d seeds) '
          '| own measurement / exhaustive best (median) |' % args.seeds)
    print('|---|---:|---:|---:|---:|')
    for strategy in ('random', 'anneal'):
        for frac in (0.05, 0.10, 0.20):
            evals = max(2, round(size * frac))
            scores, own = [], []
            for seed in range(1, args.seeds + 1):
                rows = tune(exe, args.cls, args.space, strategy, log, evals, seed)
                ok = [r for r in rows if r['outcome'] == 'ok']
                pick = max(ok, key=lambda r: r['gflops_q25'])
                scores.append(table.get(pick['config'], 0.0) / best)
                own.append(pick['gflops_q25'] / best)
            print('| %s | %d%% | %d | %.3f (min %.3f) | %.3f |' % (
                strategy, frac * 100, evals, statistics.median(scores), min(scores), statistics.median(own)))
    os.rmdir(work)


if __name__ == '__main__':
    main()
