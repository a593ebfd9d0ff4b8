#!/usr/bin/env python3
"""Where the threads of MiniLM's batch-1 forward spend a forward (Linux schedstat):

    PY=build/python-venv/bin/python   # tessera installed, plus the model package (docs/minilm.md)
    $PY bench/minilm_sched.py [--device cpu] [--tokens 16] [--forwards 300] [--reps 3] [--json FILE]

Runs --reps blocks of --forwards forwards back to back and prints, per forward, the wall time and
for each thread of the process that ran (the calling thread, PoCL's workers) the time it ran on
a CPU, the time it was runnable but waited for one (other jobs' load: near 0 on a quiet
machine), and the rest, the time it slept (wall - run - wait), with its time slices. On a quiet
2-core machine a PoCL worker's sleep is the forward's idle core time: the hand-offs between
launches (a worker that runs out of work-groups sleeps until the next launch wakes it) and the
calling thread's host work between one forward's read-back and the next one's first launch.
The forward's wall time cannot go below run / 2 of the workers' sum plus the serial host part;
/proc/PID/task/TID/schedstat holds the three numbers (ns, ns, slices)."""
import argparse
import json
import os
import statistics
import sys
import threading
import time

import tessera
from tessera.examples import minilm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_profile import tokens  # noqa: E402


def schedstat():
    out = {}
    for tid in os.listdir('/proc/self/task'):
        try:
            with open('/proc/self/task/%s/schedstat' % tid) as f:
                out[int(tid)] = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--tokens', type=int, default=16)
    ap.add_argument('--forwards', type=int, default=300)
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--json')
    args = ap.parse_args()
    if not os.path.exists('/proc/self/task/%d/schedstat' % threading.get_native_id()):
        sys.exit('minilm_sched: no /proc/self/task/*/schedstat here (Linux with schedstats)')
    model = minilm.Model()
    runner = minilm.Runner(model, args.device)
    ids, lengths = tokens(model, args.tokens)
    for _ in range(20):
        runner.forward(ids, lengths)
    me, n = threading.get_native_id(), args.forwards
    reps = []
    for _ in range(args.reps):
        before, t0 = schedstat(), time.perf_counter_ns()
        for _ in range(n):
            runner.forward(ids, lengths)
        wall = (time.perf_counter_ns() - t0) / n / 1e3
        after = schedstat()
        threads = []
        for tid, (run1, wait1, slices1) in after.items():
            run0, wait0, slices0 = before.get(tid, (0, 0, 0))
            run, wait = (run1 - run0) / n / 1e3, (wait1 - wait0) / n / 1e3
            if run < 1.0:  # a thread that did not take part
                continue
            threads.append({'thread': 'caller' if tid == me else 'worker', 'run_us': run, 'wait_us': wait,
                            'sleep_us': wall - run - wait, 'slices': (slices1 - slices0) / n})
        threads.sort(key=lambda t: (t['thread'] != 'caller', -t['run_us']))
        reps.append({'wall_us': wall, 'load': os.getloadavg()[0], 'threads': threads})
        print('forward %.0f us (load %.2f):' % (wall, reps[-1]['load']))
        for t in threads:
            print('  %-7s run %6.0f  runnable-wait %6.0f  sleep %6.0f us  slices %.1f' % (
                t['thread'], t['run_us'], t['wait_us'], t['sleep_us'], t['slices']))
    walls = [r['wall_us'] for r in reps]
    print('median forward %.0f us over %d blocks of %d' % (statistics.median(walls), args.reps, n))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'device': runner.device.name, 'tokens': args.tokens, 'forwards': n, 'reps': reps}, f, indent=1)


if __name__ == '__main__':
    main()
