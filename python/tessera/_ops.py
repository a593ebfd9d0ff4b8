"""The ops besides the GEMM (_gemm.py): gelu, conv2d, pooling, attention, layernorm and embedding on NumPy
arrays, tessera.Arrays and pyopencl arrays. Shapes and strides come from the arrays; outputs are
allocated when not given, of the kind of the inputs (pyopencl in, pyopencl out; tessera.Array in
or keep_on_device=True, tessera.Array out; otherwise NumPy)."""
import math

import numpy as np

from . import _args
from ._call import Call, result_dtype
from ._array import _contiguous_strides
from ._errors import _cl_check, _invalid
from ._gemm import _activation, _merged_stride, gemm, matmul  # noqa: F401 (the package's ops, one import)
from ._gemm import _Replay, _fast_call, _remember, _replayable, _replays, _tensors_key
from ._tessera_cffi import ffi, lib

__all__ = ['gemm', 'matmul', 'gelu', 'conv2d', 'max_pool2d', 'avg_pool2d', 'adaptive_avg_pool2d', 'attention',
           'layernorm', 'embedding']


_out_dtype = result_dtype


# ------------------------------------------------------------------ GELU

_GELU_MODES = {'none': lib.TSR_GELU_ERF, 'erf': lib.TSR_GELU_ERF, 'tanh': lib.TSR_GELU_TANH}


def gelu(x, out=None, *, approximate='none', out_dtype=None, device=None, keep_on_device=False):
    """GELU elementwise, PyTorch's definitions: approximate="none" (erf, the default) or "tanh".
    x any shape, contiguous (NumPy inputs are copied as needed); out may be x (in place).
    Unlike PyTorch, GELU(-inf) is -0, not NaN."""
    if out is not None:  # a repeat on the same objects: found by their identity (see _gemm.py)
        fkey = (id(x), id(out), approximate, out_dtype, id(device), keep_on_device, type(keep_on_device))
        return _fast_call(fkey, (x, out, device), out, _gelu, x, out, approximate, out_dtype, device, keep_on_device)
    return _gelu(x, out, approximate, out_dtype, device, keep_on_device)


def _gelu(x, out, approximate, out_dtype, device, keep_on_device):
    mode = _args.choice(approximate, 'approximate', _GELU_MODES, '"none" or "tanh"')
    # a repeat on the same device-resident tensors replays the C call (see _gemm.py)
    key = _tensors_key((x, out), device, ('gelu', mode)) if out is not None and type(keep_on_device) is bool else None
    if key is not None:
        entry = _replays.get(key)
        if entry is not None and entry.replay():
            return out
    with Call(device, (x, out), keep_on_device, op='gelu') as call:
        X = call.operand(x, 'x', contiguous=True)
        if out is not None and out is x and X.kind != 'numpy':
            Y = X
            Y.result = out
        else:
            Y = call.output(out, X.shape, _out_dtype(out, out_dtype, X.dtype))
            if Y.kind != 'numpy' and tuple(Y.strides) != _contiguous_strides(Y.shape) and min(Y.shape, default=1) > 0:
                raise _invalid('out must be contiguous')
        n = math.prod(X.shape)
        if n:
            desc = ffi.new('tsr_gelu_desc *', {'mode': mode, 'n': n, 'x_type': X.tsr_type, 'y_type': Y.tsr_type,
                                               'x_offset': X.offset, 'y_offset': Y.offset})
            args = (call.handle, desc, X.mem, Y.mem, call.queue, ffi.NULL)
            call.check(lib.tsr_gelu(*args))
            if key is not None and _replayable(call):
                _remember(key, _Replay(call, [args], (X, Y), lib.tsr_gelu))
        return call.finish(Y)


# ------------------------------------------------------------------ conv2d

def _pair(value, name, least):
    if isinstance(value, (tuple, list)) and len(value) == 2:
        pair = tuple(_args.integer(v, name, high=_INT_MAX) for v in value)
    elif isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        pair = (int(value), int(value))
    else:
        raise _invalid('%s must be an int or a pair of ints, not %r' % (name, value))
    if min(pair) < least or max(pair) > _INT_MAX:
        raise _invalid('%s must be in %d..%d, not %r' % (name, least, _INT_MAX, pair))
    return pair


_INT_MAX = 2 ** 31 - 1
_ALGOS = {'auto': lib.TSR_CONV_AUTO, 'im2col': lib.TSR_CONV_IM2COL, 'implicit': lib.TSR_CONV_IMPLICIT,
          'direct': lib.TSR_CONV_DIRECT}


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, scale=None, residual=None,
           activation=None, algo='auto', layout='nchw', out=None, out_dtype=None, device=None,
           keep_on_device=False):
    """torch.nn.functional.conv2d's semantics: x [N, C, H, W], weight [O, C/groups, kh, kw],
    bias [O] (fp32) or None, stride/padding/dilation an int or a pair (padding also "valid", or
    "same" where it is symmetric), with a fused epilogue in the same pass over the output:
        y = activation(scale[k] * conv + bias[k] + residual[n, k, i, j])
    scale [O] fp32 or None (a BatchNorm folded in: scale = gamma / sqrt(var + eps), bias = beta -
    mean * scale), residual a tensor of the output's shape in any storage dtype, or None (it may be
    out itself, in place), activation None, "relu", "gelu" or "gelu_tanh". Contiguous NCHW/OIHW
    tensors, or with layout="nhwc" x [N, H, W, C], residual and the output [N, OH, OW, O] (weight
    stays OIHW; computed in NCHW between transposes); algo "auto" (tuned), "im2col", "implicit" or
    "direct"."""
    if out is not None:  # a repeat on the same objects: found by their identity (see _gemm.py)
        fkey = ('conv2d', id(x), id(weight), id(bias), id(scale), id(residual), id(out), _typed(stride),
                _typed(padding), _typed(dilation), _typed(groups), _typed(activation), _typed(algo),
                _typed(layout), out_dtype, id(device), keep_on_device, type(keep_on_device))
        return _fast_call(fkey, (x, weight, bias, scale, residual, out, device), out, _conv2d, x, weight, bias,
                          stride, padding, dilation, groups, scale, residual, activation, algo, layout, out,
                          out_dtype, device, keep_on_device)
    return _conv2d(x, weight, bias, stride, padding, dilation, groups, scale, residual, activation, algo, layout,
                   out, out_dtype, device, keep_on_device)


def _typed(value):
    """A scalar argument with its type (and a pair's with theirs) for a fast-path key, so that a
    value the full path refuses (True for 1) never matches one it took; a list stays a list
    (unhashable: such a call goes the full way)."""
    if type(value) is tuple:
        return tuple((v, type(v)) for v in value)
    return value, type(value)


def _conv2d(x, weight, bias, stride, padding, dilation, groups, scale, residual, activation, algo, layout, out,
            out_dtype, device, keep_on_device):
    algo = _args.choice(algo, 'algo', _ALGOS, 'one of %s' % ', '.join(_ALGOS))
    lay = _args.choice(layout, 'layout', _LAYOUTS, '"nchw" or "nhwc"')
    nhwc = lay == lib.TSR_NHWC
    act = _activation(activation)
    stride, dilation = _pair(stride, 'stride', 1), _pair(dilation, 'dilation', 1)
    groups = _args.integer(groups, 'groups', 1, _INT_MAX)
    if isinstance(padding, str) and padding not in ('valid', 'same'):
        raise _invalid('padding must be an int, a pair, "valid" or "same", not %r' % (padding,))
    # a repeat on the same device-resident tensors replays the C call (see _gemm.py)
    key = None
    if out is not None and type(keep_on_device) is bool:
        pad_key = padding if isinstance(padding, str) else _pair(padding, 'padding', 0)
        key = _tensors_key((x, weight, bias, scale, residual, out), device,
                           ('conv2d', stride, pad_key, dilation, groups, act, algo, lay))
        entry = _replays.get(key) if key is not None else None
        if entry is not None and entry.replay():
            return out
    with Call(device, (x, weight, bias, scale, residual, out), keep_on_device, op='conv2d') as call:
        X = call.operand(x, 'x', contiguous=True)
        W = call.operand(weight, 'weight', contiguous=True)
        if X.ndim != 4 or W.ndim != 4:
            raise _invalid('x and weight must be 4-D (%s, OIHW), not %s and %s'
                           % ('NHWC' if nhwc else 'NCHW', X.shape, W.shape))
        d = ffi.new('tsr_conv2d_desc *')
        d.layout = lay
        if nhwc:
            d.batch, d.in_height, d.in_width, d.in_channels = X.shape
        else:
            d.batch, d.in_channels, d.in_height, d.in_width = X.shape
        d.out_channels, cg, d.kernel_h, d.kernel_w = W.shape
        d.stride_h, d.stride_w = stride
        d.dilation_h, d.dilation_w = dilation
        d.groups = groups
        if cg * d.groups != d.in_channels:
            raise _invalid('weight has %d input channels per group, x has %d channels in %d groups'
                           % (cg, d.in_channels, d.groups))
        if isinstance(padding, str) and padding == 'valid':
            padding = 0
        elif isinstance(padding, str):  # "same"
            pads = []
            for k, dil, s in ((d.kernel_h, d.dilation_h, d.stride_h), (d.kernel_w, d.dilation_w, d.stride_w)):
                total = dil * (k - 1)
                if s != 1 or total % 2:
                    raise _invalid('padding="same" needs stride 1 and an even dilation*(kernel-1) here')
                pads.append(total // 2)
            padding = tuple(pads)
        d.pad_h, d.pad_w = _pair(padding, 'padding', 0)
        d.epilogue.activation = act
        d.algo = algo
        d.x_offset, d.w_offset = X.offset, W.offset
        d.x_type, d.w_type = X.tsr_type, W.tsr_type
        out_h, out_w = ffi.new('size_t *'), ffi.new('size_t *')
        call.check(lib.tsr_conv2d_output_size(d, out_h, out_w))
        B = S = R = None
        if bias is not None:
            B = call.operand(bias, 'bias', contiguous=True)
            if B.dtype != np.float32 or B.shape != (d.out_channels,):
                raise _invalid('bias must be float32 of shape [%d], not %s %s' % (d.out_channels, B.dtype, B.shape))
            d.epilogue.bias = B.mem
            d.epilogue.bias_offset = B.offset
        if scale is not None:
            S = call.operand(scale, 'scale', contiguous=True)
            if S.dtype != np.float32 or S.shape != (d.out_channels,):
                raise _invalid('scale must be float32 of shape [%d], not %s %s' % (d.out_channels, S.dtype, S.shape))
            d.epilogue.scale = S.mem
            d.epilogue.scale_offset = S.offset
        shape = (d.batch, out_h[0], out_w[0], d.out_channels) if nhwc else (d.batch, d.out_channels, out_h[0], out_w[0])
        if residual is not None:
            R = call.operand(residual, 'residual', contiguous=True)
            if tuple(R.shape) != shape:
                raise _invalid("residual must have the output's shape %s, not %s" % (list(shape), list(R.shape)))
            d.epilogue.residual = R.mem
            d.epilogue.residual_offset = R.offset
            d.epilogue.residual_type = R.tsr_type
        Y = call.output(out, shape, _out_dtype(out, out_dtype, X.dtype))
        if Y.kind != 'numpy' and tuple(Y.strides) != _contiguous_strides(shape) and min(shape) > 0:
            raise _invalid('out must be contiguous %s' % ('NHWC' if nhwc else 'NCHW'))
        d.y_offset, d.y_type = Y.offset, Y.tsr_type
        if min(shape) > 0:
            args = (call.handle, d, X.mem, W.mem, Y.mem, call.queue, ffi.NULL)
            call.check(lib.tsr_conv2d(*args))
            if key is not None and _replayable(call):
                _remember(key, _Replay(call, [args], (X, W, B, S, R, Y), lib.tsr_conv2d))
        return call.finish(Y)


# ------------------------------------------------------------------ pooling

_LAYOUTS = {'nchw': lib.TSR_NCHW, 'nhwc': lib.TSR_NHWC}


def _pool2d(op, kind, x, kernel_size, stride, padding, dilation, ceil_mode, count_include_pad, layout, out,
            out_dtype, device, keep_on_device):
    args = (op, kind, x, kernel_size, stride, padding, dilation, ceil_mode, count_include_pad, layout, out, out_dtype,
            device, keep_on_device)
    if out is not None:  # a repeat on the same objects: found by their identity (see _gemm.py)
        fkey = (op, id(x), id(out), _typed(kernel_size), _typed(stride), _typed(padding), _typed(dilation),
                _typed(ceil_mode), _typed(count_include_pad), _typed(layout), out_dtype, id(device), keep_on_device,
                type(keep_on_device))
        return _fast_call(fkey, (x, out, device), out, _pool2d_full, *args)
    return _pool2d_full(*args)


def _pool2d_full(op, kind, x, kernel_size, stride, padding, dilation, ceil_mode, count_include_pad, layout, out,
                 out_dtype, device, keep_on_device):
    lay = _args.choice(layout, 'layout', _LAYOUTS, '"nchw" or "nhwc"')
    kernel = _pair(kernel_size, 'kernel_size', 1)
    # stride None (or PyTorch's empty list): the kernel size
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) \
        else _pair(stride, 'stride', 1)
    padding, dilation = _pair(padding, 'padding', 0), _pair(dilation, 'dilation', 1)
    ceil_mode = _args.flag(ceil_mode, 'ceil_mode')
    count_include_pad = _args.flag(count_include_pad, 'count_include_pad')
    # a repeat on the same device-resident tensors replays the C call (see _gemm.py)
    key = None
    if out is not None and type(keep_on_device) is bool:
        key = _tensors_key((x, out), device, (op, kind, kernel, stride, padding, dilation, ceil_mode,
                                              count_include_pad, lay))
        entry = _replays.get(key) if key is not None else None
        if entry is not None and entry.replay():
            return out
    with Call(device, (x, out), keep_on_device, op=op) as call:
        X = call.operand(x, 'x', contiguous=True)
        if X.ndim != 4:
            raise _invalid('x must be 4-D (%s), not %s' % ('NCHW' if lay == lib.TSR_NCHW else 'NHWC', X.shape))
        d = ffi.new('tsr_pool2d_desc *')
        d.kind, d.layout = kind, lay
        if lay == lib.TSR_NCHW:
            d.batch, d.channels, d.in_height, d.in_width = X.shape
        else:
            d.batch, d.in_height, d.in_width, d.channels = X.shape
        d.kernel_h, d.kernel_w = kernel
        d.stride_h, d.stride_w = stride
        d.pad_h, d.pad_w = padding
        d.dilation_h, d.dilation_w = dilation
        d.ceil_mode, d.exclude_pad = int(ceil_mode), int(not count_include_pad)
        d.x_offset, d.x_type = X.offset, X.tsr_type
        if min(X.shape) == 0:
            raise _invalid('x must not be empty, got shape %s' % (X.shape,))
        out_h, out_w = ffi.new('size_t *'), ffi.new('size_t *')
        call.check(lib.tsr_pool2d_output_size(d, out_h, out_w))
        shape = ((d.batch, d.channels, out_h[0], out_w[0]) if lay == lib.TSR_NCHW
                 else (d.batch, out_h[0], out_w[0], d.channels))
        Y = call.output(out, shape, _out_dtype(out, out_dtype, X.dtype))
        if Y.kind != 'numpy' and tuple(Y.strides) != _contiguous_strides(shape):
            raise _invalid('out must be contiguous %s' % layout.upper())
        d.y_offset, d.y_type = Y.offset, Y.tsr_type
        args = (call.handle, d, X.mem, Y.mem, call.queue, ffi.NULL)
        call.check(lib.tsr_pool2d(*args))
        if key is not None and _replayable(call):
            _remember(key, _Replay(call, [args], (X, Y), lib.tsr_pool2d))
        return call.finish(Y)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, *, layout='nchw', out=None,
               out_dtype=None, device=None, keep_on_device=False):
    """torch.nn.functional.max_pool2d's semantics (return_indices aside): x [N, C, H, W] (layout
    "nchw") or [N, H, W, C] ("nhwc", channels_last), contiguous; kernel_size, stride (None: the
    kernel), padding (at most half the kernel) and dilation an int or a pair; ceil_mode as PyTorch.
    NaN propagates; f16/bf16 storage (fp32 arithmetic); out in the same layout."""
    return _pool2d('max_pool2d', lib.TSR_POOL_MAX, x, kernel_size, stride, padding, dilation, ceil_mode, True,
                   layout, out, out_dtype, device, keep_on_device)


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, *, layout='nchw',
               out=None, out_dtype=None, device=None, keep_on_device=False):
    """torch.nn.functional.avg_pool2d's semantics (divisor_override aside): as max_pool2d, with
    count_include_pad (padded zeros count in the divisor; the ceil-mode overhang does not)."""
    return _pool2d('avg_pool2d', lib.TSR_POOL_AVG, x, kernel_size, stride, padding, 1, ceil_mode,
                   count_include_pad, layout, out, out_dtype, device, keep_on_device)


def adaptive_avg_pool2d(x, output_size, *, layout='nchw', out=None, out_dtype=None, device=None,
                        keep_on_device=False):
    """torch.nn.functional.adaptive_avg_pool2d for output_size 1 or (1, 1) only: global average
    pooling (one reduction per image and channel), output [N, C, 1, 1] (or [N, 1, 1, C])."""
    if not (output_size == 1 or (isinstance(output_size, (tuple, list)) and tuple(output_size) == (1, 1))) \
            or isinstance(output_size, bool):
        raise _invalid('output_size must be 1 or (1, 1) (global average pooling), not %r' % (output_size,))
    lay = _args.choice(layout, 'layout', _LAYOUTS, '"nchw" or "nhwc"')
    shape = getattr(x, 'shape', None)
    if shape is None or len(shape) != 4:
        raise _invalid('x must be 4-D, not %r' % (shape,))
    h, w = (shape[2], shape[3]) if lay == lib.TSR_NCHW else (shape[1], shape[2])
    return _pool2d('adaptive_avg_pool2d', lib.TSR_POOL_AVG, x, (h, w), None, 0, 1, False, True, layout, out,
                   out_dtype, device, keep_on_device)


# ------------------------------------------------------------------ attention

_CAUSAL = {False: None, None: None, True: 'bottom_right', 'bottom_right': 'bottom_right', 'top_left': 'top_left'}


def _heads(op, role):
    """(B, H, L, D) and (batch, head, row) element strides of a [B, H, L, D] (or [H, L, D]) operand."""
    if op.ndim == 3:
        shape, strides = (1,) + op.shape, (0,) + tuple(op.strides)
    elif op.ndim == 4:
        shape, strides = op.shape, tuple(op.strides)
    else:
        raise _invalid('%s must be [B, H, L, D] or [H, L, D], not %s' % (role, op.shape))
    if strides[3] != 1 and shape[3] > 1:
        raise _invalid('%s: head_dim elements must be contiguous (element strides %s)' % (role, strides))
    return shape, strides[:3]


def _scale(scale):
    """The softmax scale as the C call takes it: None is the default 1/sqrt(D) (0.0 in the C
    descriptor); 0 itself is refused, since the C API would read it as that default."""
    if scale is None:
        return 0.0
    scale = _args.c_float(scale, 'scale')
    if np.float32(scale) == 0:
        raise _invalid('scale=%r: 0 (or a value that is 0 as a float32) is refused, because the C API reads 0 as '
                       'the default; pass scale=None for 1/sqrt(head_dim)' % (scale,))
    return scale


def _gqa_shapes(qshape, kshape, vshape, role='shapes disagree'):
    """Check q [B, H, Lq, D] against k and v [B, Hkv, Lk, D]; returns the query heads per key head."""
    (b, h, _, d), (bk, hk, lk, dk), (bv, hv, lv, dv) = qshape, kshape, vshape
    if bk != b or bv != b or (hv, lv) != (hk, lk) or dk != d:
        raise _invalid('%s: q %s, k %s, v %s (q [B,H,Lq,D], k and v [B,Hkv,Lk,D])' % (role, qshape, kshape, vshape))
    if dv != d:
        raise _invalid('%s: v has head size %d, q and k %d (a value head size other than the query\'s is not '
                       'supported)' % (role, dv, d))
    if hk == 0 or h % hk:
        raise _invalid('%s: q has %d heads, k and v %d (grouped-query attention needs the key heads to divide the '
                       'query heads)' % (role, h, hk))
    return h // hk


def attention(q, k, v, *, causal=False, kv_lengths=None, scale=None, attn_mask=None, out=None, return_lse=False,
              out_dtype=None, device=None, keep_on_device=False):
    """softmax(scale q k^T + mask) v, blocked (flash-style), per batch entry and head.

    q [B, H, Lq, D], k and v [B, Hkv, Lk, D] (or without B), any strides over B, H and L (a
    [B, L, H, D] projection's .transpose(0, 2, 1, 3) is read in place), D contiguous. Hkv may
    divide H (grouped-query attention: query head i uses key head i // (H // Hkv), as PyTorch's
    enable_gqa=True); v's head size must be q's. scale: None is 1/sqrt(D); 0 is refused.
    causal: False; "bottom_right" (also True: query i sees keys j <= i + Lk - Lq, tessera's
    convention, PyTorch's causal_lower_right, for decoding with a KV cache); or "top_left"
    (j <= i, PyTorch's is_causal=True). kv_lengths: per batch entry the number of valid keys
    (padding at the end); the causal diagonal stays anchored at Lk, not at each entry's length.
    attn_mask is not supported (refused: use causal and kv_lengths). A query that sees no key
    gets zeros (PyTorch: NaN); a NaN score gives its row NaN, as NumPy's softmax does.
    return_lse: also the per-row log-sum-exp [B, H, Lq] (fp32; -inf for rows that see no key)."""
    if attn_mask is not None:
        raise _invalid('attn_mask is not supported: tessera masks with causal= (bottom_right or top_left) and '
                       'kv_lengths= (padding at the end of each batch entry\'s keys)')
    align = _args.choice(causal, 'causal', _CAUSAL, 'False, True, "bottom_right" or "top_left"')
    return_lse = _args.flag(return_lse, 'return_lse')
    c_scale = _scale(scale)
    # replayed as gelu is, without key lengths or the log-sum-exp (their arrays are the caller's)
    key = None
    if out is not None and kv_lengths is None and not return_lse:
        key = _tensors_key((q, k, v, out), device, ('attention', align, c_scale))
        entry = _replays.get(key) if key is not None else None
        if entry is not None and entry.replay():
            return out
    with Call(device, (q, k, v, out), keep_on_device, op='attention') as call:
        Q, K, V = call.operand(q, 'q'), call.operand(k, 'k'), call.operand(v, 'v')
        (b, h, lq, dq), qs = _heads(Q, 'q')
        (bk, hk, lk, dk), ks = _heads(K, 'k')
        vshape, vs = _heads(V, 'v')
        group = _gqa_shapes((b, h, lq, dq), (bk, hk, lk, dk), vshape)
        O = call.output(out, Q.shape, _out_dtype(out, out_dtype, Q.dtype))
        _, os_ = _heads(O, 'out')
        lens = _args.counts(kv_lengths, 'kv_lengths', b, 0, lk) if kv_lengths is not None else None
        lse = call.output(None, Q.shape[:-1], np.float32, role='lse') if return_lse else None
        if b * h * lq == 0:
            return call.finish(O, lse) if return_lse else call.finish(O)
        # query heads r, r + group, ...: one call per r over the key heads (grouped-query
        # attention), or, with one key head, a head stride of 0 in k and v and a single call
        heads = [(0, 1, h)]
        if group > 1 and hk == 1 and (ks[0], ks[2]) != (0, 0) and (vs[0], vs[2]) != (0, 0):
            ks, vs = (ks[0], 0, ks[2]), (vs[0], 0, vs[2])
        elif group > 1:
            heads = [(r, group, hk) for r in range(group)]
        if align != 'top_left' or lq == lk:
            parts = [(0, lq, lk, align is not None, lens)]
        elif lq < lk:
            # top-left: query i sees keys j <= i < Lq, so the keys past Lq are never seen and the
            # call on the first Lq keys, bottom-right aligned (shift 0), is the same mask
            parts = [(0, lq, lq, True, [min(x, lq) for x in lens] if lens else None)]
        else:
            # Lq > Lk: rows below Lk are causal on all Lk keys (shift 0); the later rows see every key
            parts = [(0, lk, lk, True, lens), (lk, lq - lk, lk, False, lens)]
            parts = [part for part in parts if part[1]]
        direct = len(heads) == 1 and len(parts) == 1  # lse written in place, else through scratch rows
        copies, made = [], []
        for r, step, nheads in heads:
            for first, rows, kv_len, flag, lengths in parts:
                d = ffi.new('tsr_attention_desc *')
                d.batch, d.heads, d.q_len, d.kv_len, d.head_dim = b, nheads, rows, kv_len, dq
                d.q_offset = Q.offset + r * qs[1] + first * qs[2]
                d.o_offset = O.offset + r * os_[1] + first * os_[2]
                d.k_offset, d.v_offset = K.offset, V.offset
                d.q_strides, d.o_strides = [qs[0], qs[1] * step, qs[2]], [os_[0], os_[1] * step, os_[2]]
                d.k_strides, d.v_strides = list(ks), list(vs)
                d.scale = c_scale
                d.causal = flag
                keep = ffi.new('int[]', lengths) if lengths is not None else None
                if keep is not None:
                    d.kv_lengths = keep
                part_lse = None
                if return_lse:
                    part_lse = lse if direct else call.scratch((b, nheads, rows))
                    d.lse, d.lse_offset = part_lse.mem, part_lse.offset
                    if not direct:
                        copies.append((part_lse, r, step, nheads, first, rows))
                d.q_type, d.k_type, d.v_type, d.o_type = Q.tsr_type, K.tsr_type, V.tsr_type, O.tsr_type
                args = (call.handle, d, Q.mem, K.mem, V.mem, O.mem, call.queue, ffi.NULL)
                call.check(lib.tsr_attention(*args))
                made.append(args)
        if key is not None and not copies and _replayable(call):
            _remember(key, _Replay(call, made, (Q, K, V, O), lib.tsr_attention))
        if copies:
            call.barrier()
            for src, r, step, nheads, first, rows in copies:
                _copy_lse(call, src, lse, b, h, lq, r, step, nheads, first, rows)
        return call.finish(O, lse) if return_lse else call.finish(O)


def _copy_lse(call, src, dst, b, h, lq, r, step, nheads, first, rows):
    """dst[bi, r + j * step, first + i] = src[bi, j, i] for bi < b, j < nheads, i < rows: the
    scratch log-sum-exp rows of one call into [B, H, Lq] (fp32, on the device)."""
    src_origin = ffi.new('size_t[3]', [src.offset * 4, 0, 0])
    dst_origin = ffi.new('size_t[3]', [(dst.offset + r * lq + first) * 4, 0, 0])
    region = ffi.new('size_t[3]', [rows * 4, nheads, b])
    _cl_check(lib.clEnqueueCopyBufferRect(call.queue, src.mem, dst.mem, src_origin, dst_origin, region, rows * 4,
                                          nheads * rows * 4, step * lq * 4, h * lq * 4, 0, ffi.NULL, ffi.NULL),
              'clEnqueueCopyBufferRect')


# ------------------------------------------------------------------ LayerNorm, embedding

def _rows(op, role, cols):
    """(rows, row stride) of a [..., cols] operand whose leading dimensions merge into rows."""
    if op.ndim < 1 or op.shape[-1] != cols:
        raise _invalid('%s has shape %s: [..., %d] expected' % (role, op.shape, cols))
    if op.strides[-1] != 1 and cols > 1:
        raise _invalid('%s: the last dimension must be contiguous (element strides %s)' % (role, op.strides))
    lead = op.shape[:-1]
    rows = math.prod(lead)
    stride = _merged_stride(lead, op.strides[:-1], role, 'leading dimensions')
    if stride is None:
        stride = cols
    if rows > 1 and stride < cols:
        raise _invalid('%s: rows overlap (row stride %d < %d columns)' % (role, stride, cols))
    return rows, stride


def layernorm(x, weight, bias, *, residual=None, eps=1e-5, out=None, out_dtype=None, device=None,
              keep_on_device=False):
    """torch.nn.functional.layer_norm(x + residual, (cols,), weight, bias, eps) over the last
    dimension, fused (one pass, fp32 arithmetic). x and residual [..., cols], weight and bias [cols]
    fp32, or None as in PyTorch (weight None: ones, bias None: zeros). eps: a finite number > 0.
    out may be x or residual themselves (in place, a transformer's Add & Norm)."""
    if out is not None:  # a repeat on the same objects: found by their identity (see _gemm.py)
        fkey = ('layernorm', id(x), id(weight), id(bias), id(residual), id(out), eps, type(eps), out_dtype,
                id(device), keep_on_device, type(keep_on_device))
        return _fast_call(fkey, (x, weight, bias, residual, out, device), out, _layernorm, x, weight, bias, residual, eps,
                          out, out_dtype, device, keep_on_device)
    return _layernorm(x, weight, bias, residual, eps, out, out_dtype, device, keep_on_device)


def _layernorm(x, weight, bias, residual, eps, out, out_dtype, device, keep_on_device):
    eps = _args.real(eps, 'eps', positive=True)
    key = None
    if out is not None and weight is not None and bias is not None and type(keep_on_device) is bool:  # as gelu
        key = _tensors_key((x, residual, weight, bias, out), device, ('layernorm', eps))
        entry = _replays.get(key) if key is not None else None
        if entry is not None and entry.replay():
            return out
    with Call(device, (x, residual, weight, bias, out), keep_on_device, op='layernorm') as call:
        X = call.operand(x, 'x')
        cols = X.shape[-1] if X.ndim else 0
        rows, x_stride = _rows(X, 'x', cols)
        R = None
        if residual is not None:
            R = call.operand(residual, 'residual')
            if R.shape != X.shape:
                raise _invalid('residual has shape %s, x %s' % (R.shape, X.shape))
            _, r_stride = _rows(R, 'residual', cols)
        G = call.operand(weight if weight is not None else np.ones(cols, np.float32), 'weight')
        B = call.operand(bias if bias is not None else np.zeros(cols, np.float32), 'bias')
        for op, role in ((G, 'weight'), (B, 'bias')):
            if op.shape != (cols,) or op.dtype != np.float32:
                raise _invalid('%s must be float32 of shape [%d], not %s %s' % (role, cols, op.dtype, op.shape))
            if op.strides != (1,) and cols > 1:
                raise _invalid('%s must be contiguous (element stride %d)' % (role, op.strides[0]))
        if out is not None and X.kind != 'numpy' and (out is x or out is residual):
            Y = X if out is x else R
            Y.result = out
        else:
            Y = call.output(out, X.shape, _out_dtype(out, out_dtype, X.dtype))
        _, y_stride = _rows(Y, 'out', cols)
        d = ffi.new('tsr_layernorm_desc *')
        d.rows, d.cols, d.eps = rows, cols, eps
        d.x_offset, d.gamma_offset, d.beta_offset, d.y_offset = X.offset, G.offset, B.offset, Y.offset
        d.x_stride, d.y_stride = x_stride, y_stride
        d.x_type, d.y_type = X.tsr_type, Y.tsr_type
        if R is not None:
            d.residual_offset, d.residual_stride, d.residual_type = R.offset, r_stride, R.tsr_type
        if rows:
            args = (call.handle, d, X.mem, R.mem if R is not None else ffi.NULL, G.mem, B.mem, Y.mem, call.queue,
                    ffi.NULL)
            call.check(lib.tsr_layernorm(*args))
            if key is not None and _replayable(call):
                _remember(key, _Replay(call, [args], (X, R, G, B, Y), lib.tsr_layernorm))
        return call.finish(Y)


def _host_ids(values, name, shape=None):
    """A host integer array (ids, type_ids) as contiguous int32, each in 0..INT32_MAX."""
    try:
        arr = np.asarray(values)
    except ValueError as exc:  # a ragged list
        raise _invalid('%s cannot be read as an array (%s)' % (name, exc)) from None
    if arr.dtype.kind not in 'iu' or arr.ndim not in (1, 2) or arr.size == 0:
        raise _invalid('%s must be a non-empty 1-D or 2-D integer array, not %s %s' % (name, arr.dtype, arr.shape))
    if shape is not None and arr.shape != shape:
        raise _invalid('%s has shape %s, ids %s' % (name, arr.shape, shape))
    flat = arr.reshape(-1)
    if arr.dtype == np.int32:  # every value fits; tsr_embedding checks each against its table's rows
        return arr.shape, np.ascontiguousarray(flat)
    bad = np.flatnonzero((flat < 0) | (flat > np.iinfo(np.int32).max))
    if bad.size:
        raise _invalid('embedding: %s[%d] = %d is outside 0..%s-1' % (name, bad[0], flat[bad[0]],
                                                                     'vocab' if name == 'ids' else 'type_vocab'))
    return arr.shape, np.ascontiguousarray(flat, dtype=np.int32)


def embedding(ids, word, position=None, token_type=None, *, type_ids=None, position_start=0, out=None,
              out_dtype=np.float32, device=None, keep_on_device=False):
    """BERT's embedding sum: out[b, t] = word[ids[b, t]] + position[position_start + t] +
    token_type[type_ids[b, t]] (position, token_type optional; type_ids None: type 0).
    ids and type_ids are host integer arrays [batch, seq] (or [seq]), checked on the host; the
    tables are [rows, hidden] of one storage type: float32, float16 or bfloat16 (ml_dtypes), NumPy
    arrays or tessera.Arrays (keep them on the device as tessera.Arrays: a NumPy table is uploaded
    on every call); 16-bit tables are widened and summed in fp32, out is rounded once to out_dtype. type_ids need a token_type table, and a position_start other than
    0 a position table. Returns [batch, seq, hidden] ([seq, hidden] for 1-D ids)."""
    if word is None:
        raise _invalid('embedding: word (the token table) is required, not None')
    shape, host_ids = _host_ids(ids, 'ids')
    seq = shape[-1]
    host_types = None
    if type_ids is not None:
        if token_type is None:
            raise _invalid('embedding: type_ids given without a token_type table (they would be ignored)')
        _, host_types = _host_ids(type_ids, 'type_ids', shape)
    position_start = _args.integer(position_start, 'position_start', 0, np.iinfo(np.int32).max)
    if position_start and position is None:
        raise _invalid('embedding: position_start=%d given without a position table (it would be ignored)'
                       % position_start)
    # a repeat on the same device-resident tables and out with ids of the same shape replays the C
    # call with the new ids (the C call checks them against the tables, as on the full path)
    key = None
    if out is not None:
        key = _tensors_key((word, position, token_type, out), device,
                           ('embedding', shape, host_types is not None, position_start))
    if key is not None:
        entry = _replays.get(key)
        if entry is not None and entry.replay_ids(host_ids, host_types):
            return out
    with Call(device, (word, position, token_type, out), keep_on_device, op='embedding') as call:
        tables = []
        for table, role in ((word, 'word'), (position, 'position'), (token_type, 'token_type')):
            op = call.operand(table, role, optional=True)
            if op is not None and (op.ndim != 2 or op.strides != (op.shape[1], 1)):
                raise _invalid('%s must be a contiguous [rows, hidden] table, not %s %s'
                               % (role, op.dtype, op.shape))
            tables.append(op)
        W, P, T = tables
        for op, role in ((P, 'position'), (T, 'token_type')):
            if op is not None and op.dtype != W.dtype:
                raise _invalid('%s is %s, word %s: the tables share one storage type' % (role, op.dtype, W.dtype))
        hidden = W.shape[1]
        for op, role in ((P, 'position'), (T, 'token_type')):
            if op is not None and op.shape[1] != hidden:
                raise _invalid('%s has %d columns, word has %d' % (role, op.shape[1], hidden))
        Y = call.output(out, shape + (hidden,), _out_dtype(out, out_dtype, np.float32))
        _, y_stride = _rows(Y, 'out', hidden)
        d = ffi.new('tsr_embedding_desc *')
        d.tokens, d.seq_len, d.hidden, d.vocab = host_ids.size, seq, hidden, W.shape[0]
        d.position_start = position_start
        d.word_offset, d.y_offset, d.y_stride, d.y_type = W.offset, Y.offset, y_stride, Y.tsr_type
        d.table_type = W.tsr_type
        if P is not None:
            d.max_positions, d.position_offset = P.shape[0], P.offset
        if T is not None:
            d.type_vocab, d.token_type_offset = T.shape[0], T.offset
        args = [call.handle, d, ffi.from_buffer('int32_t[]', host_ids),
                ffi.from_buffer('int32_t[]', host_types) if host_types is not None else ffi.NULL,
                W.mem, P.mem if P is not None else ffi.NULL, T.mem if T is not None else ffi.NULL, Y.mem, call.queue,
                ffi.NULL]
        call.check(lib.tsr_embedding(*args))
        if key is not None and _replayable(call):
            args[2] = args[3] = None  # each replay passes its own ids (the C call copies them)
            _remember(key, _EmbeddingReplay(call, [args], (W, P, T, Y), lib.tsr_embedding))
        return call.finish(Y)


class _EmbeddingReplay(_Replay):
    """An embedding call's arguments, replayed with each call's own host ids (a call's own
    argument tuple: threads may replay one entry at once)."""

    def replay_ids(self, host_ids, host_types):
        args = list(self.calls[0])
        args[2] = ffi.from_buffer('int32_t[]', host_ids)
        args[3] = ffi.from_buffer('int32_t[]', host_types) if host_types is not None else ffi.NULL
        return self.replay([args])
