#!/usr/bin/env python3
"""tessera peak next to clpeak (Debian's clpeak) on the same device, in alternating runs.

    python3 bench/peak_vs_clpeak.py [--runs 3] [--bandwidth-only] [--tessera build/tools/tessera]
                                    [--device 0:0]

Each round runs `clpeak` and then `tessera peak --json` once; the table gives the median over
rounds of each figure, side by side: global-memory read bandwidth per vector width (clpeak's
global-bandwidth test reads and sums, like tessera's read test), the best bandwidth each tool
finds, fp32 throughput, launch latency and transfers. It also prints the host's own read and copy
bandwidth as tessera measures it (CPU devices), and the ratios the targets name, computed within
each round (the two tools a few seconds apart) before the median is taken over rounds, which
cancels much of a shared machine's drift. --bandwidth-only runs just the bandwidth tests of both
tools (and the host's), about 30 s a round, so more rounds fit.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

WIDTHS = ["float", "float2", "float4", "float8", "float16"]


def run_clpeak(platform, device, bandwidth_only):
    tests = ["--global-bandwidth"] + ([] if bandwidth_only else ["--compute-sp", "--kernel-latency",
                                                                 "--transfer-bandwidth"])
    out = subprocess.run(["clpeak", "-p", str(platform), "-d", str(device)] + tests,
                         check=True, capture_output=True, text=True).stdout
    res = {}
    section = None
    for line in out.splitlines():
        s = line.strip()
        if s.startswith("Global memory bandwidth"):
            section = "bw"
        elif s.startswith("Single-precision compute"):
            section = "sp"
        elif s.startswith("Transfer bandwidth"):
            section = "xfer"
        m = re.match(r"(float\d*)\s*:\s*([\d.]+)", s)
        if m and section in ("bw", "sp"):
            res[f"{section}.{m.group(1)}"] = float(m.group(2))
        m = re.match(r"(enqueueWriteBuffer|enqueueReadBuffer)\s*:\s*([\d.]+)", s)
        if m and section == "xfer":
            res["xfer." + m.group(1)] = float(m.group(2))
        m = re.match(r"Kernel launch latency\s*:\s*([\d.]+)", s)
        if m:
            res["latency_us"] = float(m.group(1))
    return res


def run_tessera(binary, device, bandwidth_only):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "peak.json")
        cmd = [binary, "peak", "--json", path] + (["--device", device] if device else [])
        if bandwidth_only:
            cmd += ["--tests", "bandwidth,host"]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        with open(path) as f:
            p = json.load(f)["peaks"]
    res = {"bw.best": p["bandwidth_gbps"]}
    if not bandwidth_only:
        res.update({"sp.best": p["compute_gflops"], "latency_us": p["launch_us"]["round_trip"]["median"],
                    "xfer.enqueueWriteBuffer": p["transfer_gbps"]["write"]["median"],
                    "xfer.enqueueReadBuffer": p["transfer_gbps"]["read"]["median"]})
        for w, e in zip(WIDTHS, p["compute"]):
            res[f"sp.{w}"] = e["median"]
    for w, e in zip(WIDTHS, p["bandwidth"]["read"]):
        res[f"bw.{w}"] = e["median"]
    res["read.best"] = max(e["median"] for e in p["bandwidth"]["read"])
    res["copy.best"] = max(e["median"] for e in p["bandwidth"]["copy"])
    if "host_copy_gbps" in p:
        res["host_copy"] = p["host_copy_gbps"]["median"]
        res["host_read"] = p["host_read_gbps"]["median"]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tessera", default="build/tools/tessera")
    ap.add_argument("--device", default="0:0", help="P:D, for both tools")
    ap.add_argument("--bandwidth-only", action="store_true", help="only the bandwidth tests (and the host's)")
    args = ap.parse_args()
    plat, dev = (int(x) for x in args.device.split(":"))
    rounds = []
    for i in range(args.runs):
        c = run_clpeak(plat, dev, args.bandwidth_only)
        t = run_tessera(args.tessera, args.device, args.bandwidth_only)
        rounds.append((c, t))
        print(f"round {i + 1}: clpeak best read {max(c.get('bw.' + w, 0) for w in WIDTHS):.1f} GB/s, "
              f"tessera best {t['bw.best']:.1f} GB/s", file=sys.stderr)

    def med(tool, key):
        vals = [r[tool].get(key) for r in rounds if r[tool].get(key) is not None]
        return statistics.median(vals) if vals else None

    def fmt(v):
        return "-" if v is None else f"{v:.1f}"

    def clpeak_best(r, prefix):
        return max(r[0].get(prefix + w, 0) for w in WIDTHS)

    def width_table(prefix, label, best_label, unit):  # a row per vector width, then each tool's best
        for w in WIDTHS:
            c, t = med(0, prefix + w), med(1, prefix + w)
            print(f"| {label} {w} ({unit}) | {fmt(c)} | {fmt(t)} | {t / c:.2f} |" if c and t else
                  f"| {label} {w} ({unit}) | {fmt(c)} | {fmt(t)} | - |")
        cbest = statistics.median(clpeak_best(r, prefix) for r in rounds)
        tbest = med(1, prefix + "best")
        print(f"| {best_label} ({unit}) | {cbest:.1f} | {tbest:.1f} | {tbest / cbest:.2f} |")

    print(f"median of {args.runs} alternating rounds, device {args.device}\n")
    print("| figure | clpeak | tessera peak | tessera / clpeak |")
    print("|---|---:|---:|---:|")
    width_table("bw.", "read bandwidth", "best bandwidth", "GB/s")
    print(f"| best copy bandwidth, read + written (GB/s) | - | {fmt(med(1, 'copy.best'))} | - |")
    if med(1, "host_copy") is not None:
        print(f"| the host's own read, same threads (GB/s) | - | {fmt(med(1, 'host_read'))} | - |")
        print(f"| the host's own copy, read + written (GB/s) | - | {fmt(med(1, 'host_copy'))} | - |")

    def paired(num, den):  # per-round ratios: median and range
        vals = [num(r) / den(r) for r in rounds if num(r) and den(r)]
        return f"{statistics.median(vals):.2f} ({min(vals):.2f}–{max(vals):.2f})" if vals else "-"

    print(f"\nratios within each round, median (range) over {len(rounds)} rounds:\n")
    print("| ratio | value |")
    print("|---|---:|")
    print(f"| tessera best bandwidth / clpeak best | "
          f"{paired(lambda r: r[1]['bw.best'], lambda r: clpeak_best(r, 'bw.'))} |")
    if med(1, "host_copy") is not None:
        print(f"| tessera best read / the host's read | "
              f"{paired(lambda r: r[1]['read.best'], lambda r: r[1].get('host_read'))} |")
        print(f"| tessera best copy / the host's copy | "
              f"{paired(lambda r: r[1]['copy.best'], lambda r: r[1].get('host_copy'))} |")
        print(f"| tessera best bandwidth / the host's best | "
              f"{paired(lambda r: r[1]['bw.best'], lambda r: max(r[1].get('host_read'), r[1].get('host_copy')))} |")
    if args.bandwidth_only:
        return
    print("\n| figure | clpeak | tessera peak | tessera / clpeak |")
    print("|---|---:|---:|---:|")
    width_table("sp.", "fp32", "best fp32", "GFLOP/s")
    print(f"| launch latency (µs; tessera: enqueue + finish round trip) | {fmt(med(0, 'latency_us'))} | "
          f"{fmt(med(1, 'latency_us'))} | - |")
    print(f"| host to device (GB/s) | {fmt(med(0, 'xfer.enqueueWriteBuffer'))} | "
          f"{fmt(med(1, 'xfer.enqueueWriteBuffer'))} | - |")
    print(f"| device to host (GB/s) | {fmt(med(0, 'xfer.enqueueReadBuffer'))} | "
          f"{fmt(med(1, 'xfer.enqueueReadBuffer'))} | - |")


if __name__ == "__main__":
    main()
