#!/usr/bin/env python3
"""Kernel defaults agree with the declared ones (TAP output).

Each op in runtime/ops/*.c declares its tuning parameters in an X-macro,
X(NAME, KIND, DEFAULT, values...); the DEFINE ones reach the kernel as -DNAME=value, and the host
passes every one of them on every build. A kernel source of the op (cl/SOURCE.cl for the op's
.source_name and .more_sources) that still gives NAME a fallback (#ifndef NAME / #define NAME V)
must give the declared DEFAULT, so the two can never tell different stories.

KNOWN lists the disagreements this check found when it was written. Fixing them edits the kernel
text, which changes the op's source hash and so makes every tuned entry for it stale (the built-in
database's included, which must then be re-stamped in the same change); they are fixed together
with a change that re-stamps the database anyway. A disagreement not listed fails, and so does a
listed one that no longer exists (remove it from KNOWN).

usage: check_kernel_defaults.py SOURCE_ROOT
"""
import pathlib
import re
import sys

# (source, parameter): (kernel's fallback, declared default) as found; see the docstring.
KNOWN = {
    ("attention", "BC"): (16, 4),
    ("attention", "BR"): (16, 1),
    ("attention", "RW"): (2, 1),
    ("conv", "KWG"): (16, 8),
    ("conv", "MWI"): (4, 1),
    ("conv", "VW"): (8, 1),
    ("conv_cpu", "MWI"): (6, 1),
    ("conv_cpu", "STAGE"): (2, 0),
    ("conv_cpu", "VW"): (16, 1),
    ("gelu", "VPT"): (4, 1),
    ("gelu", "VW"): (8, 1),
    ("gemm", "KU"): (4, 1),
    ("gemm", "KWG"): (16, 8),
    ("gemm", "MWI"): (6, 1),
    ("gemm", "VW"): (16, 1),
    ("gemm_gpu", "DB"): (1, 0),
    ("gemm_gpu", "KU"): (4, 1),
    ("gemm_gpu", "KWG"): (16, 8),
    ("gemm_gpu", "MWI"): (8, 1),
    ("gemm_gpu", "NVW"): (2, 1),
    ("gemm_gpu", "PAD"): (1, 0),
    ("gemm_gpu", "VW"): (4, 1),
    ("gemm_gpu", "WGM"): (16, 1),
    ("gemm_gpu", "WGN"): (16, 1),
}


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
    """{NAME: value} for every #ifndef NAME / #define NAME value pair with an integer value."""
    return {name: int(value) for name, name2, value in
            re.findall(r"#ifndef\s+(\w+)\s*\n\s*#define\s+(\w+)\s+(-?\d+)\s*\n", cl_text) if name == name2}


def main():
    root = pathlib.Path(sys.argv[1])
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
        if KNOWN.get(key) == (kernel, decl):
            results.append((True, "cl/%s.cl %s: %d in the kernel, %d declared (known, see KNOWN)" % (key[0], key[1], kernel, decl)))
        else:
            results.append((False, "cl/%s.cl: #define %s %d, but the op declares %d" % (key[0], key[1], kernel, decl)))
    for key in sorted(set(KNOWN) - set(found)):
        results.append((False, "cl/%s.cl %s is listed in KNOWN but agrees now (or is gone): remove it" % key))
    if not found and not any(ok for ok, _ in results):
        results.append((False, "no op parameters found: the check reads nothing"))
    print("1..%d" % len(results))
    for i, (ok, what) in enumerate(results, start=1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, what))
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
