#!/usr/bin/env python3
"""MiniLM at batch 1: each implementation's latency right after each implementation's call.

    PY=build/python-venv/bin/python   # as for bench/minilm_bench.py (tessera, torch, onnxruntime)
    $PY bench/minilm_follow.py [--rounds 9] [--threads 2] [--idle 0.05]

For every pair (previous, current) and round: --idle seconds of idle, one call of `previous`,
then one timed call of `current` with no idle between. Prints the medians as a matrix: the
diagonal is an implementation back to back with itself; off the diagonal its latency while the
previous one's worker threads may still spin (ONNX Runtime's and PyTorch's thread pools spin
after their work; PoCL's workers sleep), which is what bench/minilm_bench.py --settle 0 --calls 1
measures for every call.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilm_bench  # noqa: E402  (the peers and the token ids)
from tessera.examples import minilm  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--threads', type=int, default=os.cpu_count())
    ap.add_argument('--rounds', type=int, default=9)
    ap.add_argument('--idle', type=float, default=0.05)
    ap.add_argument('--latency-tokens', type=int, default=16)
    args = ap.parse_args()
    model = minilm.Model()
    impls = {'tessera': minilm.Runner(model, args.device).forward,
             'pytorch': minilm_bench.torch_peer(model, args.threads)[0],
             'onnxruntime': minilm_bench.onnx_peer(model, args.threads, tempfile.mkdtemp())[0]}
    ids, lengths = minilm_bench.token_batches(model, args)['latency']
    for run in impls.values():
        run(ids, lengths)
    times = {}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for prev in impls:
            for cur in impls:
                time.sleep(args.idle)
                impls[prev](ids, lengths)
                t0 = time.perf_counter()
                impls[cur](ids, lengths)
                times.setdefault((cur, prev), []).append((time.perf_counter() - t0) * 1e3)
    print('1 x %d tokens, medians of %d rounds (ms), load %.2f -> %.2f' % (
        ids.shape[1], args.rounds, load, os.getloadavg()[0]))
    print('%-12s' % 'current' + ''.join('  after %-12s' % p for p in impls))
    for cur in impls:
        print('%-12s' % cur + ''.join('  %18.2f' % statistics.median(times[(cur, p)]) for p in impls))


if __name__ == '__main__':
    main()
