"""gelu, conv2d and attention against float64 NumPy references, on NumPy, tessera.Array and
pyopencl operands; their bad inputs."""
import numpy as np
import pytest

import tessera
from conftest import act_ref, assert_close, attention_ref, conv2d_ref, gelu_ref, uniform


@pytest.mark.parametrize('approximate', ['none', 'tanh'])
def test_gelu(device, rng, approximate):
    x = uniform(rng, (3, 1000, 7), lo=-8, hi=8)
    assert_close(tessera.gelu(x, approximate=approximate), gelu_ref(x, approximate), 2e-6, 'gelu')
    specials = np.array([np.inf, -np.inf, np.nan, -30.0, 0.0, 30.0], np.float32)
    got = tessera.gelu(specials, approximate=approximate)
    assert got[0] == np.inf and got[1] == 0 and np.signbit(got[1]) and np.isnan(got[2])
    assert got[3] == 0 and got[4] == 0 and got[5] == 30.0
    h = tessera.gelu(x.astype(np.float16), approximate=approximate)
    assert h.dtype == np.float16
    assert_close(h, gelu_ref(x.astype(np.float16), approximate), 2e-3, 'gelu f16')


def test_gelu_in_place_on_device(device, rng):
    x = uniform(rng, (5000,), lo=-4, hi=4)
    dx = tessera.to_device(x)
    assert tessera.gelu(dx, dx) is dx
    assert_close(dx.get(), gelu_ref(x), 2e-6, 'in place')
    with pytest.raises(tessera.InvalidArgument, match='approximate'):
        tessera.gelu(x, approximate='fast')
    with pytest.raises(tessera.InvalidArgument, match='contiguous'):
        tessera.gelu(dx.view((2, 2), (4, 2)))
    with pytest.raises(tessera.TesseraError) as info:
        dx.view((5001,))
    assert info.value.status_name == 'TSR_ERR_BUFFER_TOO_SMALL'



CONV_CASES = [
    # x shape, weight shape, stride, padding, dilation, groups
    ((2, 3, 17, 15), (8, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 8, 20, 20), (16, 8, 1, 1), (1, 1), (0, 0), (1, 1), 1),
    ((3, 6, 19, 13), (6, 2, 3, 5), (2, 1), (1, 2), (1, 1), 3),
    ((1, 4, 16, 16), (4, 1, 3, 3), (1, 1), (2, 2), (2, 2), 4),   # depthwise, dilated
    ((2, 5, 11, 9), (7, 5, 4, 2), (3, 2), (0, 1), (1, 2), 1),
]


@pytest.mark.parametrize('case', range(len(CONV_CASES)))
@pytest.mark.parametrize('algo', ['auto', 'im2col', 'implicit', 'direct'])
def test_conv2d(device, rng, case, algo):
    xs, ws, stride, padding, dilation, groups = CONV_CASES[case]
    x, w, bias = uniform(rng, xs), uniform(rng, ws), uniform(rng, (ws[0],))
    activation = [None, 'relu', 'gelu', 'gelu_tanh'][case % 4]
    got = tessera.conv2d(x, w, bias, stride, padding, dilation, groups, activation=activation, algo=algo)
    want = act_ref(conv2d_ref(x, w, bias, stride, padding, dilation, groups), activation)
    assert_close(got, want, 1e-5, 'conv2d case %d %s' % (case, algo))


@pytest.mark.parametrize('case', range(len(CONV_CASES)))
def test_conv2d_nhwc(device, rng, case):
    """layout="nhwc": x [N, H, W, C], residual and output [N, OH, OW, O], weight OIHW; f16 storage
    and a residual in the last case."""
    xs, ws, stride, padding, dilation, groups = CONV_CASES[case]
    x, w, bias = uniform(rng, xs), uniform(rng, ws), uniform(rng, (ws[0],))
    want = conv2d_ref(x, w, bias, stride, padding, dilation, groups)  # NCHW
    xl = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    if case == len(CONV_CASES) - 1:
        res = uniform(rng, want.transpose(0, 2, 3, 1).shape)
        got = tessera.conv2d(xl.astype(np.float16), w.astype(np.float16), bias, stride, padding, dilation, groups,
                             residual=res, activation='relu', layout='nhwc', out_dtype=np.float32)
        want = x.astype(np.float16).astype(np.float64)
        want = act_ref(conv2d_ref(want, w.astype(np.float16).astype(np.float64), bias, stride, padding, dilation,
                                  groups).transpose(0, 2, 3, 1) + res, 'relu')
        assert_close(got, want, 1e-5, 'conv2d nhwc f16 case %d' % case)
        return
    got = tessera.conv2d(xl, w, bias, stride, padding, dilation, groups, layout='nhwc')
    assert got.shape == want.transpose(0, 2, 3, 1).shape
    assert_close(got, want.transpose(0, 2, 3, 1), 1e-5, 'conv2d nhwc case %d' % case)


def test_conv2d_same_padding_and_bad_input(device, rng):
    x, w = uniform(rng, (1, 3, 10, 10)), uniform(rng, (4, 3, 3, 3))
    assert tessera.conv2d(x, w, padding='same').shape == (1, 4, 10, 10)
    out = np.full((1, 4, 8, 8), 5.0, np.float32)
    for call, words in [
        (lambda: tessera.conv2d(x, uniform(rng, (4, 2, 3, 3)), out=out), 'input channels'),
        (lambda: tessera.conv2d(x, w, uniform(rng, (5,)), out=out), 'bias'),
        (lambda: tessera.conv2d(x[0], w, out=out), '4-D'),
        (lambda: tessera.conv2d(x, w, stride=0, out=out), 'stride'),
        (lambda: tessera.conv2d(x, w, padding='same', stride=2), 'same'),
        (lambda: tessera.conv2d(x, w, out=np.zeros((1, 4, 9, 8), np.float32)), 'shape'),
        (lambda: tessera.conv2d(x, w, algo='winograd'), 'algo'),
        (lambda: tessera.conv2d(x, w, layout='chwn', out=out), 'layout'),
        (lambda: tessera.conv2d(x, w, layout='nhwc', out=out), 'input channels'),
    ]:
        with pytest.raises(tessera.TesseraError) as info:
            call()
        assert words in str(info.value), str(info.value)
        assert np.all(out == 5.0)


@pytest.mark.parametrize('causal', [False, 'bottom_right', 'top_left'])
@pytest.mark.parametrize('lq,lk', [(37, 37), (20, 53), (53, 20), (1, 40), (64, 128)])
def test_attention(device, rng, causal, lq, lk):
    b, h, d = 2, 3, 32
    q, k, v = uniform(rng, (b, h, lq, d)), uniform(rng, (b, h, lk, d)), uniform(rng, (b, h, lk, d))
    got, lse = tessera.attention(q, k, v, causal=causal, return_lse=True)
    want, want_lse = attention_ref(q, k, v, causal or None)
    assert_close(got, want, 2e-5, 'attention %s %dx%d' % (causal, lq, lk))
    assert np.array_equal(np.isinf(lse), np.isinf(want_lse))
    assert_close(np.where(np.isinf(lse), 0, lse), np.where(np.isinf(want_lse), 0, want_lse), 2e-5, 'lse')
    lens = [int(rng.integers(0, lk + 1)), lk]
    got = tessera.attention(q, k, v, causal=causal, kv_lengths=lens, scale=0.3)
    assert_close(got, attention_ref(q, k, v, causal or None, lens, 0.3)[0], 2e-5, 'kv_lengths %s' % lens)


def test_attention_layouts_in_place(device, rng):
    # projections in [B, L, H, D]: their transposed views are read as they are
    b, lq, h, d = 2, 30, 4, 16
    qkv = uniform(rng, (b, lq, 3, h, d))
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    want = attention_ref(q, k, v, 'bottom_right')[0]
    assert_close(tessera.attention(q, k, v, causal=True), want, 2e-5, 'numpy views')
    dqkv = tessera.to_device(qkv.reshape(b, lq, 3 * h * d))
    # the same views on the device: element strides (L*3*H*D, D, 3*H*D) over one buffer
    views = [dqkv.view((b, h, lq, d), (lq * 3 * h * d, d, 3 * h * d, 1), i * h * d) for i in range(3)]
    out = tessera.attention(*views, causal=True)
    assert isinstance(out, tessera.Array)
    assert_close(out.get(), want, 2e-5, 'packed QKV on the device')
    got = tessera.attention(q[0], k[0], v[0], causal='top_left')
    assert got.shape == (h, lq, d)
    assert_close(got, want[0], 2e-5, '3-D')


def test_attention_pyopencl_and_16_bit(device, rng):
    cl = pytest.importorskip('pyopencl')
    cla = pytest.importorskip('pyopencl.array')
    ctx = cl.Context([cl.get_platforms()[device.info.platform_index].get_devices()[device.info.device_index]])
    queue = cl.CommandQueue(ctx)
    q, k, v = (uniform(rng, (1, 2, 24, 64), np.float16) for _ in range(3))
    got = tessera.attention(*(cla.to_device(queue, t) for t in (q, k, v)), causal='top_left')
    assert isinstance(got, cla.Array) and got.dtype == np.float16
    assert_close(got.get(), attention_ref(q, k, v, 'top_left')[0], 3e-3, 'pyopencl f16')


def test_attention_bad_input(device, rng):
    q, k = uniform(rng, (1, 2, 8, 16)), uniform(rng, (1, 2, 9, 16))
    out = np.full((1, 2, 8, 16), 3.0, np.float32)
    for call, words in [
        (lambda: tessera.attention(q, k, k[..., :8], out=out), 'shapes disagree'),
        (lambda: tessera.attention(q, k, k, causal='left', out=out), 'causal'),
        (lambda: tessera.attention(q, k, k, kv_lengths=[10], out=out), 'kv_lengths'),
        (lambda: tessera.attention(q, k, k, kv_lengths=[1, 2], out=out), 'kv_lengths'),
        (lambda: tessera.attention(q[0, 0], k, k, out=out), '[B, H, L, D]'),
        (lambda: tessera.attention(q, k, k, scale=float('nan'), out=out), 'scale'),
        (lambda: tessera.attention(q, k.astype(np.float64), k, out=out), 'dtype'),
    ]:
        with pytest.raises(tessera.TesseraError) as info:
            call()
        assert words in str(info.value), str(info.value)
        assert np.all(out == 3.0)


def layernorm_ref(x, weight, bias, residual=None, eps=1e-5):
    s = np.asarray(x, np.float64) + (np.asarray(residual, np.float64) if residual is not None else 0.0)
    mean = s.mean(axis=-1, keepdims=True)
    var = ((s - mean) ** 2).mean(axis=-1, keepdims=True)
    return (s - mean) / np.sqrt(var + eps) * np.asarray(weight, np.float64) + np.asarray(bias, np.float64)


@pytest.mark.parametrize('cols', [1, 3, 384, 1000])
def test_layernorm(device, rng, cols):
    x, r = uniform(rng, (2, 7, cols), lo=-3, hi=5), uniform(rng, (2, 7, cols))
    g, b = uniform(rng, (cols,)), uniform(rng, (cols,))
    assert_close(tessera.layernorm(x, g, b), layernorm_ref(x, g, b), 1e-5, 'layernorm')
    assert_close(tessera.layernorm(x, g, b, residual=r, eps=1e-12), layernorm_ref(x, g, b, r, 1e-12), 1e-5,
                 'with residual')
    half = tessera.layernorm(x.astype(np.float16), g, b, residual=r, out_dtype=np.float16)
    assert half.dtype == np.float16
    assert_close(half, layernorm_ref(x.astype(np.float16), g, b, r), 4e-3, 'f16')


def test_layernorm_in_place_and_strided(device, rng):
    x, r = uniform(rng, (40, 96)), uniform(rng, (40, 96))
    g, b = uniform(rng, (96,)), uniform(rng, (96,))
    dx, dr = tessera.to_device(x), tessera.to_device(r)
    assert tessera.layernorm(dx, g, b, residual=dr, out=dr) is dr  # Add & Norm into the residual stream
    assert_close(dr.get(), layernorm_ref(x, g, b, r), 1e-5, 'in place on residual')
    wide = tessera.to_device(uniform(rng, (40, 128)))
    view = wide.view((40, 96), (128, 1))  # rows 128 apart
    want = layernorm_ref(wide.get()[:, :96], g, b)
    assert tessera.layernorm(view, g, b, out=view) is view
    assert_close(wide.get()[:, :96], want, 1e-5, 'strided rows in place')
    out = np.full((40, 96), 2.0, np.float32)
    for call, words in [
        (lambda: tessera.layernorm(x, g, b, eps=0, out=out), 'eps'),
        (lambda: tessera.layernorm(x, g[:95], b, out=out), 'weight'),
        (lambda: tessera.layernorm(x, g, b, residual=r[:39], out=out), 'residual'),
        (lambda: tessera.layernorm(x, g.astype(np.float16), b, out=out), 'weight'),
        (lambda: tessera.layernorm(x, g, b, out=np.zeros((40, 95), np.float32)), 'shape'),
    ]:
        with pytest.raises(tessera.TesseraError) as info:
            call()
        assert words in str(info.value), str(info.value)
        assert np.all(out == 2.0)


def test_embedding(device, rng):
    vocab, positions, types, hidden = 50, 16, 2, 24
    word, pos, typ = uniform(rng, (vocab, hidden)), uniform(rng, (positions, hidden)), uniform(rng, (types, hidden))
    ids = rng.integers(0, vocab, (3, 10))
    type_ids = rng.integers(0, types, (3, 10))
    dw, dp, dt = tessera.to_device(word), tessera.to_device(pos), tessera.to_device(typ)
    got = tessera.embedding(ids, dw, dp, dt, type_ids=type_ids)
    want = word[ids].astype(np.float64) + pos[:10] + typ[type_ids]
    assert isinstance(got, tessera.Array) and got.shape == (3, 10, hidden)
    assert_close(got.get(), want, 1e-6, 'embedding')
    assert_close(tessera.embedding(ids[0], word), word[ids[0]], 0, 'word only, NumPy table')
    assert_close(tessera.embedding(ids, dw, dp, position_start=6).get(), word[ids] + pos[6:16], 1e-6,
                 'position start')
    for call, words in [
        (lambda: tessera.embedding(np.array([[1, vocab]]), dw), 'ids[1] = 50'),
        (lambda: tessera.embedding(np.array([[-1, 2]]), dw), 'ids[0] = -1'),
        (lambda: tessera.embedding(ids, dw, dp, position_start=7), 'position'),
        (lambda: tessera.embedding(ids, dw, None, dt, type_ids=type_ids + 1), 'type'),
        (lambda: tessera.embedding(ids.astype(np.float32), dw), 'integer'),
        (lambda: tessera.embedding(ids, dw, tessera.to_device(pos[:, :5])), 'columns'),
    ]:
        with pytest.raises(tessera.TesseraError) as info:
            call()
        assert words in str(info.value), str(info.value)


def test_embedding_16bit_tables(device, rng):
    # f16 (and bf16 where ml_dtypes is installed) tables, NumPy or on the device, any output type:
    # the reference sums the stored (rounded) table values in double.
    table_types = [np.float16]
    try:
        import ml_dtypes
        table_types.append(ml_dtypes.bfloat16)
    except ImportError:
        pass
    vocab, positions, types, hidden = 40, 12, 2, 20
    ids = rng.integers(0, vocab, (2, 9))
    type_ids = rng.integers(0, types, (2, 9))
    for tt in table_types:
        word = uniform(rng, (vocab, hidden)).astype(tt)
        pos, typ = uniform(rng, (positions, hidden)).astype(tt), uniform(rng, (types, hidden)).astype(tt)
        want = (word.astype(np.float64)[ids] + pos.astype(np.float64)[:9] + typ.astype(np.float64)[type_ids])
        for out_dtype in [np.float32] + table_types:
            u = 2.0 ** -23 * 3 + (0 if out_dtype == np.float32 else 2.0 ** -(10 if out_dtype == np.float16 else 7))
            for w, p, t in ((word, pos, typ), tuple(tessera.to_device(a) for a in (word, pos, typ))):
                got = tessera.embedding(ids, w, p, t, type_ids=type_ids, out_dtype=out_dtype)
                got = got.get() if isinstance(got, tessera.Array) else got
                assert got.dtype == np.dtype(out_dtype) and got.shape == (2, 9, hidden)
                err = np.abs(got.astype(np.float64) - want)
                assert np.all(err <= u * (np.abs(want) + 6)), (tt, out_dtype, err.max())
        with pytest.raises(tessera.TesseraError) as info:
            tessera.embedding(ids, word, pos.astype(np.float32))
        assert 'one storage type' in str(info.value), str(info.value)


def test_leading_dimensions_that_do_not_merge(device, rng):
    buf = tessera.to_device(uniform(rng, (200,)))
    four = buf.view((2, 3, 4, 5), (100, 20, 5, 1))  # batch stride 100 is not 3 * 20
    w = uniform(rng, (5, 2))
    got = tessera.matmul(four, w, keep_on_device=True)  # GEMM: one batched call per leading index
    assert_close(got.get(), np.matmul(four.get().astype(np.float64), w), 1e-6, 'unmerged batch dimensions')
    rows = buf.view((2, 3, 5), (100, 20, 1))
    g, b = uniform(rng, (5,)), uniform(rng, (5,))
    with pytest.raises(tessera.InvalidArgument, match='leading dimensions .* cannot be merged'):
        tessera.layernorm(rows, g, b)
    before = buf.get()
    with pytest.raises(tessera.InvalidArgument):
        tessera.layernorm(rows, g, b, out=rows)
    assert np.array_equal(buf.get(), before)  # refused: nothing written


@pytest.mark.parametrize('d', [16, 24])  # the vectorized kernels (D % 16 == 0) and the generic one
def test_attention_nan_scores_give_nan_rows(device, rng, d):
    q, k, v = uniform(rng, (2, 3, 9, d)), uniform(rng, (2, 3, 12, d)), uniform(rng, (2, 3, 12, d))
    clean, clean_lse = tessera.attention(q, k, v, return_lse=True)
    q[1, 2, 4, 0] = np.nan  # one query row: that row's scores are all NaN (NumPy's softmax: a NaN row)
    k[0, 1, 5, 3] = np.nan  # one key: every row of that head sees it
    got, lse = tessera.attention(q, k, v, return_lse=True)
    nan_rows = np.zeros((2, 3, 9), bool)
    nan_rows[1, 2, 4] = nan_rows[0, 1, :] = True
    assert np.isnan(got[nan_rows]).all() and np.isnan(lse[nan_rows]).all()
    assert np.array_equal(got[~nan_rows], clean[~nan_rows]) and np.array_equal(lse[~nan_rows], clean_lse[~nan_rows])
    causal = tessera.attention(q, k, v, causal='top_left')  # rows before key 5 of head (0, 1) do not see it
    assert np.isfinite(causal[0, 1, :5]).all() and np.isnan(causal[0, 1, 5:]).all() and np.isnan(causal[1, 2, 4]).all()


def test_attention_scale_is_literal_or_refused(device, rng):
    q, k, v = uniform(rng, (1, 2, 5, 16)), uniform(rng, (1, 2, 7, 16)), uniform(rng, (1, 2, 7, 16))
    out = np.full((1, 2, 5, 16), 3.0, np.float32)
    for bad in (0, 0.0, -0.0, np.float32(0), 1e-50, True, '0.5', float('inf'), 1e39, 2j):
        with pytest.raises(tessera.InvalidArgument, match='scale'):
            tessera.attention(q, k, v, scale=bad, out=out)
        assert np.all(out == 3.0)
    for scale in (-0.3, 1e-30, 2.5):  # negative and tiny scales are taken as given
        assert_close(tessera.attention(q, k, v, scale=scale), attention_ref(q, k, v, scale=scale)[0], 2e-5,
                     'scale %g' % scale)


@pytest.mark.parametrize('hk', [1, 2])
@pytest.mark.parametrize('causal', [False, 'bottom_right', 'top_left'])
def test_attention_grouped_query(device, rng, hk, causal):
    b, h, lq, lk, d = 2, 4, 11, 7, 16
    q = uniform(rng, (b, lq, h, d)).transpose(0, 2, 1, 3)  # [B, L, H, D] projections, read in place
    k, v = uniform(rng, (b, hk, lk, d)), uniform(rng, (b, hk, lk, d))
    lens = [lk, 3]
    ek, ev = np.repeat(k, h // hk, axis=1), np.repeat(v, h // hk, axis=1)  # PyTorch's enable_gqa=True
    want, want_lse = attention_ref(q, ek, ev, causal or None, lens)
    got, lse = tessera.attention(q, k, v, causal=causal, kv_lengths=lens, return_lse=True)
    assert_close(got, want, 2e-5, 'GQA %d key heads, %s' % (hk, causal))
    assert np.array_equal(np.isinf(lse), np.isinf(want_lse))
    assert_close(np.where(np.isinf(lse), 0, lse), np.where(np.isinf(want_lse), 0, want_lse), 2e-5, 'GQA lse')
    dq, dk, dv = (tessera.to_device(np.ascontiguousarray(t)) for t in (q, k, v))
    out = tessera.to_device(np.full((b, h, lq, d), np.nan, np.float32))
    assert tessera.attention(dq, dk, dv, causal=causal, kv_lengths=lens, out=out) is out
    assert_close(out.get(), want, 2e-5, 'GQA on the device')
    assert_close(tessera.attention(q[1], k[1], v[1], causal=causal), attention_ref(q, ek, ev, causal or None)[0][1],
                 2e-5, 'GQA 3-D')


def test_attention_refusals(device, rng):
    """What tessera's attention does not do (docs/python.md): a mask tensor, a value head size
    other than the query's, key heads that do not divide the query heads."""
    q, k = uniform(rng, (1, 4, 8, 16)), uniform(rng, (1, 4, 9, 16))
    out = np.full((1, 4, 8, 16), 3.0, np.float32)
    for call, words in [
        (lambda: tessera.attention(q, k, k, attn_mask=np.zeros((8, 9), bool), out=out), 'attn_mask is not supported'),
        (lambda: tessera.attention(q, k, uniform(rng, (1, 4, 9, 32)), out=out), 'value head size'),
        (lambda: tessera.attention(q, k[:, :3], k[:, :3], out=out), 'grouped-query'),
        (lambda: tessera.attention(q, k[:, :2], k[:, :1], out=out), 'shapes disagree'),
    ]:
        with pytest.raises(tessera.InvalidArgument) as info:
            call()
        assert words in str(info.value), str(info.value)
        assert np.all(out == 3.0)


def test_repeated_ops_replay_and_stay_correct(rng):
    """gelu, layernorm, attention and embedding repeated on the same device-resident tensors replay
    their C calls: new contents, another scalar (eps, approximate, scale), layernorm in place
    (reading what the last call wrote), the embedding's new (and bad) ids, a released table and a
    closed device are all honoured."""
    dev = tessera.Device('cpu')
    x = uniform(rng, (4, 384), lo=-3, hi=3)
    dx, dy = tessera.to_device(x, device=dev), tessera.empty((4, 384), device=dev)
    for approximate in ('tanh', 'none', 'tanh'):
        for _ in range(2):
            assert tessera.gelu(dx, out=dy, approximate=approximate) is dy
            assert_close(dy.get(), gelu_ref(x, approximate), 2e-6, 'gelu replayed (%s)' % approximate)
    x2 = uniform(rng, (4, 384), lo=-3, hi=3)
    dx.set(x2)  # new contents, same buffer: the replay reads them
    tessera.gelu(dx, out=dy, approximate='tanh')
    assert_close(dy.get(), gelu_ref(x2, 'tanh'), 2e-6, 'gelu replayed on new contents')

    g, b, r = uniform(rng, (384,)), uniform(rng, (384,)), uniform(rng, (4, 384))
    dg, db, dr = (tessera.to_device(t, device=dev) for t in (g, b, r))
    for eps in (1e-5, 1e-12, 1e-5):
        for _ in range(2):
            assert tessera.layernorm(dx, dg, db, residual=dr, eps=eps, out=dy) is dy
            assert_close(dy.get(), layernorm_ref(x2, g, b, r, eps), 1e-5, 'layernorm replayed (eps %g)' % eps)
    state = x2.astype(np.float64)
    for _ in range(3):  # in place: each replay normalizes what the one before wrote
        tessera.layernorm(dx, dg, db, residual=dr, out=dx)
        state = layernorm_ref(state, g, b, r)
    assert_close(dx.get(), state, 1e-5, 'layernorm replayed in place')

    q, k, v = (uniform(rng, (1, 3, 16, 32)) for _ in range(3))
    dq, dk, dv = (tessera.to_device(t, device=dev) for t in (q, k, v))
    do = tessera.empty((1, 3, 16, 32), device=dev)
    for scale in (None, 0.3, None):
        for _ in range(2):
            assert tessera.attention(dq, dk, dv, scale=scale, out=do) is do
            assert_close(do.get(), attention_ref(q, k, v, None, None, scale)[0], 2e-5, 'attention replayed')
    lens = [9]  # key lengths are not replayed: the mask is the call's
    tessera.attention(dq, dk, dv, kv_lengths=lens, out=do)
    assert_close(do.get(), attention_ref(q, k, v, None, lens)[0], 2e-5, 'attention with kv_lengths')
    vocab, hidden = 30, 384
    word, pos, typ = uniform(rng, (vocab, hidden)), uniform(rng, (16, hidden)), uniform(rng, (2, hidden))
    dw, dp, dt = (tessera.to_device(t, device=dev) for t in (word, pos, typ))
    de = tessera.empty((2, 8, hidden), device=dev)
    for _ in range(3):  # each repeat replays the C call with its own ids (and type ids)
        ids, types = rng.integers(0, vocab, (2, 8)), rng.integers(0, 2, (2, 8))
        assert tessera.embedding(ids, dw, dp, dt, out=de) is de
        assert_close(de.get(), word[ids] + pos[:8] + typ[0], 1e-6, 'embedding replayed')
        assert tessera.embedding(ids, dw, dp, dt, type_ids=types, out=de) is de
        assert_close(de.get(), word[ids] + pos[:8] + typ[types], 1e-6, 'embedding replayed with type ids')
    de.set(np.full((2, 8, hidden), 4.0, np.float32))
    for bad, words in ((vocab, 'ids[9] = 30'), (-1, 'ids[9] = -1')):  # the replay checks its ids too
        ids = rng.integers(0, vocab, (2, 8))
        ids[1, 1] = bad
        with pytest.raises(tessera.InvalidArgument) as info:
            tessera.embedding(ids, dw, dp, dt, out=de)
        assert words in str(info.value), str(info.value)
    assert np.all(de.get() == 4.0)
    ids = rng.integers(0, vocab, (2, 8))
    dp2 = tessera.to_device(pos[::-1].copy(), device=dev)  # another table: its own call
    tessera.embedding(ids, dw, dp2, dt, out=de)
    assert_close(de.get(), word[ids] + pos[::-1][:8] + typ[0], 1e-6, 'embedding, another position table')
    dp2.release()
    with pytest.raises(tessera.TesseraError, match='released'):
        tessera.embedding(ids, dw, dp2, dt, out=de)
    dev.close()
    with pytest.raises(tessera.TesseraError, match='closed'):
        tessera.embedding(ids, dw, dp, dt, out=de)
    with pytest.raises(tessera.TesseraError, match='closed'):
        tessera.gelu(dx, out=dy, approximate='tanh')
    with pytest.raises(tessera.TesseraError, match='closed'):
        tessera.layernorm(dx, dg, db, residual=dr, out=dy)
    with pytest.raises(tessera.TesseraError, match='closed'):
        tessera.attention(dq, dk, dv, out=do)


def test_embedding_replay_from_threads(rng):
    """Threads replaying embedding calls at once on one device and the same tables, each on an
    output of its own: every call's own ids reach its output (a replay passes them in an argument
    tuple of its own). Also one entry replayed from every thread (a shared output, each call and
    its read under a lock)."""
    import threading
    dev = tessera.Device('cpu')
    vocab, hidden, seq = 50, 64, 12
    word, pos = uniform(rng, (vocab, hidden)), uniform(rng, (seq, hidden))
    dw, dp = tessera.to_device(word, device=dev), tessera.to_device(pos, device=dev)
    outs = [tessera.empty((1, seq, hidden), device=dev) for _ in range(4)]
    shared, lock, errors = tessera.empty((1, seq, hidden), device=dev), threading.Lock(), []

    def worker(t):
        r = np.random.default_rng([7, t])
        try:
            for _ in range(40):
                ids = r.integers(0, vocab, (1, seq)).astype(np.int32)
                tessera.embedding(ids, dw, dp, out=outs[t])
                np.testing.assert_allclose(outs[t].get(), word[ids] + pos, rtol=0, atol=1e-6)
                with lock:
                    tessera.embedding(ids, dw, dp, out=shared)
                    np.testing.assert_allclose(shared.get(), word[ids] + pos, rtol=0, atol=1e-6)
        except BaseException as exc:  # noqa: BLE001 (reported by the test)
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)  # a guard against a hang, not a timing check
        assert not t.is_alive()
    assert not errors, errors
    dev.close()


@pytest.mark.parametrize('algo', ['auto', 'im2col', 'implicit', 'direct'])
def test_conv2d_fused_epilogue(device, rng, algo):
    """act(scale * conv + bias + residual): a folded BatchNorm and a skip connection, the residual
    from the host in float16 and on the device as the output itself (in place)."""
    x, w = uniform(rng, (2, 6, 9, 11)), uniform(rng, (8, 6, 3, 3))
    scale, bias = uniform(rng, (8,), lo=-2, hi=2), uniform(rng, (8,))
    res = uniform(rng, (2, 8, 9, 11)).astype(np.float16)
    got = tessera.conv2d(x, w, bias, padding=1, scale=scale, residual=res, activation='relu', algo=algo)
    conv = conv2d_ref(x, w, None, (1, 1), (1, 1), (1, 1), 1)
    want = act_ref(conv * scale[None, :, None, None] + bias[None, :, None, None] + res.astype(np.float64), 'relu')
    assert_close(got, want, 1e-5, 'fused conv2d %s' % algo)
    y = tessera.to_device(res.astype(np.float32))  # the residual is the output: read before written
    assert tessera.conv2d(x, w, padding=1, scale=scale, residual=y, out=y, algo=algo) is y
    assert_close(y.get(), conv * scale[None, :, None, None] + res.astype(np.float64), 1e-5, 'in place %s' % algo)


def test_conv2d_epilogue_bad_input(device, rng):
    x, w = uniform(rng, (1, 3, 6, 6)), uniform(rng, (4, 3, 3, 3))
    out = np.full((1, 4, 4, 4), 5.0, np.float32)
    for call, words in [
        (lambda: tessera.conv2d(x, w, scale=uniform(rng, (5,)), out=out), 'scale'),
        (lambda: tessera.conv2d(x, w, scale=np.ones(4, np.float16), out=out), 'scale'),
        (lambda: tessera.conv2d(x, w, residual=uniform(rng, (1, 4, 4, 5)), out=out), 'residual'),
    ]:
        with pytest.raises(tessera.TesseraError) as info:
            call()
        assert words in str(info.value), str(info.value)
        assert np.all(out == 5.0)


def test_conv2d_repeats_replay_and_stay_correct(rng):
    """conv2d repeated on the same device-resident tensors replays its C call (found by the argument
    objects, or by the tensors and scalars): new contents of x and of constant weights, another
    stride, padding, epilogue or algorithm, the output as its own residual (each repeat adds what the
    last one wrote), a pair of bools where ints were (refused even after the ints' call was
    learned), a released weight array and a closed device are all honoured."""
    dev = tessera.Device('cpu')
    x, w = uniform(rng, (2, 6, 9, 11)), uniform(rng, (8, 6, 3, 3))
    scale, bias = uniform(rng, (8,), lo=-2, hi=2), uniform(rng, (8,))
    dx, dw, ds, db = (tessera.to_device(t, device=dev) for t in (x, w, scale, bias))
    dw.set_constant()
    ref = {}

    def want(stride, padding, epilogue):
        key = (x.tobytes(), w.tobytes(), stride, padding)
        if key not in ref:
            ref[key] = conv2d_ref(x, w, None, (stride, stride), (padding, padding), (1, 1), 1)
        conv = ref[key]
        if epilogue:
            conv = act_ref(conv * scale[None, :, None, None] + bias[None, :, None, None], 'relu')
        return conv

    outs = {}
    for stride, padding, epilogue, algo in ((1, 1, False, 'auto'), (2, 1, False, 'auto'), (1, 0, True, 'auto'),
                                            (1, 1, True, 'implicit'), (1, 1, False, 'auto')):
        shape = want(stride, padding, epilogue).shape
        dy = outs.setdefault(shape, tessera.empty(shape, device=dev))
        for _ in range(3):
            kw = dict(scale=ds, activation='relu') if epilogue else {}
            got = tessera.conv2d(dx, dw, db if epilogue else None, stride, padding, out=dy, algo=algo, device=dev,
                                 **kw)
            assert got is dy
            assert_close(dy.get(), want(stride, padding, epilogue), 1e-5,
                         'conv2d repeated (stride %d, padding %d, epilogue %s, %s)' % (stride, padding, epilogue, algo))
    x = uniform(rng, (2, 6, 9, 11))
    dx.set(x)  # new contents, same buffer: the replay reads them
    w = uniform(rng, (8, 6, 3, 3))
    dw.set(w)  # constant weights rewritten: their kept copy is made again
    dy = outs[want(1, 1, False).shape]
    for _ in range(2):
        tessera.conv2d(dx, dw, None, 1, 1, out=dy, device=dev)
        assert_close(dy.get(), want(1, 1, False), 1e-5, 'conv2d repeated on new x and weights')
    state = dy.get().astype(np.float64)
    for _ in range(3):  # the output as its own residual: each repeat reads what the last one wrote
        tessera.conv2d(dx, dw, None, 1, 1, residual=dy, out=dy, device=dev)
        state = state + want(1, 1, False)
        assert_close(dy.get(), state, 1e-5, 'conv2d repeated in place')
    dy.set(np.full(dy.shape, 7.0, np.float32))
    with pytest.raises(tessera.InvalidArgument, match='stride'):
        tessera.conv2d(dx, dw, None, (True, True), 1, out=dy, device=dev)
    with pytest.raises(tessera.InvalidArgument, match='padding'):
        tessera.conv2d(dx, dw, None, 1, (True, 1), out=dy, device=dev)
    assert np.all(dy.get() == 7.0)
    dw.release()
    with pytest.raises(tessera.TesseraError, match='released'):
        tessera.conv2d(dx, dw, None, 1, 1, out=dy, device=dev)
    w2 = tessera.to_device(w, device=dev)
    tessera.conv2d(dx, w2, None, 1, 1, out=dy, device=dev)
    assert_close(dy.get(), want(1, 1, False), 1e-5, 'conv2d on a new weight array')
    dev.close()
    with pytest.raises(tessera.TesseraError, match='closed'):
        tessera.conv2d(dx, w2, None, 1, 1, out=dy, device=dev)


@pytest.mark.parametrize('dtype', [np.float32, np.float16])
def test_conv2d_constant_weights_follow_writes(device, rng, dtype):
    """A weight Array marked constant (tessera keeps its transformed or widened copy): the result
    follows set(), an op writing the weights, and changed() after a write tessera did not make;
    unmarked, every write counts again (docs/conv.md, "Kept weights")."""
    x = uniform(rng, (1, 6, 12, 11)).astype(dtype)
    dx = tessera.to_device(x)

    def check(dw, w, what):
        got = tessera.conv2d(dx, dw, None, 1, 1, out_dtype=np.float32)
        want = conv2d_ref(x, w, None, (1, 1), (1, 1), (1, 1), 1)
        assert_close(got, want, 1e-5 if dtype == np.float32 else 2e-3, what)

    w = uniform(rng, (10, 6, 3, 3)).astype(dtype)
    dw = tessera.to_device(w).set_constant()
    check(dw, w, 'marked')
    check(dw, w, 'marked, again')
    w = uniform(rng, (10, 6, 3, 3)).astype(dtype)
    dw.set(w)
    check(dw, w, 'after set()')
    w = uniform(rng, (10, 6, 3, 3)).astype(dtype)
    tessera.gelu(tessera.to_device(w / 8), out=dw)  # an op's output into the weights
    w = dw.get()
    check(dw, w, "after an op's output")
    w = uniform(rng, (10, 6, 3, 3)).astype(dtype)
    dw.set(w).changed()
    check(dw, w, 'after changed()')
    dw.set_constant(False)
    w = uniform(rng, (10, 6, 3, 3)).astype(dtype)
    dw.set(w)
    check(dw, w, 'unmarked')
    with pytest.raises(tessera.InvalidArgument, match='constant'):
        dw.set_constant(1)
    dw.release()
    with pytest.raises(tessera.TesseraError):
        dw.set_constant()


def test_conv2d_constant_weights_views_and_lifetimes(rng):
    """set_constant() through a view marks the whole buffer: writes through the parent or through
    another view of it (set()) are seen; a released array or a closed device is refused by
    set_constant() and changed() with an exception, and the mark goes with the buffer."""
    dev = tessera.Device('cpu')
    x = uniform(rng, (1, 6, 12, 11)).astype(np.float16)  # 16-bit weights: every form keeps a widened copy
    dx = tessera.to_device(x, device=dev)

    def check(dw, w, what):
        got = tessera.conv2d(dx, dw, None, 1, 1, out_dtype=np.float32)
        want = conv2d_ref(x, w, None, (1, 1), (1, 1), (1, 1), 1)
        assert_close(got, want, 2e-3, what)

    ws = [uniform(rng, (10, 6, 3, 3)).astype(np.float16) for _ in range(2)]
    big = tessera.to_device(np.stack(ws), device=dev)
    view = big[1].set_constant()  # the mark covers big and every view of it
    check(view, ws[1], 'marked through a view')
    ws[1] = uniform(rng, (10, 6, 3, 3)).astype(np.float16)
    big.set(np.stack(ws))  # a write through the parent
    check(view, ws[1], "after the parent's set()")
    ws[1] = uniform(rng, (10, 6, 3, 3)).astype(np.float16)
    big[1].set(ws[1])  # through another view of the same buffer
    check(view, ws[1], "after another view's set()")
    big.set_constant(False)  # unmarked through the parent
    ws[1] = uniform(rng, (10, 6, 3, 3)).astype(np.float16)
    view.set(ws[1])
    check(view, ws[1], 'unmarked through the parent')
    view.set_constant()
    big.release()
    for call in (view.set_constant, view.changed, big.set_constant, big.changed):
        with pytest.raises(tessera.TesseraError, match='released'):
            call()
    dw = tessera.to_device(ws[0], device=dev).set_constant()
    check(dw, ws[0], 'a new buffer, marked')
    dev.close()
    for call in (dw.set_constant, dw.changed):
        with pytest.raises(tessera.TesseraError, match='closed'):
            call()
