#!/usr/bin/env python3
"""util/, bench/, report/, mpi/ and tools/ reach a device only through the public API (tsr_device_queue,
tsr_device_context, tsr_device_id, tsr_device_get_info, tsr_device_fingerprint, ...), never
through the members of struct tsr_device: the runtime may change that struct freely.

usage: check_device_api.py SOURCE_ROOT   (TAP output: one line per directory checked)
"""
import pathlib
import re
import sys

# Files allowed to reach into the struct (none: every file is on the public API).
EXEMPT = set()


def device_members(internal_h):
    """The member names of struct tsr_device, read from its definition."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", internal_h, flags=re.S)
    body = text[text.index("struct tsr_device {") + len("struct tsr_device {"):]
    # Nested struct bodies out, innermost first, until the first '}' closes struct tsr_device.
    while "{" in body[: body.index("}")]:
        body = re.sub(r"\{[^{}]*\}", " ", body, count=1)
    body = body[:body.index("}")]
    members = set()
    for statement in body.split(";"):
        for declarator in statement.split(","):
            m = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$", declarator.strip())
            if m:
                members.add(m.group(1))
    return members


def main():
    root = pathlib.Path(sys.argv[1])
    members = device_members((root / "runtime" / "internal.h").read_text())
    if not {"queue", "context", "info"} <= members:
        print("1..1\nnot ok 1 - cannot read struct tsr_device's members from runtime/internal.h")
        return 1
    names = "|".join(sorted(members))
    # dev->queue, r->dev->context, device->info, (*dev).id: a pointer named for a device.
    pattern = re.compile(r"\b\w*dev\w*\s*->\s*(%s)\b|\(\s*\*\s*\w*dev\w*\s*\)\s*\.\s*(%s)\b" % (names, names))
    dirs = ["util", "bench", "report", "mpi", "tools"]
    print("1..%d" % len(dirs))
    failed = 0
    for n, d in enumerate(dirs, 1):
        found = []
        for path in sorted((root / d).rglob("*.[ch]")):
            rel = path.relative_to(root).as_posix()
            if rel in EXEMPT:
                continue
            for lineno, line in enumerate(path.read_text().splitlines(), 1):
                code = re.sub(r'"(?:[^"\\]|\\.)*"|/\*.*?\*/|//.*', '""', line)
                m = pattern.search(code)
                if m:
                    found.append("%s:%d: %s" % (rel, lineno, line.strip()))
        if found:
            failed += 1
            print("not ok %d - %s reads struct tsr_device members; use the public accessors" % (n, d))
            for f in found:
                print("# " + f)
        else:
            print("ok %d - %s uses the public device API" % (n, d))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
