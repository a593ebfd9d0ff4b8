#!/usr/bin/env python3
"""What a tessera call costs from Python against the same call from C.

    build/python-venv/bin/python bench/python_overhead.py [--device cpu] [--size 256]
        [--calls 200] [--reps 7] [--c-binary build/bench/call_overhead] [--json FILE]

Alternates, --reps times: the C program bench/call_overhead (N x N x N tsr_matmul, synchronous
and pipelined) and the same calls through the package, tessera.matmul(a, b, out) on pyopencl
arrays (zero-copy; synchronous: queue.finish() after each call), and the bare cffi call
(lib.tsr_matmul + clFinish, no package code) in the same process, which separates what the
package costs from what calling from an interpreter costs. NumPy arrays (copied in and
out on every call) are timed too, for scale. Medians over the reps; the ratio and the per-call
Python overhead (Python minus C, microseconds) are printed and written as JSON. The calling
thread's CPU time per call (time.thread_time, pipelined, PoCL's workers not counted) is taken
for tessera.matmul and for the bare cffi call: their difference is what the package adds on the
caller's core, a figure that the machine's load moves much less than wall time.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import tessera


def direct_call(a, b, c, queue):
    """The same call through the cffi module, without the package: what the interpreter alone costs."""
    from tessera._call import _device_for_queue
    from tessera._tessera_cffi import ffi, lib
    dev = _device_for_queue(queue)
    n = a.shape[0]
    mems = [ffi.cast('cl_mem', x.base_data.int_ptr) for x in (a, b, c)]
    q = lib.tsr_device_queue(dev.handle)

    desc = ffi.new('tsr_matmul_desc *', {'m': n, 'n': n, 'k': n, 'alpha': 1.0})

    def call():
        lib.tsr_matmul(dev.handle, desc, mems[0], mems[1], mems[2], q, ffi.NULL)
    return call, q, lib


def python_rep(a, b, c, queue, calls, na, nb, nc):
    for _ in range(10):
        tessera.matmul(a, b, c)
    queue.finish()
    direct, q, lib = direct_call(a, b, c, queue)
    t0 = time.perf_counter()
    for _ in range(calls):
        direct()
        lib.clFinish(q)
    direct_us = (time.perf_counter() - t0) / calls * 1e6
    t0 = time.perf_counter()
    for _ in range(calls):
        tessera.matmul(a, b, c)
        queue.finish()
    t1 = time.perf_counter()
    for _ in range(calls):
        tessera.matmul(a, b, c)
    queue.finish()
    t2 = time.perf_counter()
    cpu = {}
    for name, fn in (('package', lambda: tessera.matmul(a, b, c)), ('cffi', direct)):
        c0 = time.thread_time()
        for _ in range(calls):
            fn()
        cpu[name] = (time.thread_time() - c0) / calls * 1e6
        queue.finish()
        lib.clFinish(q)
    t2b = time.perf_counter()
    numpy_calls = max(calls // 4, 5)
    for _ in range(numpy_calls):
        tessera.matmul(na, nb, nc)
    t3 = time.perf_counter()
    return {'synchronous_us': (t1 - t0) / calls * 1e6, 'pipelined_us': (t2 - t1) / calls * 1e6,
            'numpy_us': (t3 - t2b) / numpy_calls * 1e6, 'direct_cffi_synchronous_us': direct_us,
            'thread_cpu_package_us': cpu['package'], 'thread_cpu_cffi_us': cpu['cffi']}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--size', type=int, default=256)
    ap.add_argument('--calls', type=int, default=200)
    ap.add_argument('--reps', type=int, default=7)
    ap.add_argument('--c-binary', default='build/bench/call_overhead')
    ap.add_argument('--json')
    args = ap.parse_args()
    info = tessera.Device(args.device).info
    cl_device = cl.get_platforms()[info.platform_index].get_devices()[info.device_index]
    queue = cl.CommandQueue(cl.Context([cl_device]))
    n = args.size
    rng = np.random.default_rng(1)
    na, nb = (rng.uniform(-1, 1, (n, n)).astype(np.float32) for _ in range(2))
    nc = np.empty((n, n), np.float32)
    a, b, c = cla.to_device(queue, na), cla.to_device(queue, nb), cla.empty(queue, (n, n), np.float32)
    tessera.matmul(a, b, c)
    assert np.allclose(c.get(), na.astype(np.float64) @ nb, atol=1e-4), 'wrong result'
    c_runs, py_runs = [], []
    for rep in range(args.reps):
        out = subprocess.run([args.c_binary, '--device', args.device, '--size', str(n), '--calls', str(args.calls)],
                             capture_output=True, text=True, check=True)
        c_runs.append(json.loads(out.stdout))
        py_runs.append(python_rep(a, b, c, queue, args.calls, na, nb, nc))
        print('rep %d: C %.1f / %.1f us, Python %.1f / %.1f us (synchronous / pipelined), cffi alone %.1f us, '
              'NumPy arrays %.1f us; caller CPU %.1f us package, %.1f us cffi' % (rep, c_runs[-1]['synchronous_us'], c_runs[-1]['pipelined_us'],
                                       py_runs[-1]['synchronous_us'], py_runs[-1]['pipelined_us'],
                                       py_runs[-1]['direct_cffi_synchronous_us'], py_runs[-1]['numpy_us'],
                                       py_runs[-1]['thread_cpu_package_us'], py_runs[-1]['thread_cpu_cffi_us']),
              file=sys.stderr)
    med = lambda runs, key: statistics.median(r[key] for r in runs)  # noqa: E731
    result = {'device': info.name, 'size': n, 'calls': args.calls, 'reps': args.reps,
              'c': {k: med(c_runs, k) for k in ('synchronous_us', 'pipelined_us')},
              'python_pyopencl': {k: med(py_runs, k) for k in ('synchronous_us', 'pipelined_us')},
              'python_numpy_us': med(py_runs, 'numpy_us'),
              'python_direct_cffi_synchronous_us': med(py_runs, 'direct_cffi_synchronous_us'),
              'c_runs': c_runs, 'python_runs': py_runs}
    for key in ('synchronous_us', 'pipelined_us'):
        result['ratio_' + key[:-3]] = result['python_pyopencl'][key] / result['c'][key]
        result['python_overhead_' + key] = result['python_pyopencl'][key] - result['c'][key]
    result['thread_cpu_us'] = {k: med(py_runs, 'thread_cpu_%s_us' % k) for k in ('package', 'cffi')}
    result['package_overhead_thread_cpu_us'] = result['thread_cpu_us']['package'] - result['thread_cpu_us']['cffi']
    result['load'] = os.getloadavg()
    result['package_overhead_synchronous_us'] = (result['python_pyopencl']['synchronous_us']
                                                 - result['python_direct_cffi_synchronous_us'])
    print('%dx%dx%d GEMM on %s: Python/C %.3f synchronous, %.3f pipelined; Python adds %.1f us per call '
          '(pipelined: %.1f us), of which the package (tessera.matmul against the bare cffi call in the same '
          'process) %.1f us; with NumPy arrays (copies) %.1f us per call; on the calling thread\'s CPU '
          'tessera.matmul %.1f us, the bare cffi call %.1f us: the package adds %.1f us (load %.2f)'
          % (n, n, n, info.name, result['ratio_synchronous'], result['ratio_pipelined'],
             result['python_overhead_synchronous_us'], result['python_overhead_pipelined_us'],
             result['package_overhead_synchronous_us'], result['python_numpy_us'],
             result['thread_cpu_us']['package'], result['thread_cpu_us']['cffi'],
             result['package_overhead_thread_cpu_us'], result['load'][0]))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)


if __name__ == '__main__':
    main()
