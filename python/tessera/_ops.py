"""The ops: gemm/matmul, gelu, conv2d and attention on NumPy arrays, tessera.Arrays and pyopencl
arrays. Shapes and strides come from the arrays; outputs are allocated when not given, of the
kind of the inputs (pyopencl in, pyopencl out; tessera.Array in or keep_on_device=True,
tessera.Array out; otherwise NumPy)."""
import math
import sys

import numpy as np

from . import _core
from ._core import Array, Call, Device, _check, _invalid, _tsr_type, ffi, lib

__all__ = ['gemm', 'matmul', 'gelu', 'conv2d', 'attention', 'layernorm', 'embedding']

_ACTIVATIONS = {None: lib.TSR_ACT_NONE, 'none': lib.TSR_ACT_NONE, 'relu': lib.TSR_ACT_RELU,
                'gelu': lib.TSR_ACT_GELU_ERF, 'gelu_erf': lib.TSR_ACT_GELU_ERF,
                'gelu_tanh': lib.TSR_ACT_GELU_TANH}


def _activation(name):
    if name not in _ACTIVATIONS:
        raise _invalid('activation %r: one of None, "relu", "gelu" (erf, PyTorch\'s default), "gelu_tanh"' % (name,))
    return _ACTIVATIONS[name]


# ------------------------------------------------------------------ GEMM

def _numpy_matrix(x):
    """A NumPy matrix (or stack) as it should go to the device, and whether it goes transposed:
    a view whose last two axes are a transposed contiguous array (a.T) is uploaded as stored,
    without a copy, and the GEMM reads it transposed. Leading axes broadcast with stride 0 hold
    one matrix, uploaded once."""
    if not isinstance(x, np.ndarray) or x.ndim < 2:
        return x, False
    if x.ndim > 2 and all(s == 0 for s in x.strides[:-2]):
        x = x[(0,) * (x.ndim - 2)]
    if not x.flags.c_contiguous:
        swapped = np.swapaxes(x, -1, -2)
        if swapped.flags.c_contiguous:
            return swapped, True
    return x, False


def _shape(x):
    shape = getattr(x, 'shape', None)
    return tuple(shape) if shape is not None else np.shape(x)


def _merged_stride(lead, strides, role, what):
    """The element stride of leading dimensions `lead` merged into one (None when all are 1):
    stride[i] == shape[i+1] * stride[i+1] for every adjacent pair of extent > 1."""
    dims = [(e, s) for e, s in zip(lead, strides) if e != 1]
    for (e0, s0), (e1, s1) in zip(dims, dims[1:]):
        if s0 != e1 * s1:
            raise _invalid('%s: %s %s with element strides %s cannot be merged into one' % (role, what, lead, strides))
    return dims[-1][1] if dims else None


def _flatten_batch(op, role):
    """(batch, batch_stride) of an operand of rank >= 2; leading dimensions merge when their
    strides allow (a contiguous [B, H, M, K] is B*H matrices). Rank 2: one matrix, stride 0."""
    lead = op.shape[:-2]
    if not lead:
        return 1, 0
    stride = _merged_stride(lead, op.strides[:-2], role, 'batch dimensions')
    return math.prod(lead), stride if stride is not None else 0


def _matrix(op, role):
    """(rows, cols, stored_transposed, ld) of an operand's last two axes: row-major with a
    leading dimension, or the transpose of one (a column-major view)."""
    rows, cols = op.shape[-2], op.shape[-1]
    s_r, s_c = op.strides[-2], op.strides[-1]
    if (s_c == 1 or cols <= 1) and (rows <= 1 or s_r >= cols):
        return rows, cols, False, max(s_r if rows > 1 else cols, cols, 1)
    if (s_r == 1 or rows <= 1) and (cols <= 1 or s_c >= rows):
        return rows, cols, True, max(s_c if cols > 1 else rows, rows, 1)
    raise _invalid('%s: neither rows nor columns are contiguous (element strides %s): copy it first'
                   % (role, tuple(op.strides[-2:])))


# A repeated call with the same device-resident operands (same buffers, offsets, shapes, strides,
# types and arguments, `out` given: a model's layers, a benchmark loop) skips the resolution and
# checks above and replays the C call it made; the C library still checks every call. Entries
# hold their operands' buffers, so an address cannot be reused under them, and are dropped when
# their device closes. NumPy operands are never replayed (they are copied on every call).
_replays = {}
_REPLAYS_MAX = 256


def _tensor_key(x):
    cla = sys.modules.get('pyopencl.array')
    if cla is not None and isinstance(x, cla.Array):
        if x.base_data is None:
            return None
        return (1, x.base_data.int_ptr, x.offset, x.shape, x.strides, x.dtype.num, x.context.int_ptr, x.queue.int_ptr)
    if isinstance(x, Array):
        if x._mem is None:
            return None
        return (2, id(x._mem), x.offset, x.shape, x.strides, x.dtype.num, id(x.device))
    return None


def _replay_key(a, b, out, bias, device, scalars):
    if out is None or not (device is None or isinstance(device, Device)) or _core._profile is not None:
        return None
    key = [id(device), scalars]
    for t in (a, b, out, bias):
        if t is None:
            key.append(None)
            continue
        tk = _tensor_key(t)
        if tk is None:
            return None
        key.append(tk)
    key = tuple(key)
    try:
        hash(key)
    except TypeError:  # an unhashable argument (a list as activation, say): no replay
        return None
    return key


class _Replay:
    def __init__(self, call, args, operands, epilogue):
        self.device, self.args, self.epilogue = call.device, args, epilogue
        self.operands = operands  # keeps the buffers (and the epilogue's bias) alive
        self.waits = [op.source for op in operands if op is not None and op.kind == 'pyopencl']

    def replay(self):
        if self.device._handle is None:  # closed since: its handle must not be used
            return False
        for x in self.waits:
            if x.events:
                import pyopencl as cl
                cl.wait_for_events(x.events)
        _check(lib.tsr_gemm(*self.args))
        return True


def _remember(key, entry):
    while len(_replays) >= _REPLAYS_MAX:
        _replays.pop(next(iter(_replays)))
    _replays[key] = entry


def gemm(a, b, out=None, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, bias=None, activation=None,
         out_dtype=np.float32, device=None, keep_on_device=False):
    """out = activation(alpha * op(a) @ op(b) + beta * out + bias), op(x) = x.T when trans_x.

    a: [..., m, k] (or [..., k, m] with trans_a), b: [..., k, n] (or [..., n, k]); leading
    (batch) dimensions broadcast as in NumPy, and a 2-D operand is shared by every batch entry.
    Either last-two-axes order is read in place (a.T costs nothing). float32, float16 (and
    bfloat16 via ml_dtypes) storage, computed in fp32. bias: [n] shared, or [batch, n] per entry
    (fp32). activation: None, "relu", "gelu" (erf), "gelu_tanh". beta != 0 reads `out`, which must
    then be given. Returns out (allocated as out_dtype when not given)."""
    if beta != 0 and out is None:
        raise _invalid('beta != 0 reads C: pass out=')
    key = _replay_key(a, b, out, bias, device, (alpha, beta, trans_a, trans_b, activation))
    if key is not None:
        entry = _replays.get(key)
        if entry is not None and entry.replay():
            return out
    call = Call(device, (a, b, out, bias), keep_on_device, op='gemm')
    lead_a, lead_b = _shape(a)[:-2], _shape(b)[:-2]
    a_host, a_swapped = _numpy_matrix(a)
    b_host, b_swapped = _numpy_matrix(b)
    A = call.operand(a_host, 'a')
    B = call.operand(b_host, 'b')
    if A.ndim < 2 or B.ndim < 2:
        raise _invalid('gemm needs operands of rank >= 2 (a: %s, b: %s)' % (A.shape, B.shape))
    a_rows, a_cols, a_st, lda = _matrix(A, 'a')
    b_rows, b_cols, b_st, ldb = _matrix(B, 'b')
    if a_swapped:  # stored as the transpose of the caller's matrix
        a_rows, a_cols, a_st = a_cols, a_rows, not a_st
    if b_swapped:
        b_rows, b_cols, b_st = b_cols, b_rows, not b_st
    m, k = (a_cols, a_rows) if trans_a else (a_rows, a_cols)
    k2, n = (b_cols, b_rows) if trans_b else (b_rows, b_cols)
    if k != k2:
        raise _invalid('inner dimensions disagree: op(a) is %dx%d, op(b) is %dx%d' % (m, k, k2, n))
    a_batch, a_stride = _flatten_batch(A, 'a')
    b_batch, b_stride = _flatten_batch(B, 'b')
    if lead_a == lead_b or not lead_b:
        lead = lead_a
    elif not lead_a:
        lead = lead_b
    else:
        try:
            lead = np.broadcast_shapes(lead_a, lead_b)
        except ValueError:
            raise _invalid('batch dimensions %s and %s do not broadcast' % (lead_a, lead_b)) from None
    batch = math.prod(lead)
    if a_batch not in (1, batch) or b_batch not in (1, batch) or (lead_a and lead_a != lead and a_batch != 1) \
            or (lead_b and lead_b != lead and b_batch != 1):
        raise _invalid('batch dimensions %s and %s: each must equal the other or hold one matrix' % (lead_a, lead_b))
    if a_batch == 1:
        a_stride = 0
    if b_batch == 1:
        b_stride = 0
    shape = tuple(lead) + (m, n)
    C = call.output(out, shape, out.dtype if out is not None else out_dtype, needs_input=beta != 0)
    c_rows, c_cols, c_st, ldc = _matrix(C, 'out') if C.ndim >= 2 else (m, n, False, n)
    if c_st and m > 1 and n > 1:
        raise _invalid('out must have contiguous rows (element strides %s)' % (tuple(C.strides),))
    c_batch, c_stride = _flatten_batch(C, 'out')
    if batch > 1 and c_stride < (m - 1) * ldc + n:
        raise _invalid('out: batch entries overlap (element stride %d)' % c_stride)
    epilogue = ffi.NULL
    act = _activation(activation)
    bias_op = None
    if bias is not None or act != lib.TSR_ACT_NONE:
        epilogue = ffi.new('tsr_epilogue *')
        epilogue.activation = act
        if bias is not None:
            bias_op = call.operand(bias, 'bias')
            if bias_op.dtype != np.float32:
                raise _invalid('bias: float32 only (the epilogue adds it in fp32), not %s' % bias_op.dtype)
            if bias_op.shape[-1:] != (n,) or bias_op.ndim > 2 or (bias_op.ndim == 2 and bias_op.shape[0] not in (1, batch)):
                raise _invalid('bias has shape %s: [%d] or [%d, %d] expected' % (bias_op.shape, n, batch, n))
            if bias_op.strides[-1] != 1 and n > 1:
                raise _invalid('bias: elements must be contiguous')
            epilogue.bias = bias_op.mem
            epilogue.bias_offset = bias_op.offset
            epilogue.bias_stride = bias_op.strides[0] if bias_op.ndim == 2 and bias_op.shape[0] > 1 else 0
    T = (lib.TSR_NO_TRANS, lib.TSR_TRANS)
    args = (call.handle, lib.TSR_ROW_MAJOR, T[bool(trans_a) != a_st], T[bool(trans_b) != b_st],
            m, n, k, float(alpha),
            A.tsr_type, A.mem, A.offset, lda, a_stride,
            B.tsr_type, B.mem, B.offset, ldb, b_stride, float(beta),
            C.tsr_type, C.mem, C.offset, ldc, c_stride if batch > 1 else 0,
            batch, epilogue, call.queue, ffi.NULL)
    call.check(lib.tsr_gemm(*args))
    if key is not None and call.started is None and call.foreign_queue is None:
        _remember(key, _Replay(call, args, (A, B, C, bias_op), epilogue))
    return call.finish(C)


def matmul(a, b, out=None, **kwargs):
    """a @ b with NumPy's matmul broadcasting over leading dimensions (rank >= 2 operands);
    gemm's keyword arguments (bias, activation, out_dtype, device, keep_on_device) apply."""
    return gemm(a, b, out, **kwargs)


# ------------------------------------------------------------------ GELU

def gelu(x, out=None, *, approximate='none', out_dtype=None, device=None, keep_on_device=False):
    """GELU elementwise, PyTorch's definitions: approximate="none" (erf, the default) or "tanh".
    x any shape, contiguous (NumPy inputs are copied as needed); out may be x (in place).
    Unlike PyTorch, GELU(-inf) is -0, not NaN."""
    modes = {'none': lib.TSR_GELU_ERF, 'erf': lib.TSR_GELU_ERF, 'tanh': lib.TSR_GELU_TANH}
    if approximate not in modes:
        raise _invalid('approximate must be "none" or "tanh", not %r' % (approximate,))
    call = Call(device, (x, out), keep_on_device, op='gelu')
    X = call.operand(x, 'x', contiguous=True)
    if out is not None and out is x and X.kind != 'numpy':
        Y = X
        Y.result = out
    else:
        Y = call.output(out, X.shape, out.dtype if out is not None else (out_dtype or X.dtype))
        if Y.kind != 'numpy' and tuple(Y.strides) != tuple(_cstrides(Y.shape)) and min(Y.shape, default=1) > 0:
            raise _invalid('out must be contiguous')
    n = math.prod(X.shape)
    if n:
        call.check(lib.tsr_gelu_ex(call.handle, modes[approximate], X.tsr_type, X.mem, X.offset, Y.tsr_type, Y.mem,
                                   Y.offset, n, call.queue, ffi.NULL))
    return call.finish(Y)


def _cstrides(shape):
    from ._core import _contiguous_strides
    return _contiguous_strides(shape)


# ------------------------------------------------------------------ conv2d

def _pair(value, name, least):
    if isinstance(value, (int, np.integer)):
        value = (value, value)
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, (int, np.integer)) for v in value)):
        raise _invalid('%s must be an int or a pair of ints, not %r' % (name, value))
    if min(value) < least:
        raise _invalid('%s must be at least %d, not %r' % (name, least, tuple(value)))
    return int(value[0]), int(value[1])


_ALGOS = {'auto': lib.TSR_CONV_AUTO, 'im2col': lib.TSR_CONV_IM2COL, 'implicit': lib.TSR_CONV_IMPLICIT,
          'direct': lib.TSR_CONV_DIRECT}


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, activation=None, algo='auto',
           out=None, out_dtype=None, device=None, keep_on_device=False):
    """torch.nn.functional.conv2d's semantics: x [N, C, H, W], weight [O, C/groups, kh, kw],
    bias [O] (fp32) or None, stride/padding/dilation an int or a pair (padding also "valid", or
    "same" where it is symmetric), then the activation (None, "relu", "gelu", "gelu_tanh").
    Contiguous NCHW/OIHW tensors; algo "auto" (tuned), "im2col", "implicit" or "direct"."""
    if algo not in _ALGOS:
        raise _invalid('algo must be one of %s, not %r' % (', '.join(_ALGOS), algo))
    call = Call(device, (x, weight, bias, out), keep_on_device, op='conv2d')
    X = call.operand(x, 'x', contiguous=True)
    W = call.operand(weight, 'weight', contiguous=True)
    if X.ndim != 4 or W.ndim != 4:
        raise _invalid('x and weight must be 4-D (NCHW, OIHW), not %s and %s' % (X.shape, W.shape))
    d = ffi.new('tsr_conv2d_desc *')
    d.batch, d.in_channels, d.in_height, d.in_width = X.shape
    d.out_channels, cg, d.kernel_h, d.kernel_w = W.shape
    d.stride_h, d.stride_w = _pair(stride, 'stride', 1)
    d.dilation_h, d.dilation_w = _pair(dilation, 'dilation', 1)
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise _invalid('groups must be a positive int')
    d.groups = int(groups)
    if cg * d.groups != d.in_channels:
        raise _invalid('weight has %d input channels per group, x has %d channels in %d groups'
                       % (cg, d.in_channels, d.groups))
    if padding == 'valid':
        padding = 0
    elif padding == 'same':
        pads = []
        for k, dil, s in ((d.kernel_h, d.dilation_h, d.stride_h), (d.kernel_w, d.dilation_w, d.stride_w)):
            total = dil * (k - 1)
            if s != 1 or total % 2:
                raise _invalid('padding="same" needs stride 1 and an even dilation*(kernel-1) here')
            pads.append(total // 2)
        padding = tuple(pads)
    d.pad_h, d.pad_w = _pair(padding, 'padding', 0)
    d.activation = _activation(activation)
    d.algo = _ALGOS[algo]
    d.x_offset, d.w_offset = X.offset, W.offset
    d.x_type, d.w_type = X.tsr_type, W.tsr_type
    out_h, out_w = ffi.new('size_t *'), ffi.new('size_t *')
    call.check(lib.tsr_conv2d_output_size(d, out_h, out_w))
    B = None
    if bias is not None:
        B = call.operand(bias, 'bias', contiguous=True)
        if B.dtype != np.float32 or B.shape != (d.out_channels,):
            raise _invalid('bias must be float32 of shape [%d], not %s %s' % (d.out_channels, B.dtype, B.shape))
        d.bias_offset = B.offset
    shape = (d.batch, d.out_channels, out_h[0], out_w[0])
    Y = call.output(out, shape, out.dtype if out is not None else (out_dtype or X.dtype))
    if Y.kind != 'numpy' and tuple(Y.strides) != tuple(_cstrides(shape)) and min(shape) > 0:
        raise _invalid('out must be contiguous NCHW')
    d.y_offset, d.y_type = Y.offset, Y.tsr_type
    if min(shape) > 0:
        call.check(lib.tsr_conv2d(call.handle, d, X.mem, W.mem, B.mem if B is not None else ffi.NULL, Y.mem,
                                  call.queue, ffi.NULL))
    return call.finish(Y)


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


def attention(q, k, v, *, causal=False, kv_lengths=None, scale=None, out=None, return_lse=False, out_dtype=None,
              device=None, keep_on_device=False):
    """softmax(scale q k^T + mask) v, blocked (flash-style), per batch entry and head.

    q [B, H, Lq, D], k and v [B, H, Lk, D] (or without B), any strides over B, H and L (a
    [B, L, H, D] projection's .transpose(0, 2, 1, 3) is read in place), D contiguous. scale:
    default 1/sqrt(D). causal: False; "bottom_right" (also True: query i sees keys
    j <= i + Lk - Lq, tessera's convention, PyTorch's causal_lower_right, for decoding with a KV
    cache); or "top_left" (j <= i, PyTorch's is_causal=True). kv_lengths: per batch entry the
    number of valid keys (padding at the end); the causal diagonal stays anchored at Lk, not at
    each entry's length. A query that sees no key gets zeros (PyTorch: NaN). return_lse: also
    the per-row log-sum-exp [B, H, Lq] (fp32; -inf for rows that see no key)."""
    if not isinstance(causal, (bool, str, type(None))) or causal not in _CAUSAL:
        raise _invalid('causal must be False, True, "bottom_right" or "top_left", not %r' % (causal,))
    align = _CAUSAL[causal]
    call = Call(device, (q, k, v, out), keep_on_device, op='attention')
    Q, K, V = call.operand(q, 'q'), call.operand(k, 'k'), call.operand(v, 'v')
    (b, h, lq, dq), qs = _heads(Q, 'q')
    (bk, hk, lk, dk), ks = _heads(K, 'k')
    (bv, hv, lv, dv), vs = _heads(V, 'v')
    if (bk, hk, dk) != (b, h, dq) or (bv, hv, lv, dv) != (b, h, lk, dq):
        raise _invalid('shapes disagree: q %s, k %s, v %s (q [B,H,Lq,D], k and v [B,H,Lk,D])'
                       % (Q.shape, K.shape, V.shape))
    out_shape = Q.shape
    O = call.output(out, out_shape, out.dtype if out is not None else (out_dtype or Q.dtype))
    _, os_ = _heads(O, 'out')
    lens = None
    if kv_lengths is not None:
        lens = [int(x) for x in np.asarray(kv_lengths).reshape(-1)]
        if len(lens) != b or any(not 0 <= x <= lk for x in lens):
            raise _invalid('kv_lengths must hold %d counts in 0..%d, not %s' % (b, lk, list(kv_lengths)))
    lse = None
    if return_lse:
        lse = call.output(None, out_shape[:-1], np.float32, role='lse')

    def desc_for(q_rows, q_first, kv_len, causal_flag, lengths, lse_op):
        d = ffi.new('tsr_attention_desc *')
        d.batch, d.heads, d.q_len, d.kv_len, d.head_dim = b, h, q_rows, kv_len, dq
        d.q_offset = Q.offset + q_first * qs[2]
        d.o_offset = O.offset + q_first * os_[2]
        d.k_offset, d.v_offset = K.offset, V.offset
        d.q_strides, d.k_strides, d.v_strides, d.o_strides = list(qs), list(ks), list(vs), list(os_)
        d.scale = float(scale) if scale is not None else 0.0
        d.causal = causal_flag
        keep = None
        if lengths is not None:
            keep = ffi.new('int[]', lengths)
            d.kv_lengths = keep
        if lse_op is not None:
            d.lse, d.lse_offset = lse_op.mem, lse_op.offset
        d.q_type, d.k_type, d.v_type, d.o_type = Q.tsr_type, K.tsr_type, V.tsr_type, O.tsr_type
        return d, keep

    def run(d):
        call.check(lib.tsr_attention(call.handle, d[0], Q.mem, K.mem, V.mem, O.mem, call.queue, ffi.NULL))

    if scale is not None and not np.isfinite(scale):
        raise _invalid('scale must be finite')
    if b * h * lq == 0:
        return call.finish(O, lse) if return_lse else call.finish(O)
    if align != 'top_left' or lq == lk:
        run(desc_for(lq, 0, lk, align is not None, lens, lse))
    elif lq < lk:
        # top-left: query i sees keys j <= i < Lq, so the keys past Lq are never seen and the
        # call on the first Lq keys, bottom-right aligned (shift 0), is the same mask
        run(desc_for(lq, 0, lq, True, [min(x, lq) for x in lens] if lens else None, lse))
    else:
        # Lq > Lk: rows below Lk are causal on all Lk keys (shift 0); the later rows see every key
        parts = []
        for first, rows, flag in ((0, lk, True), (lk, lq - lk, False)):
            if rows == 0:
                continue
            part_lse = call.scratch((b, h, rows)) if return_lse else None
            run(desc_for(rows, first, lk, flag, lens, part_lse))
            parts.append((first, rows, part_lse))
        if return_lse:
            for first, rows, part in parts:
                _copy_rows(call, part, lse, first, rows, lq, b * h)
    return call.finish(O, lse) if return_lse else call.finish(O)


def _copy_rows(call, src, dst, first, rows, lq, planes):
    """dst[p, first:first+rows] = src[p, :rows] for p < planes (fp32 rows on the device)."""
    src_origin = ffi.new('size_t[3]', [src.offset * 4, 0, 0])
    dst_origin = ffi.new('size_t[3]', [(dst.offset + first) * 4, 0, 0])
    region = ffi.new('size_t[3]', [rows * 4, planes, 1])
    err = lib.clEnqueueCopyBufferRect(call.queue, src.mem, dst.mem, src_origin, dst_origin, region, rows * 4, 0, lq * 4, 0,
                                      0, ffi.NULL, ffi.NULL)
    if err != 0:
        from ._core import _cl_check
        _cl_check(err, 'clEnqueueCopyBufferRect')


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
    fp32. out may be x or residual themselves (in place, a transformer's Add & Norm)."""
    if not isinstance(eps, (int, float, np.floating)) or not np.isfinite(eps) or eps <= 0:
        raise _invalid('eps must be a finite number > 0, not %r' % (eps,))
    call = Call(device, (x, residual, weight, bias, out), keep_on_device, op='layernorm')
    X = call.operand(x, 'x')
    cols = X.shape[-1] if X.ndim else 0
    rows, x_stride = _rows(X, 'x', cols)
    R = None
    if residual is not None:
        R = call.operand(residual, 'residual')
        if R.shape != X.shape:
            raise _invalid('residual has shape %s, x %s' % (R.shape, X.shape))
        _, r_stride = _rows(R, 'residual', cols)
    G, B = call.operand(weight, 'weight'), call.operand(bias, 'bias')
    for op, role in ((G, 'weight'), (B, 'bias')):
        if op.shape != (cols,) or op.dtype != np.float32:
            raise _invalid('%s must be float32 of shape [%d], not %s %s' % (role, cols, op.dtype, op.shape))
    if out is not None and X.kind != 'numpy' and (out is x or out is residual):
        Y = X if out is x else R
        Y.result = out
    else:
        Y = call.output(out, X.shape, out.dtype if out is not None else (out_dtype or X.dtype))
    _, y_stride = _rows(Y, 'out', cols)
    d = ffi.new('tsr_layernorm_desc *')
    d.rows, d.cols, d.eps = rows, cols, float(eps)
    d.x_offset, d.gamma_offset, d.beta_offset, d.y_offset = X.offset, G.offset, B.offset, Y.offset
    d.x_stride, d.y_stride = x_stride, y_stride
    d.x_type, d.y_type = X.tsr_type, Y.tsr_type
    if R is not None:
        d.residual_offset, d.residual_stride, d.residual_type = R.offset, r_stride, R.tsr_type
    if rows:
        call.check(lib.tsr_layernorm(call.handle, d, X.mem, R.mem if R is not None else ffi.NULL, G.mem, B.mem, Y.mem,
                                     call.queue, ffi.NULL))
    return call.finish(Y)


def embedding(ids, word, position=None, token_type=None, *, type_ids=None, position_start=0, out=None,
              out_dtype=np.float32, device=None, keep_on_device=False):
    """BERT's embedding sum: out[b, t] = word[ids[b, t]] + position[position_start + t] +
    token_type[type_ids[b, t]] (position, token_type optional; type_ids None: type 0).
    ids and type_ids are host integer arrays [batch, seq] (or [seq]), checked on the host; the
    tables are fp32 [rows, hidden] (keep them on the device as tessera.Arrays: a NumPy table is
    uploaded on every call). Returns [batch, seq, hidden] ([seq, hidden] for 1-D ids)."""
    ids = np.asarray(ids)
    if ids.dtype.kind not in 'iu' or ids.ndim not in (1, 2) or ids.size == 0:
        raise _invalid('ids must be a non-empty 1-D or 2-D integer array, not %s %s' % (ids.dtype, ids.shape))
    if np.any(ids < 0) or np.any(ids > np.iinfo(np.int32).max):
        bad = int(np.flatnonzero((ids.reshape(-1) < 0) | (ids.reshape(-1) > np.iinfo(np.int32).max))[0])
        raise _invalid('embedding: ids[%d] = %d is outside 0..vocab-1' % (bad, int(ids.reshape(-1)[bad])))
    seq = ids.shape[-1]
    host_ids = np.ascontiguousarray(ids.reshape(-1), dtype=np.int32)
    host_types = None
    if type_ids is not None:
        type_ids = np.asarray(type_ids)
        if type_ids.shape != ids.shape or type_ids.dtype.kind not in 'iu' or np.any(type_ids < 0) \
                or np.any(type_ids > np.iinfo(np.int32).max):
            raise _invalid('type_ids must be non-negative integers of the shape of ids %s' % (ids.shape,))
        host_types = np.ascontiguousarray(type_ids.reshape(-1), dtype=np.int32)
    call = Call(device, (word, position, token_type, out), keep_on_device, op='embedding')
    tables = []
    for table, role in ((word, 'word'), (position, 'position'), (token_type, 'token_type')):
        op = call.operand(table, role) if table is not None else None
        if op is not None and (op.ndim != 2 or op.dtype != np.float32 or
                               op.strides != (op.shape[1], 1)):
            raise _invalid('%s must be a contiguous float32 [rows, hidden] table, not %s %s' % (role, op.dtype, op.shape))
        tables.append(op)
    W, P, T = tables
    hidden = W.shape[1]
    for op, role in ((P, 'position'), (T, 'token_type')):
        if op is not None and op.shape[1] != hidden:
            raise _invalid('%s has %d columns, word has %d' % (role, op.shape[1], hidden))
    Y = call.output(out, ids.shape + (hidden,), out.dtype if out is not None else out_dtype)
    _, y_stride = _rows(Y, 'out', hidden)
    d = ffi.new('tsr_embedding_desc *')
    d.tokens, d.seq_len, d.hidden, d.vocab = host_ids.size, seq, hidden, W.shape[0]
    d.position_start = int(position_start)
    d.word_offset, d.y_offset, d.y_stride, d.y_type = W.offset, Y.offset, y_stride, Y.tsr_type
    if P is not None:
        d.max_positions, d.position_offset = P.shape[0], P.offset
    if T is not None:
        d.type_vocab, d.token_type_offset = T.shape[0], T.offset
    call.check(lib.tsr_embedding(call.handle, d, ffi.from_buffer('int32_t[]', host_ids),
                                 ffi.from_buffer('int32_t[]', host_types) if host_types is not None else ffi.NULL,
                                 W.mem, P.mem if P is not None else ffi.NULL, T.mem if T is not None else ffi.NULL,
                                 Y.mem, call.queue, ffi.NULL))
    return call.finish(Y)
