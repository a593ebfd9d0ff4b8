"""DeviceGroup: one matmul or attention split across devices, against float64 NumPy; each tile
equals the same tile computed alone on its device; refusals. The group is PoCL's pthread and
basic devices where both are offered (POCL_DEVICES="pthread basic"), else the test device twice."""
import numpy as np
import pytest

import tessera
from conftest import uniform


@pytest.fixture(scope='module')
def group(device):
    names = [d.name for d in tessera.devices()]
    picks = [s for s in ('pthread', 'basic') if any(s in n for n in names)]
    g = tessera.DeviceGroup(picks if len(picks) == 2 else [device, device])
    yield g
    g.close()


def test_matmul_split_matches_reference_and_tiles(group, rng):
    m, k, n = 203, 77, 58
    a, b = uniform(rng, (m, k)), uniform(rng, (n, k)).T  # b read in place, transposed
    c = group.matmul(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 2e-6
    st = group.stats()
    assert sum(d['units'] for d in st['devices']) == m
    assert sorted((f, f + cnt) for _, f, cnt in st['tiles'])[0][0] == 0
    for dev_index, first, count in st['tiles']:
        alone = tessera.matmul(a[first:first + count], b, device=group.devices[dev_index])
        assert np.array_equal(alone, c[first:first + count]), 'tile %d+%d on device %d' % (first, count, dev_index)


def test_batched_and_beta(group, rng):
    a, b = uniform(rng, (6, 31, 17)), uniform(rng, (1, 17, 23))  # b broadcast over the batch
    out = uniform(rng, (6, 31, 23))
    ref = 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 2.0 * out
    got = group.matmul(a, b, out=out, alpha=0.5, beta=2.0)
    assert got is out
    assert np.abs(got - ref).max() < 1e-5 * max(1.0, np.abs(ref).max())


def test_attention_split_by_heads(group, rng):
    bsz, heads, lq, lk, d = 2, 5, 9, 13, 16
    q = uniform(rng, (bsz, lq, heads, d)).transpose(0, 2, 1, 3)  # [B, L, H, D] projections
    k, v = uniform(rng, (bsz, heads, lk, d)), uniform(rng, (bsz, heads, lk, d))
    lens = [lk, 6]
    o = group.attention(q, k, v, causal=True, kv_lengths=lens)
    s = np.einsum('bhqd,bhkd->bhqk', q.astype(np.float64), k.astype(np.float64)) / np.sqrt(d)
    i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
    for bi in range(bsz):
        mask = (j <= i + lk - lq) & (j < lens[bi])
        s[bi][:, ~mask] = -np.inf
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum('bhqk,bhkd->bhqd', p / p.sum(-1, keepdims=True), v.astype(np.float64))
    assert np.abs(o - ref).max() < 1e-5
    assert sum(dv['units'] for dv in group.stats()['devices']) == bsz * heads


def test_weights_and_refusals(group, rng):
    a, b = uniform(rng, (40, 8)), uniform(rng, (8, 12))
    group.set_weights([0] * (len(group) - 1) + [1])
    group.matmul(a, b)
    st = group.stats()
    assert st['weights_from'] == 'given' and st['devices'][-1]['units'] == 40
    group.set_weights(None)
    with pytest.raises(tessera.InvalidArgument, match='every weight is 0'):
        group.set_weights([0] * len(group))
    with pytest.raises(tessera.InvalidArgument, match='one weight per device'):
        group.set_weights([1] * (len(group) + 1))
    with pytest.raises(tessera.InvalidArgument, match='inner dimensions'):
        group.matmul(a, a)
    with pytest.raises(tessera.InvalidArgument, match='float32'):
        group.matmul(a.astype(np.float64), b)
    with pytest.raises(tessera.InvalidArgument, match='beta'):
        group.matmul(a, b, beta=1.0)
    with pytest.raises(tessera.InvalidArgument, match='causal'):
        group.attention(a[None, None], a[None, None], a[None, None], causal='top_left')
    with pytest.raises(tessera.InvalidArgument):
        tessera.DeviceGroup([])


def test_attention_grouped_query_split(group, rng):
    bsz, heads, kv_heads, lq, lk, d = 2, 6, 2, 5, 9, 16
    q = uniform(rng, (bsz, heads, lq, d))
    k, v = uniform(rng, (bsz, kv_heads, lk, d)), uniform(rng, (bsz, kv_heads, lk, d))
    o = group.attention(q, k, v, causal=True, kv_lengths=[lk, 4], scale=0.7)
    ek, ev = np.repeat(k, heads // kv_heads, axis=1), np.repeat(v, heads // kv_heads, axis=1)
    want = tessera.attention(q, ek, ev, causal=True, kv_lengths=[lk, 4], scale=0.7)
    assert np.abs(o - want).max() < 1e-6
    with pytest.raises(tessera.InvalidArgument, match='grouped-query'):
        group.attention(q, k[:, :1].repeat(4, axis=1), v[:, :1].repeat(4, axis=1))
