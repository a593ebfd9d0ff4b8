#!/usr/bin/env python3
"""MiniLM's batch-1 forward with its Linear weights on 2 MiB pages against 4 KiB pages, in one process:

    PY=build/python-venv/bin/python   # tessera installed, plus the model package (docs/minilm.md)
    $PY bench/minilm_hugepages_ab.py [--tokens 16] [--rounds 61] [--calls 10] [--json FILE]

Linux and PoCL's CPU device only (a question about this machine, not a feature). Two devices,
two runners. "new" gets all its Linear weights in one buffer (views at offsets, 2 MiB of
margin before the first), then the buffer is mapped (PoCL's CPU device maps a buffer in place)
and its whole 2 MiB pages are madvised MADV_HUGEPAGE and MADV_COLLAPSE. The weights stream
at stride ldb across pages; the question is whether the TLB misses cost. Each round runs
--calls forwards of each side, alternating the order; printed are the medians over rounds of
the process CPU time and the wall time per forward, the madvise results, and the load."""
import argparse
import ctypes
import json
import os
import sys

import numpy as np

import tessera
from tessera._tessera_cffi import ffi, lib
from tessera.examples import minilm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_rounds import alternate  # noqa: E402
from minilm_profile import tokens  # noqa: E402

HUGE = 2 << 20
MADV_HUGEPAGE, MADV_COLLAPSE = 14, 25


def madvise_huge(device, arr):
    """Maps `arr`'s buffer and madvises its whole 2 MiB pages; returns the two madvise results."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    ocl = ctypes.CDLL('libOpenCL.so.1')
    ocl.clEnqueueMapBuffer.restype = ctypes.c_void_p
    ocl.clEnqueueMapBuffer.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint64,
                                       ctypes.c_size_t, ctypes.c_size_t, ctypes.c_uint, ctypes.c_void_p,
                                       ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    ocl.clEnqueueUnmapMemObject.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint,
                                            ctypes.c_void_p, ctypes.c_void_p]
    ocl.clFinish.argtypes = [ctypes.c_void_p]
    mem = int(ffi.cast('intptr_t', arr.mem))
    queue = int(ffi.cast('intptr_t', lib.tsr_device_queue(device.handle)))
    nbytes = arr.dtype.itemsize * int(np.prod(arr.shape))
    err = ctypes.c_int()
    ptr = ocl.clEnqueueMapBuffer(queue, mem, 1, 1, 0, nbytes, 0, None, None, ctypes.byref(err))  # CL_MAP_READ
    if err.value:
        sys.exit('minilm_hugepages_ab: clEnqueueMapBuffer failed (%d)' % err.value)
    lo, hi = (ptr + HUGE - 1) // HUGE * HUGE, (ptr + nbytes) // HUGE * HUGE
    got = [libc.madvise(lo, hi - lo, advice) for advice in (MADV_HUGEPAGE, MADV_COLLAPSE)] if hi > lo else []
    ocl.clEnqueueUnmapMemObject(queue, mem, ctypes.c_void_p(ptr), 0, None, None)
    ocl.clFinish(queue)
    return got, hi - lo


def anon_huge_kb():
    with open('/proc/self/smaps_rollup') as f:
        return int(f.read().split('AnonHugePages:')[1].split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--tokens', type=int, default=16)
    ap.add_argument('--rounds', type=int, default=61)
    ap.add_argument('--calls', type=int, default=10)
    ap.add_argument('--json')
    args = ap.parse_args()
    devs = {name: tessera.Device('cpu') for name in ('old', 'new')}
    model = minilm.Model()
    ids, lengths = tokens(model, args.tokens)
    runners = {name: minilm.Runner(model, dev) for name, dev in devs.items()}
    for r in runners.values():
        r.forward(ids, lengths)  # uploads the weights of the layout this length takes
    new = runners['new']
    layers = new._linear[new._layout(args.tokens)]
    weights = [(i, k, a.get()) for i, layer in enumerate(layers) for k, a in layer.items()]
    margin = HUGE // 4
    host = np.zeros(margin + sum(w.size for _, _, w in weights), np.float32)
    off = margin
    for _, _, w in weights:
        host[off:off + w.size] = w.ravel()
        off += w.size
    big = tessera.to_device(host, device=devs['new'])
    off = margin
    for i, k, w in weights:
        layers[i][k] = big.view(w.shape, offset=off)
        off += w.size
    huge_before = anon_huge_kb()
    advice, advised = madvise_huge(devs['new'], big)
    huge_after = anon_huge_kb()
    out = {name: np.asarray(r.forward(ids, lengths)) for name, r in runners.items()}
    diff = float(np.abs(out['old'] - out['new']).max())
    if diff > 0:
        sys.exit('minilm_hugepages_ab: the two sides disagree (%g)' % diff)
    stats, med, loads = alternate({name: (lambda r=runners[name]: r.forward(ids, lengths)) for name in ('old', 'new')},
                                  args.rounds, args.calls)
    print('1 x %d tokens, %d rounds x %d forwards, load %.2f -> %.2f; madvise %s over %d MiB, AnonHugePages '
          '%d -> %d kB' % (args.tokens, args.rounds, args.calls, loads[0], loads[1], advice, advised >> 20,
                           huge_before, huge_after))
    for k, what in (('cpu', 'process CPU ms'), ('wall', 'wall ms')):
        print('  %-16s 4 KiB %7.3f  2 MiB %7.3f  2 MiB / 4 KiB %.3f' % (what, med['old'][k], med['new'][k],
                                                                     med['new'][k] / med['old'][k]))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'device': devs['new'].name, 'tokens': args.tokens, 'rounds': args.rounds, 'calls': args.calls,
                       'madvise': advice, 'advised_bytes': advised, 'anon_huge_kb': [huge_before, huge_after],
                       'load': loads, 'ms': stats, 'median_ms': med,
                       'new_over_old': {k: med['new'][k] / med['old'][k] for k in ('wall', 'cpu')}}, f, indent=1)


if __name__ == '__main__':
    main()
