#!/usr/bin/env python3
"""MiniLM's 1 x 16-token forward: its host path as before session 20 against Runner.forward, in one
process, alternating blocks of 10 forwards, ROUNDS=N rounds (default 41):

    PY=build/python-venv/bin/python   # tessera installed, plus the model package (docs/minilm.md)
    ROUNDS=41 $PY bench/minilm_host_ab.py

"old" is the previous forward spelled out: tessera.embedding through its full argument path
(its replay entry dropped before each call), the int32 ids range-checked in NumPy, the pooled
vectors normalised through a float64 copy; "new" is Runner.forward (the embedding's replay, the
int32 ids passed to the C check, one fewer NumPy call). Both use their own runner and device
and give the same embedding (checked bit for bit). Printed: medians of the wall time, process
CPU time and calling thread's CPU time per forward ("main": the host work, most of it between
one forward's read-back and the next one's first launch, when PoCL's workers have nothing to do).
"""
import os, time, sys, statistics, numpy as np, tessera
from tessera import _ops, _gemm
from tessera.examples import minilm
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_profile import tokens
model = minilm.Model()
ids, lengths = tokens(model, 16)
new_host_ids = _ops._host_ids
def old_host_ids(values, name, shape=None):
    arr = np.asarray(values)
    if arr.dtype.kind not in 'iu' or arr.ndim not in (1, 2) or arr.size == 0: raise ValueError
    flat = arr.reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat > np.iinfo(np.int32).max))
    if bad.size: raise ValueError
    return arr.shape, np.ascontiguousarray(flat, dtype=np.int32)
rs = {n: minilm.Runner(model, tessera.Device('cpu')) for n in ('old', 'new')}
for r in rs.values(): r.forward(ids, lengths); r.forward(ids, lengths)  # warm (kept strips), then the recording
def old_forward(r=rs['old']):
    _ops._host_ids = old_host_ids
    for k in [k for k, e in _gemm._replays.items() if type(e).__name__ == '_EmbeddingReplay']: del _gemm._replays[k]
    st = r._shapes[(1, 16, None)]
    full = bool(np.all(np.asarray(lengths) == 16))
    tessera.embedding(ids, r.word, r.position, r.token_type, out=st['x3'], device=r.device)
    st['graph'].replay()
    pooled = st['pooled'].get().reshape(1, 384).astype(np.float64)
    out = (pooled / np.sqrt(np.einsum('ij,ij->i', pooled, pooled))[:, None]).astype(np.float32)
    _ops._host_ids = new_host_ids
    return out
def new_forward(r=rs['new']):
    return r.forward(ids, lengths)
assert np.array_equal(old_forward(), new_forward())
runs = {'old': old_forward, 'new': new_forward}
S = {n: {'wall': [], 'cpu': [], 'main': []} for n in runs}
for rep in range(int(os.environ.get('ROUNDS', 41))):
    for n in (('old', 'new') if rep % 2 else ('new', 'old')):
        f = runs[n]; f()
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        for _ in range(10): f()
        S[n]['wall'].append((time.perf_counter() - t0) * 100); S[n]['cpu'].append((time.process_time() - c0) * 100)
        S[n]['main'].append((time.thread_time() - m0) * 100)
med = {n: {k: statistics.median(v) for k, v in d.items()} for n, d in S.items()}
print('ms per forward  old %s  new %s  new/old %s  load %.2f' % (
    {k: round(v, 3) for k, v in med['old'].items()}, {k: round(v, 3) for k, v in med['new'].items()},
    {k: round(med['new'][k] / med['old'][k], 3) for k in med['old']}, os.getloadavg()[0]))
