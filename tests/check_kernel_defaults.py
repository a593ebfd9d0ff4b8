#!/usr/bin/env python3
"""Kernel defaults agree with the declared ones (TAP output).

Each op in runtime/ops/*.c declares its tuning parameters in an X-macro,
X(NAME, KIND, DEFAULT, values...); the DEFINE ones reach the kernel as -DNAME=value, and the host
passes every one of them on every build. A kernel source of the op (cl/SOURCE.cl for the op's
.source_name and .more_sources) that still gives NAME a fallback (#ifndef NAME / #define NAME V)
must give the declared DEFAULT, so the two can never tell different stories.

The fallbacks are dead text for every launch (the host defines every parameter), so making them
agree changed no launch; it changed the ops' source hashes, and data/builtin_tuning.json was
re-stamped with tools/restamp_db.c in the same change (docs/tuning.md, "Re-stamping"). Any
disagreement fails. The check also runs itself on a copy of the tree with one disagreement
planted, which must fail, so it cannot pass by reading nothing.

usage: check_kernel_defaults.py SOURCE_ROOT
"""
import pathlib
import re
import shutil
import sys
import tempfile


def declared(op_text):
    """{NAME: default} of the DEFINE parameters in the op's X-macro."""
    m = re.search(r"#define \w+_PARAMS\(X\)(.*?)\n\n", op_text, re.S)
    if not m:
        return None
    params = {}
    for name, kind, default in re.findall(r"X\((\w+),\s*(\w+),\s*(-?\d+)", m.group(1)):
        if kind == "DEFINE":
            params[name] = int(default)
    return params


def sources(op_text):
    names = re.findall(r'\.source_name\s*=\s*"(\w+)"', op_text)
    more = re.search(r"static const char \*const \w+_more_sources\[\]\s*=\s*\{([^}]*)\}", op_text)
    if more:
        names += re.findall(r'"(\w+)"', more.group(1))
    return names


def fallbacks(cl_text):
    """{NAME: value} for every #ifndef NAME / #define NAME value pair with an integer value (and
    perhaps a // comment after it)."""
    return {name: int(value) for name, name2, value in
            re.findall(r"#ifndef\s+(\w+)\s*\n\s*#define\s+(\w+)\s+(-?\d+)[ \t]*(?://[^\n]*)?\n", cl_text)
            if name == name2}


def check(root):
    """[(ok, what)] for the tree at root; a disagreement is a failure."""
    results = []
    found = {}
    for op_file in sorted((root / "runtime" / "ops").glob("*.c")):
        text = op_file.read_text()
        params = declared(text)
        if params is None:
            continue
        for src in sources(text):
            cl = root / "cl" / (src + ".cl")
            if not cl.exists():
                results.append((False, "%s: its source %s does not exist" % (op_file.name, cl.name)))
                continue
            for name, value in sorted(fallbacks(cl.read_text()).items()):
                if name in params and params[name] != value:
                    found[(src, name)] = (value, params[name])
            results.append((True, "%s: cl/%s.cl read (%d declared DEFINE parameters)" % (op_file.name, src, len(params))))
    for key, (kernel, decl) in sorted(found.items()):
        results.append((False, "cl/%s.cl: #define %s %d, but the op declares %d" % (key[0], key[1], kernel, decl)))
    if not any(ok for ok, _ in results):
        results.append((False, "no op parameters found: the check reads nothing"))
    return results


def planted(root):
    """The check on a copy of the tree whose cl/gemm.cl falls back to MWI 6 and cl/attention.cl to
    STAGE 1 (a fallback with a comment after it); the ops declare 1 and 0."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp)
        shutil.copytree(root / "cl", copy / "cl")
        shutil.copytree(root / "runtime" / "ops", copy / "runtime" / "ops")
        for src, pattern, value in (("gemm", r"(#ifndef MWI\s*\n\s*#define MWI )-?\d+", 6),
                                    ("attention", r"(#ifndef STAGE\s*\n\s*#define STAGE )-?\d+(?=[ \t]*//)", 1)):
            cl = copy / "cl" / (src + ".cl")
            text, n = re.subn(pattern, r"\g<1>%d" % value, cl.read_text())
            if n != 1:
                return (False, "planted disagreement: cl/%s.cl has no fallback to plant it in" % src)
            cl.write_text(text)
        failures = [what for ok, what in check(copy) if not ok]
        caught = failures == ["cl/attention.cl: #define STAGE 1, but the op declares 0",
                              "cl/gemm.cl: #define MWI 6, but the op declares 1"]
        return (caught, "planted disagreements (cl/gemm.cl MWI 6, cl/attention.cl STAGE 1 with its comment) fail "
                "the check%s" % ("" if caught else ": it reported %r" % failures))


def main():
    root = pathlib.Path(sys.argv[1])
    results = check(root) + [planted(root)]
    print("1..%d" % len(results))
    for i, (ok, what) in enumerate(results, start=1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, what))
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
