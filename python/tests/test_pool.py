"""max_pool2d, avg_pool2d and adaptive_avg_pool2d against a float64 NumPy reference written from
PyTorch's definitions: both layouts, stride/padding/dilation, ceil_mode, count_include_pad, 16-bit
storage, device operands, NaN, and bad arguments."""
import numpy as np
import pytest

import tessera
from conftest import assert_close, uniform


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _out_size(n, k, s, p, d, ceil_mode):
    span = n + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def pool_ref(x, kind, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, count_include_pad=True,
             layout='nchw'):
    """float64 pooling of an NCHW (or NHWC) array, one output position at a time over all (n, c)."""
    x = np.asarray(x, np.float64)
    if layout == 'nhwc':
        x = x.transpose(0, 3, 1, 2)
    (kh, kw), (ph, pw), (dh, dw) = _pair(kernel_size), _pair(padding), _pair(dilation)
    sh, sw = _pair(stride) if stride is not None else (kh, kw)
    n, c, h, w = x.shape
    oh, ow = _out_size(h, kh, sh, ph, dh, ceil_mode), _out_size(w, kw, sw, pw, dw, ceil_mode)
    y = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            hs, ws = i * sh - ph, j * sw - pw
            rows = [hs + a * dh for a in range(kh) if 0 <= hs + a * dh < h]
            cols = [ws + b * dw for b in range(kw) if 0 <= ws + b * dw < w]
            window = x[:, :, rows][:, :, :, cols].reshape(n, c, -1)
            if kind == 'max':
                y[:, :, i, j] = window.max(axis=2) if window.shape[2] else -np.inf  # max propagates NaN
            else:
                he, we = min(hs + kh, h + ph), min(ws + kw, w + pw)
                divisor = (he - hs) * (we - ws) if count_include_pad else len(rows) * len(cols)
                y[:, :, i, j] = window.sum(axis=2) / divisor
    return y.transpose(0, 2, 3, 1) if layout == 'nhwc' else y


CASES = [
    # shape (NCHW), kernel, stride, padding, dilation, ceil_mode, count_include_pad
    ((1, 64, 112, 112), 3, 2, 1, 1, False, True),  # ResNet-50's stem pool
    ((2, 5, 17, 23), 3, 2, 1, 1, True, False),
    ((2, 3, 5, 5), 2, 2, 1, 1, True, True),
    ((1, 7, 9, 40), (2, 5), (1, 2), (1, 2), 1, False, True),
    ((1, 4, 13, 11), 3, 1, 1, (2, 1), True, True),
    ((3, 6, 8, 8), 4, 3, 2, 1, True, False),
]


@pytest.mark.parametrize('layout', ['nchw', 'nhwc'])
@pytest.mark.parametrize('case', CASES)
def test_pool_against_reference(device, rng, case, layout):
    shape, k, s, p, d, ceil_mode, include = case
    x = uniform(rng, shape, lo=-3, hi=3)
    xin = x.transpose(0, 2, 3, 1).copy() if layout == 'nhwc' else x
    want = pool_ref(xin, 'max', k, s, p, d, ceil_mode, layout=layout)
    got = tessera.max_pool2d(xin, k, s, p, d, ceil_mode, layout=layout)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want.astype(np.float32))  # max is exact
    if d == 1:
        want = pool_ref(xin, 'avg', k, s, p, 1, ceil_mode, include, layout=layout)
        assert_close(tessera.avg_pool2d(xin, k, s, p, ceil_mode, include, layout=layout), want, 1e-6, 'avg')


@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_pool_16_bit(device, rng, dtype):
    if dtype == 'bfloat16':
        ml_dtypes = pytest.importorskip('ml_dtypes')  # NumPy has bfloat16 only through ml_dtypes
        dt = np.dtype(ml_dtypes.bfloat16)
    else:
        dt = np.dtype(np.float16)
    X = uniform(rng, (2, 8, 14, 14), lo=-2, hi=2).astype(dt)
    xs = X.astype(np.float64)
    got = tessera.max_pool2d(X, 3, 2, 1, out_dtype=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, pool_ref(xs, 'max', 3, 2, 1).astype(np.float32))
    same = tessera.max_pool2d(X, 3, 2, 1, layout='nchw')
    assert same.dtype == dt
    half = tessera.avg_pool2d(X, 2)
    assert_close(half.astype(np.float64), pool_ref(xs, 'avg', 2), 8e-3, 'avg 16-bit')


def test_global_average_and_device_operands(device, rng):
    x = uniform(rng, (2, 2048, 7, 7))
    want = x.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    assert_close(tessera.adaptive_avg_pool2d(x, 1), want, 1e-6, 'global nchw')
    assert_close(tessera.avg_pool2d(x, 7), want, 1e-6, 'kernel = H x W')
    nhwc = x.transpose(0, 2, 3, 1).copy()
    assert_close(tessera.adaptive_avg_pool2d(nhwc, (1, 1), layout='nhwc'), want.transpose(0, 2, 3, 1), 1e-6, 'nhwc')
    dx = tessera.to_device(x)
    dy = tessera.adaptive_avg_pool2d(dx, 1)
    assert isinstance(dy, tessera.Array)
    assert_close(dy.get(), want, 1e-6, 'on the device')
    out = tessera.empty((2, 2048, 1, 1), np.float32)
    assert tessera.avg_pool2d(dx, 7, out=out) is out
    assert_close(out.get(), want, 1e-6, 'into out')


def test_max_propagates_nan(device, rng):
    x = uniform(rng, (1, 2, 6, 6))
    x[0, 0, 2, 3] = np.nan
    x[0, 1, 0, 0] = -np.inf
    got = tessera.max_pool2d(x, 2)
    assert np.isnan(got[0, 0, 1, 1]) and np.isnan(got).sum() == 1
    np.testing.assert_array_equal(got, pool_ref(x, 'max', 2).astype(np.float32))


def test_pool_bad_arguments(device, rng):
    x = uniform(rng, (1, 2, 8, 8))
    for call, words in [
        (lambda: tessera.max_pool2d(x, 0), 'kernel_size'),
        (lambda: tessera.max_pool2d(x, 3, padding=2), 'half the kernel'),
        (lambda: tessera.max_pool2d(x, 2, stride=0), 'stride'),
        (lambda: tessera.max_pool2d(x, 2, dilation=0), 'dilation'),
        (lambda: tessera.max_pool2d(x, 9), 'empty'),
        (lambda: tessera.max_pool2d(x, 2, ceil_mode=1), 'ceil_mode'),
        (lambda: tessera.avg_pool2d(x, 2, count_include_pad='yes'), 'count_include_pad'),
        (lambda: tessera.max_pool2d(x, 2, layout='chwn'), 'layout'),
        (lambda: tessera.max_pool2d(x[0], 2), '4-D'),
        (lambda: tessera.max_pool2d(x, (2, 2, 2)), 'kernel_size'),
        (lambda: tessera.max_pool2d(x, 2, out=np.zeros((1, 2, 3, 3), np.float32)), 'shape'),
        (lambda: tessera.adaptive_avg_pool2d(x, 2), 'output_size'),
    ]:
        with pytest.raises(tessera.InvalidArgument, match=words):
            call()
    dx = tessera.to_device(x)
    with pytest.raises(tessera.InvalidArgument, match='overlap'):
        tessera.max_pool2d(dx, 8, out=dx.view((1, 2, 1, 1)))


def test_pool_repeats_replay_and_stay_correct(rng):
    """Pooling repeated on the same device-resident tensors replays its C call (found by the
    argument objects, or by the tensors and scalars): new contents, another kernel, stride or
    kind, ceil_mode=1 where True was (refused even after True's call was learned), a released
    input and a closed device are all honoured."""
    dev = tessera.Device('cpu')
    x = uniform(rng, (2, 5, 17, 23))
    dx = tessera.to_device(x, device=dev)
    outs = {}
    for kind, kernel, stride, ceil in (('max', 3, 2, True), ('avg', 3, 2, True), ('max', 2, None, False),
                                       ('max', 3, 2, True)):
        want = pool_ref(x, kind, kernel, stride, 1 if kernel == 3 else 0, 1, ceil)
        out = outs.setdefault(want.shape, tessera.empty(want.shape, device=dev))
        fn = tessera.max_pool2d if kind == 'max' else tessera.avg_pool2d
        for _ in range(3):
            assert fn(dx, kernel, stride, 1 if kernel == 3 else 0, ceil_mode=ceil, out=out, device=dev) is out
            assert_close(out.get(), want, 1e-6, 'pool repeated (%s %d/%s)' % (kind, kernel, stride))
    x = uniform(rng, (2, 5, 17, 23))
    dx.set(x)  # new contents, same buffer: the replay reads them
    want = pool_ref(x, 'max', 3, 2, 1, 1, True)
    out = outs[want.shape]
    for _ in range(2):
        tessera.max_pool2d(dx, 3, 2, 1, ceil_mode=True, out=out, device=dev)
        assert_close(out.get(), want, 1e-6, 'pool repeated on new contents')
    g = tessera.empty((2, 5, 1, 1), device=dev)
    for _ in range(2):
        assert tessera.adaptive_avg_pool2d(dx, 1, out=g, device=dev) is g
        assert_close(g.get(), x.astype(np.float64).mean(axis=(2, 3), keepdims=True), 1e-6, 'global, repeated')
    out.set(np.full(out.shape, 7.0, np.float32))
    with pytest.raises(tessera.InvalidArgument, match='ceil_mode'):
        tessera.max_pool2d(dx, 3, 2, 1, ceil_mode=1, out=out, device=dev)
    assert np.all(out.get() == 7.0)
    dx.release()
    with pytest.raises(tessera.TesseraError, match='released'):
        tessera.max_pool2d(dx, 3, 2, 1, ceil_mode=True, out=out, device=dev)
    dx = tessera.to_device(x, device=dev)
    dev.close()
    with pytest.raises(tessera.TesseraError, match='closed'):
        tessera.max_pool2d(dx, 3, 2, 1, ceil_mode=True, out=out, device=dev)
