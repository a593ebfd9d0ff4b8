"""MiniLM forward at batch 1 x 16 tokens, back to back, with the encoder replayed from a recorded
graph and with its calls made one by one, alternating (docs/graph.md). Prints the medians of
each and checks both give the same embedding bit for bit.

    python bench/minilm_graph.py [--rounds 15] [--calls 50]
"""
import argparse
import statistics
import time

import numpy as np

import tessera
from tessera.examples import minilm


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=int, default=15, help='alternations (median over them)')
    ap.add_argument('--calls', type=int, default=50, help='forwards back to back per timed round')
    ap.add_argument('--tokens', type=int, default=16)
    args = ap.parse_args()
    model = minilm.Model()
    runner = minilm.Runner(model, tessera.default_device())
    rng = np.random.default_rng(1)
    ids = rng.integers(1000, 20000, size=(1, args.tokens)).astype(np.int64)
    ids[0, 0], ids[0, -1] = 101, 102  # [CLS] ... [SEP]
    lengths = np.array([args.tokens])
    out = {}
    for mode in (True, False):  # warm up both (the graph is recorded here)
        runner.use_graph = mode
        out[mode] = runner.forward(ids, lengths)
    assert np.array_equal(out[True], out[False]), 'the replay differs from the calls'
    times = {True: [], False: []}
    for r in range(args.rounds):
        for mode in ((True, False) if r % 2 == 0 else (False, True)):
            runner.use_graph = mode
            t0 = time.perf_counter()
            for _ in range(args.calls):
                runner.forward(ids, lengths)
            times[mode].append((time.perf_counter() - t0) / args.calls)
    g, p = statistics.median(times[True]), statistics.median(times[False])
    print('MiniLM 1x%d forward, median of %d rounds of %d back-to-back calls:' % (args.tokens, args.rounds, args.calls))
    print('  graph replay  %.2f ms' % (g * 1e3))
    print('  calls         %.2f ms' % (p * 1e3))
    print('  speedup       %.2fx' % (p / g))


if __name__ == '__main__':
    main()
