"""tessera against torch.nn.functional on the same inputs: the conventions table of the README.
Runs when PyTorch is importable (it is too large for CI: see README); skipped, with the reason
in pytest's summary, otherwise."""
import numpy as np
import pytest

import tessera
from conftest import assert_close, uniform
from test_ops import CONV_CASES

torch = pytest.importorskip('torch', reason='PyTorch is not installed (pip install torch to run the comparison)')
F = torch.nn.functional


def t(x):
    return torch.from_numpy(np.ascontiguousarray(x))


@pytest.mark.parametrize('shape', [((64, 48), (48, 80)), ((3, 17, 40), (40, 9)), ((2, 4, 33, 16), (2, 4, 16, 21))])
def test_matmul(device, rng, shape):
    a, b = uniform(rng, shape[0]), uniform(rng, shape[1])
    assert_close(tessera.matmul(a, b), torch.matmul(t(a), t(b)).numpy(), 1e-5, 'matmul')
    w, bias = uniform(rng, (30, shape[0][-1])), uniform(rng, (30,))
    assert_close(tessera.gemm(a, w, trans_b=True, bias=bias, activation='gelu'),
                 F.gelu(F.linear(t(a), t(w), t(bias))).numpy(), 1e-5, 'linear + gelu')


@pytest.mark.parametrize('approximate', ['none', 'tanh'])
def test_gelu(device, rng, approximate):
    x = uniform(rng, (4096,), lo=-10, hi=10)
    assert_close(tessera.gelu(x, approximate=approximate), F.gelu(t(x), approximate=approximate).numpy(), 2e-6,
                 'gelu')
    # the one documented difference: GELU(-inf) is -0 in tessera, NaN in PyTorch
    special = np.array([-np.inf, np.inf], np.float32)
    ours, theirs = tessera.gelu(special, approximate=approximate), F.gelu(t(special), approximate=approximate).numpy()
    assert ours[0] == 0 and np.signbit(ours[0]) and ours[1] == np.inf
    assert np.isnan(theirs[0]) and theirs[1] == np.inf


@pytest.mark.parametrize('case', range(len(CONV_CASES)))
def test_conv2d(device, rng, case):
    xs, ws, stride, padding, dilation, groups = CONV_CASES[case]
    x, w, bias = uniform(rng, xs), uniform(rng, ws), uniform(rng, (ws[0],))
    want = F.conv2d(t(x), t(w), t(bias), stride, padding, dilation, groups).numpy()
    assert_close(tessera.conv2d(x, w, bias, stride, padding, dilation, groups), want, 1e-5, 'conv2d')
    if stride == (1, 1) and all(d * (k - 1) % 2 == 0 for d, k in zip(dilation, ws[2:])):
        assert_close(tessera.conv2d(x, w, bias, padding='same', dilation=dilation, groups=groups),
                     F.conv2d(t(x), t(w), t(bias), padding='same', dilation=dilation, groups=groups).numpy(),
                     1e-5, 'same')


def lower_right_mask(lq, lk):
    """PyTorch's causal_lower_right as a boolean mask (True: attend)."""
    return torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=lk - lq)


@pytest.mark.parametrize('lq,lk', [(40, 40), (16, 48), (48, 40)])
def test_attention_conventions(device, rng, lq, lk):
    b, h, d = 2, 4, 32
    q, k, v = uniform(rng, (b, h, lq, d)), uniform(rng, (b, h, lk, d)), uniform(rng, (b, h, lk, d))
    sdpa = F.scaled_dot_product_attention
    # no mask
    assert_close(tessera.attention(q, k, v), sdpa(t(q), t(k), t(v)).numpy(), 2e-5, 'plain')
    # top_left is PyTorch's is_causal=True (query i sees keys j <= i)
    assert_close(tessera.attention(q, k, v, causal='top_left'), sdpa(t(q), t(k), t(v), is_causal=True).numpy(),
                 2e-5, 'top_left vs is_causal=True')
    # bottom_right (tessera's causal=True) is causal_lower_right (j <= i + Lk - Lq)
    if lq <= lk:  # with Lq > Lk its first Lq - Lk rows see no key: PyTorch gives NaN there, tessera 0
        want = sdpa(t(q), t(k), t(v), attn_mask=lower_right_mask(lq, lk)).numpy()
        assert_close(tessera.attention(q, k, v, causal=True), want, 2e-5, 'bottom_right')
        try:
            from torch.nn.attention.bias import causal_lower_right
            assert_close(tessera.attention(q, k, v, causal='bottom_right'),
                         sdpa(t(q), t(k), t(v), attn_mask=causal_lower_right(lq, lk)).numpy(), 2e-5,
                         'causal_lower_right')
        except ImportError:
            pass
    else:
        ours = tessera.attention(q, k, v, causal=True)
        theirs = sdpa(t(q), t(k), t(v), attn_mask=lower_right_mask(lq, lk)).numpy()
        blind = lq - lk
        # rows that see no key: tessera writes 0; PyTorch 2.15's CPU kernel (measured here) writes
        # 0 too, other versions and backends NaN, so either is accepted from it
        assert np.all(ours[:, :, :blind] == 0)
        assert np.all(np.isnan(theirs[:, :, :blind])) or np.all(theirs[:, :, :blind] == 0)
        assert_close(ours[:, :, blind:], theirs[:, :, blind:], 2e-5, 'bottom_right, rows that see keys')


def test_attention_kv_lengths_with_causal(device, rng):
    """Padding at the end (kv_lengths) with the causal diagonal anchored at Lk, the tensor's
    length, for every batch entry (not at each entry's own length)."""
    b, h, lq, lk, d = 3, 2, 12, 30, 16
    q, k, v = uniform(rng, (b, h, lq, d)), uniform(rng, (b, h, lk, d)), uniform(rng, (b, h, lk, d))
    lens = [30, 25, 19]
    j = torch.arange(lk)
    masks = torch.stack([lower_right_mask(lq, lk) & (j < n)[None, :] for n in lens])[:, None]
    want = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=masks).numpy()
    assert_close(tessera.attention(q, k, v, causal=True, kv_lengths=lens), want, 2e-5, 'kv_lengths + causal')
    masks = torch.stack([torch.ones(lq, lk, dtype=torch.bool).tril() & (j < n)[None, :] for n in lens])[:, None]
    want = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=masks).numpy()
    assert_close(tessera.attention(q, k, v, causal='top_left', kv_lengths=lens), want, 2e-5, 'kv_lengths + top_left')


def test_layernorm_and_embedding(device, rng):
    x, r = uniform(rng, (4, 9, 384), lo=-2, hi=3), uniform(rng, (4, 9, 384))
    g, b = uniform(rng, (384,)), uniform(rng, (384,))
    want = F.layer_norm(t(x) + t(r), (384,), t(g), t(b), eps=1e-12).numpy()
    assert_close(tessera.layernorm(x, g, b, residual=r, eps=1e-12), want, 1e-5, 'layer_norm')
    assert_close(tessera.layernorm(x, g, b), F.layer_norm(t(x), (384,), t(g), t(b)).numpy(), 1e-5, 'default eps')
    word, pos = uniform(rng, (100, 32)), uniform(rng, (20, 32))
    ids = rng.integers(0, 100, (2, 20))
    want = (F.embedding(torch.from_numpy(ids), t(word)) + t(pos)[None]).numpy()
    assert_close(tessera.embedding(ids, word, pos), want, 1e-6, 'embedding')
