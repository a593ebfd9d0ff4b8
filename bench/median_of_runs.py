#!/usr/bin/env python3
"""Repeat a `tessera bench` command and summarize the rows as medians over the runs.

    python3 bench/median_of_runs.py --runs 3 --json out.json -- build/tools/tessera bench conv2d --sizes 1,8

On a shared machine one run can be off by 20-40%; each run already times every row side by side
(median of several timed runs per row), and this takes the median over whole runs, per shape and
implementation, of the time and of the ratios between implementations measured in the same run.
--ratio A/B (repeatable) names the ratios to print (time of B over time of A, by impl prefix);
default: tessera against every peer in the rows.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", help="write the per-run rows and the medians here")
    ap.add_argument("--ratio", action="append", default=[], help="A/B: B's time over A's (impl prefixes)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = [c for c in args.command if c != "--"]
    if not cmd:
        ap.error("give the tessera bench command after --")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            path = os.path.join(tmp, f"run{i}.json")
            subprocess.run(cmd + ["--json", path], check=True, stdout=subprocess.DEVNULL)
            with open(path) as f:
                runs.append(json.load(f))
            print(f"run {i + 1}/{args.runs} done", file=sys.stderr)

    def row(run, op, shape, prefix):
        for r in run:
            if r["op"] == op and r["shape"] == shape and r["impl"].startswith(prefix):
                return r
        return None

    keys = []
    for r in runs[0]:
        if (r["op"], r["shape"]) not in keys:
            keys.append((r["op"], r["shape"]))
    ratios = [tuple(x.split("/", 1)) for x in args.ratio]
    summary = []
    print(f"medians over {args.runs} runs of: {' '.join(cmd)}\n")
    for op, shape in keys:
        impls = [r["impl"] for r in runs[0] if r["op"] == op and r["shape"] == shape]
        line = {"op": op, "shape": shape, "impls": {}, "ratios": {}}
        for impl in impls:
            ts = [row(run, op, shape, impl)["time_ms"] for run in runs if row(run, op, shape, impl)]
            # Bandwidth-bound rows (GELU, copies) carry GB/s and no FLOP count.
            rate = "gbps" if all(row(run, op, shape, impl).get("gbps", 0) > 0 and
                                 not row(run, op, shape, impl).get("gflops")
                                 for run in runs if row(run, op, shape, impl)) else "gflops"
            gs = [row(run, op, shape, impl)[rate] for run in runs if row(run, op, shape, impl)]
            line["impls"][impl] = {"time_ms": statistics.median(ts), rate: statistics.median(gs),
                                   f"{rate}_min": min(gs), f"{rate}_max": max(gs)}
        wanted = ratios or [("tessera", i) for i in impls if not i.startswith("tessera")]
        for a, b in wanted:
            per_run = []
            for run in runs:
                ra, rb = row(run, op, shape, a), row(run, op, shape, b)
                if ra and rb:
                    per_run.append(rb["time_ms"] / ra["time_ms"])
            if per_run:
                line["ratios"][f"{a}/{b}"] = {"median": statistics.median(per_run), "min": min(per_run),
                                              "max": max(per_run)}
        summary.append(line)
        print(f"{op} {shape}")
        for impl, v in line["impls"].items():
            rate, unit = ("gbps", "GB/s") if "gbps" in v else ("gflops", "GFLOP/s")
            print(f"    {impl:24s} {v['time_ms']:10.3f} ms {v[rate]:9.1f} {unit:7s} "
                  f"[{v[rate + '_min']:.1f}, {v[rate + '_max']:.1f}]")
        for k, v in line["ratios"].items():
            print(f"    {k:40s} {v['median']:.2f} (runs: {v['min']:.2f} to {v['max']:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": cmd, "runs": runs, "medians": summary}, f, indent=1)


if __name__ == "__main__":
    main()
