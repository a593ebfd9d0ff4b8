#!/usr/bin/env python3
"""MiniLM's batch-1 forward with and without a gate on the queue, alternated in one process:

    PY=build/python-venv/bin/python   # tessera installed, pyopencl and the model package
    $PY bench/minilm_gate_ab.py [--rounds 41] [--calls 10] [--tokens 16] [--json FILE]

"plain" is Runner.forward: the embedding call (its ids upload and kernel), the encoder graph's
replay (50 launches at 1 x 16 tokens), the pooled vectors' read. On PoCL's CPU device the first
command wakes the worker threads, which then run the embedding while the calling thread is still
enqueueing the replay: on 2 cores the two workers and the caller share the cores, and a worker
that runs out of enqueued work sleeps until the next launch wakes it. In that order the
embedding call took 0.13 ms inside the forward against 0.015 ms called back to back on a busy
queue (load 8, 2-core Zen 5).

"gated" holds the queue first: a barrier waiting on a user event (pyopencl on tessera's own
queue), then the same embedding call and replay, then the event set complete, then the read: the
workers are woken once, with the whole forward queued. The two give the same embedding (checked).
Printed: medians over rounds of the wall time and process CPU time per forward, the load average,
and per forward the context switches (Linux, /proc/self/task/*/status, summed over the rounds) of
the calling thread (involuntary: preempted, by PoCL's workers among others) and of the other
threads (voluntary: a worker that ran out of work and slept). Under load the wall time is mostly
other jobs' (measure quietly); the switches show the mechanism at any load."""
import argparse
import json
import os
import statistics
import sys
import threading
import time

import numpy as np
import pyopencl as cl

import tessera
from tessera import _tessera_cffi
from tessera.examples import minilm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_profile import tokens  # noqa: E402


def switches():
    """{thread id: (voluntary, involuntary) context switches} of this process (Linux; else {})."""
    out = {}
    if not os.path.isdir('/proc/self/task'):
        return out
    for tid in os.listdir('/proc/self/task'):
        try:
            with open('/proc/self/task/%s/status' % tid) as f:
                got = dict(line.split(':', 1) for line in f if 'ctxt_switches' in line)
            out[int(tid)] = (int(got['voluntary_ctxt_switches']), int(got['nonvoluntary_ctxt_switches']))
        except (OSError, KeyError, ValueError):  # the thread ended
            pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--tokens', type=int, default=16)
    ap.add_argument('--rounds', type=int, default=41)
    ap.add_argument('--calls', type=int, default=10)
    ap.add_argument('--json')
    args = ap.parse_args()
    ffi, lib = _tessera_cffi.ffi, _tessera_cffi.lib
    model = minilm.Model()
    ids, lengths = tokens(model, args.tokens)
    plain, gated = (minilm.Runner(model, tessera.Device(args.device)) for _ in range(2))
    for r in (plain, gated):
        r.forward(ids, lengths)  # the warm forward (the runner's kept strips are made here)
        r.forward(ids, lengths)  # records each runner's graph
    dev = gated.device
    with dev._held() as handle:
        queue = cl.CommandQueue.from_int_ptr(int(ffi.cast('uintptr_t', lib.tsr_device_queue(handle))),
                                             retain=True)
    context = queue.context
    state = next(iter(gated._shapes.values()))

    def gated_forward():
        gate = cl.UserEvent(context)
        cl.enqueue_barrier(queue, wait_for=[gate])
        tessera.embedding(ids, gated.word, gated.position, gated.token_type, out=state['x3'], device=dev)
        state['graph'].replay()
        gate.set_status(cl.command_execution_status.COMPLETE)
        pooled = state['pooled'].get().reshape(-1, minilm.HIDDEN).astype(np.float64)
        return (pooled / np.sqrt(np.einsum('ij,ij->i', pooled, pooled))[:, None]).astype(np.float32)

    runs = {'plain': lambda: plain.forward(ids, lengths), 'gated': gated_forward}
    out = {name: run() for name, run in runs.items()}
    cos = float(np.min((out['plain'] * out['gated']).sum(axis=1)))
    if cos < 0.9999999:
        sys.exit('minilm_gate_ab: the two disagree (cosine %.9f)' % cos)
    stats = {name: {'wall': [], 'cpu': []} for name in runs}
    # per forward: the calling thread's involuntary switches, the other threads' voluntary ones
    sw = {name: [0, 0] for name in runs}
    me = threading.get_native_id()
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for name in (('plain', 'gated') if r % 2 == 0 else ('gated', 'plain')):
            run = runs[name]
            run()
            before = switches()
            w, c = time.perf_counter(), time.process_time()
            for _ in range(args.calls):
                run()
            stats[name]['wall'].append((time.perf_counter() - w) / args.calls * 1e3)
            stats[name]['cpu'].append((time.process_time() - c) / args.calls * 1e3)
            after = switches()
            for tid, (vol, invol) in after.items():
                v0, i0 = before.get(tid, (0, 0))
                if tid == me:
                    sw[name][0] += invol - i0
                else:
                    sw[name][1] += vol - v0
    loads.append(os.getloadavg()[0])
    med = {n: {k: statistics.median(v) for k, v in s.items()} for n, s in stats.items()}
    print('1 x %d tokens, %d rounds x %d forwards, cosine %.9f, load %.2f -> %.2f' % (
        args.tokens, args.rounds, args.calls, cos, loads[0], loads[1]))
    for k, what in (('wall', 'wall ms'), ('cpu', 'process CPU ms')):
        print('  %-16s plain %7.3f  gated %7.3f  gated/plain %.3f' % (what, med['plain'][k], med['gated'][k],
                                                                    med['gated'][k] / med['plain'][k]))
    per = {n: [x / (args.rounds * args.calls) for x in v] for n, v in sw.items()}
    print('  per forward: caller preempted (involuntary switches) plain %.1f gated %.1f; other threads slept '
          '(voluntary) plain %.1f gated %.1f' % (per['plain'][0], per['gated'][0], per['plain'][1], per['gated'][1]))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'device': dev.name, 'tokens': args.tokens, 'rounds': args.rounds, 'calls': args.calls,
                       'cosine': cos, 'load': loads, 'ms': stats, 'median_ms': med,
                       'switches_per_forward': {n: {'caller_involuntary': v[0], 'others_voluntary': v[1]}
                                                for n, v in per.items()},
                       'gated_over_plain': {k: med['gated'][k] / med['plain'][k] for k in ('wall', 'cpu')}},
                      f, indent=1)


if __name__ == '__main__':
    main()
