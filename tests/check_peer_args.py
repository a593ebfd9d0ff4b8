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
    print(f"1..{len(results)}")
    for i, (name, ok, rc, err) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {name}")
        if not ok:
            print(f"# exit {rc}: {err}")
    return 0 if all(r[1] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
