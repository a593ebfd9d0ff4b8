"""Device groups: one matmul or attention split across several devices (tsr_*_multi).

    with tessera.DeviceGroup(['pthread', 'basic']) as group:
        c = group.matmul(a, b)          # NumPy in, NumPy out; rows of C shared out by rate
        print(group.stats())            # which device computed what, and how fast

Operands are NumPy arrays: the devices may sit on different platforms, so each one receives
only the operands of its own tiles. Every tile is one ordinary single-device call, so its
result is bitwise what that device gives for the tile alone.
"""
import contextlib
import types

import numpy as np

from . import _args
from ._device import Device
from ._errors import _check, _closed, _invalid, _text
from ._gemm import _flatten_batch, _matrix
from ._lifetime import Uses
from ._ops import _gqa_shapes, _scale
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
    closed with the group. The group holds its devices: closing one of them closes the group
    first (after the group's calls in flight), and a later call raises TesseraError."""

    def __init__(self, devices):
        self._group = None
        self._uses = Uses()
        self._owned = []
        if isinstance(devices, (str, Device)):
            raise _invalid('a device group takes a list of devices, not one %s' % type(devices).__name__)
        try:
            devices = list(devices)
        except TypeError:
            raise _invalid('a device group takes a list of devices, not %s' % type(devices).__name__) from None
        if not devices:
            raise _invalid('a device group needs at least one device')
        self.devices = []
        try:
            for i, d in enumerate(devices):
                if isinstance(d, Device):
                    self.devices.append(d)
                elif isinstance(d, str):
                    dev = Device(d)
                    self._owned.append(dev)
                    self.devices.append(dev)
                else:
                    raise _invalid('devices[%d] must be a tessera.Device or a selector string, not %s'
                                   % (i, type(d).__name__))
            with self._members() as held:
                handles = ffi.new('tsr_device *[]', held)
                out = ffi.new('tsr_device_group **')
                _check(lib.tsr_group_create(handles, len(self.devices), out))
                self._group = out[0]
                for d in self.devices:
                    d._groups.add(self)
        except BaseException:
            self.close()
            raise

    @contextlib.contextmanager
    def _members(self):
        """Hold a use of every member (each distinct device once); yields their handles."""
        held = []
        try:
            for d in dict.fromkeys(self.devices):
                d._acquire()
                held.append(d)
            yield [d._handle for d in self.devices]
        finally:
            for d in held:
                d._release()

    def _call(self, fn, *args):
        """fn(group handle, *args) holding the group and its members: close() (of the group or of
        a member, on another thread) waits for it, and a closed group raises TesseraError."""
        if self._group is None and self._uses.open:
            raise _closed('the device group is closed')
        self._uses.acquire('the device group')
        try:
            with self._members():
                return fn(self._group, *args)
        finally:
            self._uses.release()

    @property
    def handle(self):
        if self._group is None or not self._uses.open:
            raise _closed('the device group is closed%s' % (': ' + self._uses.reason if self._uses.reason else ''))
        return self._group

    def _member_closed(self, device):
        """A member device is closing (Device.close, after its own calls): the C group goes first."""
        index = next(i for i, d in enumerate(self.devices) if d is device)
        self._close_group('its device %d was closed' % index)

    def _close_group(self, reason=None):
        uses = getattr(self, '_uses', None)
        if uses is None or not uses.begin_close('the device group', reason):
            return
        try:
            if self._group is not None:
                lib.tsr_group_destroy(self._group)
        finally:
            self._group = None
            uses.end_close()

    def close(self):
        """Release the group (after its calls in flight on other threads) and the devices it
        opened from selectors; idempotent."""
        self._close_group()
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
            self._call(lambda g: _check(lib.tsr_group_set_weights(g, ffi.NULL)))
            return
        if isinstance(weights, (str, bytes)) or not hasattr(weights, '__len__'):
            raise _invalid('weights must be a sequence of numbers, one per device, not %r' % (weights,))
        w = [_args.real(x, 'weights[%d]' % i) for i, x in enumerate(weights)]
        if len(w) != len(self.devices):
            raise _invalid('one weight per device: %d given for %d devices' % (len(w), len(self.devices)))
        self._call(lambda g: _check(lib.tsr_group_set_weights(g, ffi.new('double[]', w))))

    def stats(self):
        """What the last call did: seconds, where the weights came from, per device (weight, units,
        tiles, busy seconds, GFLOP/s) and the tiles (device, first unit, unit count)."""
        def read(g):
            st = ffi.new('tsr_group_stats *')
            _check(lib.tsr_group_last_stats(g, st))
            per = [dict(weight=st.devices[i].weight, units=st.devices[i].units, tiles=st.devices[i].tiles,
                        busy_s=st.devices[i].busy_s, gflops=st.devices[i].gflops) for i in range(len(self.devices))]
            tiles = [(st.tiles[i].device, st.tiles[i].first, st.tiles[i].count) for i in range(st.tile_count)]
            return dict(seconds=st.seconds, weights_from=_text(st.weights_from), devices=per, tiles=tiles)
        return self._call(read)

    def matmul(self, a, b, out=None, *, alpha=1.0, beta=0.0):
        """alpha a @ b + beta out, split by rows of the result (2-D) or by batch entries (3-D:
        [batch, m, k] @ [batch, k, n], a batch of 1 broadcast). float32 NumPy arrays; transposed
        views are read in place. out: a float32 C-contiguous array to accumulate into (beta) or
        write; returned."""
        alpha, beta = _args.c_float(alpha, 'alpha'), _args.c_float(beta, 'beta')
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
        desc = ffi.new('tsr_matmul_desc *', {
            'layout': lib.TSR_ROW_MAJOR, 'trans_a': lib.TSR_TRANS if ta else lib.TSR_NO_TRANS,
            'trans_b': lib.TSR_TRANS if tb else lib.TSR_NO_TRANS, 'm': m, 'n': n, 'k': k, 'alpha': alpha, 'beta': beta,
            'a': {'ld': lda}, 'b': {'ld': ldb}, 'c': {'ld': max(n, 1)}})
        self._call(lambda g: _check(lib.tsr_matmul_multi(
            g, desc, ffi.cast('const float *', a.ctypes.data), ffi.cast('const float *', b.ctypes.data),
            ffi.cast('float *', c.ctypes.data))))
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
        desc = ffi.new('tsr_matmul_desc *', {
            'layout': lib.TSR_ROW_MAJOR, 'trans_a': lib.TSR_TRANS if ta else lib.TSR_NO_TRANS,
            'trans_b': lib.TSR_TRANS if tb else lib.TSR_NO_TRANS, 'm': m, 'n': n, 'k': k, 'batch': batch,
            'alpha': alpha, 'beta': beta, 'a': {'ld': lda, 'batch_stride': sa}, 'b': {'ld': ldb, 'batch_stride': sb},
            'c': {'ld': max(n, 1), 'batch_stride': m * n}})
        self._call(lambda g: _check(lib.tsr_matmul_multi(
            g, desc, ffi.cast('const float *', a.ctypes.data), ffi.cast('const float *', b.ctypes.data),
            ffi.cast('float *', c.ctypes.data))))
        return c

    def attention(self, q, k, v, *, causal=False, kv_lengths=None, scale=None):
        """softmax(scale q k^T + mask) v split by heads: q [B, H, Lq, D], k and v [B, Hkv, Lk, D]
        float32 NumPy arrays, any element strides over B, H and L ([B, L, H, D] projections
        .transpose(0, 2, 1, 3) are read in place), D contiguous; Hkv may divide H (grouped-query
        attention, as tessera.attention). causal True: query i sees keys j <= i + Lk - Lq
        (tessera's convention, PyTorch's causal_lower_right). kv_lengths: valid keys per batch
        entry. scale: None is 1/sqrt(D); 0 is refused. Returns a new [B, H, Lq, D] array."""
        causal = _args.flag(causal, 'DeviceGroup.attention: causal (bottom-right alignment; True or False)')
        c_scale = _scale(scale)
        for x, name in ((q, 'q'), (k, 'k'), (v, 'v')):
            if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 4:
                raise _invalid('%s must be a 4-D float32 NumPy array [B, H, L, D]' % name)
            if x.strides[3] != 4 or any(s < 0 or s % 4 for s in x.strides):
                raise _invalid('%s: D must be contiguous and strides positive (strides %s)' % (name, x.strides))
        group = _gqa_shapes(q.shape, k.shape, v.shape)
        (b, h, lq, d), (_, hk, lk, _) = q.shape, k.shape
        o = np.empty((b, h, lq, d), np.float32)
        lens = ffi.new('int[]', _args.counts(kv_lengths, 'kv_lengths', b, 0, lk)) if kv_lengths is not None else None
        descs = []
        for r in range(group):  # query heads r, r + group, ... against the key heads
            desc = ffi.new('tsr_attention_desc *')
            desc.batch, desc.heads, desc.q_len, desc.kv_len, desc.head_dim = b, hk, lq, lk, d
            for field, x, step in (('q_strides', q, group), ('k_strides', k, 1), ('v_strides', v, 1),
                                   ('o_strides', o, group)):
                getattr(desc, field)[0:3] = [x.strides[0] // 4, x.strides[1] // 4 * step, x.strides[2] // 4]
            desc.scale = c_scale
            desc.causal = causal
            if lens is not None:
                desc.kv_lengths = lens
            descs.append((desc, q.ctypes.data + r * q.strides[1], o.ctypes.data + r * o.strides[1]))

        def run(g):
            for desc, qp, op in descs:
                _check(lib.tsr_attention_multi(g, desc, ffi.cast('const float *', qp),
                                               ffi.cast('const float *', k.ctypes.data),
                                               ffi.cast('const float *', v.ctypes.data), ffi.cast('float *', op)))
        if b * h * lq:
            self._call(run)
        return o

    def __repr__(self):
        if not self._uses.open:
            return 'DeviceGroup(closed)'
        return 'DeviceGroup(%s)' % ', '.join(d.name for d in self.devices)
