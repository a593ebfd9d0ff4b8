#!/usr/bin/env python3
"""One error idiom in runtime/ (TAP output).

The idiom (runtime/internal.h): a status local named explicitly in every check,
    TSR_CHECK(status, expr, done);  TSR_CL_CHECK(status, clCall(...), done);
and one cleanup label `done` (`unlock` where a lock is released before it). The older forms may not
come back in any runtime/**/*.c or *.h:
  - a file-local RETURN_IF_FAILED macro,
  - a status assigned inside a condition: `if ((st = f()) != TSR_SUCCESS)`, `x && (status = f())`,
  - a 2-argument TSR_CHECK / TSR_CL_CHECK (the implicit `status` local),
  - labels named `out` / `out_unlocked` (and `goto out;`).
Before reading the tree, the checker is run on a planted file holding each old form and must find
every one of them (so this test cannot pass by finding nothing).

usage: check_idioms.py SOURCE_ROOT
"""
import pathlib
import re
import sys
import tempfile

STATUS_NAMES = r"(?:st|status)"


def strip_comments_and_strings(text):
    """Comments and string/char literals blanked (newlines kept, so line numbers stay)."""
    def blank(m):
        s = m.group(0)
        if s.startswith(("/*", "//")):
            return re.sub(r"[^\n]", " ", s)
        return s[0] + " " * (len(s) - 2) + s[-1]
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, text, flags=re.S)


def top_level_args(text, open_paren):
    """The number of top-level arguments of the call whose '(' is at open_paren."""
    depth, args, i = 0, 1, open_paren
    while i < len(text):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return args
        elif c == "," and depth == 1:
            args += 1
        i += 1
    return -1


def problems(path, text):
    """(line, message) for every old idiom in one file's text."""
    code = strip_comments_and_strings(text)
    found = []

    def line_of(pos):
        return code.count("\n", 0, pos) + 1

    for m in re.finditer(r"\bRETURN_IF_FAILED\b", code):
        found.append((line_of(m.start()), "RETURN_IF_FAILED (use TSR_CHECK(status, expr, done))"))
    for m in re.finditer(r"\(\s*%s\s*=(?!=)" % STATUS_NAMES, code):
        found.append((line_of(m.start()), "a status assigned inside a condition (use TSR_CHECK(status, expr, done))"))
    for m in re.finditer(r"\b(TSR_(?:CL_)?CHECK)\s*\(", code):
        n = top_level_args(code, m.end() - 1)  # the #define's parameters count the same way
        if n != 3:
            found.append((line_of(m.start()), "%s with %d arguments (it takes status, expr, label)" % (m.group(1), n)))
    for m in re.finditer(r"(?m)^[ \t]*(out|out_unlocked)[ \t]*:(?!:)", code):
        found.append((line_of(m.start()), "label '%s' (the cleanup label is 'done', or 'unlock')" % m.group(1)))
    for m in re.finditer(r"\bgoto\s+(out|out_unlocked)\s*;", code):
        found.append((line_of(m.start()), "goto %s (the cleanup label is 'done', or 'unlock')" % m.group(1)))
    return found


PLANTED = """
#define RETURN_IF_FAILED(expr) do { tsr_status f_ = (expr); if (f_) return f_; } while (0)
static tsr_status planted(void) {
    tsr_status st, status = TSR_SUCCESS;
    if ((st = step()) != TSR_SUCCESS) return st;
    if (flag && (status = step()) != TSR_SUCCESS) goto out;
    TSR_CHECK(step(), out);
    TSR_CL_CHECK(clFinish(q), out_unlocked);
    RETURN_IF_FAILED(step());
out:
    unlock();
out_unlocked:
    return status;
}
"""
# the kinds of finding the planted file must produce, each at least once
PLANTED_KINDS = ["RETURN_IF_FAILED", "inside a condition", "TSR_CHECK with 2", "TSR_CL_CHECK with 2",
                 "label 'out'", "label 'out_unlocked'", "goto out"]

CLEAN = """
static tsr_status clean(void) {
    tsr_status status = TSR_SUCCESS;
    /* old forms in comments are fine: if ((st = f())) ... out: */
    const char *s = "goto out; (status = x)";
    TSR_CHECK(status, step(a, b), done);
    TSR_CL_CHECK(status, clFinish(q), unlock);
unlock:
    unlock();
done:
    return status == TSR_SUCCESS && a == b ? status : fixup(s);
}
"""


def main():
    root = pathlib.Path(sys.argv[1])
    files = sorted(p for p in (root / "runtime").rglob("*") if p.suffix in (".c", ".h"))
    print("1..%d" % (2 + len(files)))
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        planted = pathlib.Path(tmp) / "planted.c"
        planted.write_text(PLANTED)
        got = problems(planted, planted.read_text())
        missing = [k for k in PLANTED_KINDS if not any(k in msg for _, msg in got)]
        if missing:
            failed += 1
            print("not ok 1 - the checker misses old forms in a planted file: %s" % ", ".join(missing))
        else:
            print("ok 1 - the checker finds all %d old forms in a planted file (%d findings)" %
                  (len(PLANTED_KINDS), len(got)))
    got = problems("clean.c", CLEAN)
    if got:
        failed += 1
        print("not ok 2 - the checker flags the idiom itself: %s" % got)
    else:
        print("ok 2 - the checker passes the idiom (comments and strings ignored)")
    for i, path in enumerate(files, start=3):
        rel = path.relative_to(root)
        found = problems(path, path.read_text())
        if found:
            failed += 1
            print("not ok %d - %s" % (i, rel))
            for line, msg in found:
                print("#   %s:%d: %s" % (rel, line, msg))
        else:
            print("ok %d - %s" % (i, rel))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
