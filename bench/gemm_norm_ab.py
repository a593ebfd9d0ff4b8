#!/usr/bin/env python3
"""A linear layer's Add & Norm three ways, side by side in one process (alternating, medians):

    PY=build/python-venv/bin/python   # tessera installed
    $PY bench/gemm_norm_ab.py [M] [K] [N] [--rounds 41] [--device cpu]

  sep    gemm(h, w, p, bias) then layernorm(p, g, b, residual=x, out=x): two launches
  fused  gemm(h, w, x, bias, residual=x, layernorm=(g, b, eps)): one launch where the small-M
         kernel runs (docs/gemm.md, "LayerNorm last")
  plain  the GEMM alone (what the norm adds on top of it)
Each is a graph of 20 calls replayed back to back; printed per call: wall and process CPU time
(microseconds), with the load average. Defaults: MiniLM's output projection at 16 tokens,
16 x 384 x 384 (its FFN2 is 16 1536 384)."""
import argparse
import os
import statistics
import time

import numpy as np

import tessera


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('m', type=int, nargs='?', default=16)
    ap.add_argument('k', type=int, nargs='?', default=384)
    ap.add_argument('n', type=int, nargs='?', default=384)
    ap.add_argument('--rounds', type=int, default=41)
    ap.add_argument('--device', default='cpu')
    args = ap.parse_args()
    dev = tessera.as_device(args.device)
    rng = np.random.default_rng(1)
    M, K, N, R = args.m, args.k, args.n, 20

    def up(a):
        return tessera.to_device(np.ascontiguousarray(a, dtype=np.float32), device=dev)

    a, w, b = up(rng.standard_normal((M, K))), up(rng.standard_normal((K, N)) * 0.05), up(rng.standard_normal(N))
    g, be = up(1 + 0.1 * rng.standard_normal(N)), up(0.1 * rng.standard_normal(N))
    x0 = rng.standard_normal((M, N))
    xs = {k: up(x0) for k in ('sep', 'fused')}
    proj = tessera.empty((M, N), device=dev)
    calls = {
        'sep': lambda: (tessera.gemm(a, w, proj, bias=b),
                        tessera.layernorm(proj, g, be, residual=xs['sep'], eps=1e-12, out=xs['sep'])),
        'fused': lambda: tessera.gemm(a, w, xs['fused'], bias=b, residual=xs['fused'], layernorm=(g, be, 1e-12)),
        'plain': lambda: tessera.gemm(a, w, proj, bias=b),
    }
    graphs = {}
    for name, call in calls.items():
        with tessera.graph(dev) as graph:
            for _ in range(R):
                call()
        graphs[name] = graph
    st = {k: {'wall': [], 'cpu': []} for k in graphs}
    load0 = os.getloadavg()[0]
    for r in range(args.rounds):
        for k in (list(graphs) if r % 2 else list(graphs)[::-1]):
            graphs[k].replay()
            dev.finish()
            t, c = time.perf_counter(), time.process_time()
            graphs[k].replay()
            dev.finish()
            st[k]['wall'].append((time.perf_counter() - t) / R * 1e6)
            st[k]['cpu'].append((time.process_time() - c) / R * 1e6)
    print('%s, %d x %d x %d, %d rounds of %d calls, load %.2f -> %.2f (us per call)' % (
        dev.name, M, K, N, args.rounds, R, load0, os.getloadavg()[0]))
    for k in graphs:
        print('  %-6s wall %7.1f  CPU %7.1f' % (k, statistics.median(st[k]['wall']), statistics.median(st[k]['cpu'])))


if __name__ == '__main__':
    main()
