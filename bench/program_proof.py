#!/usr/bin/env python3
"""Does a kernel-source change leave the programs of tuned entries unchanged? (the evidence
tools/restamp_db asks for: docs/tuning.md, "Re-stamping").

    python3 bench/program_proof.py --old OLD/build --new NEW/build [--db data/builtin_tuning.json]
        [--ops conv2d,gemm] [--classes 3x3,strided] [--device cpu] [--march skylake-avx512]
        [--old-kernels DIR] [--new-kernels DIR] [--entries-of TEXT] [--shim build/bench/program_dump.so]
        [--json F]

For each tuned entry of this device (its name as the OpenCL driver gives it) in --db, both builds'
`tessera tune` run that entry's class with the entry's configuration as the only candidate, on
empty caches, under bench/program_dump.so (LD_PRELOAD), which writes every program the process
builds from source: its text (tessera inlines the #includes) and its build options. Each program is
compiled by clang-15 for x86-64 with -march=MARCH (the target PoCL compiles for: cl/dtype_avx512.cl
branches on __AVX512F__), with the program's own -D/-U options, to optimized LLVM IR (-O2, which drops
helpers no kernel calls and comments), and preprocessed (-E -P) too; the two builds' programs are
matched by their options. "same": every program the tune built (the fixture's default and the entry's
configuration) has the same options and the same IR in both builds (the note says where the
preprocessed text differs anyway, e.g. an unused helper), so re-stamping the entry cannot change
what it computes or how fast it runs on its fixture; "differs": the programs whose IR differs are
named, with the functions (kernels and helpers left out of line) whose IR differs or that only one side
defines, so an added kernel or a change to a kernel the entry does not launch can be told from one it
runs. Host-side changes that alter launches but not programs are outside this check
(docs/tuning.md says what else to look at).
Exit status: 0 done (whatever the verdicts), 1 an error.
"""
import argparse
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def die(msg):
    print(f"program_proof: {msg}", file=sys.stderr)
    sys.exit(1)


def device_name(tessera, selector):
    out = subprocess.run([tessera, "devices", "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        die(f"{tessera} devices --json failed: {out.stderr.strip()}")
    doc = json.loads(out.stdout)
    devs = doc["devices"] if isinstance(doc, dict) else doc
    for d in devs:
        if d.get("selector") == selector or (selector == "cpu" and d.get("type") == "CPU") \
                or selector.lower() in d.get("name", "").lower():
            return d["name"]
    die(f"no device matches {selector}")


def entries(db_path, name, ops, classes, entries_of=None):
    with open(db_path) as f:
        db = json.load(f)
    out = []
    for key, dev in db["devices"].items():
        if (dev.get("name") != name) if not entries_of else (entries_of not in dev.get("name", "")):
            continue
        for op, by_class in dev.get("ops", {}).items():
            if ops and op not in ops:
                continue
            for cls, e in by_class.items():
                if classes and cls not in classes:
                    continue
                cfg = " ".join(f"{k}={v}" for k, v in e["config"].items())
                out.append((op, cls, cfg))
    return out


def functions(code):
    """{name: body} of the functions a module's IR defines, metadata numbers masked (a function added
    or removed elsewhere renumbers them)."""
    out, name, body = {}, None, []
    for line in code.splitlines():
        if name is None and line.startswith("define "):
            at = line.find("@")
            name, body = line[at + 1:line.find("(", at)], [line]
        elif name is not None:
            body.append(line)
            if line == "}":
                out[name] = re.sub(r"!\d+", "!N", re.sub(r"#\d+", "#N", "\n".join(body)))
                name = None
    return out


def differing_functions(old_code, new_code):
    """The functions whose masked IR differs, with ' (new)' or ' (gone)' where only one side has it."""
    a, b = functions(old_code), functions(new_code)
    return sorted(f + (" (new)" if f not in a else " (gone)" if f not in b else "")
                  for f in set(a) | set(b) if a.get(f) != b.get(f))


def built_programs(build, kernels, shim, op, cls, cfg, selector, march, work):
    """{options: preprocessed text} of every program `tessera tune` of build builds for the class."""
    dump = os.path.join(work, "dump")
    os.makedirs(dump)
    env = dict(os.environ, PROGRAM_DUMP_DIR=dump, LD_PRELOAD=shim,
               TSR_CACHE_DIR=os.path.join(work, "cache"), POCL_CACHE_DIR=os.path.join(work, "pocl"),
               XDG_CACHE_HOME=work, TSR_TUNING_DB=os.path.join(work, "db.json"))
    env.pop("TSR_KERNEL_DIR", None)
    if kernels:
        env["TSR_KERNEL_DIR"] = kernels
    cmd = [os.path.join(build, "tools", "tessera"), "tune", "--device", selector, "--op", op, "--classes", cls,
           "--space", cfg, "--db", os.path.join(work, "db.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return None, proc.stderr.strip().splitlines()[-1:] or ["failed"]
    progs = {}
    for path in sorted(glob.glob(os.path.join(dump, "*.cl"))):
        with open(path[:-3] + ".opts") as f:
            opts = f.read().strip()
        flags = [t for t in shlex.split(opts) if t.startswith(("-D", "-U"))]
        base = ["clang-15", "-x", "cl", "-cl-std=CL1.2", "--target=x86_64-unknown-linux-gnu", f"-march={march}", *flags]
        pre = subprocess.run(base[:1] + ["-E", "-P"] + base[1:] + [path], capture_output=True, text=True)
        ir = subprocess.run(base + ["-Xclang", "-finclude-default-header", "-O2", "-S", "-emit-llvm", "-o", "-", path],
                            capture_output=True, text=True)
        if pre.returncode != 0 or ir.returncode != 0:
            die(f"clang-15 on a {op}/{cls} program failed: {(pre.stderr or ir.stderr).strip()[:300]}")
        # the module's IR without the lines naming the dump file
        code = "\n".join(l for l in ir.stdout.splitlines() if not l.startswith(("; ModuleID", "source_filename")))
        progs[opts] = (pre.stdout, code)
    return progs, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the build directory before the change")
    ap.add_argument("--new", required=True, help="the build directory after it")
    ap.add_argument("--db", default=os.path.join(ROOT, "data", "builtin_tuning.json"))
    ap.add_argument("--ops", default="", help="comma-separated ops (default: all)")
    ap.add_argument("--classes", default="", help="comma-separated classes (default: all)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--march", default="skylake-avx512", help="clang's -march for the device's target")
    ap.add_argument("--old-kernels", help="TSR_KERNEL_DIR for the old side (default: its build's embedded sources)")
    ap.add_argument("--new-kernels", help="TSR_KERNEL_DIR for the new side")
    ap.add_argument("--shim", default=os.path.join(ROOT, "build", "bench", "program_dump.so"),
                    help="bench/program_dump.so (default: this checkout's build)")
    ap.add_argument("--entries-of", metavar="TEXT",
                    help="take the entries of the device whose name contains TEXT (another device's: their "
                         "configurations are built here, for this device, with --march: a proxy for that device's "
                         "programs, e.g. --entries-of H200 --march x86-64 where no AVX-512 code may be compiled)")
    ap.add_argument("--json", help="write the verdicts here")
    args = ap.parse_args()
    for b in (args.old, args.new):
        if not os.access(os.path.join(b, "tools", "tessera"), os.X_OK):
            die(f"{b}: no tools/tessera (build it first)")
    if not os.path.exists(args.shim):
        die(f"{args.shim}: missing (ninja -C build bench/program_dump.so)")
    name = device_name(os.path.join(args.new, "tools", "tessera"), args.device)
    todo = entries(args.db, name, [o for o in args.ops.split(",") if o], [c for c in args.classes.split(",") if c],
                   args.entries_of)
    if not todo:
        die(f"no entries for {name} in {args.db}")
    verdicts = []
    for op, cls, cfg in todo:
        with tempfile.TemporaryDirectory() as w_old, tempfile.TemporaryDirectory() as w_new:
            old, e1 = built_programs(args.old, args.old_kernels, args.shim, op, cls, cfg, args.device, args.march, w_old)
            new, e2 = built_programs(args.new, args.new_kernels, args.shim, op, cls, cfg, args.device, args.march, w_new)
        if old is None or new is None:
            v = {"op": op, "class": cls, "config": cfg, "verdict": "error", "why": (e1 or e2)}
        else:
            keys = set(old) | set(new)
            diff = sorted(o for o in keys if o not in old or o not in new or old[o][1] != new[o][1])
            text = sorted(o for o in keys if o not in old or o not in new or old[o][0] != new[o][0])
            v = {"op": op, "class": cls, "config": cfg, "programs": len(new),
                 "verdict": "same" if not diff else "differs", "differing_options": diff,
                 "text_differs_options": text,
                 "differing_functions": {o: differing_functions(old[o][1] if o in old else "",
                                                                new[o][1] if o in new else "") for o in diff}}
        verdicts.append(v)
        note = ""
        if v["verdict"] == "differs":
            fns = sorted({f for fs in v["differing_functions"].values() for f in fs})
            note = f"  ({len(v['differing_options'])} program(s) differ; functions: {', '.join(fns) or '-'})"
        elif v["verdict"] == "same" and v["text_differs_options"]:
            note = f"  (same code; the text of {len(v['text_differs_options'])} program(s) differs)"
        print(f"{v['verdict']:<8} {op:<10} {cls:<18} {cfg}{note}" +
              (f"  {v['why']}" if v["verdict"] == "error" else ""), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "old": args.old, "new": args.new, "march": args.march, "verdicts": verdicts},
                      f, indent=1)


if __name__ == "__main__":
    main()
