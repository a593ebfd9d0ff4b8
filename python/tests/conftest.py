"""Fixtures of the Python suite: the device under test ($TSR_DEVICE, default the CPU), a
random generator seeded from $TSR_TEST_SEED or the clock (printed, so a failure reproduces
with TSR_TEST_SEED=<seed>), and double-precision references."""
import math
import os
import time

import numpy as np
import pytest

import tessera

SEED = int(os.environ.get('TSR_TEST_SEED', '0')) or (time.time_ns() & 0xFFFFFFFF)


def pytest_report_header(config):
    return 'tessera: TSR_TEST_SEED=%d, device %s' % (SEED, os.environ.get('TSR_DEVICE', 'cpu'))


@pytest.fixture(scope='session')
def device():
    dev = tessera.Device(os.environ.get('TSR_DEVICE', 'cpu'))
    tessera.set_default_device(dev)
    yield dev
    dev.close()


@pytest.fixture
def rng(request):
    # one stream per test, derived from the session seed and the test's name
    return np.random.default_rng([SEED, sum(map(ord, request.node.nodeid))])


def uniform(rng, shape, dtype=np.float32, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu_ref(x, approximate='none'):
    x = np.asarray(x, dtype=np.float64)
    if approximate == 'tanh':
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def act_ref(y, activation):
    if activation is None:
        return y
    if activation == 'relu':
        return np.maximum(y, 0.0)
    return gelu_ref(y, 'tanh' if activation == 'gelu_tanh' else 'none')


def conv2d_ref(x, w, bias, stride, padding, dilation, groups):
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for r in range(kh):
            for s in range(kw):
                patch = xs[:, :, r * dh:r * dh + sh * (oh - 1) + 1:sh, s * dw:s * dw + sw * (ow - 1) + 1:sw]
                y[:, g * og:(g + 1) * og] += np.einsum('ncij,oc->noij', patch, w[g * og:(g + 1) * og, :, r, s])
    if bias is not None:
        y += np.asarray(bias, np.float64)[None, :, None, None]
    return y


def attention_ref(q, k, v, causal=None, kv_lengths=None, scale=None):
    """float64 attention with tessera's conventions: rows that see no key give 0 (lse -inf)."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    b, h, lq, d = q.shape
    lk = k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = scale * np.einsum('bhid,bhjd->bhij', q, k)
    i = np.arange(lq)[:, None]
    j = np.arange(lk)[None, :]
    visible = np.ones((b, 1, lq, lk), bool)
    if kv_lengths is not None:
        visible &= (j < np.asarray(kv_lengths)[:, None, None, None])
    if causal == 'bottom_right':
        visible &= (j <= i + (lk - lq))
    elif causal == 'top_left':
        visible &= (j <= i)
    s = np.where(visible, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    p = np.where(visible, np.exp(s - m_safe), 0.0)
    denom = p.sum(axis=-1, keepdims=True)
    out = np.einsum('bhij,bhjd->bhid', p / np.where(denom > 0, denom, 1.0), v)
    with np.errstate(divide='ignore'):
        lse = np.where(denom[..., 0] > 0, np.log(np.where(denom[..., 0] > 0, denom[..., 0], 1.0)) + m_safe[..., 0],
                       -np.inf)
    return out, lse


def assert_close(got, want, tol, what=''):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, '%s: shape %s, expected %s' % (what, got.shape, want.shape)
    err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    worst = float(err.max()) if err.size else 0.0
    assert worst <= tol, '%s: max relative error %.3g > %.3g (seed %d)' % (what, worst, tol, SEED)
