#!/usr/bin/env python3
"""bench/pytorch_peer.py refuses bad --paired settings before it needs PyTorch or a device (TAP
output): each bad value of a new flag exits 2 with a message naming the flag, no traceback, no
--json written; valid settings pass those checks (the run then stops at a missing --tessera).

usage: check_peer_args.py SOURCE_ROOT
"""
import contextlib
import importlib.util
import io
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

CASES = [  # (extra arguments, text the message must hold)
    (["--precision", "0"], "--precision"),
    (["--precision", "1"], "--precision"),
    (["--precision", "nan"], "--precision"),
    (["--precision", "-0.05"], "--precision"),
    (["--block-ms", "0"], "--block-ms"),
    (["--block-ms", "-1"], "--block-ms"),
    (["--block-ms", "inf"], "--block-ms"),
    (["--block-ms", "nan"], "--block-ms"),
    (["--min-pairs", "0"], "--min-pairs"),
    (["--min-pairs", "-1"], "--min-pairs"),
    (["--min-pairs", "5", "--max-pairs", "4"], "--max-pairs"),
    (["--paired-budget", "0"], "--paired-budget"),
    (["--paired-budget", "nan"], "--paired-budget"),
    (["--paired-budget", "1e999"], "--paired-budget"),
    (["--ops", "depthwise"], "--paired"),
    (["--ops", "gelu,conv2d"], "--paired"),
    (["--block-ms", "abc"], "--block-ms"),  # argparse's own refusal (exit 2 as well)
    (["--passes", "0"], "--passes"),
    (["--passes", "21"], "--passes"),
    (["--passes", "x"], "--passes"),
]


def main():
    root = pathlib.Path(sys.argv[1])
    script = root / "bench" / "pytorch_peer.py"
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        missing = os.path.join(tmp, "no-tessera")
        base = [sys.executable, str(script), "--paired", "--ops", "conv2d", "--tessera", missing, "--json", out]
        for extra, text in CASES:
            p = subprocess.run(base + extra, capture_output=True, text=True, timeout=60)
            ok = p.returncode == 2 and text in p.stderr and "Traceback" not in p.stderr and not os.path.exists(out)
            results.append((f"{' '.join(extra)}: exit 2 naming {text}", ok, p.returncode, p.stderr.strip()))
        p = subprocess.run(base + ["--precision", "0.02", "--block-ms", "5", "--min-pairs", "3", "--max-pairs", "3",
                                   "--paired-budget", "2"], capture_output=True, text=True, timeout=60)
        ok = p.returncode == 2 and "not an executable" in p.stderr and not os.path.exists(out)
        results.append(("valid --paired settings pass the checks (stops at the missing --tessera)", ok, p.returncode,
                        p.stderr.strip()))
        unpaired = [a for a in base if a != "--paired"] + ["--passes", "2"]
        p = subprocess.run(unpaired, capture_output=True, text=True, timeout=60)
        ok = p.returncode == 2 and "--passes: with --paired only" in p.stderr and not os.path.exists(out)
        results.append(("--passes without --paired: exit 2 naming it", ok, p.returncode, p.stderr.strip()))
        # write_json: whole or not at all, through a file of its own (a link at PATH.tmp is not followed)
        spec = importlib.util.spec_from_file_location("pytorch_peer", script)
        peer = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(peer)
        kept = os.path.join(tmp, "kept.json")
        victim = os.path.join(tmp, "victim")
        with open(victim, "w") as f:
            f.write("untouched")
        os.symlink(victim, kept + ".tmp")
        with contextlib.redirect_stdout(io.StringIO()):
            peer.write_json(kept, {"a": 1})
            try:
                peer.write_json(kept, {"a": float("nan")})
                refused = False
            except ValueError:
                refused = True
        with open(kept) as f:
            now = json.load(f)
        with open(victim) as f:
            intact = f.read() == "untouched"
        left = sorted(n for n in os.listdir(tmp) if n.startswith("kept.json.") and n != "kept.json.tmp")
        ok = refused and now == {"a": 1} and intact and not left
        results.append(("write_json: a NaN refused leaves the old file and no temporary; a link at PATH.tmp untouched",
                        ok, 0, f"refused {refused}, file {now}, victim intact {intact}, left {left}"))
    # combine_passes: two passes of one row pool their pairs; the times are the passes' median; each
    # pass's own median ratio and their range are kept
    def side(ms, gflops, ratios=None):
        row = {"op": "conv2d", "shape": "1x8x8x8 k8 3x3/1 p1", "impl": "tessera(implicit)", "time_ms": ms,
               "time_min_ms": ms * 0.9, "time_max_ms": ms * 1.1, "runs": 10, "gflops": gflops, "gbps": 0.0,
               "cpu_ms": 2 * ms, "rel_err": 1e-7}
        if ratios:
            row["vs_pytorch"] = {"ratio": statistics.median(ratios), "bounds": [None, None], "min": min(ratios),
                                 "max": max(ratios), "pairs": len(ratios), "cpu_ratio": 1.0, "pair_ratios": ratios}
        return row
    t, py = peer.combine_passes([(side(2.0, 100.0, [0.9, 1.0, 1.1]), side(2.0, 100.0)),
                                 (side(1.0, 200.0, [1.9, 2.0, 2.1]), side(1.0, 200.0))])
    vs = t["vs_pytorch"]
    ok = (abs(vs["ratio"] - 1.5) < 1e-9 and vs["pairs"] == 6 and vs["passes"] == [1.0, 2.0]
          and vs["pass_range"] == [1.0, 2.0] and abs(t["time_ms"] - 1.5) < 1e-9 and abs(t["gflops"] - 400 / 3) < 1e-6
          and t["runs"] == 20 and abs(py["gflops"] - 400 / 3) < 1e-6 and vs["min"] == 0.9 and vs["max"] == 2.1)
    results.append(("--passes: combine_passes pools the pairs, takes the passes' median time, keeps each pass's ratio",
                    ok, 0, json.dumps(vs)))
    one = (side(2.0, 100.0, [1.0]), side(2.0, 100.0))
    ok = peer.combine_passes([one]) is one
    results.append(("--passes 1: a row is as measured", ok, 0, ""))
    print(f"1..{len(results)}")
    for i, (name, ok, rc, err) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {name}")
        if not ok:
            print(f"# exit {rc}: {err}")
    return 0 if all(r[1] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
