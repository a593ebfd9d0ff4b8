#!/usr/bin/env python3
"""The layers of the whole tree (TAP output).

Builds the file-level graph "file A uses a symbol defined in file B" from the global symbols of
the built object files (nm): the static libraries and the executables' objects (meson keeps an
executable's objects in EXE.p/ beside it), leaving out the generated embedded_*.c. Each source
file belongs to the layer of its top folder, lowest first:

    runtime  <  util  <  bench  <  report  <  mpi  <  tools

  1 - no circle between files (anywhere in the tree);
  2 - no file uses a file of a layer above its own (same layer or lower only);
  3 - the installed MPI library (libtessera_mpi.a) uses only tessera's public API: every tsr_
      symbol it needs from outside itself is a TSR_API function of include/tessera.h.
On success it prints the layering: each file with the files it uses, lowest first.

Usage: check_layers.py SOURCE_ROOT NM ARTIFACT... [--plant A:B]...
  ARTIFACT: a static library (.a), an executable (its EXE.p/ objects are read) or an object file.
  --plant A:B adds the edge "A uses B" (source paths; or B a symbol that file A uses) before
  checking and inverts the verdict: ok only when a check fails naming that edge (the tests that
  prove the checker can fail)."""
import os
import re
import subprocess
import sys

LAYERS = ['runtime', 'util', 'bench', 'report', 'mpi', 'tools']
RANK = {name: i for i, name in enumerate(LAYERS)}
MPI_LIBRARY = 'libtessera_mpi.a'


def usage(msg):
    print('1..0 # usage: %s' % msg)
    sys.exit(2)


args, plants = [], []
argv = sys.argv[1:]
while argv:
    a = argv.pop(0)
    if a == '--plant':
        if not argv or ':' not in argv[0]:
            usage('--plant A:B')
        plants.append(tuple(argv.pop(0).split(':', 1)))
    else:
        args.append(a)
if len(args) < 3:
    usage(__doc__.strip().split('\n')[-5])
root, nm, artifacts = args[0], args[1], args[2:]

# Every C source of the product, keyed by the names meson gives its object (the path below the
# directory of the meson.build that builds it, '/' flattened to '_'): resolved per artifact below.
sources = []
for layer in LAYERS:
    for dirpath, _, files in os.walk(os.path.join(root, layer)):
        for f in files:
            if f.endswith('.c'):
                sources.append(os.path.relpath(os.path.join(dirpath, f), root))


def source_of(obj_name, base):
    """'runtime_ops_op.c.o' built from `base` ('' for the root, 'tools', 'mpi') -> 'runtime/ops/op.c'."""
    name = obj_name[:-2] if obj_name.endswith('.o') else obj_name
    matches = []
    for s in sources:
        rel = os.path.relpath(s, base) if base else s
        if not rel.startswith('..') and rel.replace('/', '_') == name:
            matches.append(s)
    return matches[0] if len(matches) == 1 else None


def build_base(path):
    """The source folder whose meson.build built the artifact: its directory below the build root."""
    d = os.path.dirname(os.path.abspath(path))
    while d != '/' and not os.path.exists(os.path.join(d, 'meson-private')):
        d = os.path.dirname(d)
    rel = os.path.relpath(os.path.dirname(os.path.abspath(path)), d) if d != '/' else ''
    return '' if rel == '.' else rel


def nm_lines(paths):
    out = subprocess.run([nm, '-A', '-g'] + paths, check=True, capture_output=True, text=True).stdout
    return out.splitlines()


defined = {}      # symbol -> set of files defining it
used = {}         # file -> symbols it uses from elsewhere
unit_of = {}      # file -> the artifact it came from
unknown = []
for art in artifacts:
    base = build_base(art)
    if art.endswith('.a') or art.endswith('.o'):
        paths = [art]
    else:
        pdir = art + '.p'
        paths = sorted(os.path.join(pdir, f) for f in os.listdir(pdir) if f.endswith('.o')) if os.path.isdir(pdir) else []
    if not paths:
        continue
    for line in nm_lines(paths):
        # "lib.a:member.o:<address> <type> <symbol>" or "dir/x.o:<address> <type> <symbol>"
        m = re.match(r'^(.*?):\s*(?:[0-9a-fA-F]+\s+)?([A-Za-z])\s+(\S+)$', line)
        if not m:
            continue
        where, kind, symbol = m.group(1), m.group(2), m.group(3)
        obj = os.path.basename(where.split('.a:')[-1]) if '.a:' in where else os.path.basename(where)
        if 'embedded_' in obj:
            continue
        f = source_of(obj, base)
        if not f:
            unknown.append('%s (%s)' % (obj, art))
            continue
        used.setdefault(f, set())
        unit_of[f] = os.path.basename(art)
        if kind == 'U':
            used[f].add(symbol)
        else:
            defined.setdefault(symbol, set()).add(f)

edges = {f: {} for f in used}  # file -> {file it uses: [symbols]}
for f, symbols in used.items():
    for s in sorted(symbols):
        owners = defined.get(s, set()) - {f}
        if len(owners) > 1:  # the same name in two programs (main): the one in f's own artifact
            owners = {g for g in owners if unit_of[g] == unit_of[f]} or owners
        for g in owners:
            edges[f].setdefault(g, []).append(s)
for a, b in plants:
    for f in (a, b) if b.endswith('.c') else (a,):
        if f not in edges:
            print('1..0 # --plant: %s is not a file of the graph' % f)
            sys.exit(2)
    if b.endswith('.c'):
        edges[a].setdefault(b, []).append('<planted>')
    else:  # a symbol the file uses
        used[a].add(b)


def layer_name(f):
    return f.split('/', 1)[0]


# 1: strongly connected components (Tarjan): a component of more than one file is a circle.
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

# 2: a file uses files of its own layer or below.
upward = [(f, g) for f in sorted(edges) for g in sorted(edges[f]) if RANK[layer_name(g)] > RANK[layer_name(f)]]

# 3: the installed MPI library on the public API.
header = open(os.path.join(root, 'include', 'tessera.h')).read()
public = set(re.findall(r'\bTSR_API\b[^;(]*?\b(tsr_\w+)\s*\(', header))
mpi_files = {f for f in used if unit_of[f] == MPI_LIBRARY}
mpi_defined = {s for s, owners in defined.items() if owners & mpi_files}
private = sorted({(f, s) for f in mpi_files for s in used[f]
                  if s.startswith('tsr_') and s not in mpi_defined and s not in public})

failures = []  # (test number, lines)
lines = []
for c in circles:
    lines.append('# circle: ' + ', '.join(c))
    for f in c:
        for g in sorted(edges[f]):
            if g in c:
                lines.append('#   %s -> %s (%s)' % (f, g, ', '.join(edges[f][g])))
if circles:
    failures.append((1, lines))
lines = ['#   %s -> %s: %s reaches up into %s (%s)' % (f, g, layer_name(f), layer_name(g), ', '.join(edges[f][g]))
         for f, g in upward]
if upward:
    failures.append((2, lines))
if private:
    failures.append((3, ['#   %s uses %s, not in include/tessera.h' % fs for fs in private]))

if plants:
    # Inverted: the planted edge must be reported by a failing check.
    text = '\n'.join(l for _, ls in failures for l in ls)
    print('1..1')
    missing = [(a, b) for a, b in plants if '%s -> %s' % (a, b) not in text and '%s uses %s' % (a, b) not in text]
    if failures and not missing:
        print('ok 1 - the planted edge%s %s fail%s the check' % (
            's' if len(plants) > 1 else '', ', '.join('%s -> %s' % p for p in plants), '' if len(plants) > 1 else 's'))
        for _, ls in failures:
            print('\n'.join(ls))
        sys.exit(0)
    print('not ok 1 - the planted edge %s went unnoticed' % ', '.join('%s -> %s' % p for p in missing or plants))
    sys.exit(1)

print('1..3')
names = {1: 'no circle between files (%d files)' % len(edges),
         2: 'no file uses a layer above its own (%s)' % ' < '.join(LAYERS),
         3: 'the installed MPI library uses only the public API (%d files)' % len(mpi_files)}
failed = dict(failures)
for n in (1, 2, 3):
    if n in failed:
        print('not ok %d - %s' % (n, names[n]))
        print('\n'.join(failed[n]))
    else:
        print('ok %d - %s' % (n, names[n]))
if unknown:
    print('# objects without a source file here (left out): ' + ', '.join(sorted(set(unknown))))
if not failures:
    # Depth of a file: one above the deepest file it uses, within the layer order.
    depth = {}

    def depth_of(f):
        if f not in depth:
            depth[f] = 1 + max((depth_of(g) for g in edges[f]), default=-1)
        return depth[f]

    for layer in LAYERS:
        files = sorted((f for f in edges if layer_name(f) == layer), key=lambda f: (depth_of(f), f))
        for f in files:
            print('# %-7s %2d: %-30s uses %s' % (layer, depth_of(f), f, ', '.join(sorted(edges[f])) or 'nothing'))
sys.exit(1 if failures else 0)
