#!/usr/bin/env python3
"""No import circle in runtime/ (TAP output).

Builds the file-level graph "file A uses a symbol defined in file B" from the global symbols of
the static library's object files (nm), leaving out the generated embedded_*.c, and fails naming
every circle it finds. On success it prints the layering: each file with the files it uses, lowest
layer first (a file only uses files of lower layers).
Usage: check_layers.py LIBTESSERA.a [NM]"""
import re
import subprocess
import sys

archive = sys.argv[1]
nm = sys.argv[2] if len(sys.argv) > 2 else 'nm'


def source_name(member):
    """'runtime_tuner_space.c.o' -> 'runtime/tuner/space.c' (meson flattens the path into the object's name)."""
    name = member[:-2] if member.endswith('.o') else member
    for prefix, path in (('runtime_ops_', 'runtime/ops/'), ('runtime_tuner_', 'runtime/tuner/'),
                         ('runtime_group_', 'runtime/group/'), ('runtime_', 'runtime/')):
        if name.startswith(prefix):
            return path + name[len(prefix):]
    return name


out = subprocess.run([nm, '-A', '-g', archive], check=True, capture_output=True, text=True).stdout
defined = {}  # symbol -> file defining it
used = {}     # file -> symbols it uses from elsewhere
for line in out.splitlines():
    # "lib.a:member.o:<address> <type> <symbol>" (no address for undefined symbols)
    m = re.match(r'^[^:]*:([^:]+):\s*(?:[0-9a-fA-F]+\s+)?([A-Za-z])\s+(\S+)$', line)
    if not m or 'embedded_' in m.group(1):
        continue
    member, kind, symbol = source_name(m.group(1)), m.group(2), m.group(3)
    used.setdefault(member, set())
    if kind == 'U':
        used[member].add(symbol)
    else:
        defined[symbol] = member

edges = {f: {} for f in used}  # file -> {file it uses: [symbols]}
for f, symbols in used.items():
    for s in sorted(symbols):
        g = defined.get(s)
        if g and g != f:
            edges[f].setdefault(g, []).append(s)

# Strongly connected components (Tarjan): a component of more than one file is a circle.
index, low, on_stack, stack, components = {}, {}, set(), [], []


def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(edges[v]):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on_stack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        component = []
        while True:
            w = stack.pop()
            on_stack.discard(w)
            component.append(w)
            if w == v:
                break
        components.append(sorted(component))


sys.setrecursionlimit(10000)
for v in sorted(edges):
    if v not in index:
        visit(v)

circles = [c for c in components if len(c) > 1]
print('1..1')
if circles:
    print('not ok 1 - runtime/ has import circles')
    for c in circles:
        print('# circle: ' + ', '.join(c))
        for f in c:
            for g in sorted(edges[f]):
                if g in c:
                    print('#   %s -> %s (%s)' % (f, g, ', '.join(edges[f][g])))
    sys.exit(1)

# Layer of a file: one above the highest layer it uses.
layer = {}


def layer_of(f):
    if f not in layer:
        layer[f] = 1 + max((layer_of(g) for g in edges[f]), default=-1)
    return layer[f]


for f in edges:
    layer_of(f)
for n in range(max(layer.values(), default=-1) + 1):
    for f in sorted(x for x in layer if layer[x] == n):
        print('# layer %d: %-26s uses %s' % (n, f, ', '.join(sorted(edges[f])) or 'nothing in runtime/'))
print('ok 1 - no import circle in runtime/ (%d files)' % len(edges))
