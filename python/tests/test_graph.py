"""tessera.graph: a recorded matmul + GELU + layernorm + attention sequence replays on new input
contents and matches a float64 reference; NumPy data, embedding and a released Array are refused
with clear errors; a config override and a closed device make replays fail."""
import numpy as np
import pytest

import tessera
from conftest import attention_ref, gelu_ref, uniform

T, K, H, HEADS = 8, 24, 64, 2


def _reference(x, w, gamma, beta):
    g = gelu_ref(x.astype(np.float64) @ w.astype(np.float64))
    mu = g.mean(-1, keepdims=True)
    y = (g - mu) / np.sqrt(g.var(-1, keepdims=True) + 1e-5) * gamma + beta
    q = y.reshape(1, T, HEADS, H // HEADS).transpose(0, 2, 1, 3)
    return attention_ref(q, q, q)[0].transpose(0, 2, 1, 3).reshape(T, H)


def _chain(dev, rng):
    x, w = uniform(rng, (T, K)), uniform(rng, (K, H), lo=-0.5, hi=0.5)
    gamma, beta = uniform(rng, (H,), lo=0.5, hi=1.5), uniform(rng, (H,), lo=-0.2, hi=0.2)
    arrays = {n: tessera.to_device(v, dev) for n, v in (('x', x), ('w', w), ('gamma', gamma), ('beta', beta))}
    for n in ('h', 'y', 'o'):
        arrays[n] = tessera.empty((T, H), device=dev)
    return (w, gamma, beta), arrays


def _run(a):
    tessera.matmul(a['x'], a['w'], out=a['h'])
    tessera.gelu(a['h'], out=a['h'])
    tessera.layernorm(a['h'], a['gamma'], a['beta'], eps=1e-5, out=a['y'])
    yq = a['y'].view((1, HEADS, T, H // HEADS), strides=(T * H, H // HEADS, H, 1))
    oq = a['o'].view((1, HEADS, T, H // HEADS), strides=(T * H, H // HEADS, H, 1))
    tessera.attention(yq, yq, yq, out=oq)


def test_replay_follows_new_inputs(device, rng):
    (w, gamma, beta), a = _chain(device, rng)
    with tessera.graph(device, name='chain') as g:
        _run(a)
    assert g.launches >= 4
    for _ in range(3):
        x = uniform(rng, (T, K))
        a['x'].set(x)
        a['o'].set(np.full((T, H), np.nan, np.float32))
        g.replay()
        got = a['o'].get()
        np.testing.assert_allclose(got, _reference(x, w, gamma, beta), rtol=1e-4, atol=1e-5)
    g()  # the call form


def test_refusals(device, rng):
    _, a = _chain(device, rng)
    with pytest.raises(tessera.InvalidArgument, match='NumPy'):
        with tessera.graph(device):
            tessera.gelu(np.ones(H, np.float32), out=a['h'][0])
    with pytest.raises(tessera.InvalidArgument, match='NumPy'):
        with tessera.graph(device):
            tessera.gelu(a['h'], out=np.empty((T, H), np.float32))  # a NumPy result
    table = tessera.to_device(uniform(rng, (10, H)), device)
    with pytest.raises(tessera.TesseraError, match='tsr_embedding'):
        with tessera.graph(device):
            tessera.embedding(np.array([[1, 2]], np.int32), table, keep_on_device=True)
    with tessera.graph(device) as g:
        _run(a)
    a['h'].release()
    with pytest.raises(tessera.TesseraError, match='released'):
        g.replay()


def test_override_and_closed_device(rng):
    dev = tessera.Device()
    _, a = _chain(dev, rng)
    with tessera.graph(dev) as g:
        _run(a)
    g.replay()
    dev.override('gelu', None)
    with pytest.raises(tessera.TesseraError, match='re-record'):
        g.replay()
    with tessera.graph(dev) as g:
        _run(a)
    g.replay()
    dev.close()
    with pytest.raises(tessera.TesseraError, match='closed'):
        g.replay()
    g.release()
