"""Device groups: one matmul or attention split across several devices (tsr_*_multi).

    with tessera.DeviceGroup(['pthread', 'basic']) as group:
        c = group.matmul(a, b)          # NumPy in, NumPy out; rows of C shared out by rate
        print(group.stats())            # which device computed what, and how fast

Operands are NumPy arrays: the devices may sit on different platforms, so each one receives
only the operands of its own tiles. Every tile is one ordinary single-device call, so its
result is bitwise what that device gives for the tile alone.
"""
import types

import numpy as np

from ._core import Device, _check, _invalid, _text
from ._ops import _flatten_batch, _matrix
from ._tessera_cffi import ffi, lib


def _elements(x, name, ndim):
    """A float32 NumPy array of `ndim` axes as a view with element strides, for the package's
    shared operand helpers (_matrix, _flatten_batch); negative or unaligned strides refused."""
    if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != ndim:
        raise _invalid('%s must be a %d-D float32 NumPy array' % (name, ndim))
    if any(s < 0 or s % x.itemsize for s in x.strides):
        raise _invalid('%s: strides must be positive multiples of 4 bytes (strides %s)' % (name, x.strides))
    return types.SimpleNamespace(shape=x.shape, strides=tuple(s // x.itemsize for s in x.strides))


class DeviceGroup:
    """Several devices sharing one call. `devices`: Device objects or selectors ("pthread",
    "gpu", "0:1", ...); the same device may appear twice. Devices opened here from selectors are
    closed with the group."""

    def __init__(self, devices):
        devices = list(devices)
        if not devices:
            raise _invalid('a device group needs at least one device')
        self._owned = []
        self.devices = []
        for d in devices:
            if isinstance(d, Device):
                self.devices.append(d)
            else:
                dev = Device(d)
                self._owned.append(dev)
                self.devices.append(dev)
        handles = ffi.new('tsr_device *[]', [d.handle for d in self.devices])
        out = ffi.new('tsr_device_group **')
        _check(lib.tsr_group_create(handles, len(self.devices), out))
        self._group = out[0]

    @property
    def handle(self):
        if self._group is None:
            raise _invalid('the device group is closed')
        return self._group

    def close(self):
        if getattr(self, '_group', None) is not None:
            lib.tsr_group_destroy(self._group)
            self._group = None
        for d in getattr(self, '_owned', []):
            d.close()
        self._owned = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def __len__(self):
        return len(self.devices)

    def set_weights(self, weights):
        """Fix each device's share (relative rates, >= 0, one per device); None: measured rates."""
        if weights is None:
            _check(lib.tsr_group_set_weights(self.handle, ffi.NULL))
            return
        w = [float(x) for x in weights]
        if len(w) != len(self.devices):
            raise _invalid('one weight per device: %d given for %d devices' % (len(w), len(self.devices)))
        _check(lib.tsr_group_set_weights(self.handle, ffi.new('double[]', w)))

    def stats(self):
        """What the last call did: seconds, where the weights came from, per device (weight, units,
        tiles, busy seconds, GFLOP/s) and the tiles (device, first unit, unit count)."""
        st = ffi.new('tsr_group_stats *')
        _check(lib.tsr_group_last_stats(self.handle, st))
        per = [dict(weight=st.devices[i].weight, units=st.devices[i].units, tiles=st.devices[i].tiles,
                    busy_s=st.devices[i].busy_s, gflops=st.devices[i].gflops) for i in range(len(self.devices))]
        tiles = [(st.tiles[i].device, st.tiles[i].first, st.tiles[i].count) for i in range(st.tile_count)]
        return dict(seconds=st.seconds, weights_from=_text(st.weights_from), devices=per, tiles=tiles)

    def matmul(self, a, b, out=None, *, alpha=1.0, beta=0.0):
        """alpha a @ b + beta out, split by rows of the result (2-D) or by batch entries (3-D:
        [batch, m, k] @ [batch, k, n], a batch of 1 broadcast). float32 NumPy arrays; transposed
        views are read in place. out: a float32 C-contiguous array to accumulate into (beta) or
        write; returned."""
        if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
            raise _invalid('DeviceGroup.matmul takes NumPy arrays')
        if a.ndim == 2 and b.ndim == 2:
            return self._matmul2(a, b, out, alpha, beta)
        if a.ndim == 3 and b.ndim == 3:
            return self._matmul3(a, b, out, alpha, beta)
        raise _invalid('DeviceGroup.matmul: both operands 2-D, or both 3-D (batches), not %d-D and %d-D'
                       % (a.ndim, b.ndim))

    def _output(self, out, shape, beta):
        if out is None:
            if beta != 0:
                raise _invalid('beta != 0 needs out (the C it scales)')
            return np.empty(shape, np.float32)
        if (not isinstance(out, np.ndarray) or out.dtype != np.float32 or out.shape != tuple(shape)
                or not out.flags.c_contiguous or not out.flags.writeable):
            raise _invalid('out must be a writeable C-contiguous float32 array of shape %s' % (tuple(shape),))
        return out

    def _matmul2(self, a, b, out, alpha, beta):
        (m, k), (k2, n) = a.shape, b.shape
        if k != k2:
            raise _invalid('matmul: inner dimensions differ (%s @ %s)' % (a.shape, b.shape))
        _, _, ta, lda = _matrix(_elements(a, 'a', 2), 'a')
        _, _, tb, ldb = _matrix(_elements(b, 'b', 2), 'b')
        c = self._output(out, (m, n), beta)
        _check(lib.tsr_sgemm_multi(self.handle, lib.TSR_ROW_MAJOR, lib.TSR_TRANS if ta else lib.TSR_NO_TRANS,
                                   lib.TSR_TRANS if tb else lib.TSR_NO_TRANS, m, n, k, float(alpha),
                                   ffi.cast('const float *', a.ctypes.data), lda,
                                   ffi.cast('const float *', b.ctypes.data), ldb, float(beta),
                                   ffi.cast('float *', c.ctypes.data), max(n, 1)))
        return c

    def _matmul3(self, a, b, out, alpha, beta):
        (ba, m, k), (bb, k2, n) = a.shape, b.shape
        if k != k2 or not (ba == bb or ba == 1 or bb == 1):
            raise _invalid('matmul: shapes %s @ %s do not agree' % (a.shape, b.shape))
        batch = max(ba, bb)
        ea, eb = _elements(a, 'a', 3), _elements(b, 'b', 3)
        _, _, ta, lda = _matrix(ea, 'a')
        _, _, tb, ldb = _matrix(eb, 'b')
        _, sa = _flatten_batch(ea, 'a')
        _, sb = _flatten_batch(eb, 'b')
        c = self._output(out, (batch, m, n), beta)
        _check(lib.tsr_sgemm_strided_batched_multi(
            self.handle, lib.TSR_ROW_MAJOR, lib.TSR_TRANS if ta else lib.TSR_NO_TRANS,
            lib.TSR_TRANS if tb else lib.TSR_NO_TRANS, m, n, k, float(alpha),
            ffi.cast('const float *', a.ctypes.data), lda, sa, ffi.cast('const float *', b.ctypes.data), ldb, sb,
            float(beta), ffi.cast('float *', c.ctypes.data), max(n, 1), m * n, batch))
        return c

    def attention(self, q, k, v, *, causal=False, kv_lengths=None, scale=None):
        """softmax(scale q k^T + mask) v split by heads: q [B, H, Lq, D], k and v [B, H, Lk, D]
        float32 NumPy arrays, any element strides over B, H and L ([B, L, H, D] projections
        .transpose(0, 2, 1, 3) are read in place), D contiguous. causal True: query i sees keys
        j <= i + Lk - Lq (tessera's convention, PyTorch's causal_lower_right). kv_lengths: valid
        keys per batch entry. Returns a new [B, H, Lq, D] array."""
        if causal not in (False, True):
            raise _invalid('DeviceGroup.attention: causal is True or False (bottom-right alignment)')
        arrays = []
        for x, name in ((q, 'q'), (k, 'k'), (v, 'v')):
            if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 4:
                raise _invalid('%s must be a 4-D float32 NumPy array [B, H, L, D]' % name)
            if x.strides[3] != 4 or any(s < 0 or s % 4 for s in x.strides):
                raise _invalid('%s: D must be contiguous and strides positive (strides %s)' % (name, x.strides))
            arrays.append(x)
        (b, h, lq, d), (bk, hk, lk, dk) = q.shape, k.shape
        if (bk, hk, dk) != (b, h, d) or v.shape != k.shape:
            raise _invalid('shapes disagree: q %s, k %s, v %s' % (q.shape, k.shape, v.shape))
        o = np.empty((b, h, lq, d), np.float32)
        desc = ffi.new('tsr_attention_desc *')
        desc.batch, desc.heads, desc.q_len, desc.kv_len, desc.head_dim = b, h, lq, lk, d
        for field, x in (('q_strides', q), ('k_strides', k), ('v_strides', v), ('o_strides', o)):
            getattr(desc, field)[0:3] = [s // 4 for s in x.strides[:3]]
        desc.scale = 0.0 if scale is None else float(scale)
        desc.causal = bool(causal)
        lens = None
        if kv_lengths is not None:
            values = [int(x) for x in np.asarray(kv_lengths).reshape(-1)]
            if len(values) != b:
                raise _invalid('kv_lengths must hold %d counts, not %d' % (b, len(values)))
            lens = ffi.new('int[]', values)
            desc.kv_lengths = lens
        _check(lib.tsr_attention_multi(self.handle, desc, ffi.cast('const float *', q.ctypes.data),
                                       ffi.cast('const float *', k.ctypes.data),
                                       ffi.cast('const float *', v.ctypes.data), ffi.cast('float *', o.ctypes.data)))
        return o

    def __repr__(self):
        return 'DeviceGroup(%s)' % ', '.join(d.name for d in self.devices)
