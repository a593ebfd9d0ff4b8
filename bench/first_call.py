#!/usr/bin/env python3
"""First-call latency of tessera's GEMM (cold and warm binary caches) and of
CLBlast, each in a fresh process; medians of several runs.
Usage: bench/first_call.py [--build DIR] [--runs N] [--no-clblast]

With --before DIR (another build's directory) it compares the two builds instead, alternating
before/after, each run with empty caches (tessera's and PoCL's), tessera's disk cache on and off:
wall and CPU time of the first call, of closing the device (where programs built from source are
written to the disk cache) and of the whole process; --json writes every run."""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time


def run_once(exe, env_extra, clblast):
    env = dict(os.environ, **env_extra)
    t0 = time.perf_counter()
    out = subprocess.run([exe] + (['--clblast'] if clblast else []), env=env, check=True,
                         capture_output=True, text=True).stdout
    whole = (time.perf_counter() - t0) * 1e3
    row = json.loads(out)
    row['whole_process_ms'] = whole
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default='build')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--no-clblast', action='store_true')
    ap.add_argument('--before', help='compare with this build directory (cold caches, alternating)')
    ap.add_argument('--json', help='--before: write every run here')
    args = ap.parse_args()
    exe = os.path.join(args.build, 'bench', 'first_call')
    if args.before:
        return compare(os.path.join(args.before, 'bench', 'first_call'), exe, args)
    work = tempfile.mkdtemp(prefix='tsr-first-call-')
    counter = [0]

    def fresh(name):
        counter[0] += 1
        path = os.path.join(work, '%s-%d' % (name, counter[0]))
        os.makedirs(path)
        return path

    warm_tsr, warm_pocl, warm_pocl_clblast = fresh('tsr'), fresh('pocl'), fresh('pocl-clblast')
    run_once(exe, {'TSR_CACHE_DIR': warm_tsr, 'POCL_CACHE_DIR': warm_pocl}, False)
    cases = [
        ('tessera, cold caches (tessera + PoCL)', False,
         lambda: {'TSR_CACHE_DIR': fresh('tsr'), 'POCL_CACHE_DIR': fresh('pocl')}),
        ('tessera, warm tessera cache, cold PoCL cache', False,
         lambda: {'TSR_CACHE_DIR': warm_tsr, 'POCL_CACHE_DIR': fresh('pocl')}),
        ('tessera, warm caches', False,
         lambda: {'TSR_CACHE_DIR': warm_tsr, 'POCL_CACHE_DIR': warm_pocl}),
    ]
    if not args.no_clblast:
        run_once(exe, {'POCL_CACHE_DIR': warm_pocl_clblast}, True)
        cases += [
            ('CLBlast, cold PoCL cache', True, lambda: {'POCL_CACHE_DIR': fresh('pocl')}),
            ('CLBlast, warm PoCL cache', True, lambda: {'POCL_CACHE_DIR': warm_pocl_clblast}),
        ]
    print('first call of a 256^3 SGEMM in a fresh process, median of %d runs' % args.runs)
    print('| case | device open (ms) | first call (ms) | second call (ms) | whole process (ms) |')
    print('|---|---:|---:|---:|---:|')
    for label, clblast, env in cases:
        rows = [run_once(exe, env(), clblast) for _ in range(args.runs)]
        med = {k: statistics.median(r[k] for r in rows)
               for k in ('open_ms', 'first_call_ms', 'second_call_ms', 'whole_process_ms')}
        print('| %s | %.1f | %.1f | %.1f | %.0f |' % (label, med['open_ms'], med['first_call_ms'],
                                                     med['second_call_ms'], med['whole_process_ms']))
    subprocess.run(['rm', '-rf', work])


def compare(before, after, args):
    work = tempfile.mkdtemp(prefix='tsr-first-call-')
    keys = ('first_call_ms', 'first_call_cpu_ms', 'close_ms', 'close_cpu_ms', 'whole_process_ms', 'cpu_ms')
    runs = []
    for r in range(args.runs):
        order = [('before', before), ('after', after)]
        for build, exe in (order if r % 2 == 0 else order[::-1]):
            for cache in ('on', 'off'):
                pocl = os.path.join(work, 'pocl-%d-%s-%s' % (r, build, cache))
                tsr = os.path.join(work, 'tsr-%d-%s-%s' % (r, build, cache)) if cache == 'on' else 'off'
                os.makedirs(pocl)
                row = run_once(exe, {'TSR_CACHE_DIR': tsr, 'POCL_CACHE_DIR': pocl}, False)
                row.update(build=build, cache=cache, load=os.getloadavg()[0])
                runs.append(row)
    print('first call of a 256^3 SGEMM in a fresh process, empty caches, median of %d runs (load %s)'
          % (args.runs, ' '.join('%.1f' % r['load'] for r in runs)))
    print('| build | disk cache | ' + ' | '.join(keys) + ' |')
    print('|---|---|' + '---:|' * len(keys))
    for build in ('before', 'after'):
        for cache in ('on', 'off'):
            rows = [r for r in runs if r['build'] == build and r['cache'] == cache]
            print('| %s | %s | ' % (build, cache) +
                  ' | '.join('%.0f' % statistics.median(r.get(k, 0) for r in rows) for k in keys) + ' |')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(runs, f, indent=1)
    subprocess.run(['rm', '-rf', work])


if __name__ == '__main__':
    main()
