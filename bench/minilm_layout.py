"""MiniLM forward at batch 1 with the Linear weights in each layout, alternating in one process:
'in_out' (transposed at load, op(B) = B; the small-m GEMM configuration the device resolves) and
'out_in' (as stored, read with trans_b; the gemm configuration forced to --smallm on a second
handle of the same device, so the other's configuration is untouched). Both encoders replay a
recorded graph. Prints the medians (ms per forward) and checks both embeddings agree.

    python bench/minilm_layout.py [--rounds 15] [--calls 20] [--tokens 16] [--smallm CONFIG]
"""
import argparse
import statistics
import time

import numpy as np

import tessera
from tessera.examples import minilm


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=int, default=15)
    ap.add_argument('--calls', type=int, default=20)
    ap.add_argument('--tokens', type=int, default=16)
    ap.add_argument('--batch', type=int, default=1)
    ap.add_argument('--smallm', default='KERNEL=2 MWI=8 VW=16 NVW=2 KU=4',
                    help='gemm configuration forced for the out_in runner ("" : none)')
    ap.add_argument('--in-out-config', default='',
                    help='gemm configuration forced for the in_out runner (default: none, the resolved one)')
    args = ap.parse_args()
    model = minilm.Model()
    dev_a, dev_b = tessera.Device(), tessera.Device()
    if args.smallm:
        dev_b.override('gemm', args.smallm)
    if args.in_out_config:
        dev_a.override('gemm', args.in_out_config)
    for name, d in (('in_out', dev_a), ('out_in', dev_b)):
        cls = minilm.Runner.small_m_class(args.batch * args.tokens)
        c = d.config('gemm', cls)
        print('%s: gemm %s %s (%s)' % (name, cls, c['config'], c['source']))
    runners = {'in_out': minilm.Runner(model, dev_a, weights='in_out'),
               'out_in': minilm.Runner(model, dev_b, weights='out_in')}
    auto = minilm.Runner(model, dev_a, weights='auto')._layout(args.batch * args.tokens)
    print("weights='auto' picks %s at %d rows on this device" % (auto, args.batch * args.tokens))
    rng = np.random.default_rng(1)
    ids = rng.integers(1000, 20000, size=(args.batch, args.tokens)).astype(np.int64)
    ids[:, 0], ids[:, -1] = 101, 102
    lengths = np.full(args.batch, args.tokens)
    out = {name: r.forward(ids, lengths) for name, r in runners.items()}
    diff = float(np.max(np.abs(out['in_out'] - out['out_in'])))
    assert diff < 1e-4, diff
    times = {name: [] for name in runners}
    names = list(runners)
    for r in range(args.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            runners[name].forward(ids, lengths)  # warm: the other runner's threads/caches
            t0 = time.perf_counter()
            for _ in range(args.calls):
                runners[name].forward(ids, lengths)
            times[name].append((time.perf_counter() - t0) / args.calls * 1e3)
    med = {n: statistics.median(t) for n, t in times.items()}
    print('batch %d x %d tokens, %d rounds x %d calls, out_in config %r, max |diff| %.1e'
          % (args.batch, args.tokens, args.rounds, args.calls, args.smallm, diff))
    for n in names:
        print('  %-7s %.2f ms (min %.2f)' % (n, med[n], min(times[n])))
    print('  out_in / in_out time: %.3f' % (med['out_in'] / med['in_out']))


if __name__ == '__main__':
    main()
