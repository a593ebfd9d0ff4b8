#!/usr/bin/env python3
"""PyTorch's CPU kernels as a benchmark peer of `tessera bench`, side by side.

For each op asked for, each round runs `tessera bench OP` (its rows are medians of runs) and
then times PyTorch on the very shapes that run reported, with as many threads as the OpenCL
device has compute units; rounds alternate the two (with --pause seconds of idle between the
blocks, so neither runtime's spinning threads eat the other's time), and every number kept is the median over
rounds (the ratio printed is the median of the per-round ratios, with its range). Each PyTorch
row carries its own error against the same computation in float64, on its own random inputs,
with the output buffer poisoned (NaN) before the checked call.

    python3 bench/pytorch_peer.py --install                 # once: CPU PyTorch into .venv-torch
    python3 bench/pytorch_peer.py --ops gemm,attention --rounds 3 --json docs/data/bench-pytorch-pocl.json
    python3 bench/pytorch_peer.py --table docs/data/bench-pytorch-pocl.json    # the README's table

What PyTorch runs, per tessera row:
  gemm       "MxNxK" / "BxMxNxK"   torch.matmul (torch.bmm for batches), fp32, out=
  gelu       "N" elements          torch._C._nn.gelu(x, approximate='tanh' | 'none', out=y) against
                                   tessera's fused-tanh and fused-erf; the copy kernel against y.copy_(x)
  conv2d     a ResNet-50 layer      torch.nn.functional.conv2d, no bias on either side (tessera's layer
                                   rows run without bias); the stack rows are not timed here
  depthwise  a depthwise layer      the same, groups = channels (`tessera bench conv2d --part depthwise`;
                                   --depthwise-layers mobilenet: MobileNet-V2's ten depthwise layers),
                                   rated in GB/s and as a fraction of the copy kernel's GB/s in the same
                                   round (`tessera bench gelu --part elementwise --sizes --copy-sizes`)
  attention  "1xHxLxD" (+ causal)  torch.nn.functional.scaled_dot_product_attention, is_causal for the
                                   causal rows (Lq = Lk: both mask key j > query i)

--paired (gemm, conv2d and attention): the rows of one `tessera bench` run (its shapes, the form each call
takes, its error; conv2d's with --forms chosen: the call's own path, no forced forms) are timed again in this process, tessera through its Python package (installed
into the same venv: `pip install .`; weights marked constant as the bench marks them) and PyTorch,
in pairs of blocks: a block is one unmeasured call then enough calls back to back for --block-ms,
the two sides take turns (tessera first in even pairs, PyTorch first in odd ones) with --pause / 5
seconds of idle between blocks, and pairs go on until the median of the per-pair ratios is known
within +-(--precision) (its ~95% order-statistics bounds) or --paired-budget seconds are spent on
the row (at least --min-pairs pairs). On a VM whose speed moves by 2x within seconds, rows timed
seconds apart (the rounds above) can land in different phases; a pair's two blocks see the same
one. Each ratio is written with its bounds, its range and the number of pairs. The bounds cover the
row's own few seconds: where the machine drifts over minutes (on a 2-core Zen 4 VM one row's ratio
moved 0.82-2.30 between runs of the same code), --passes N measures the whole list N times, one pass
after another, pools each row's pairs and gives the range of the passes' own medians beside them.

The script is not part of the test suite (PyTorch is a multi-GB install). It re-runs itself under
the virtual environment's Python when the current one has no torch.
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_VENV = os.path.join(ROOT, ".venv-torch")
OPS = ("gemm", "gelu", "conv2d", "depthwise", "attention")  # depthwise: bench conv2d --part depthwise


def die(msg):
    print(f"pytorch_peer: {msg}", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------- environment

def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def install(venv):
    """CPU PyTorch into a virtual environment: the CPU wheel index where it is reachable, else PyPI."""
    if not os.path.exists(venv_python(venv)):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    pip = [venv_python(venv), "-m", "pip", "install", "--quiet"]
    cpu_index = ["--index-url", "https://download.pytorch.org/whl/cpu", "--retries", "1", "--timeout", "15"]
    if subprocess.run(pip + cpu_index + ["torch"]).returncode != 0:
        print("pytorch_peer: the CPU wheel index is not reachable; installing torch from PyPI", file=sys.stderr)
        subprocess.run(pip + ["torch"], check=True)
    subprocess.run(pip + ["numpy"], check=True)
    out = subprocess.run([venv_python(venv), "-c", "import torch; print(torch.__version__)"], check=True,
                         capture_output=True, text=True)
    print(f"pytorch_peer: torch {out.stdout.strip()} in {venv}")


def ensure_torch(args):
    try:
        import torch  # noqa: F401
        return
    except ImportError:
        pass
    py = venv_python(args.venv)
    if not os.path.exists(py):
        die(f"no torch here and no virtual environment at {args.venv}: run with --install first")
    if os.path.realpath(sys.prefix) == os.path.realpath(args.venv):
        die(f"{args.venv} has no torch: run with --install")
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


# ---------------------------------------------------------------- tessera side

def tessera_device(args):
    out = subprocess.run([args.tessera, "devices", "--json"], check=True, capture_output=True, text=True).stdout
    devices = json.loads(out)
    if args.device is None:
        cpus = [d for d in devices if d.get("type") == "CPU" and not d.get("unusable")]
        if not cpus:
            die("no usable OpenCL CPU device: PyTorch here runs on the CPU, so compare with a CPU device")
        return cpus[0]
    for d in devices:
        if d.get("selector") == args.device or args.device.lower() in d.get("name", "").lower():
            return d
    die(f"no device matches --device {args.device}")


def run_tessera(args, op, device, sizes=None):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rows.json")
        bench_op = {"depthwise": "conv2d", "copy": "gelu"}.get(op, op)
        cmd = [args.tessera, "bench", bench_op, "--device", device["selector"], "--budget", str(args.budget), "--json",
               path]
        if args.sizes.get(op):
            cmd += ["--sizes", args.sizes[op]]
        if op == "depthwise":
            cmd += ["--part", "depthwise"]
            if args.depthwise_layers:
                cmd += ["--layers", args.depthwise_layers]
        if op == "conv2d":
            cmd += ["--part", "layers"]
            if args.layers:
                cmd += ["--layers", args.layers]
            if args.paired:  # the paired rows time the call's own path only: no forced forms, no direct kernel
                cmd += ["--forms", "chosen"]
        if op in ("gelu", "copy"):
            cmd += ["--part", "elementwise"]
        if op == "copy":  # the copy kernel's GB/s, the depthwise rows' yardstick
            cmd += ["--sizes", sizes or args.copy_sizes]
        if not args.peers or op in ("attention", "copy"):  # CLBlast's attention pipeline is not what is compared here
            cmd += ["--no-peers"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            die(f"{' '.join(cmd)} failed:\n{proc.stderr}")
        with open(path) as f:
            return json.load(f), cmd


# ---------------------------------------------------------------- PyTorch side

def median_time(fn, budget_s, min_runs=3, max_runs=200):
    fn()  # warm-up: allocation, oneDNN primitive creation
    times = []
    start = time.perf_counter()
    while len(times) < max_runs and (len(times) < min_runs or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), max(times), len(times)


def rel_err(got, ref):
    import torch
    got = got.double()
    if torch.isnan(got).any():
        return math.inf  # unwritten (still poisoned) or broken
    den = torch.linalg.vector_norm(ref)
    num = torch.linalg.vector_norm(got - ref)
    return float(num / den) if den > 0 else float(num)


CONV_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)x(\d+) k(\d+) (\d+)x(\d+)/(\d+) p(\d+)(?: g(\d+))?(?: d(\d+))?$")


def torch_workload(row):
    """(impl, description, run, check) for a tessera row, or None when PyTorch has no counterpart."""
    import torch
    import torch.nn.functional as F
    op, shape, impl = row["op"], row["shape"], row["impl"]
    gen = torch.Generator().manual_seed(zlib.crc32(f"{op}|{shape}|{impl}".encode()))

    def rand(*size, lo=-1.0, hi=1.0):
        return torch.rand(*size, generator=gen, dtype=torch.float32) * (hi - lo) + lo

    if op == "gemm" and impl == "tessera":
        dims = [int(v) for v in shape.split("x")]
        batch, m, n, k = dims if len(dims) == 4 else [1] + dims
        a, b = rand(batch, m, k, lo=-0.5, hi=0.5), rand(batch, k, n, lo=-0.5, hi=0.5)
        c = torch.empty(batch, m, n)
        if batch == 1:
            a2, b2, c2 = a[0], b[0], c[0]
            run = lambda: torch.matmul(a2, b2, out=c2)  # noqa: E731
        else:
            run = lambda: torch.bmm(a, b, out=c)  # noqa: E731
        ref = lambda: torch.matmul(a.double(), b.double())  # noqa: E731
        flops, nbytes = 2.0 * batch * m * n * k, 4.0 * batch * (m * k + k * n + m * n)
        return "pytorch", "torch.matmul (bmm for batches)", run, c, ref, flops, nbytes
    if op == "gelu" and impl in ("fused-tanh", "fused-erf", "copy-kernel"):
        n = int(shape)
        x, y = rand(n, lo=-5, hi=5), torch.empty(n)
        if impl == "copy-kernel":
            return "pytorch-copy", "y.copy_(x)", lambda: y.copy_(x), y, lambda: x.double(), 0.0, 8.0 * n
        approx = "tanh" if impl == "fused-tanh" else "none"
        run = lambda: torch._C._nn.gelu(x, approximate=approx, out=y)  # noqa: E731
        ref = lambda: F.gelu(x.double(), approximate=approx)  # noqa: E731
        return f"pytorch-{impl.split('-')[1]}", f"torch gelu(approximate='{approx}', out=)", run, y, ref, 0.0, 8.0 * n
    if op == "conv2d" and impl.startswith("tessera(") and "resnet50" not in shape:
        mt = CONV_SHAPE.match(shape)
        if not mt:
            return None
        nb, c, h, w, k, r, s, stride, pad = (int(v) for v in mt.groups()[:9])
        groups = int(mt.group(10) or 1)
        dilation = int(mt.group(11) or 1)
        x = rand(nb, c, h, w)
        wt = rand(k, c // groups, r, s, lo=-0.1, hi=0.1)
        run = lambda: F.conv2d(x, wt, None, stride, pad, dilation, groups)  # noqa: E731
        ref = lambda: F.conv2d(x.double(), wt.double(), None, stride, pad, dilation, groups)  # noqa: E731
        p = (h + 2 * pad - dilation * (r - 1) - 1) // stride + 1
        q = (w + 2 * pad - dilation * (s - 1) - 1) // stride + 1
        flops = 2.0 * nb * k * p * q * (c // groups) * r * s
        nbytes = 4.0 * (nb * c * h * w + k * (c // groups) * r * s + nb * k * p * q)
        return "pytorch", "torch.nn.functional.conv2d, no bias", run, None, ref, flops, nbytes
    if op in ("attention", "attention-causal") and impl == "tessera-blocked":
        b, h, l, d = (int(v) for v in shape.split()[0].split("x"))
        causal = op == "attention-causal"
        q, k, v = rand(b, h, l, d), rand(b, h, l, d), rand(b, h, l, d)
        run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
        ref = lambda: F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)  # noqa: E731
        flops = 4.0 * b * h * l * l * d / (2.0 if causal else 1.0)
        what = "scaled_dot_product_attention" + (", is_causal=True" if causal else "")
        return "pytorch", what, run, None, ref, flops, 0.0
    return None


def torch_checked(row, w, checks):
    """PyTorch's error on a tessera row's shape (workload w of torch_workload), once per shape: its
    output poisoned, one call, against the float64 reference (inf: NaN in the output)."""
    impl, _, run, out, ref = w[:5]
    key = (row["op"], row["shape"], impl)
    if key not in checks:
        if out is not None:
            out.fill_(float("nan"))
            run()
            got = out
        else:
            got = run()
        checks[key] = rel_err(got, ref())
    return checks[key]


def torch_row(row, w, err, ms, lo, hi, runs, timing):
    """PyTorch's row beside a tessera row: its median time (ms) and extremes over `runs` calls."""
    impl, what, flops, nbytes = w[0], w[1], w[5], w[6]
    return {"op": row["op"], "shape": row["shape"], "impl": impl, "variant": what, "time_ms": ms, "time_min_ms": lo,
            "time_max_ms": hi, "runs": runs, "gflops": flops / (ms * 1e6) if flops else 0.0,
            "gbps": nbytes / (ms * 1e6) if nbytes and not flops else 0.0, "rel_err": err,
            "timing": timing, "mask": row.get("mask", "")} | (
               {"rel_err": None, "error": "NaN in the output"} if not math.isfinite(err) else {})


def time_torch(row, budget, checks):
    w = torch_workload(row)
    if w is None:
        return None
    err = torch_checked(row, w, checks)
    ms, lo, hi, runs = median_time(w[2], budget)
    return torch_row(row, w, err, ms, lo, hi, runs, "host")


# ---------------------------------------------------------------- the rounds

PAIRS = {  # tessera impl -> PyTorch impl it is compared with, per op
    "gemm": {"tessera": "pytorch"},
    "gelu": {"fused-tanh": "pytorch-tanh", "fused-erf": "pytorch-erf", "copy-kernel": "pytorch-copy"},
    "conv2d": {"tessera(": "pytorch"},
    "attention": {"tessera-blocked": "pytorch"},
    "attention-causal": {"tessera-blocked": "pytorch"},
}


def depthwise_row(row):
    """A depthwise conv2d row (groups = channels): rated in GB/s, x read once + weights + y written once."""
    mt = CONV_SHAPE.match(row["shape"]) if row["op"] == "conv2d" else None
    return bool(mt and mt.group(10) and mt.group(10) == mt.group(2) and row.get("gbps"))


def matched_elements(row):
    """The copy kernel's element count that moves a depthwise row's bytes (x read once, the weights, y written
    once, fp32: the bytes its GB/s counts), each element read once and written once: bytes / 8."""
    n, c, h, w, k, r, s_, stride, pad = (int(v) for v in CONV_SHAPE.match(row["shape"]).groups()[:9])
    p, q = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - s_) // stride + 1
    return max(1, (4 * (n * c * h * w + k * r * s_ + n * k * p * q)) // 8)


def peer_of(row):
    for prefix, peer in PAIRS.get(row["op"], {}).items():
        if row["impl"] == prefix or (prefix.endswith("(") and row["impl"].startswith(prefix)):
            return peer
    return None


def markdown_table(path):
    """The README's table from a --json file: tessera, PyTorch and (GEMM) OpenBLAS side by side."""
    with open(path) as f:
        doc = json.load(f)
    rows = doc["rows"]

    def find(op, shape, impl):
        return next((r for r in rows if r["op"] == op and r["shape"] == shape and r["impl"] == impl), None)

    print("| op | shape | tessera | PyTorch | OpenBLAS | unit | tessera ÷ PyTorch speed, median (range) "
          "| tessera ÷ OpenBLAS speed |")
    print("|---|---|---:|---:|---:|---|---:|---:|")
    for r in rows:
        vs = r.get("vs_pytorch")
        if not vs:
            continue
        p = find(r["op"], r["shape"], vs["peer"])
        gbps = r["op"] == "gelu" or (r["op"] == "conv2d" and " g" in r["shape"] and r.get("gbps"))
        unit = "GB/s" if gbps else "GFLOP/s"

        def rate(x):
            return x["gbps"] if gbps else x["gflops"]

        if p and gbps and r["op"] == "conv2d":  # PyTorch's rows carry FLOP rates: same bytes, its time
            p = dict(p, gbps=r["gbps"] * r["time_ms"] / p["time_ms"])
        ob = find(r["op"], r["shape"], "openblas") if r["op"] == "gemm" else None
        label = {"copy-kernel": "copy kernel vs `y.copy_(x)`", "fused-tanh": "GELU tanh", "fused-erf": "GELU erf"}
        what = r["op"] if r["op"] != "gelu" else "gelu: " + label.get(r["impl"], r["impl"])
        obs = f"{ob['gflops']:.1f}" if ob else "–"
        obr = f"{ob['time_ms'] / r['time_ms']:.2f}" if ob else "–"
        passes = f"; passes {vs['pass_range'][0]:.2f}–{vs['pass_range'][1]:.2f}" if "pass_range" in vs else ""
        print(f"| {what} | {r['shape']} | {rate(r):.1f} | {rate(p):.1f} | {obs} | {unit} | "
              f"**{vs['ratio']:.2f}** ({vs['min']:.2f}–{vs['max']:.2f}{passes}) | {obr} |")


def write_json(path, doc):
    """doc into path, whole or not at all: a new temporary file beside it (created exclusively, so
    never a file or link already there), then a rename; removed when the dump fails."""
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)  # as open() would make it (mkstemp's own is 0600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, allow_nan=False)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    print(f"\nwrote {path}")


# ---------------------------------------------------------------- paired blocks (--paired)

def tessera_workload(row, dev):
    """(run, check) for a gemm, conv2d or attention row of `tessera bench` on tessera's Python package: run makes
    one call and waits for it (as the bench's timed call does); check returns its relative error
    against float64 on the same inputs (of the output as the last call left it: its buffer starts
    poisoned with NaN, so a call that writes nothing reads as an infinite error). None when the row
    is not one of those."""
    import numpy as np
    import tessera
    op, shape, impl = row["op"], row["shape"], row["impl"]
    rng = np.random.default_rng(zlib.crc32(f"tessera|{op}|{shape}".encode()))
    if op == "gemm" and impl == "tessera":
        dims = [int(v) for v in shape.split("x")]
        batch, m, n, k = dims if len(dims) == 4 else [1] + dims
        ha = rng.uniform(-0.5, 0.5, (batch, m, k)).astype(np.float32)
        hb = rng.uniform(-0.5, 0.5, (batch, k, n)).astype(np.float32)
        if batch == 1:
            ha, hb = ha[0], hb[0]
        a, b = tessera.to_device(ha, device=dev), tessera.to_device(hb, device=dev)
        c = tessera.to_device(np.full(ha.shape[:-1] + (n,), np.nan, np.float32), device=dev)  # poisoned

        def run():
            tessera.gemm(a, b, out=c, device=dev)
            dev.finish()

        def check():
            ref = np.matmul(ha.astype(np.float64), hb.astype(np.float64))
            return float(np.linalg.norm(c.get() - ref) / np.linalg.norm(ref))
        return run, check
    if op in ("attention", "attention-causal") and impl == "tessera-blocked":
        import torch
        b, h, l, d = (int(v) for v in shape.split()[0].split("x"))
        causal = op == "attention-causal"  # (Lq = Lk: tessera's diagonal and PyTorch's is_causal agree)
        hq, hk, hv = (rng.uniform(-1, 1, (b, h, l, d)).astype(np.float32) for _ in range(3))
        q, k, v = (tessera.to_device(a, device=dev) for a in (hq, hk, hv))
        o = tessera.to_device(np.full((b, h, l, d), np.nan, np.float32), device=dev)  # poisoned

        def run():
            tessera.attention(q, k, v, causal=causal, out=o, device=dev)
            dev.finish()

        def check():
            ref = torch.nn.functional.scaled_dot_product_attention(
                *(torch.from_numpy(a).double() for a in (hq, hk, hv)), is_causal=causal).numpy()
            return float(np.linalg.norm(o.get() - ref) / np.linalg.norm(ref))
        return run, check
    mt = CONV_SHAPE.match(shape) if op == "conv2d" and impl.startswith("tessera(") else None
    if mt:
        import torch
        nb, ch, h, w, k, r, s_, stride, pad = (int(v) for v in mt.groups()[:9])
        groups, dilation = int(mt.group(10) or 1), int(mt.group(11) or 1)
        hx = rng.uniform(-1, 1, (nb, ch, h, w)).astype(np.float32)
        hw = rng.uniform(-0.1, 0.1, (k, ch // groups, r, s_)).astype(np.float32)
        x, wt = tessera.to_device(hx, device=dev), tessera.to_device(hw, device=dev)
        wt.set_constant()  # as `tessera bench conv2d` (--weights kept, its default)
        p = (h + 2 * pad - dilation * (r - 1) - 1) // stride + 1
        q = (w + 2 * pad - dilation * (s_ - 1) - 1) // stride + 1
        y = tessera.to_device(np.full((nb, k, p, q), np.nan, np.float32), device=dev)  # poisoned

        def run():
            tessera.conv2d(x, wt, None, stride, pad, dilation, groups, out=y, device=dev)
            dev.finish()

        def check():
            ref = torch.nn.functional.conv2d(torch.from_numpy(hx).double(), torch.from_numpy(hw).double(), None,
                                             stride, pad, dilation, groups).numpy()
            return float(np.linalg.norm(y.get() - ref) / np.linalg.norm(ref))
        return run, check
    return None


def median_bounds(values):
    """The median of `values` and its ~95% order-statistics bounds (None, None when too few)."""
    v = sorted(values)
    n = len(v)
    half = 1.96 * math.sqrt(n * 0.25)
    lo, hi = math.floor(n * 0.5 - half), math.ceil(n * 0.5 + half)
    if lo < 0 or hi > n - 1:
        return statistics.median(v), None, None
    return statistics.median(v), v[lo], v[hi]


def time_block(run, calls):
    """One unmeasured call, then `calls` back to back: (wall ms, process CPU ms) per call."""
    run()
    w, c = time.perf_counter(), time.process_time()
    for _ in range(calls):
        run()
    return (time.perf_counter() - w) / calls * 1e3, (time.process_time() - c) / calls * 1e3


def calls_for(run, block_ms):
    """Calls that make a block of about block_ms (after a warm-up), at least 1."""
    run()
    t = time.perf_counter()
    run()
    ms = (time.perf_counter() - t) * 1e3
    return max(1, min(1000, int(block_ms / max(ms, 1e-3))))


def paired_row(row, dev, args, checks):
    """tessera's row and PyTorch's timed in pairs of blocks; returns (tessera row, pytorch row) or None."""
    tw = tessera_workload(row, dev)
    pw = torch_workload(row)
    if tw is None or pw is None:
        return None
    trun, tcheck = tw
    impl, prun, flops, nbytes = pw[0], pw[2], pw[5], pw[6]
    trun()
    terr = tcheck()  # a correct call is what gets timed: its error against float64, this process's inputs
    if not math.isfinite(terr):
        die(f"{row['op']} {row['shape']}: tessera's output in this process holds NaN or Inf")
    perr = torch_checked(row, pw, checks)
    sides = {"tessera": (trun, calls_for(trun, args.block_ms)), "pytorch": (prun, calls_for(prun, args.block_ms))}
    samples = {name: {"wall": [], "cpu": []} for name in sides}
    ratios, cpu_ratios = [], []
    start = time.perf_counter()
    while True:
        order = ("tessera", "pytorch") if len(ratios) % 2 == 0 else ("pytorch", "tessera")
        got = {}
        for name in order:
            time.sleep(args.pause / 5)  # the other side's threads settle
            fn, calls = sides[name]
            got[name] = time_block(fn, calls)
            samples[name]["wall"].append(got[name][0])
            samples[name]["cpu"].append(got[name][1])
        ratios.append(got["pytorch"][0] / got["tessera"][0])
        cpu_ratios.append(got["pytorch"][1] / got["tessera"][1] if got["tessera"][1] > 0 else math.nan)
        med, lo, hi = median_bounds(ratios)
        n = len(ratios)
        if n >= args.max_pairs:
            break
        if n >= args.min_pairs and ((lo is not None and hi - lo <= 2 * args.precision * med)
                                    or time.perf_counter() - start > args.paired_budget):
            break
    med, lo, hi = median_bounds(ratios)
    cpu_ok = [r for r in cpu_ratios if math.isfinite(r)]
    t = dict(row)
    tms, pms = statistics.median(samples["tessera"]["wall"]), statistics.median(samples["pytorch"]["wall"])
    t.update(time_ms=tms, time_min_ms=min(samples["tessera"]["wall"]), time_max_ms=max(samples["tessera"]["wall"]),
             runs=n * sides["tessera"][1], gflops=flops / (tms * 1e6) if flops else 0.0,
             gbps=nbytes / (tms * 1e6) if nbytes and not flops else 0.0, rel_err=max(terr, row.get("rel_err") or 0.0),
             cpu_ms=statistics.median(samples["tessera"]["cpu"]), timing="host, paired blocks")
    t["vs_pytorch"] = {"peer": impl, "ratio": med, "bounds": [lo, hi], "min": min(ratios), "max": max(ratios),
                       "pairs": n, "cpu_ratio": statistics.median(cpu_ok) if cpu_ok else None,
                       "pair_ratios": [round(r, 4) for r in ratios],
                       "meaning": "PyTorch's time over tessera's per pair of blocks (median; bounds: its ~95% "
                                  "order-statistics interval, null when too few pairs): above 1 tessera is faster"}
    p = torch_row(row, pw, perr, pms, min(samples["pytorch"]["wall"]), max(samples["pytorch"]["wall"]),
                  n * sides["pytorch"][1], "host, paired blocks")
    p["cpu_ms"] = statistics.median(samples["pytorch"]["cpu"])
    return t, p


def combine_passes(gots):
    """One (tessera, pytorch) row pair from a row's passes: every pass's pairs pooled (median and bounds),
    times the median over passes, and each pass's own median ratio with their range (the spread
    between passes minutes apart, which one pass's bounds cannot show on a machine whose speed drifts)."""
    if len(gots) == 1:
        return gots[0]
    t, p = dict(gots[0][0]), dict(gots[0][1])
    pooled = [r for g in gots for r in g[0]["vs_pytorch"]["pair_ratios"]]
    med, lo, hi = median_bounds(pooled)
    for row, k in ((t, 0), (p, 1)):
        ms = statistics.median(g[k]["time_ms"] for g in gots)
        scale = row["time_ms"] / ms  # rates scale inversely with the time (flops and bytes are the row's own)
        row.update(time_ms=ms, time_min_ms=min(g[k]["time_min_ms"] for g in gots),
                   time_max_ms=max(g[k]["time_max_ms"] for g in gots), runs=sum(g[k]["runs"] for g in gots),
                   gflops=row["gflops"] * scale, gbps=row["gbps"] * scale,
                   cpu_ms=statistics.median(g[k]["cpu_ms"] for g in gots))
    t["rel_err"] = max(g[0]["rel_err"] for g in gots)
    per_pass = [g[0]["vs_pytorch"]["ratio"] for g in gots]
    cpu = [g[0]["vs_pytorch"]["cpu_ratio"] for g in gots if g[0]["vs_pytorch"]["cpu_ratio"] is not None]
    t["vs_pytorch"] = dict(t["vs_pytorch"], ratio=med, bounds=[lo, hi], min=min(pooled), max=max(pooled),
                           pairs=len(pooled), pair_ratios=pooled, cpu_ratio=statistics.median(cpu) if cpu else None,
                           passes=per_pass, pass_range=[min(per_pass), max(per_pass)])
    return t, p


def print_paired(t, p, label=""):
    vs = t["vs_pytorch"]
    b = vs["bounds"]
    bounds = f"[{b[0]:.2f}, {b[1]:.2f}]" if b[0] is not None else "[too few pairs]"
    spread = f", passes {vs['pass_range'][0]:.2f}-{vs['pass_range'][1]:.2f}" if "pass_range" in vs else ""
    print(f"{t['op']:<9} {t['shape']:<32} {t['impl']:<20} {t['gflops']:8.1f} {p['gflops']:8.1f} "
          f"{vs['ratio']:6.2f}x {bounds} range {vs['min']:.2f}-{vs['max']:.2f}, {vs['pairs']} pairs{spread}{label}",
          flush=True)


def paired_main(args, ops, device, threads):
    try:
        import tessera
    except ImportError:
        die("--paired needs tessera's Python package in this venv (pip install . from the checkout)")
    import torch
    dev = tessera.Device(device["selector"])
    rows, commands, checks = [], {}, {}
    load_before = os.getloadavg()[0]
    for op in ops:
        time.sleep(args.pause)
        trows, cmd = run_tessera(args, op, device)
        commands[op] = " ".join(cmd[0:1] + [c for c in cmd[1:] if not c.startswith("/tmp")])
        time.sleep(args.pause)
        # --passes: the whole list again, so each row is sampled minutes apart (one pass's bounds cover
        # its own few seconds only); a pass's lines say which pass they are, the pooled lines follow
        got = [[] for _ in trows]
        for n in range(args.passes):
            for i, r in enumerate(trows):
                one = paired_row(r, dev, args, checks) if peer_of(r) else None
                if one:
                    got[i].append(one)
                    print_paired(*one, f"  (pass {n + 1} of {args.passes})" if args.passes > 1 else "")
        if args.passes > 1:
            print(f"-- {op}: the {args.passes} passes pooled --", flush=True)
        for i, r in enumerate(trows):
            if got[i]:
                both = combine_passes(got[i])
                rows.extend(both)
                if args.passes > 1:
                    print_paired(*both)
            else:
                rows.append(r)
    dev.close()
    load = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    if args.json:
        # rounds: the one `tessera bench` run the rows come from (each row's pairs are in vs_pytorch)
        doc = {"tool": "bench/pytorch_peer.py", "argv": sys.argv[1:], "method": "paired", "rounds": 1,
               "passes": args.passes, "threads": threads,
               "torch": torch.__version__, "tessera_commands": commands, "load": load, "rows": rows}
        write_json(args.json, doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--install", action="store_true", help="install CPU PyTorch into --venv and exit")
    ap.add_argument("--venv", default=DEFAULT_VENV, help="virtual environment with torch (default: .venv-torch)")
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build", "tools", "tessera"))
    ap.add_argument("--device", help="OpenCL device selector (default: the first CPU device)")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds per row and round, each side")
    ap.add_argument("--threads", type=int, help="PyTorch threads (default: the device's compute units)")
    ap.add_argument("--pause", type=float, default=0.5,
                    help="seconds of idle between the two sides' blocks (one runtime's spinning worker threads "
                         "must not eat the other's time; default 0.5)")
    ap.add_argument("--no-peers", dest="peers", action="store_false", help="pass --no-peers to tessera bench")
    for op in OPS:
        ap.add_argument(f"--{op}-sizes", dest=f"sizes_{op.replace('2d', '')}", help=f"tessera bench {op} --sizes")
    ap.add_argument("--layers", help="tessera bench conv2d --layers")
    ap.add_argument("--depthwise-layers", help="tessera bench conv2d --part depthwise --layers (e.g. mobilenet: "
                                               "MobileNet-V2's depthwise layers)")
    ap.add_argument("--copy-sizes", default="1M",
                    help="with depthwise: the copy kernel's sizes (tessera bench gelu --part elementwise --sizes; "
                         "default 1M), whose median GB/s each depthwise row is a fraction of")
    ap.add_argument("--copy-matched", action="store_true",
                    help="with depthwise: also time the copy kernel on each depthwise row's own bytes (elements = "
                         "bytes / 8: one read and one write), in the same round right after the depthwise run, and "
                         "give each row's fraction of that copy's GB/s beside the --copy-sizes one (a small layer "
                         "and a copy of its size pay the same launch; a 1M copy does not)")
    ap.add_argument("--paired", action="store_true",
                    help="gemm, conv2d and attention: time each row in pairs of blocks, tessera (its Python package) and "
                         "PyTorch taking turns in this process, until the ratio's median is known (see above)")
    ap.add_argument("--block-ms", type=float, default=20.0, help="--paired: milliseconds of calls per block")
    ap.add_argument("--precision", type=float, default=0.05,
                    help="--paired: stop a row when the median ratio's ~95%% bounds are within +-this (relative)")
    ap.add_argument("--min-pairs", type=int, default=9, help="--paired: pairs per row at least (default 9)")
    ap.add_argument("--max-pairs", type=int, default=200, help="--paired: pairs per row at most")
    ap.add_argument("--paired-budget", type=float, default=8.0,
                    help="--paired: seconds per row after which it stops once --min-pairs are done")
    ap.add_argument("--passes", type=int, default=1,
                    help="--paired: measure the whole row list this many times, one pass after another, and "
                         "pool each row's pairs (its line then gives the range of the passes' own medians: the "
                         "drift between minutes that one pass's bounds cannot show; default 1)")
    ap.add_argument("--json", help="write every row (tessera's and PyTorch's medians over rounds) here")
    ap.add_argument("--table", metavar="FILE", help="print the markdown table of a --json file and exit")
    args = ap.parse_args()
    if args.table:
        markdown_table(args.table)
        return
    if args.install:
        install(args.venv)
        return
    ops = [o for o in args.ops.split(",") if o]
    for o in ops:
        if o not in OPS:
            die(f"--ops: no op '{o}' (some of {', '.join(OPS)})")
    if args.rounds < 1 or not args.budget > 0 or not math.isfinite(args.budget) or (args.threads is not None
                                                                                      and args.threads < 1):
        die("--rounds, --budget and --threads must be positive (and --budget finite)")
    if not (args.pause >= 0 and math.isfinite(args.pause)):
        die("--pause must be a finite number of seconds, 0 or more")
    if args.paired:
        bad = [o for o in ops if o not in ("gemm", "conv2d", "attention")]
        if bad:
            die(f"--paired: gemm, conv2d and attention only, not {', '.join(bad)}")
        if not (args.block_ms > 0 and math.isfinite(args.block_ms)):
            die("--block-ms must be a positive finite number of milliseconds")
        if not 0 < args.precision < 1:
            die("--precision must be a fraction between 0 and 1")
        if not 1 <= args.min_pairs <= args.max_pairs:
            die("--min-pairs and --max-pairs: 1 <= --min-pairs <= --max-pairs")
        if not (args.paired_budget > 0 and math.isfinite(args.paired_budget)):
            die("--paired-budget must be a positive finite number of seconds")
        if not 1 <= args.passes <= 20:
            die("--passes must be 1 to 20")
    elif args.passes != 1:
        die("--passes: with --paired only")
    if not os.access(args.tessera, os.X_OK):
        die(f"{args.tessera}: not an executable (build first, or give --tessera)")
    args.sizes = {op: getattr(args, f"sizes_{op.replace('2d', '')}") for op in OPS}
    if args.json:
        parent = os.path.dirname(os.path.abspath(args.json))
        if not os.access(parent, os.W_OK):
            die(f"--json: cannot write in {parent}")
    # PyTorch keeps its default OpenMP wait policy (what users run): its threads spin only
    # briefly after each call, and tessera runs in its own process between PyTorch's rows.
    ensure_torch(args)
    import torch

    device = tessera_device(args)
    threads = args.threads or int(device["compute_units"])
    torch.set_num_threads(threads)
    if args.paired:
        print(f"tessera on {device['selector']} {device['name']} ({device['platform_name']}), "
              f"PyTorch {torch.__version__} on {threads} threads; paired blocks of {args.block_ms:g} ms, "
              f"medians of per-pair ratios", flush=True)
        print(f"{'op':<9} {'shape':<32} {'tessera impl':<20} {'tessera':>8} {'pytorch':>8}  speed (bounds, range)")
        paired_main(args, ops, device, threads)
        return
    print(f"tessera on {device['selector']} {device['name']} ({device['platform_name']}), "
          f"PyTorch {torch.__version__} on {threads} threads; {args.rounds} rounds, medians", flush=True)

    rows_by_round, commands, checks, loads = [], {}, {}, []
    copy_gbps = []  # per round: the copy kernel's median GB/s over --copy-sizes
    matched_gbps = []  # per round: {elements: the copy kernel's GB/s} on the depthwise rows' own bytes
    for rnd in range(args.rounds):
        got = []
        load_before = os.getloadavg()[0]
        if "depthwise" in ops:
            time.sleep(args.pause)
            crows, ccmd = run_tessera(args, "copy", device)
            commands["copy"] = " ".join(ccmd[0:1] + [c for c in ccmd[1:] if not c.startswith("/tmp")])
            rates = [r["gbps"] for r in crows if r["impl"] == "copy-kernel" and r.get("gbps")]
            copy_gbps.append(statistics.median(rates) if rates else None)
        for op in ops:
            time.sleep(args.pause)
            trows, cmd = run_tessera(args, op, device)
            time.sleep(args.pause)
            commands[op] = " ".join(cmd[0:1] + [c for c in cmd[1:] if not c.startswith("/tmp")])
            if op == "depthwise" and args.copy_matched:
                sizes = sorted({matched_elements(r) for r in trows if depthwise_row(r)})
                mrows, _ = run_tessera(args, "copy", device, ",".join(str(n) for n in sizes))
                matched_gbps.append({int(r["shape"]): r["gbps"] for r in mrows
                                     if r["impl"] == "copy-kernel" and r.get("gbps")})
                time.sleep(args.pause)
            for r in trows:
                r["round"] = rnd
                got.append(r)
                if peer_of(r):
                    time.sleep(args.pause / 5)  # between PyTorch's rows too: its OpenMP threads settle
                    p = time_torch(r, args.budget, checks)
                    if p:
                        p["device"] = f"PyTorch {torch.__version__} CPU, {threads} threads"
                        p["round"] = rnd
                        got.append(p)
        rows_by_round.append(got)
        loads.append([round(load_before, 2), round(os.getloadavg()[0], 2)])
        print(f"round {rnd + 1}/{args.rounds} done (1-minute load average {loads[-1][0]} -> {loads[-1][1]})",
              flush=True)

    # medians over rounds, per (op, shape, impl); ratios per round, then their median
    def key(r):
        return (r["op"], r["shape"], r["impl"])

    keys = []
    for r in rows_by_round[0]:
        if key(r) not in keys:
            keys.append(key(r))
    merged = []
    for k in keys:
        rs = [r for rnd in rows_by_round for r in rnd if key(r) == k]
        m = dict(rs[0])
        m.pop("round", None)
        for f in ("time_ms", "gflops", "gbps"):
            m[f] = statistics.median(r[f] for r in rs)
        m["time_min_ms"] = min(r["time_min_ms"] for r in rs)
        m["time_max_ms"] = max(r["time_max_ms"] for r in rs)
        m["rounds"] = len(rs)
        errs = [r["rel_err"] for r in rs if r.get("rel_err") is not None]
        m["rel_err"] = max(errs) if errs else None
        merged.append(m)
    print(f"\n{'op':<17} {'shape':<32} {'tessera impl':<24} {'tessera':>9} {'pytorch':>9} {'speed tessera/pytorch':>22}")
    for m in merged:
        peer = peer_of(m)
        if not peer:
            continue
        ratios = []
        for rnd in rows_by_round:
            t = next((r for r in rnd if key(r) == key(m)), None)
            p = next((r for r in rnd if key(r) == (m["op"], m["shape"], peer)), None)
            if t and p:
                ratios.append(p["time_ms"] / t["time_ms"])
        if not ratios:
            continue
        m["vs_pytorch"] = {"peer": peer, "ratio": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
                           "meaning": "PyTorch's time over tessera's, per round: above 1 tessera is faster"}
        pm = next(x for x in merged if key(x) == (m["op"], m["shape"], peer))
        dw = depthwise_row(m)
        unit = "GB/s" if m["op"] == "gelu" or dw else "GFLOP/s"
        if dw:  # PyTorch's rows carry FLOP rates: the same bytes over its time
            pm = dict(pm, gbps=m["gbps"] * m["time_ms"] / pm["time_ms"])
        rate = (lambda r: r["gbps"]) if unit == "GB/s" else (lambda r: r["gflops"])
        extra = ""
        if dw:  # the fraction of the copy kernel's GB/s, per round (the same round's copy run), median
            fr = [t["gbps"] / c for rnd, c in zip(rows_by_round, copy_gbps) if c
                  for t in rnd if key(t) == key(m) and t.get("gbps")]
            if fr:
                m["vs_copy_kernel"] = {"fraction": statistics.median(fr), "min": min(fr), "max": max(fr),
                                       "meaning": "tessera's GB/s (x read once, weights, y written once) over the "
                                                  "copy kernel's GB/s in the same round"}
                extra = f"  {statistics.median(fr):.2f} of copy ({min(fr):.2f}-{max(fr):.2f})"
            fm = [t["gbps"] / mg[matched_elements(t)] for rnd, mg in zip(rows_by_round, matched_gbps)
                  for t in rnd if key(t) == key(m) and t.get("gbps") and mg.get(matched_elements(t))]
            if fm:
                m["vs_copy_same_bytes"] = {"fraction": statistics.median(fm), "min": min(fm), "max": max(fm),
                                           "elements": matched_elements(m),
                                           "meaning": "tessera's GB/s over the copy kernel's GB/s on the same bytes "
                                                      "(elements = bytes / 8), timed in the same round"}
                extra += f"; {statistics.median(fm):.2f} of a same-bytes copy ({min(fm):.2f}-{max(fm):.2f})"
        print(f"{m['op']:<17} {m['shape']:<32} {m['impl']:<24} {rate(m):9.1f} {rate(pm):9.1f} "
              f"{m['vs_pytorch']['ratio']:6.2f}x ({min(ratios):.2f}-{max(ratios):.2f})  {unit}{extra}")
    if args.json:
        doc = {"tool": "bench/pytorch_peer.py", "argv": sys.argv[1:], "rounds": args.rounds, "threads": threads,
               "torch": torch.__version__, "tessera_commands": commands,
               "load_per_round": loads, "rows": merged}  # the host's 1-minute load average before and after each round
        if copy_gbps:
            doc["copy_kernel_gbps_per_round"] = copy_gbps
        if matched_gbps:
            doc["copy_kernel_same_bytes_gbps_per_round"] = [{str(k): v for k, v in mg.items()} for mg in matched_gbps]
        write_json(args.json, doc)


if __name__ == "__main__":
    main()
