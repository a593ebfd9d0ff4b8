#!/usr/bin/env python3
"""Where MiniLM's batch-1 forward (1 sentence x 16 tokens) spends its time on tessera.

    PY=build/python-venv/bin/python   # tessera installed, plus the model package (docs/minilm.md)
    $PY bench/minilm_profile.py [--device cpu] [--rounds 15] [--repeat 10] [--json FILE]

Every number is a median over --rounds rounds, each round timing the cases back to back in the
same order (the whole machine's load shows in all of them alike):
  forward          Runner.forward, end to end (embedding, the graph, read-back, normalisation)
  embedding        the embedding call + clFinish
  encoder          the graph's replay (encoder and pooling) + clFinish (replay_host: the call alone)
  read-back        the pooled vectors' read (nothing queued)
  per op           each of layer 0's calls recorded in a graph --repeat + 1 times and once:
                   steady = (t(repeat + 1) - t(1)) / repeat is the op's device time per call
                   back to back, first = t(1) - steady what one call alone adds (the queue's
                   wake-up, clFinish's wait)
The sum of six layers' steady times is what the encoder would take without gaps; the rest of
`encoder` is time between launches (PoCL's command hand-off and wake-ups). Last, the sleeps per
forward of the process's other threads (PoCL's workers: voluntary context switches, from
/proc/self/task/*/status, over --rounds x 10 forwards back to back): a worker that runs out of
work-groups sleeps, and the next kernel waits for its wake-up.
"""
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


def tokens(model, n):
    words = ('the quick brown fox jumps over the lazy dog while a small crowd of people watches from '
             'the stands and talks about the weather in the city ').split()
    rng = np.random.default_rng(0)
    ids, lengths = model.tokenize([' '.join(rng.choice(words, n - 2))])
    return ids[:, :n], np.minimum(lengths, n)


def layer_ops(runner, state, batch, seq):
    """Layer 0's calls as in Runner._encoder: (name, call) pairs."""
    H, heads = minilm.HIDDEN, minilm.HEADS
    d, eps, row = H // heads, runner.model.eps, 3 * H
    x, qkv, context, hidden = (state[n] for n in ('x', 'qkv', 'context', 'hidden'))
    q, k, v = (qkv.view((batch, heads, seq, d), (seq * row, d, row, 1), i * H) for i in range(3))
    o = context.view((batch, heads, seq, d), (seq * H, d, H, 1))
    tb = state['layout'] == 'out_in'
    layer, lw = runner.layers[0], runner._linear_weights(state['layout'])[0]
    return [
        ('gemm qkv 16x1152x384', lambda: tessera.gemm(x, lw['qkv_w'], qkv, bias=layer['qkv_b'], trans_b=tb)),
        ('attention 12x16x16x32', lambda: tessera.attention(q, k, v, out=o)),
        ('gemm out+res+norm 16x384x384', lambda: tessera.gemm(context, lw['out_w'], x, bias=layer['out_b'], trans_b=tb,
                                                              residual=x, layernorm=layer['ln1'] + (eps,))),
        ('gemm ffn1+gelu 16x1536x384', lambda: tessera.gemm(x, lw['ffn1_w'], hidden, bias=layer['ffn1_b'],
                                                            activation='gelu', trans_b=tb)),
        ('gemm ffn2+res+norm 16x384x1536', lambda: tessera.gemm(hidden, lw['ffn2_w'], x, bias=layer['ffn2_b'],
                                                                trans_b=tb, residual=x,
                                                                layernorm=layer['ln2'] + (eps,))),
    ]


def thread_sleeps():
    """Voluntary context switches per thread of this process, but the calling thread's (Linux)."""
    me, out = threading.get_native_id(), {}
    for tid in os.listdir('/proc/self/task'):
        if int(tid) == me:
            continue
        try:
            with open('/proc/self/task/%s/status' % tid) as f:
                for line in f:
                    if line.startswith('voluntary_ctxt_switches'):
                        out[tid] = int(line.split()[1])
        except OSError:  # the thread ended
            pass
    return out


def recorded(dev, call, times):
    with tessera.graph(dev) as g:
        for _ in range(times):
            call()
    return g


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--tokens', type=int, default=16)
    ap.add_argument('--rounds', type=int, default=15)
    ap.add_argument('--repeat', type=int, default=10)
    ap.add_argument('--json')
    args = ap.parse_args()
    model = minilm.Model()
    runner = minilm.Runner(model, args.device)
    dev = runner.device
    ids, lengths = tokens(model, args.tokens)
    batch, seq = ids.shape
    runner.forward(ids, lengths)  # the warm forward (the runner's kept strips are made here)
    runner.forward(ids, lengths)  # records the encoder's graph
    state = next(iter(runner._shapes.values()))
    g = state['graph']

    def embedding():
        tessera.embedding(ids, runner.word, runner.position, runner.token_type,
                          out=state['x3'], device=dev)

    replay_host = []

    def encoder():
        t0 = time.perf_counter()
        g.replay()
        replay_host.append(time.perf_counter() - t0)

    cases = [('forward', lambda: runner.forward(ids, lengths)), ('embedding', embedding), ('encoder', encoder),
             ('read-back', state['pooled'].get)]
    ops = layer_ops(runner, state, batch, seq)
    graphs = {}
    for name, call in ops:
        one, many = recorded(dev, call, 1), recorded(dev, call, args.repeat + 1)
        graphs[name] = (one, many)
        cases.append((name + ' x1', one.replay))
        cases.append((name + ' x%d' % (args.repeat + 1), many.replay))
    times = {name: [] for name, _ in cases}
    cpu = {name: [] for name, _ in cases}
    for name, call in cases:  # warm-up
        call()
        dev.finish()
    for _ in range(args.rounds):
        for name, call in cases:
            c0, t0 = time.process_time(), time.perf_counter()
            call()
            dev.finish()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    med = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    mcpu = {name: statistics.median(t) * 1e3 for name, t in cpu.items()}
    load = os.getloadavg()
    result = {'device': dev.name, 'tokens': seq, 'rounds': args.rounds, 'repeat': args.repeat,
              'load': None, 'launches_encoder': g.launches, 'ms': med, 'cpu_ms': mcpu,
              'replay_host_ms': statistics.median(replay_host) * 1e3, 'ops': []}
    result['load'] = load[0]
    print('tessera %s, %s, 1 x %d tokens, medians of %d rounds, load %.2f' % (
        tessera.__version__, dev.name, seq, args.rounds, load[0]))
    for name in ('forward', 'embedding', 'encoder', 'read-back'):
        print('  %-30s %8.3f ms  (process CPU %.3f ms)' % (name, med[name], mcpu[name]))
    print('  %-30s %8.3f ms (%d launches)' % ('encoder replay call (host)', result['replay_host_ms'], g.launches))
    total = 0.0
    print('  per op (layer 0):             launches  steady ms  first-extra ms  steady CPU ms')
    for name, _ in ops:
        t1, tn = med[name + ' x1'], med[name + ' x%d' % (args.repeat + 1)]
        steady = (tn - t1) / args.repeat
        c1, cn = mcpu[name + ' x1'], mcpu[name + ' x%d' % (args.repeat + 1)]
        steady_cpu = (cn - c1) / args.repeat
        n = graphs[name][0].launches
        total += steady
        result['ops'].append({'op': name, 'launches': n, 'steady_ms': steady, 'first_extra_ms': t1 - steady,
                              'steady_cpu_ms': steady_cpu})
        print('    %-28s %4d %10.3f %10.3f %10.3f' % (name, n, steady, t1 - steady, steady_cpu))
    result['layer_steady_ms'] = total
    print('  one layer, steady sum: %.3f ms; x %d layers = %.3f ms (+ the embedding LayerNorm)' % (
        total, minilm.LAYERS, total * minilm.LAYERS))
    if os.path.isdir('/proc/self/task'):
        forwards = args.rounds * 10
        before = thread_sleeps()
        for _ in range(forwards):
            runner.forward(ids, lengths)
        after = thread_sleeps()
        busy = {t: after[t] - before.get(t, 0) for t in after}
        busy = {t: n / forwards for t, n in busy.items() if n}
        result['sleeps_per_forward'] = busy
        print('  sleeps per forward of the other threads (PoCL workers): %s (%d kernel launches per forward)' % (
            ', '.join('%.1f' % n for n in sorted(busy.values(), reverse=True)), g.launches + 1))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)


if __name__ == '__main__':
    sys.exit(main())
