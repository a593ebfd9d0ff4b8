#!/usr/bin/env python3
"""tessera's blocked attention under several configurations against PyTorch's
scaled_dot_product_attention, in ONE process, alternating (A, B, ..., torch, A, B, ...), with
wall time and process CPU time (user + system over every thread: PoCL's and PyTorch's) per call,
medians over rounds. CPU time counts less of what other processes take from a loaded machine
than wall time does; a pause after every block lets the previous runtime's spinning threads
stop before the next block's clock starts.

    python3 bench/attention_sdpa_ab.py --venv .venv-light --L 2048 --H 8 --rounds 7 \\
        --config "BR=8 BC=64 STAGE=0 VEC=2 RW=8 DS=4" --config "" --json /tmp/ab.json

--config "" is the configuration the device resolves without an override (tuned / built-in).
--base-kernels DIR also runs every configuration on a second device whose kernels come from DIR
(TSR_KERNEL_DIR: e.g. main's cl/, `git archive main cl | tar -x -C /tmp/main-kernels`), so an
edited kernel and the one before it are timed side by side in one process (name a --config: a
tuned entry for one source is stale for the other).
Both masks (non-causal, then PyTorch's is_causal=True, Lq = Lk) run unless --mask picks one.
Each implementation is checked once against float64 (relative Frobenius error)."""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", help="re-run under this virtual environment's python (torch + tessera)")
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--H", type=int, default=8)
    ap.add_argument("--L", type=int, default=2048)
    ap.add_argument("--D", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=3, help="timed calls per block (after one warm-up call)")
    ap.add_argument("--pause", type=float, default=0.3)
    ap.add_argument("--config", action="append", default=[], help="tessera attention configuration (repeatable)")
    ap.add_argument("--mask", choices=("both", "none", "causal"), default="both")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--base-kernels", metavar="DIR", help="also time each --config with the kernel sources in DIR")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.venv and os.path.realpath(sys.prefix) != os.path.realpath(args.venv):
        py = os.path.join(args.venv, "bin", "python")
        sys.exit(subprocess.call([py] + sys.argv))
    import numpy as np
    import torch
    import torch.nn.functional as F
    import tessera

    dev = tessera.default_device()
    base_dev = None
    if args.base_kernels:
        own = os.environ.get("TSR_KERNEL_DIR")
        os.environ["TSR_KERNEL_DIR"] = os.path.abspath(args.base_kernels)
        base_dev = tessera.Device(dev.info.selector)
        if own is None:
            del os.environ["TSR_KERNEL_DIR"]
        else:
            os.environ["TSR_KERNEL_DIR"] = own
    threads = dev.info.compute_units if hasattr(dev, "info") else 2
    torch.set_num_threads(threads)
    configs = args.config or [""]
    rng = np.random.default_rng(1)
    shape = (args.B, args.H, args.L, args.D)
    qn, kn, vn = (rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(3))
    bufs = {}
    for d in (dev, base_dev) if base_dev else (dev,):
        bufs[id(d)] = [tessera.to_device(a, d) for a in (qn, kn, vn, np.zeros(shape, np.float32))]
    qt, kt, vt = (torch.from_numpy(a) for a in (qn, kn, vn))
    masks = {"both": (False, True), "none": (False,), "causal": (True,)}[args.mask]
    flops = lambda causal: 4.0 * args.B * args.H * args.L * args.L * args.D / (2.0 if causal else 1.0)  # noqa: E731

    def tessera_run(cfg, causal, d=dev):
        d.override("attention", cfg or None)
        qd, kd, vd, od = bufs[id(d)]
        def run():
            tessera.attention(qd, kd, vd, causal="top_left" if causal else False, out=od)
            d.finish()
        return run

    def torch_run(causal):
        return lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    results = []
    load = [os.getloadavg()[0]]
    for causal in masks:
        ref = F.scaled_dot_product_attention(qt.double(), kt.double(), vt.double(), is_causal=causal)
        impls = [("tessera " + (c or "(resolved)"), c, dev) for c in configs]
        if base_dev:
            impls += [("tessera base " + (c or "(resolved)"), c, base_dev) for c in configs]
        impls += [] if args.no_torch else [("pytorch", None, None)]
        errs = {}
        for name, cfg, d in impls:
            if cfg is None:
                got = torch_run(causal)().double()
            else:
                tessera_run(cfg, causal, d)()
                got = torch.from_numpy(bufs[id(d)][3].get()).double()
            errs[name] = float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref))
        wall = {n: [] for n, _, _ in impls}
        cpu = {n: [] for n, _, _ in impls}
        for rnd in range(args.rounds):
            for name, cfg, d in impls:
                run = torch_run(causal) if cfg is None else tessera_run(cfg, causal, d)
                run()
                w0, c0 = time.perf_counter(), cpu_seconds()
                for _ in range(args.calls):
                    run()
                wall[name].append((time.perf_counter() - w0) / args.calls * 1e3)
                cpu[name].append((cpu_seconds() - c0) / args.calls * 1e3)
                time.sleep(args.pause)
            load.append(os.getloadavg()[0])
        for d in (dev, base_dev) if base_dev else (dev,):
            d.override("attention", None)
        base = impls[-1][0]
        print(f"\n{'causal' if causal else 'non-causal'} {'x'.join(map(str, shape))}, {args.rounds} rounds x "
              f"{args.calls} calls, torch on {threads} threads")
        print(f"{'impl':48s} {'wall ms':>8s} {'cpu ms':>8s} {'GF/s wall':>9s} {'GF/2c cpu':>9s} {'x torch wall':>12s}"
              f" {'x torch cpu':>11s} rel_err")
        for name, _, _ in impls:
            mw, mc = statistics.median(wall[name]), statistics.median(cpu[name])
            rw = statistics.median(wall[base][i] / wall[name][i] for i in range(args.rounds))
            rc = statistics.median(cpu[base][i] / cpu[name][i] for i in range(args.rounds))
            # CPU-time rate per 2 cores: FLOPs / (cpu seconds / threads)
            gf_cpu = flops(causal) / (mc / threads * 1e6)
            print(f"{name:48s} {mw:8.2f} {mc:8.2f} {flops(causal) / (mw * 1e6):9.1f} {gf_cpu:9.1f} {rw:12.3f}"
                  f" {rc:11.3f} {errs[name]:.1e}")
            results.append({"mask": "causal" if causal else "none", "shape": list(shape), "impl": name,
                            "wall_ms": wall[name], "cpu_ms": cpu[name], "median_wall_ms": mw, "median_cpu_ms": mc,
                            "gflops_wall": flops(causal) / (mw * 1e6), "gflops_cpu_per_device": gf_cpu,
                            "torch_over_this_wall": rw, "torch_over_this_cpu": rc, "rel_err": errs[name]})
    print(f"\n1-minute load average over the run: {' '.join(f'{x:.2f}' for x in load)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "base_kernels": args.base_kernels,
                       "torch": torch.__version__, "device": dev.name,
                       "threads": threads, "rounds": args.rounds, "calls": args.calls, "load_average_1min": load,
                       "rows": results}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
