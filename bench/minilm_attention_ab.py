#!/usr/bin/env python3
"""MiniLM's 1 x 16-token forward with attention in one launch per layer (keys read in place,
BLK_DIRECT) against the two launches before it (pack_k, then attention_blk), in one process:

    PY=build/python-venv/bin/python   # tessera installed, plus the model package (docs/minilm.md)
    $PY bench/minilm_attention_ab.py [--rounds 41] [--calls 10] [--json FILE]

Two runners on two devices; "packed" records its encoder graph with $TSR_TEST_ATTENTION_PACKED=1
(the library's hook for the form before), "direct" without. Each round runs --calls forwards
back to back of each, in an order that alternates per round. Printed: the launches per forward,
the cosine between the two, and the medians over rounds of the wall time, the process CPU time
(PoCL's workers included) and the other threads' sleeps (voluntary context switches, Linux)
per forward, with the load average before and after."""
import argparse
import json
import os
import statistics
import sys
import threading
import time

import numpy as np

import tessera
from tessera.examples import minilm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_profile import tokens  # noqa: E402


def sleeps(me):
    n = 0
    for tid in os.listdir('/proc/self/task'):
        if int(tid) == me:
            continue
        try:
            with open('/proc/self/task/%s/status' % tid) as f:
                for line in f:
                    if line.startswith('voluntary_ctxt_switches'):
                        n += int(line.split()[1])
        except OSError:
            pass
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--rounds', type=int, default=41)
    ap.add_argument('--calls', type=int, default=10)
    ap.add_argument('--json')
    args = ap.parse_args()
    model = minilm.Model()
    ids, lengths = tokens(model, 16)
    runners, out = {}, {}
    for name, packed in (('packed', True), ('direct', False)):
        if packed:
            os.environ['TSR_TEST_ATTENTION_PACKED'] = '1'
        try:
            r = minilm.Runner(model, tessera.Device(args.device))
            r.forward(ids, lengths)  # the warm forward (the runner's kept strips are made here)
            out[name] = r.forward(ids, lengths)  # records the graph under the setting
        finally:
            os.environ.pop('TSR_TEST_ATTENTION_PACKED', None)
        runners[name] = r
    launches = {n: next(iter(r._shapes.values()))['graph'].launches + 1 for n, r in runners.items()}
    cos = float(np.min((out['packed'] * out['direct']).sum(axis=1)))
    if cos < 0.9999999:
        sys.exit('minilm_attention_ab: the two disagree (cosine %.9f)' % cos)
    me = threading.get_native_id()
    stats = {n: {'wall': [], 'cpu': [], 'sleeps': []} for n in runners}
    load = [os.getloadavg()[0]]
    for rnd in range(args.rounds):
        for name in (('packed', 'direct') if rnd % 2 == 0 else ('direct', 'packed')):
            r = runners[name]
            r.forward(ids, lengths)
            s0, c0, t0 = sleeps(me), time.process_time(), time.perf_counter()
            for _ in range(args.calls):
                r.forward(ids, lengths)
            stats[name]['wall'].append((time.perf_counter() - t0) / args.calls * 1e3)
            stats[name]['cpu'].append((time.process_time() - c0) / args.calls * 1e3)
            stats[name]['sleeps'].append((sleeps(me) - s0) / args.calls)
    load.append(os.getloadavg()[0])
    med = {n: {k: statistics.median(v) for k, v in s.items()} for n, s in stats.items()}
    print('1 x 16 tokens, %d rounds x %d forwards, launches per forward packed %d direct %d, cosine %.9f, '
          'load %.2f -> %.2f' % (args.rounds, args.calls, launches['packed'], launches['direct'], cos, *load))
    for k, what in (('wall', 'wall ms'), ('cpu', 'process CPU ms'), ('sleeps', 'worker sleeps')):
        print('  %-16s packed %7.3f  direct %7.3f  direct/packed %.3f' % (
            what, med['packed'][k], med['direct'][k], med['direct'][k] / med['packed'][k]))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'device': runners['direct'].device.name, 'rounds': args.rounds, 'calls': args.calls,
                       'launches': launches, 'cosine': cos, 'load': load, 'ms': stats, 'median': med,
                       'direct_over_packed': {k: med['direct'][k] / med['packed'][k] for k in med['direct']}},
                      f, indent=1)


if __name__ == '__main__':
    main()
