#!/usr/bin/env python3
"""The weights' stream of a small-M GEMM (MiniLM's 16-token shapes): 16 x N x K, B hot (the same
buffer every call: L3-resident) or cold (a rotation of --copies buffers, more than the L3 holds),
B as the runner keeps it ([K, N] row-major) or in 32-column strips ([N / 32, K, 32], each strip
contiguous: one batched GEMM over the strips, A broadcast, into a [N / 32, 16, 32] output).

    PY=build/python-venv/bin/python   # tessera installed
    $PY bench/gemm_weight_stream.py [--shapes 1536x384,384x1536,1152x384] [--copies 24] [--rounds 21]
                                    [--config "KERNEL=2 MWI=8 VW=16 NVW=2 KU=4"] [--json FILE]

Each case is a graph of --copies calls replayed back to back (then a read of the output); the cases
alternate per round. Printed: per call, medians of the wall and process CPU time (PoCL's workers
included) and the GB/s of B over the wall time; the load average before and after."""
import argparse
import json
import os
import statistics
import time

import numpy as np

import tessera

STRIP = 32


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--shapes', default='1536x384,384x1536,1152x384', help='NxK, comma separated (M is 16)')
    ap.add_argument('--copies', type=int, default=24)
    ap.add_argument('--rounds', type=int, default=21)
    ap.add_argument('--config', default='KERNEL=2 MWI=8 VW=16 NVW=2 KU=4', help='GEMM configuration forced')
    ap.add_argument('--json')
    args = ap.parse_args()
    dev = tessera.Device(args.device)
    dev.override('gemm', args.config)
    m, rng, results = 16, np.random.default_rng(0), []
    for shape in args.shapes.split(','):
        n, k = (int(v) for v in shape.split('x'))
        if n % STRIP:
            raise SystemExit('gemm_weight_stream: N must be a multiple of %d' % STRIP)
        host = [rng.standard_normal((k, n)).astype(np.float32) for _ in range(args.copies)]
        a = tessera.to_device(rng.standard_normal((m, k)).astype(np.float32), device=dev)
        rows = [tessera.to_device(w, device=dev) for w in host]
        strips = [tessera.to_device(np.ascontiguousarray(w.reshape(k, n // STRIP, STRIP).transpose(1, 0, 2)), device=dev)
                  for w in host]
        c, cs = tessera.empty((m, n), device=dev), tessera.empty((n // STRIP, m, STRIP), device=dev)
        ab = a.view((n // STRIP, m, k), (0, k, 1))
        tessera.gemm(a, rows[1], c)
        tessera.gemm(ab, strips[1], cs)
        got = cs.get().transpose(1, 0, 2).reshape(m, n)
        want = a.get().astype(np.float64) @ host[1]
        if not np.allclose(got, want, rtol=1e-4, atol=1e-3) or not np.allclose(c.get(), want, rtol=1e-4, atol=1e-3):
            raise SystemExit('gemm_weight_stream: a layout computed the wrong product')

        def graph(call):
            with tessera.graph(dev) as g:
                for i in range(args.copies):
                    call(i)
            return g
        cases = {'row hot': (graph(lambda i: tessera.gemm(a, rows[0], c)), c),
                 'row cold': (graph(lambda i: tessera.gemm(a, rows[i], c)), c),
                 'strips hot': (graph(lambda i: tessera.gemm(ab, strips[0], cs)), cs),
                 'strips cold': (graph(lambda i: tessera.gemm(ab, strips[i], cs)), cs)}
        samples = {name: {'wall': [], 'cpu': []} for name in cases}
        loads = [os.getloadavg()[0]]
        names = list(cases)
        for r in range(args.rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                g, out = cases[name]
                g.replay()
                out.get()
                w, p = time.perf_counter(), time.process_time()
                g.replay()
                out.get()
                samples[name]['wall'].append((time.perf_counter() - w) / args.copies * 1e6)
                samples[name]['cpu'].append((time.process_time() - p) / args.copies * 1e6)
        loads.append(os.getloadavg()[0])
        mb = k * n * 4 / 1e6
        print('16x%dx%d (B %.2f MB, %d copies), medians of %d, load %.2f -> %.2f' % (
            n, k, mb, args.copies, args.rounds, loads[0], loads[1]))
        med = {}
        for name, s in samples.items():
            med[name] = {key: statistics.median(v) for key, v in s.items()}
            print('  %-12s wall %7.1f us  CPU %7.1f us  %5.1f GB/s of B' % (
                name, med[name]['wall'], med[name]['cpu'], mb * 1e3 / med[name]['wall']))
        results.append({'m': m, 'n': n, 'k': k, 'load': loads, 'median_us': med, 'samples_us': samples})
        for g, _ in cases.values():
            g.release()
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'bench': 'gemm_weight_stream', 'device': dev.name, 'config': args.config,
                       'copies': args.copies, 'rounds': args.rounds, 'results': results}, f, indent=1)


if __name__ == '__main__':
    main()
