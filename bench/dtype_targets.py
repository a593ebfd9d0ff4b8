#!/usr/bin/env python3
"""Issue #19's 16-bit targets in one run: `tessera bench OP --dtype D` for GELU, GEMM and attention,
f16 then bf16, each 16-bit row timed in alternation with the same shape in fp32 (and GELU's also
with the 16-bit copy kernel), then the table of ratios against the targets.

    python3 bench/dtype_targets.py --json docs/data/bench-dtype-pocl.json --table

Ratios are of the rows' medians (the rows of a pair are timed in alternation, so both saw the same
machine); rates: GELU elements/s, GEMM and attention GFLOP/s.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESSERA = os.path.join(HERE, "..", "build", "tools", "tessera")

RUNS = [
    ("gelu", ["--sizes", "16M", "--part", "elementwise"]),
    ("gemm", ["--sizes", "1024,2048,64@128x128x128", "--no-peers"]),
    ("attention", ["--sizes", "4096", "--no-peers"]),
]


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


def targets(rows, dtype):
    """(what, shape, ratio, target) for one dtype's rows."""
    out = []
    for form in ("tanh", "erf"):
        g = [r for r in rows if r["op"] == "gelu"]
        r16 = find(g, impl="fused-%s-paired" % form, dtype=dtype)
        r32 = find(g, impl="fused-%s-paired" % form, dtype="")
        c16 = find(g, impl="fused-%s-paired-copy" % form, dtype=dtype)
        copy = find(g, impl="copy-kernel-paired-%s" % form, dtype=dtype)
        out.append(("GELU %s, elements/s vs fp32" % form, r16["shape"], r32["time_ms"] / r16["time_ms"], 1.8))
        out.append(("GELU %s vs the 16-bit copy kernel" % form, c16["shape"], copy["time_ms"] / c16["time_ms"], 0.85))
    gemm = [r for r in rows if r["op"] == "gemm" and r["impl"] == "tessera"]
    for r16 in [r for r in gemm if r.get("dtype", "") == dtype]:
        r32 = find(gemm, shape=r16["shape"], dtype="")
        target = 1.3 if "@" in r16["shape"] or r16["shape"].count("x") == 3 else 0.95
        out.append(("GEMM, GFLOP/s vs fp32", r16["shape"], r16["gflops"] / r32["gflops"], target))
    att = [r for r in rows if r["op"] in ("attention", "attention-causal")]
    for r16 in [r for r in att if r.get("dtype", "") == dtype]:
        r32 = find(att, shape=r16["shape"], mask=r16.get("mask", ""), impl=r16["impl"], dtype="")
        out.append(("attention %s, GFLOP/s vs fp32" % r16.get("mask", ""), r16["shape"],
                    r16["gflops"] / r32["gflops"], 1.2))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write every row, the commands and the target table here")
    ap.add_argument("--table", action="store_true", help="print the markdown table for the README")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds per paired row (default 2)")
    ap.add_argument("--device", help="device selector (default: tessera's default)")
    ap.add_argument("--tessera", default=TESSERA)
    ap.add_argument("--from", dest="saved", help="recompute the table from this script's saved --json, running nothing")
    args = ap.parse_args()
    rows, logs, table = [], [], []
    if args.saved:
        with open(args.saved) as f:
            saved = json.load(f)
        rows, logs = saved["rows"], saved["log"]
        for dtype in ("f16", "bf16"):
            table += [(dtype,) + t for t in targets([r for r in rows if r["run_dtype"] == dtype], dtype)]
    for dtype in () if args.saved else ("f16", "bf16"):
        got = []
        for op, extra in RUNS:
            r, log = bench(args.tessera, op, extra, dtype, args.budget, args.device)
            got += r
            logs.append(log)
        rows += [dict(r, run_dtype=dtype) for r in got]
        table += [(dtype,) + t for t in targets(got, dtype)]
    lines = ["| dtype | what | shape | 16-bit / fp32 | target | |", "|---|---|---|---|---|---|"]
    for dtype, what, shape, ratio, target in table:
        lines.append("| %s | %s | %s | %.2f | ≥ %.2f | %s |" % (dtype, what, shape, ratio, target,
                                                                  "met" if ratio >= target else "not met"))
    if args.table:
        print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": saved["command"] if args.saved else " ".join(sys.argv), "rows": rows,
                       "targets": [{"dtype": d, "what": w, "shape": s, "ratio": r, "target": t}
                                   for d, w, s, r, t in table], "log": logs}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
