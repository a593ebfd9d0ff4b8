"""Device-resident arrays: tessera.Array over a shared device buffer, and the ways to make one
(to_device, empty, from_buffer), with the buffer helpers the ops' calls use (allocation, reads
and writes, barriers on out-of-order queues, strided layouts).

An Array and its views share one _Buffer, so release() through any of them frees the buffer for
all, and each later use raises.
"""
import math
import time

import numpy as np

from . import _args, _profiling
from ._device import as_device
from ._dtypes import _dtype, _tsr_type
from ._errors import TesseraError, _check, _cl_check, _closed, _invalid
from ._tessera_cffi import ffi, lib

__all__ = ['Array', 'to_device', 'empty', 'from_buffer']


def _mem_info_size(mem, param):
    value = ffi.new('size_t *')
    _cl_check(lib.clGetMemObjectInfo(mem, param, ffi.sizeof('size_t'), value, ffi.NULL), 'clGetMemObjectInfo')
    return value[0]


def _mem_context(mem):
    value = ffi.new('cl_context *')
    _cl_check(lib.clGetMemObjectInfo(mem, lib.CL_MEM_CONTEXT, ffi.sizeof('cl_context'), value, ffi.NULL),
              'clGetMemObjectInfo')
    return value[0]


def _create_buffer(handle, nbytes, host=None):
    """A new buffer in the context of the device `handle` (the caller holds a use of it)."""
    if nbytes >= 1 << 63:
        raise _invalid('%d bytes is no buffer size' % nbytes)
    err = ffi.new('cl_int *')
    flags = lib.CL_MEM_READ_WRITE | (lib.CL_MEM_COPY_HOST_PTR if host is not None else 0)
    ptr = ffi.from_buffer(host) if host is not None else ffi.NULL
    mem = lib.clCreateBuffer(lib.tsr_device_context(handle), flags, max(int(nbytes), 1), ptr, err)
    _cl_check(err[0], 'clCreateBuffer (%d bytes)' % nbytes)
    return ffi.gc(mem, lib.clReleaseMemObject)


def _read(queue, mem, byte_offset, host):
    if host.nbytes == 0:
        return
    _cl_check(lib.clEnqueueReadBuffer(queue, mem, 1, byte_offset, host.nbytes, ffi.from_buffer(host), 0, ffi.NULL,
                                      ffi.NULL), 'clEnqueueReadBuffer')


def _write(queue, mem, byte_offset, host):
    if host.nbytes == 0:
        return
    _cl_check(lib.clEnqueueWriteBuffer(queue, mem, 1, byte_offset, host.nbytes, ffi.from_buffer(host), 0, ffi.NULL,
                                       ffi.NULL), 'clEnqueueWriteBuffer')


def _fence(device):
    """On a wrapped out-of-order queue, a barrier: what comes after waits for what came before
    (an in-order queue orders by itself). Returns the barrier's pyopencl event, or None."""
    if not device._out_of_order:
        return None
    import pyopencl as cl
    return cl.enqueue_barrier(device._pyopencl[2])


def _contiguous_strides(shape):
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(strides))


def _span(shape, strides):
    """Elements from the first to one past the last element of a strided view (0 if empty)."""
    if any(extent == 0 for extent in shape):
        return 0
    return 1 + sum((extent - 1) * stride for extent, stride in zip(shape, strides))


_release_hooks = []  # called with a _Buffer when it is released (the GEMM replay cache forgets it)
_change_hooks = []  # called with an Array one of whose attributes was assigned after it was made


class _Buffer:
    """One device buffer, shared by the Array that made it and every view of it, so that release()
    through any of them reaches all. `mem` is the cffi cl_mem, freed with its last reference (an
    op in flight on another thread holds one until it returns); None once released."""
    __slots__ = ('mem', '__weakref__')

    def __init__(self, mem):
        self.mem = mem


class Array:
    """A tensor kept on a tessera device: a cl_mem with a shape, element strides, an element offset
    and a dtype (float32, float16, or bfloat16 through ml_dtypes). Made by to_device(), empty(),
    and by ops called with device-resident inputs or keep_on_device=True; get() copies it to a
    NumPy array. Ops accept it wherever they accept a NumPy array. Views (a[i], a[i:j],
    a.view(...)) share its buffer: release() through any of them frees it for all."""

    def __init__(self, device, mem, shape, dtype, strides=None, offset=0):
        d = self.__dict__  # not through __setattr__: nothing can know this Array yet
        d['device'] = device
        d['_buf'] = mem if isinstance(mem, _Buffer) else _Buffer(mem)
        d['shape'] = shape = tuple(int(s) for s in shape)
        d['dtype'] = np.dtype(dtype)
        d['strides'] = tuple(strides) if strides is not None else _contiguous_strides(shape)  # elements
        d['offset'] = int(offset)  # elements

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        for hook in _change_hooks:  # a replay found by this Array's identity is stale now
            hook(self)

    @property
    def mem(self):
        mem = self._buf.mem
        if mem is None:
            raise _closed('the array has been released')
        self.device.handle  # noqa: B018 (raises when the device is closed)
        return mem

    @property
    def released(self):
        return self._buf.mem is None

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def is_contiguous(self):
        return self.strides == _contiguous_strides(self.shape)

    def get(self):
        """A NumPy copy (waits for the work that writes it)."""
        started = time.perf_counter()
        host = self._get()
        if _profiling.current is not None:
            _profiling.current.add('transfer', started)
        return host

    def _get(self):
        span = _span(self.shape, self.strides)
        flat = np.empty(span, self.dtype)
        mem = self.mem
        with self.device._held() as handle:
            _fence(self.device)
            _read(lib.tsr_device_queue(handle), mem, self.offset * self.dtype.itemsize, flat)
        if self.is_contiguous():
            return flat.reshape(self.shape)
        view = np.lib.stride_tricks.as_strided(flat, self.shape, [s * self.dtype.itemsize for s in self.strides])
        return view.copy()

    numpy = get

    def set(self, x):
        """Copy a NumPy array (or anything np.asarray takes) of this array's shape into it, in
        place (a contiguous Array; the values are converted to its dtype)."""
        mem = self.mem  # raises when released
        try:
            host = np.asarray(x, dtype=self.dtype, order="C")
        except (TypeError, ValueError) as exc:
            raise _invalid('set: the values cannot be read as %s (%s)' % (self.dtype, exc)) from None
        if host.shape != self.shape:
            raise _invalid('set: the values have shape %s, the array %s' % (host.shape, self.shape))
        if not self.is_contiguous():
            raise _invalid('set: the array is a strided view (strides %s)' % (self.strides,))
        started = time.perf_counter()
        with self.device._held() as handle:
            _fence(self.device)
            _write(lib.tsr_device_queue(handle), mem, self.offset * self.dtype.itemsize, host)
        _check(lib.tsr_buffer_changed(mem))  # a write tessera knows of: kept data derived from it goes
        if _profiling.current is not None:
            _profiling.current.add('transfer', started)
        return self

    def set_constant(self, constant=True):
        """Mark this array's buffer constant (or, with False, remove the mark): tessera may then
        keep what it derives from the contents, such as conv2d's Winograd-transformed or widened
        16-bit weights, or a small-M gemm's B in strips of its kernel's tile columns, instead of
        deriving it on every call (a graph records a gemm on kept strips only when a call before
        the recording made them, and refuses to replay once the buffer changed). Never stale: the kept data is made
        again after any write tessera knows of (set(), an op writing the buffer, a graph replay,
        changed()) and goes with the buffer. The mark covers the whole buffer, every view of it
        included; a pyopencl sub-buffer is refused (mark its parent). Returns self."""
        _check(lib.tsr_buffer_set_constant(self.mem, bool(_args.flag(constant, 'set_constant: constant'))))
        return self

    def changed(self):
        """Tell tessera the buffer's contents changed by a write it did not make (pyopencl, a
        kernel of your own) on a buffer marked with set_constant. Returns self."""
        _check(lib.tsr_buffer_changed(self.mem))
        return self

    def __array__(self, dtype=None, copy=None):
        if copy is False:  # NumPy 2's protocol: the values live on the device, a copy is needed
            raise ValueError('a tessera.Array cannot be viewed as a NumPy array without a copy (np.asarray(a, copy=False))')
        host = self.get()
        return host.astype(dtype, copy=False) if dtype is not None else host

    def release(self):
        """Free the device buffer now: this array, the array it is a view of and every other view
        of that buffer are unusable afterwards (their use raises TesseraError). A call in flight on
        another thread keeps the buffer until it returns. Idempotent."""
        buf = self._buf
        if buf.mem is not None:
            buf.mem = None  # the last reference, unless a call in flight holds one
            for hook in _release_hooks:
                hook(buf)

    def view(self, shape, strides=None, offset=0):
        """Another Array over the same buffer: `shape`, element `strides` (default contiguous) and
        an element `offset` from this array's start, checked to stay within the buffer."""
        shape = _args.extents(shape, 'view: shape')
        strides = _args.extents(strides, 'view: strides') if strides is not None else _contiguous_strides(shape)
        offset = _args.integer(offset, 'view: offset', 0)
        if len(strides) != len(shape):
            raise _invalid('view: shape %s and strides %s must have as many entries' % (shape, strides))
        start = self.offset + offset
        needed = (start + _span(shape, strides)) * self.dtype.itemsize
        with self.device._held():
            size = _mem_info_size(self.mem, lib.CL_MEM_SIZE)
        if needed > size:
            raise TesseraError(lib.TSR_ERR_BUFFER_TOO_SMALL, 'view: %d bytes needed, the buffer has %d'
                               % (needed, size))
        return Array(self.device, self._buf, shape, self.dtype, strides, start)

    def __getitem__(self, index):
        """Views along the leading dimension: a[i] and a[i:j] (step 1) share the buffer."""
        self.mem  # noqa: B018 (raises when released)
        if not self.shape:
            raise _invalid('a 0-d array has no items')
        if isinstance(index, slice):
            try:
                start, stop, step = index.indices(self.shape[0])
            except TypeError:
                raise _invalid('tessera.Array slices take integers, not %r' % (index,)) from None
            if step != 1:
                raise _invalid('tessera.Array slices take step 1')
            return Array(self.device, self._buf, (max(stop - start, 0),) + self.shape[1:], self.dtype,
                         self.strides, self.offset + start * self.strides[0])
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise _invalid('tessera.Array takes an int or a slice as index, not %r' % (index,))
        i = int(index) + (self.shape[0] if index < 0 else 0)
        if not 0 <= i < self.shape[0]:
            raise IndexError('index %d out of range for %d items' % (index, self.shape[0]))
        return Array(self.device, self._buf, self.shape[1:], self.dtype, self.strides[1:],
                     self.offset + i * self.strides[0])

    def __repr__(self):
        state = ' (released)' if self.released else ''
        return '<tessera.Array shape=%s dtype=%s on %s%s>' % (self.shape, self.dtype, self.device, state)


def to_device(x, device=None, dtype=None):
    """Copy a NumPy array (or anything np.asarray takes) to a new tessera.Array."""
    started = time.perf_counter()
    dev = as_device(device)
    if dtype is not None:
        dtype = _dtype(dtype, 'to_device: dtype')
    try:
        host = np.asarray(x, dtype=dtype, order="C")  # a 0-d array stays 0-d
    except (TypeError, ValueError) as exc:
        raise _invalid('to_device: the values cannot be read as an array (%s)' % exc) from None
    _tsr_type(host.dtype, 'to_device')
    with dev._held() as handle:
        result = Array(dev, _create_buffer(handle, host.nbytes, host if host.nbytes else None), host.shape, host.dtype)
    if _profiling.current is not None:
        _profiling.current.add('transfer', started)
    return result


def from_buffer(buffer, shape, dtype=np.float32, *, offset=0, strides=None, device=None):
    """A tessera.Array over an existing OpenCL buffer, zero-copy: a pyopencl.Buffer (anything with
    `int_ptr`) or a cffi cl_mem. shape, dtype, an element offset and element strides (default
    contiguous) say what it holds; they are checked against the buffer's size. The buffer must
    belong to the device's context (device: a Device, e.g. Device.from_pyopencl(queue); None: the
    default). The Array holds a reference (clRetainMemObject) until it is released."""
    dev = as_device(device)
    dtype = _dtype(dtype, 'from_buffer: dtype')
    if hasattr(buffer, 'int_ptr'):
        mem = ffi.cast('cl_mem', buffer.int_ptr)
    elif isinstance(buffer, ffi.CData) and ffi.typeof(buffer) is ffi.typeof('cl_mem'):
        mem = buffer
    else:
        raise _invalid('from_buffer takes a pyopencl.Buffer or a cl_mem, not %s' % type(buffer).__name__)
    if mem == ffi.NULL:
        raise _invalid('from_buffer: a NULL buffer')
    shape = _args.extents(shape, 'from_buffer: shape')
    strides = _args.extents(strides, 'from_buffer: strides') if strides is not None else _contiguous_strides(shape)
    offset = _args.integer(offset, 'from_buffer: offset', 0)
    if len(strides) != len(shape):
        raise _invalid('from_buffer: shape %s and strides %s must have as many entries' % (shape, strides))
    with dev._held() as handle:
        if _mem_context(mem) != lib.tsr_device_context(handle):
            raise _invalid('from_buffer: the buffer lives in another OpenCL context than device %r '
                           '(pass device=tessera.Device.from_pyopencl(queue))' % (dev,))
        needed = (offset + _span(shape, strides)) * dtype.itemsize
        size = _mem_info_size(mem, lib.CL_MEM_SIZE)
        if needed > size:
            raise TesseraError(lib.TSR_ERR_BUFFER_TOO_SMALL,
                               'from_buffer: shape %s, strides %s at offset %d need %d bytes; the buffer has %d'
                               % (shape, strides, offset, needed, size))
        _cl_check(lib.clRetainMemObject(mem), 'clRetainMemObject')
    return Array(dev, ffi.gc(mem, lib.clReleaseMemObject), shape, dtype, strides, offset)


def empty(shape, dtype=np.float32, device=None):
    """An uninitialised tessera.Array."""
    dev = as_device(device)
    shape = _args.extents(shape, 'empty: shape')
    dtype = _dtype(dtype, 'empty: dtype')
    with dev._held() as handle:
        return Array(dev, _create_buffer(handle, math.prod(shape) * dtype.itemsize), shape, dtype)
