"""Thread CPU time per repeated call of tessera.matmul / gemm / gelu / layernorm on device-resident
tessera.Arrays (16 x 16, out given: the replay path) against the bare cffi call of tsr_matmul.

    python bench/python_op_overhead.py [REPS] [OP to profile with cProfile]

Medians over REPS rounds (default 5) of 10^4 calls each (docs/python.md, "Overhead").
"""
import cProfile
import os
import pstats
import statistics
import sys
import time

import numpy as np

import tessera
from tessera._tessera_cffi import ffi, lib

N = 10000


def main():
    dev = tessera.Device('cpu')
    n = 16
    rng = np.random.default_rng(1)

    def up(*shape):
        return tessera.to_device(rng.standard_normal(shape).astype(np.float32), device=dev)

    a, b, c = up(n, n), up(n, n), up(n, n)
    g, be = up(n), up(n)
    desc = ffi.new('tsr_matmul_desc *', {'m': n, 'n': n, 'k': n, 'alpha': 1.0})
    h = dev.handle
    q = lib.tsr_device_queue(h)
    ma, mb, mc = a.mem, b.mem, c.mem
    ops = {
        'matmul': lambda: tessera.matmul(a, b, c),
        'gemm': lambda: tessera.gemm(a, b, c),
        'gelu': lambda: tessera.gelu(a, c),
        'layernorm': lambda: tessera.layernorm(a, g, be, out=c),
        'cffi': lambda: lib.tsr_matmul(h, desc, ma, mb, mc, q, ffi.NULL),
    }
    for f in ops.values():
        for _ in range(20):
            f()
    dev.finish()
    res = {k: [] for k in ops}
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 5):
        for k, f in ops.items():
            t0 = time.thread_time()
            for _ in range(N):
                f()
            res[k].append((time.thread_time() - t0) / N * 1e6)
            dev.finish()
    print(' '.join('%s %.2f' % (k, statistics.median(v)) for k, v in res.items()),
          'us thread CPU per call; load %.2f' % os.getloadavg()[0])
    if len(sys.argv) > 2:
        f = ops[sys.argv[2]]
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(N):
            f()
        prof.disable()
        dev.finish()
        pstats.Stats(prof).sort_stats('tottime').print_stats(15)


if __name__ == '__main__':
    main()
