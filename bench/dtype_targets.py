#!/usr/bin/env python3
"""Issue #38's 16-bit targets in one run: `tessera bench OP --dtype D` for GELU, LayerNorm (with its
residual), GEMM and attention at their default shapes, and conv2d's ResNet-50 layer classes at
batch 1 and 8 (`tessera bench conv2d`'s default layers), f16 then bf16, each 16-bit row timed in
alternation with the same shape in fp32 (GELU's also with the same type's copy kernel), then the
table of every target with its ratio; the embedding gather (`tessera bench embedding`: 16-bit tables
and output against fp32 tables and output, alternated, each call after the caches were emptied:
rows "gather-paired"; plain alternation, which favours fp32, is also printed as "gather-paired-hot") at
BERT-base's 4096x768.

    python3 bench/dtype_targets.py --json docs/data/bench-dtype-pocl.json --table --device cpu

Ratios are the medians over a pair's alternations of each alternation's own ratio (the row's
"paired_rate_ratio": both calls of an alternation saw the same machine, so a burst of load
that hits a few of them moves this median less than the rows' own medians), with the ratio of the
rows' medians (what sessions up to 21 recorded) beside it in the table's "medians" column, and used
where a row carries no paired ratio (JSON saved before session 22); bf16's copy kernel is paired
with f16's in the bf16 run; rates:
GELU elements/s, LayerNorm rows/s, GEMM and attention GFLOP/s, tsr_convert (from fp32) GB/s against
the fp32 copy kernel's (the byte limit). --quick runs GELU at 16M,
LayerNorm and the embedding gather at 4096x768 only (the issue's headline shapes) with a 1 s budget.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESSERA = os.path.join(HERE, "..", "build", "tools", "tessera")

# (op, arguments, arguments with --quick): default shapes (the "no 16-bit row below 0.95x fp32"
# target is about them), GEMM also the batched 64 x 128^3 of the issue.
RUNS = [
    ("gelu", ["--part", "elementwise"], ["--sizes", "16M", "--part", "elementwise"]),
    ("layernorm", [], ["--sizes", "4096x768"]),
    ("gemm", ["--sizes", "256,512,1024,2048,512x768x768,512x3072x768,512x768x3072,64@128x128x128", "--no-peers"],
     None),
    ("attention", ["--sizes", "512,2048,4096", "--no-peers"], None),
    # issue #35 item 6: ResNet-50's layer classes (conv1 7x7/2, 3x3, 3x3/2, 1x1 256->64, 64->256,
    # 1024->256, 256->1024), batch 1 and 8
    ("conv2d", ["--sizes", "1,8", "--no-peers"], None),
    ("embedding", ["--sizes", "4096x768"], ["--sizes", "4096x768"]),
]

# Issue #38's targets (AVX-512): 16-bit rate over fp32's
GELU_16M, GELU_VS_FP32, GELU_VS_COPY = "16777216", 1.7, 0.85
LN_SHAPE, LN_VS_FP32 = "4096x768 +res", 1.6
EMB_VS_FP32 = 1.6
NOT_SLOWER = 0.95
BF16_COPY_VS_F16 = 0.95


def bench(tessera, op, args, dtype, budget, device):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        cmd = [tessera, "bench", op, "--dtype", dtype, "--budget", str(budget), "--json", out] + args
        if device:
            cmd += ["--device", device]
        print("$ " + " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            sys.exit("%s failed (exit %d)" % (" ".join(cmd), proc.returncode))
        with open(out) as f:
            return json.load(f), proc.stdout


def find(rows, **want):
    hits = [r for r in rows if all(r.get(k, "") == v for k, v in want.items())]
    if len(hits) != 1:
        sys.exit("expected one row with %s, found %d" % (want, len(hits)))
    return hits[0]


def paired(row, medians, scale=1.0):
    """(ratio, ratio of medians): the row's paired rate ratio (times scale: bytes for GB/s) where it
    carries one, else the ratio of the rows' medians."""
    p = row.get("paired_rate_ratio")
    return (p * scale if p else medians, medians)


def targets(rows, dtype):
    """(what, shape, (ratio, ratio of medians), target) for one dtype's rows."""
    out = []
    g = [r for r in rows if r["op"] == "gelu"]
    for shape in sorted({r["shape"] for r in g}, key=int):
        for form in ("tanh", "erf"):
            gs = [r for r in g if r["shape"] == shape]
            r16 = find(gs, impl="fused-%s-paired" % form, dtype=dtype)
            r32 = find(gs, impl="fused-%s-paired" % form, dtype="")
            out.append(("GELU %s, elements/s vs fp32" % form, shape, paired(r16, r32["time_ms"] / r16["time_ms"]),
                        GELU_VS_FP32 if shape == GELU_16M else NOT_SLOWER))
            if shape == GELU_16M:
                c16 = find(gs, impl="fused-%s-paired-copy" % form, dtype=dtype)
                copy = find(gs, impl="copy-kernel-paired-%s" % form, dtype=dtype)
                # the copy's GB/s names the memory's state: GELU16 is memory-bound only while the
                # copy runs under ~70 GB/s on the Zen 5 (docs/dtypes.md, session 25)
                out.append(("GELU %s vs the %s copy kernel (copy %.0f GB/s)" % (form, dtype, copy["gbps"]), shape,
                            paired(c16, copy["time_ms"] / c16["time_ms"]),
                            GELU_VS_COPY))
    ln = [r for r in rows if r["op"] == "layernorm" and r["impl"] == "fused-paired"]
    for r16 in [r for r in ln if r.get("dtype", "") == dtype]:
        r32 = find(ln, shape=r16["shape"], dtype="")
        out.append(("LayerNorm + residual, rows/s vs fp32", r16["shape"], paired(r16, r32["time_ms"] / r16["time_ms"]),
                    LN_VS_FP32 if r16["shape"] == LN_SHAPE else NOT_SLOWER))
    conv = [r for r in rows if r["op"] == "gelu" and r["impl"] == "convert-paired"]
    for shape in sorted({r["shape"] for r in conv}, key=int):
        c16 = find(conv, shape=shape, dtype="f32/" + dtype)
        c32 = find(conv, shape=shape, dtype="")
        # elements/s over the copy's, times the bytes an element moves: (4 + 2) / (4 + 4)
        out.append(("tsr_convert f32 to %s, GB/s vs the fp32 copy kernel" % dtype, shape,
                    paired(c16, c16["gbps"] / c32["gbps"], 6.0 / 8.0), NOT_SLOWER))
    emb = [r for r in rows if r["op"] == "embedding" and r["impl"] == "gather-paired"]
    for r16 in [r for r in emb if r.get("dtype", "") == dtype]:
        r32 = find(emb, shape=r16["shape"], dtype="")
        out.append(("embedding gather (%s tables and y), tokens/s vs fp32" % dtype, r16["shape"],
                    paired(r16, r32["time_ms"] / r16["time_ms"]), EMB_VS_FP32))
    gemm = [r for r in rows if r["op"] == "gemm" and r["impl"] == "tessera"]
    for r16 in [r for r in gemm if r.get("dtype", "") == dtype]:
        r32 = find(gemm, shape=r16["shape"], dtype="")
        out.append(("GEMM, GFLOP/s vs fp32", r16["shape"], paired(r16, r16["gflops"] / r32["gflops"]), NOT_SLOWER))
    att = [r for r in rows if r["op"] in ("attention", "attention-causal")]
    for r16 in [r for r in att if r.get("dtype", "") == dtype]:
        r32 = find(att, shape=r16["shape"], mask=r16.get("mask", ""), impl=r16["impl"], dtype="")
        out.append(("attention %s, GFLOP/s vs fp32" % r16.get("mask", ""), r16["shape"],
                    paired(r16, r16["gflops"] / r32["gflops"]), NOT_SLOWER))
    cv = [r for r in rows if r["op"] == "conv2d" and r.get("variant", "").startswith("paired with")]
    for r16 in [r for r in cv if r.get("dtype", "") == dtype]:
        r32 = find(cv, shape=r16["shape"], dtype="")
        out.append(("conv2d, GFLOP/s vs fp32", r16["shape"], paired(r16, r16["gflops"] / r32["gflops"]), NOT_SLOWER))
    return out


def copy_targets(rows):
    """bf16's copy kernel over f16's: the bf16 run's pair (`copy-kernel-vs-f16`, alternated)."""
    out = []
    got = [r for r in rows if r["op"] == "gelu" and r["run_dtype"] == "bf16" and r["impl"] == "copy-kernel-vs-f16"]
    for shape in sorted({r["shape"] for r in got}, key=int):
        b = find([r for r in got if r["shape"] == shape], dtype="bf16")
        h = find([r for r in got if r["shape"] == shape], dtype="f16")
        out.append(("bf16", "bf16 copy kernel vs the f16 copy kernel", shape, paired(b, h["time_ms"] / b["time_ms"]),
                    BF16_COPY_VS_F16 if shape == GELU_16M else NOT_SLOWER))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write every row, the commands and the target table here")
    ap.add_argument("--table", action="store_true", help="print the markdown table for the README")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds per paired row (default 2)")
    ap.add_argument("--device", help="device selector (default: tessera's default)")
    ap.add_argument("--tessera", default=TESSERA)
    ap.add_argument("--quick", action="store_true", help="GELU 16M, LayerNorm and embedding 4096x768 only, 1 s a pair")
    ap.add_argument("--from", dest="saved", help="recompute the table from this script's saved --json, running nothing")
    args = ap.parse_args()
    rows, logs, table = [], [], []
    if args.saved:
        with open(args.saved) as f:
            saved = json.load(f)
        rows, logs = saved["rows"], saved["log"]
        for dtype in ("f16", "bf16"):
            table += [(dtype,) + t for t in targets([r for r in rows if r["run_dtype"] == dtype], dtype)]
    budget = 1.0 if args.quick and args.budget == 2.0 else args.budget
    for dtype in () if args.saved else ("f16", "bf16"):
        got = []
        for op, extra, quick in RUNS:
            if args.quick and quick is None:
                continue
            r, log = bench(args.tessera, op, quick if args.quick else extra, dtype, budget, args.device)
            got += r
            logs.append(log)
        rows += [dict(r, run_dtype=dtype) for r in got]
        table += [(dtype,) + t for t in targets(got, dtype)]
    table += copy_targets(rows)
    lines = ["| dtype | what | shape | ratio | medians | target | |", "|---|---|---|---|---|---|---|"]
    for dtype, what, shape, (ratio, medians), target in table:
        lines.append("| %s | %s | %s | %s | %.2f | ≥ %.2f | %s |" % (
            dtype, what, shape, "-" if ratio is None else "%.2f" % ratio, medians, target,
            "not measured" if ratio is None else "met" if ratio >= target else "not met"))
    if args.table:
        print("\n".join(lines))
    else:
        for dtype, what, shape, (ratio, medians), target in table:
            print("%-5s %-62s %-14s %6s (medians %.2f; target %.2f)" % (
                dtype, what, shape, "-" if ratio is None else "%.2f" % ratio, medians, target))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": saved["command"] if args.saved else " ".join(sys.argv), "rows": rows,
                       "targets": [{"dtype": d, "what": w, "shape": s, "ratio": r, "ratio_of_medians": m, "target": t}
                                   for d, w, s, (r, m), t in table], "log": logs}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
