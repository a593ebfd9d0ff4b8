"""Every bad argument raises InvalidArgument naming it, and writes nothing: no AttributeError,
TypeError, OverflowError or bare ValueError escapes, and nothing is coerced silently (a bool is
no number, 2.9 no integer, NaN no count, "cpu\\x00gpu" no "cpu")."""
import numpy as np
import pytest

import tessera
from conftest import assert_close, uniform


def _refused(cases, out=None, poison=None):
    for call, words in cases:
        with pytest.raises(tessera.InvalidArgument) as info:
            call()
        assert words in str(info.value), 'expected %r in: %s' % (words, info.value)
        if out is not None:
            assert np.array_equal(out, poison, equal_nan=True), 'a refused call wrote out (%s)' % words


def test_layernorm_takes_none_weights_as_pytorch(device, rng):
    x = uniform(rng, (5, 12), lo=-2, hi=3)
    g, b = uniform(rng, (12,)), uniform(rng, (12,))
    s = x.astype(np.float64)
    norm = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-5)
    assert_close(tessera.layernorm(x, None, None), norm, 1e-5, 'no weight, no bias')
    assert_close(tessera.layernorm(x, g, None), norm * g, 1e-5, 'no bias')
    assert_close(tessera.layernorm(x, None, b), norm + b, 1e-5, 'no weight')
    dx = tessera.to_device(x)
    assert_close(tessera.layernorm(dx, None, None, out=dx).get(), norm, 1e-5, 'in place, no weights')
    strided = tessera.to_device(np.stack([g, g])).view((12,), (2,))
    with pytest.raises(tessera.InvalidArgument, match='weight must be contiguous'):
        tessera.layernorm(x, strided, b)


def test_op_arguments(device, rng):
    a, b = uniform(rng, (6, 4)), uniform(rng, (4, 5))
    out = np.full((6, 5), 7.0, np.float32)
    poison = out.copy()
    _refused([
        (lambda: tessera.gemm(a, b, out, activation=[1]), 'activation'),
        (lambda: tessera.gemm(a, b, out, activation=np.array(['relu'])), 'activation'),
        (lambda: tessera.gemm(a, b, out, alpha='2'), 'alpha'),
        (lambda: tessera.gemm(a, b, out, alpha=True), 'alpha'),
        (lambda: tessera.gemm(a, b, out, alpha=float('nan')), 'alpha'),
        (lambda: tessera.gemm(a, b, out, beta=float('inf')), 'beta'),
        (lambda: tessera.gemm(a, b, out, alpha=1e300), 'alpha'),
        (lambda: tessera.gemm(a, b.T, out, trans_b='yes'), 'trans_b'),
        (lambda: tessera.gemm(a.T, b, out, trans_a=1), 'trans_a'),
        (lambda: tessera.gemm(a, b, keep_on_device='no'), 'keep_on_device'),
        (lambda: tessera.gemm(a, b, out_dtype='no such type'), 'not a dtype'),
        (lambda: tessera.gemm(a, b, out_dtype=np.int32), 'dtype int32'),
        (lambda: tessera.gemm(None, b, out), 'a is required'),
        (lambda: tessera.gemm(a, 'b', out), 'b: str cannot be read'),
        (lambda: tessera.matmul(a, b, out, device=3), 'device must be'),
        (lambda: tessera.matmul([[1, 2], [3]], b, out), 'a: list cannot be read'),
    ], out, poison)
    for op in (lambda o: tessera.gemm(a, b, o), lambda o: tessera.gelu(a, o),
               lambda o: tessera.layernorm(a, None, None, out=o)):
        for bad in (True, [1], 'out', 2.5):
            with pytest.raises(tessera.InvalidArgument, match='out must be a NumPy array'):
                op(bad)
    x = uniform(rng, (1, 3, 8, 8))
    w = uniform(rng, (4, 3, 3, 3))
    _refused([
        (lambda: tessera.gelu(a, approximate=None), 'approximate'),
        (lambda: tessera.gelu(a, approximate=['tanh']), 'approximate'),
        (lambda: tessera.gelu(a, out_dtype=np.float64), 'dtype float64'),
        (lambda: tessera.conv2d(x, w, stride=True), 'stride'),
        (lambda: tessera.conv2d(x, w, stride=1.5), 'stride'),
        (lambda: tessera.conv2d(x, w, stride=(1, 2.0)), 'stride'),
        (lambda: tessera.conv2d(x, w, dilation=(1,)), 'dilation'),
        (lambda: tessera.conv2d(x, w, padding='full'), 'padding'),
        (lambda: tessera.conv2d(x, w, padding=np.array([1, 1])), 'padding'),
        (lambda: tessera.conv2d(x, w, groups=True), 'groups'),
        (lambda: tessera.conv2d(x, w, groups=1.0), 'groups'),
        (lambda: tessera.conv2d(x, w, groups=2 ** 70), 'groups'),
        (lambda: tessera.conv2d(x, w, padding=2 ** 70), 'padding'),
        (lambda: tessera.conv2d(x, w, stride=(1, 2 ** 40)), 'stride'),
        (lambda: tessera.conv2d(x, w, algo=['auto']), 'algo'),
        (lambda: tessera.conv2d(x, w, activation=[1]), 'activation'),
        (lambda: tessera.layernorm(a, None, None, eps=True), 'eps'),
        (lambda: tessera.layernorm(a, None, None, eps='1e-5'), 'eps'),
        (lambda: tessera.layernorm(a, None, None, eps=float('nan')), 'eps'),
        (lambda: tessera.layernorm(a, None, None, eps=-1.0), 'eps'),
    ])


def test_attention_arguments(device, rng):
    q, k = uniform(rng, (2, 2, 4, 16)), uniform(rng, (2, 2, 6, 16))
    out = np.full((2, 2, 4, 16), 3.0, np.float32)
    poison = out.copy()
    _refused([
        (lambda: tessera.attention(q, k, k, kv_lengths=[float('nan'), 6], out=out), 'kv_lengths[0]'),
        (lambda: tessera.attention(q, k, k, kv_lengths=[2.5, 6], out=out), 'kv_lengths[0]'),
        (lambda: tessera.attention(q, k, k, kv_lengths=[True, 6], out=out), 'kv_lengths[0]'),
        (lambda: tessera.attention(q, k, k, kv_lengths=['3', 6], out=out), 'kv_lengths[0]'),
        (lambda: tessera.attention(q, k, k, kv_lengths=np.array([1.0, 2.0]), out=out), 'kv_lengths'),
        (lambda: tessera.attention(q, k, k, kv_lengths=[1], out=out), 'kv_lengths'),
        (lambda: tessera.attention(q, k, k, kv_lengths=[1, 7], out=out), 'kv_lengths[1] = 7'),
        (lambda: tessera.attention(q, k, k, kv_lengths=[-1, 2], out=out), 'kv_lengths[0] = -1'),
        (lambda: tessera.attention(q, k, k, causal=1, out=out), 'causal'),
        (lambda: tessera.attention(q, k, k, causal='yes', out=out), 'causal'),
        (lambda: tessera.attention(q, k, k, causal=[True], out=out), 'causal'),
        (lambda: tessera.attention(q, k, k, return_lse=1, out=out), 'return_lse'),
    ], out, poison)
    assert_close(tessera.attention(q, k, k, kv_lengths=np.array([3, 6], np.uint8), causal=np.True_),
                 tessera.attention(q, k, k, kv_lengths=[3, 6], causal=True), 0, 'NumPy integers and bools')


def test_embedding_arguments(device, rng):
    word, pos, typ = uniform(rng, (20, 8)), uniform(rng, (10, 8)), uniform(rng, (2, 8))
    ids = rng.integers(0, 20, (2, 5))
    _refused([
        (lambda: tessera.embedding(ids, None), 'word'),
        (lambda: tessera.embedding(ids, word, pos, position_start=-1), 'position_start'),
        (lambda: tessera.embedding(ids, word, pos, position_start=2.9), 'position_start'),
        (lambda: tessera.embedding(ids, word, pos, position_start=True), 'position_start'),
        (lambda: tessera.embedding(ids, word, pos, position_start=float('nan')), 'position_start'),
        (lambda: tessera.embedding(ids, word, position_start=2), 'position_start=2 given without a position'),
        (lambda: tessera.embedding(ids, word, pos, type_ids=np.zeros_like(ids)), 'type_ids given without'),
        (lambda: tessera.embedding(ids, word, pos, typ, type_ids=np.zeros((2, 4), int)), 'type_ids has shape'),
        (lambda: tessera.embedding(ids, word, pos, typ, type_ids=np.zeros((2, 5))), 'type_ids'),
        (lambda: tessera.embedding(ids.astype(bool), word), 'ids'),
        (lambda: tessera.embedding([[1.5, 2]], word), 'ids'),
        (lambda: tessera.embedding([[1, 2], [3]], word), 'ids cannot be read'),
        (lambda: tessera.embedding(ids, word, pos, uniform(rng, (2, 8, 1))), 'token_type'),
    ])
    got = tessera.embedding(ids, word, pos, position_start=np.int64(5))
    assert_close(got, word[ids] + pos[5:10], 1e-6, 'NumPy integer position_start')


def test_array_and_device_arguments(device, rng):
    a = tessera.to_device(uniform(rng, (4, 6)))
    _refused([
        (lambda: tessera.empty((2.5,)), 'shape[0]'),
        (lambda: tessera.empty((-1, 2)), 'shape[0]'),
        (lambda: tessera.empty((True,)), 'shape[0]'),
        (lambda: tessera.empty(3.0), 'shape[0]'),
        (lambda: tessera.empty((2,), dtype='no such type'), 'not a dtype'),
        (lambda: tessera.to_device(np.ones(3), dtype='float128x'), 'not a dtype'),
        (lambda: tessera.to_device('abc'), 'to_device'),
        (lambda: a.view((2.5,)), 'shape[0]'),
        (lambda: a.view((2,), offset=-1), 'offset'),
        (lambda: a.view((2,), offset=1.5), 'offset'),
        (lambda: a.view((2, 2), (1,)), 'as many entries'),
        (lambda: a[True], 'index'),
        (lambda: a[1.5], 'index'),
        (lambda: a[0:2.5], 'slices take integers'),
        (lambda: a[0, 1], 'index'),
        (lambda: a.set('abc'), 'set'),
        (lambda: tessera.Device('cpu\x00gpu'), 'NUL'),
        (lambda: tessera.Device(3), 'selector'),
        (lambda: tessera.Device(b'cpu'), 'selector'),
        (lambda: device.config(None, 'large'), 'op'),
        (lambda: device.config('gemm\x00', 'large'), 'NUL'),
        (lambda: device.override('gemm', 5), 'config'),
    ])
    with pytest.raises(ValueError, match='without a copy'):  # NumPy 2's __array__ protocol
        np.asarray(a, copy=False)
    assert np.asarray(a, dtype=np.float64).dtype == np.float64
    assert a[np.int64(1)].shape == (6,) and a[-1].offset == 18
    assert tessera.to_device(np.float32(2.0)).shape == ()  # a 0-d array stays 0-d
    assert tessera.empty(np.int64(3)).shape == (3,)


def test_tools_and_group_arguments(device, rng, tmp_path):
    _refused([
        (lambda: tessera.tune(None, device=device), 'op'),
        (lambda: tessera.tune('gelu', device=device, evaluations=-1), 'evaluations'),
        (lambda: tessera.tune('gelu', device=device, evaluations=1.5), 'evaluations'),
        (lambda: tessera.tune('gelu', device=device, seed=-1), 'seed'),
        (lambda: tessera.tune('gelu', device=device, budget=0), 'budget'),
        (lambda: tessera.tune('gelu', device=device, budget=float('nan')), 'budget'),
        (lambda: tessera.tune('gelu', device=device, strategy=['anneal']), 'strategy'),
        (lambda: tessera.tune('gelu', device=device, classes=[1]), 'classes[0]'),
        (lambda: tessera.tune('gelu', device=device, dry_run='yes'), 'dry_run'),
        (lambda: tessera.tune('gelu', device=device, progress=5), 'progress'),
        (lambda: tessera.tune('gelu', device=device, db=3), 'db'),
        (lambda: tessera.tune('gelu', device=device, db=str(tmp_path) + '\x00x'), 'NUL'),
        (lambda: tessera.cli('devices\x00'), 'NUL'),
        (lambda: tessera.bench('gelu', extra='--no-peers'), 'extra'),
        (lambda: tessera.bench('gelu', peers=0), 'peers'),
        (lambda: tessera.bench('gelu', budget=-1), 'budget'),
        (lambda: tessera.bench('gelu', sizes=[64, 2.5]), 'sizes[1]'),
        (lambda: tessera.bench(None), 'op'),
        (lambda: tessera.bench('gelu', device=3), 'device'),
        (lambda: tessera.report(tmp_path, quick='yes'), 'quick'),
        (lambda: tessera.report(tmp_path, tune_budget=True), 'tune_budget'),
        (lambda: tessera.report(3), 'out'),
    ])
    q = uniform(rng, (1, 2, 4, 16))
    a, b = uniform(rng, (8, 4)), uniform(rng, (4, 3))
    with tessera.DeviceGroup([device]) as group:
        _refused([
            (lambda: group.set_weights(['1']), 'weights[0]'),
            (lambda: group.set_weights([float('nan')]), 'weights[0]'),
            (lambda: group.set_weights(1.0), 'weights'),
            (lambda: group.attention(q, q, q, causal=1), 'causal'),
            (lambda: group.attention(q, q, q, scale=0), 'scale'),
            (lambda: group.attention(q, q, q, kv_lengths=[float('nan')]), 'kv_lengths[0]'),
            (lambda: group.matmul(a, b, alpha='1'), 'alpha'),
        ])
