#!/usr/bin/env python3
"""Old against new kernel text on PoCL's CPU device, in process CPU time: cl/gelu.cl (16M
elements), cl/embedding.cl (BERT-base's 4096 x 768 gather) or cl/layernorm.cl (4096 x 768 with
residual), each variant built from its own directory with its own -D defines and timed in
alternation with the others, median wall and CPU time (user + system over PoCL's threads, which
load from other jobs disturbs less than wall time) per call. Needs pyopencl (build/venv).

    build/venv/bin/python bench/cl_cpu_ab.py gelu 40 f32=OLD/cl:MODE=2,VW=16,VPT=4,WG=16 \\
        bf16old=OLD/cl:MODE=2,X_TYPE=2,Y_TYPE=2,VW=16,VPT=4,WG=16 bf16new=cl:MODE=2,X_TYPE=2,Y_TYPE=2,VW=16,VPT=4,WG=16

A variant is LABEL=DIR:K=V,...; the first is the base of the printed ratios. gelu takes WG= (its
work-group size) besides the kernel's defines; embedding and layernorm set their geometry
(layernorm WG=1 VW=16 RPG=2, the CPU default). gelu --n N (after the rounds): N elements instead
of 16M, each sample 16M / N calls back to back (262144 stays in the caches: the kernel's own cost
without DRAM's), also printed as CPU ns per 16 elements."""
import os
import resource
import statistics
import sys
import time

import numpy as np
import pyopencl as cl


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def typed(values, t):
    """values (float32) stored as type t: 0 f32, 1 f16, 2 bf16 (truncated: any bits do)."""
    return {0: values, 1: values.astype(np.float16), 2: (values.view(np.uint32) >> 16).astype(np.uint16)}[t]


def main():
    op, rounds, specs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    n = 1 << 24
    if specs[:1] == ["--n"] and op == "gelu" and len(specs) > 1:
        n, specs = int(specs[1]), specs[2:]
    inner = max(1, (1 << 24) // n)
    if op not in ("gelu", "embedding", "layernorm") or not specs:
        sys.exit(__doc__)
    ctx = cl.Context(dev_type=cl.device_type.CPU)
    queue = cl.CommandQueue(ctx)
    rng = np.random.default_rng(1)
    mf = cl.mem_flags
    U = np.uint64

    def upload(a):
        return cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)

    if op == "gelu":
        x = (rng.standard_normal(n, dtype=np.float32) * 3).astype(np.float32)
        xs = {t: upload(typed(x, t)) for t in (0, 1, 2)}
        ys = {t: cl.Buffer(ctx, mf.READ_WRITE, size=n * 4) for t in (0, 1, 2)}
    elif op == "embedding":
        tokens, hidden, vocab, positions, seq_len = 4096, 768, 30522, 512, 128
        table = rng.uniform(-0.1, 0.1, (vocab + positions + 2) * hidden).astype(np.float32)
        tables = {t: upload(typed(table, t)) for t in (0, 1, 2)}
        ids = upload(np.concatenate([rng.integers(0, vocab, tokens), rng.integers(0, 2, tokens)]).astype(np.int32))
        ys = {t: cl.Buffer(ctx, mf.READ_WRITE, size=tokens * hidden * 4) for t in (0, 1, 2)}
    else:
        rows, cols = 4096, 768
        x = rng.standard_normal(rows * cols).astype(np.float32)
        xs = {t: upload(typed(x, t)) for t in (0, 1, 2)}
        rs = {t: upload(typed(x[::-1].copy(), t)) for t in (0, 1, 2)}
        ys = {t: cl.Buffer(ctx, mf.READ_WRITE, size=rows * cols * 4) for t in (0, 1, 2)}
        gamma, beta = upload(np.ones(cols, np.float32)), upload(np.zeros(cols, np.float32))

    variants = []
    for spec in specs:
        label, rest = spec.split("=", 1)
        directory, defines = rest.split(":", 1)
        kv = dict(d.split("=", 1) for d in defines.split(",") if d)
        local = None
        if op == "gelu":
            local = (int(kv.pop("WG", "16")),)
        elif op == "layernorm":
            kv.update(WG="1", VW="16", RESIDUAL="1")
        source = open(os.path.join(directory, op + ".cl")).read()
        options = ["-I", os.path.abspath(directory)] + ["-D%s=%s" % item for item in kv.items()]
        kernel = getattr(cl.Program(ctx, source).build(options=options), op)
        if op == "gelu":
            per_item = int(kv.get("VW", 1)) * int(kv.get("VPT", 1))
            items = -(-n // per_item)
            size = (-(-items // local[0]) * local[0],)
            kernel.set_args(U(n), xs[int(kv.get("X_TYPE", 0))], U(0), ys[int(kv.get("Y_TYPE", 0))], U(0))
        elif op == "embedding":
            t, tpi = int(kv.get("T_TYPE", 0)), int(kv.get("TPI", 1))
            size = (1, -(-tokens // tpi))
            kernel.set_args(U(tokens), U(hidden), U(seq_len), U(0), ids, np.int32(1), np.int32(1), np.int32(1),
                            tables[t], U(0), tables[t], U(vocab * hidden), tables[t], U((vocab + positions) * hidden),
                            ys[int(kv.get("Y_TYPE", 0))], U(0), U(hidden))
        else:
            size, local = (rows // 2,), (1,)
            kernel.set_args(U(rows), U(cols), np.float32(1e-5), np.uint32(2), xs[int(kv.get("X_TYPE", 0))], U(0),
                            U(cols), rs[int(kv.get("R_TYPE", 0))], U(0), U(cols), gamma, U(0), beta, U(0),
                            ys[int(kv.get("Y_TYPE", 0))], U(0), U(cols))
        variants.append((label, kernel, size, local, [], []))
    for _ in range(2):  # warm-up: first-call costs out of the medians
        for _, kernel, size, local, _, _ in variants:
            cl.enqueue_nd_range_kernel(queue, kernel, size, local)
            queue.finish()
    for _ in range(rounds):
        for _, kernel, size, local, walls, cpus in variants:
            c0, t0 = cpu_seconds(), time.perf_counter()
            for _ in range(inner):
                cl.enqueue_nd_range_kernel(queue, kernel, size, local)
            queue.finish()
            walls.append((time.perf_counter() - t0) / inner)
            cpus.append((cpu_seconds() - c0) / inner)
    print("load average %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    base_wall, base_cpu = statistics.median(variants[0][4]), statistics.median(variants[0][5])
    for label, _, _, _, walls, cpus in variants:
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        print("%-16s wall %8.3f ms  cpu %8.3f ms   %s / this: wall %.2f, cpu %.2f%s" %
              (label, 1e3 * wall, 1e3 * cpu, variants[0][0], base_wall / wall, base_cpu / cpu,
               "   cpu ns / 16 elements %.3f" % (1e9 * cpu / n * 16) if op == "gelu" else ""))


if __name__ == "__main__":
    main()
