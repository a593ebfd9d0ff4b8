"""Devices, errors and device-resident arrays over the C API (through the cffi extension).

Operands of the ops come in three kinds, and this module turns each into what a tessera call
takes (a cl_mem, an element offset, element strides, a storage type):
  - NumPy arrays: copied to a device buffer for the call (and results copied back);
  - tessera.Array: a buffer tessera allocated and keeps on the device;
  - pyopencl arrays: used in place, zero-copy, when they live in the device's context.
"""
import contextlib
import math
import sys
import threading
import time

import numpy as np

from ._tessera_cffi import ffi, lib

__all__ = ['TesseraError', 'InvalidArgument', 'DeviceInfo', 'Device', 'Array', 'devices', 'default_device',
           'set_default_device', 'to_device', 'empty', 'from_buffer', 'profile', 'version']


def _text(cstr):
    return ffi.string(cstr).decode('utf-8', 'replace') if cstr != ffi.NULL else ''


class TesseraError(RuntimeError):
    """A failed tessera call: `status` (the C status code), `status_name` ("TSR_ERR_...") and
    `message` (tsr_last_error's explanation, or the Python-side check that refused the call)."""

    def __init__(self, status, message):
        self.status = int(status)
        self.status_name = _text(lib.tsr_status_str(status))
        self.message = message
        super().__init__('%s: %s' % (self.status_name, message))


class InvalidArgument(TesseraError, ValueError):
    """TSR_ERR_INVALID_ARG: a bad argument (also a ValueError). Nothing was written."""


def _error(status, message):
    return InvalidArgument(status, message) if status == lib.TSR_ERR_INVALID_ARG else TesseraError(status, message)


def _check(status):
    if status != lib.TSR_SUCCESS:
        raise _error(status, _text(lib.tsr_last_error()))


def _invalid(message):
    return InvalidArgument(lib.TSR_ERR_INVALID_ARG, message)


def _cl_check(err, what):
    if err != lib.CL_SUCCESS:
        status = lib.TSR_ERR_OUT_OF_MEMORY if err in (-4, -5, -6, -61) else lib.TSR_ERR_OPENCL
        raise TesseraError(status, '%s failed with OpenCL error %d' % (what, err))


def version():
    """The C library's version."""
    return '0.1.0'


# ------------------------------------------------------------------ data types

_DTYPES = {np.dtype(np.float32): lib.TSR_F32, np.dtype(np.float16): lib.TSR_F16}
try:  # bfloat16 arrays exist in NumPy only through ml_dtypes
    import ml_dtypes
    _DTYPES[np.dtype(ml_dtypes.bfloat16)] = lib.TSR_BF16
except ImportError:
    pass


def _tsr_type(dtype, role):
    found = _DTYPES.get(dtype)
    if found is not None:
        return found
    dtype = np.dtype(dtype)
    if dtype not in _DTYPES:
        names = ', '.join(str(d) for d in _DTYPES)
        raise _invalid('%s: dtype %s is not supported (tessera stores %s; convert with .astype(np.float32))'
                       % (role, dtype, names))
    return _DTYPES[dtype]


# ------------------------------------------------------------------ devices

class DeviceInfo:
    """One OpenCL device as tessera sees it (tsr_device_info); `selector` opens it."""

    _FIELDS = ('platform_index', 'device_index', 'type', 'name', 'vendor', 'platform_name', 'platform_vendor',
               'platform_version', 'device_version', 'driver_version', 'opencl_c_version', 'compute_units',
               'max_clock_mhz', 'global_mem_bytes', 'max_alloc_bytes', 'local_mem_bytes', 'max_work_group_size',
               'fp16', 'fp64', 'compiler_available', 'available', 'unusable')

    def __init__(self, c_info):
        for field in self._FIELDS:
            value = getattr(c_info, field)
            if field == 'type':
                value = _text(lib.tsr_device_type_str(value))
            elif isinstance(value, ffi.CData):
                value = _text(value)
            elif isinstance(value, bool):
                value = bool(value)
            setattr(self, field, value)
        self.selector = '%d:%d' % (self.platform_index, self.device_index)

    def as_dict(self):
        return {field: getattr(self, field) for field in ('selector',) + self._FIELDS}

    def __repr__(self):
        return '<tessera.DeviceInfo %s %s %r (%s)>' % (self.selector, self.type, self.name, self.platform_name)


def devices():
    """Every device of every OpenCL platform, as DeviceInfo. No platform at all raises
    TesseraError(TSR_ERR_NO_PLATFORM)."""
    infos = ffi.new('tsr_device_info **')
    count = ffi.new('size_t *')
    _check(lib.tsr_discover(infos, count))
    try:
        return [DeviceInfo(infos[0][i]) for i in range(count[0])]
    finally:
        lib.tsr_free(infos[0])


class Device:
    """An open tessera device.

    Device(selector) opens one as the CLI does: "cpu", "gpu", "accelerator", "P:D", or part of a
    device, vendor or platform name; None uses $TSR_DEVICE or the default (a GPU, else an
    accelerator, else a CPU). Device.from_pyopencl(queue) wraps a pyopencl queue (or context) so
    that ops run on its buffers in place and in order with its other work. close() (or a `with`
    block) releases it; using a closed device raises TesseraError."""

    def __init__(self, selector=None):
        if selector is not None and not isinstance(selector, str):
            raise _invalid('device selector must be a string, not %s' % type(selector).__name__)
        handle = ffi.new('tsr_device **')
        _check(lib.tsr_device_open(selector.encode() if selector else ffi.NULL, handle))
        self._handle = handle[0]
        self._pyopencl = None
        self._context_int = None
        self._lock = threading.Lock()

    @classmethod
    def from_pyopencl(cls, queue_or_context, device=None):
        """Wrap a pyopencl.CommandQueue (its context, device and queue) or a pyopencl.Context
        (with `device`, default its first device; tessera then makes its own queue)."""
        import pyopencl as cl
        if isinstance(queue_or_context, cl.CommandQueue):
            queue = queue_or_context
            context, cl_device = queue.context, queue.device
        elif isinstance(queue_or_context, cl.Context):
            queue, context = None, queue_or_context
            cl_device = device if device is not None else context.devices[0]
        else:
            raise _invalid('from_pyopencl takes a pyopencl CommandQueue or Context, not %s'
                           % type(queue_or_context).__name__)
        self = cls.__new__(cls)
        handle = ffi.new('tsr_device **')
        _check(lib.tsr_device_wrap(ffi.cast('cl_context', context.int_ptr),
                                   ffi.cast('cl_device_id', cl_device.int_ptr),
                                   ffi.cast('cl_command_queue', queue.int_ptr) if queue is not None else ffi.NULL,
                                   handle))
        self._handle = handle[0]
        self._pyopencl = (context, cl_device, queue)  # keep the pyopencl objects alive with us
        self._context_int = None
        self._lock = threading.Lock()
        return self

    @property
    def handle(self):
        """The tsr_device pointer (cffi); raises when the device is closed."""
        if self._handle is None:
            raise TesseraError(lib.TSR_ERR_INVALID_ARG, 'the device is closed')
        return self._handle

    @property
    def context_int(self):
        """The device's cl_context as an integer (pyopencl's int_ptr)."""
        value = self._context_int
        if value is None:
            value = self._context_int = int(ffi.cast('intptr_t', lib.tsr_device_context(self.handle)))
        self.handle  # noqa: B018 (raises when closed)
        return value

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Finish the device's queue and release it (idempotent)."""
        with self._lock:
            if self._handle is not None:
                lib.tsr_device_close(self._handle)
                self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, '_handle', None) is not None:
            self.close()

    @property
    def info(self):
        return DeviceInfo(lib.tsr_device_get_info(self.handle)[0])

    @property
    def name(self):
        return _text(lib.tsr_device_get_info(self.handle).name)

    @property
    def fingerprint(self):
        return _text(lib.tsr_device_fingerprint(self.handle))

    def finish(self):
        """Wait for everything enqueued on the device's queue."""
        _cl_check(lib.clFinish(lib.tsr_device_queue(self.handle)), 'clFinish')

    def config(self, op, problem_class):
        """The configuration `op` uses here for `problem_class` and where it comes from."""
        info = ffi.new('tsr_config_info *')
        _check(lib.tsr_config_lookup(self.handle, op.encode(), problem_class.encode(), info))
        return {'op': _text(info.op), 'class': _text(info.problem_class), 'used_class': _text(info.used_class),
                'config': _text(info.config), 'source': _text(lib.tsr_config_source_str(info.source)),
                'origin': _text(info.origin), 'tuned_gflops': info.tuned_gflops,
                'stale_passed_over': info.stale_passed_over}

    def override(self, op, config):
        """Force `op`'s configuration ("MWI=4 VW=8 ..."); None or "" goes back to tuned/defaults."""
        _check(lib.tsr_config_override(self.handle, op.encode(), config.encode() if config else ffi.NULL))

    def __repr__(self):
        if self._handle is None:
            return '<tessera.Device (closed)>'
        return '<tessera.Device %r>' % self.name


_default = None
_default_lock = threading.Lock()
_by_selector = {}


def default_device():
    """The device ops use when given none (opened on first use: $TSR_DEVICE or the default)."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Device()
        return _default


def set_default_device(device):
    """Make `device` (a Device or a selector string) the default; returns the Device."""
    global _default
    dev = _as_device(device)
    with _default_lock:
        _default = dev
    return dev


def _as_device(device):
    if device is None:
        return default_device()
    if isinstance(device, Device):
        device.handle  # noqa: B018 (raises when closed)
        return device
    if isinstance(device, str):  # opened once per selector: its compiled kernels stay cached
        dev = _by_selector.get(device)
        if dev is None or dev.closed:
            dev = _by_selector[device] = Device(device)
        return dev
    raise _invalid('device must be a tessera.Device or a selector string, not %s' % type(device).__name__)


# ------------------------------------------------------------------ buffers

def _mem_info_size(mem, param):
    value = ffi.new('size_t *')
    _cl_check(lib.clGetMemObjectInfo(mem, param, ffi.sizeof('size_t'), value, ffi.NULL), 'clGetMemObjectInfo')
    return value[0]


def _mem_context(mem):
    value = ffi.new('cl_context *')
    _cl_check(lib.clGetMemObjectInfo(mem, lib.CL_MEM_CONTEXT, ffi.sizeof('cl_context'), value, ffi.NULL),
              'clGetMemObjectInfo')
    return value[0]


def _create_buffer(dev, nbytes, host=None):
    err = ffi.new('cl_int *')
    flags = lib.CL_MEM_READ_WRITE | (lib.CL_MEM_COPY_HOST_PTR if host is not None else 0)
    ptr = ffi.from_buffer(host) if host is not None else ffi.NULL
    mem = lib.clCreateBuffer(lib.tsr_device_context(dev.handle), flags, max(int(nbytes), 1), ptr, err)
    _cl_check(err[0], 'clCreateBuffer (%d bytes)' % nbytes)
    return ffi.gc(mem, lib.clReleaseMemObject)


def _read(dev, mem, byte_offset, host, queue=None):
    if host.nbytes == 0:
        return
    _cl_check(lib.clEnqueueReadBuffer(queue if queue is not None else lib.tsr_device_queue(dev.handle), mem, 1,
                                      byte_offset, host.nbytes, ffi.from_buffer(host), 0, ffi.NULL, ffi.NULL),
              'clEnqueueReadBuffer')


def _write(dev, mem, byte_offset, host, queue=None):
    if host.nbytes == 0:
        return
    _cl_check(lib.clEnqueueWriteBuffer(queue if queue is not None else lib.tsr_device_queue(dev.handle), mem, 1,
                                       byte_offset, host.nbytes, ffi.from_buffer(host), 0, ffi.NULL, ffi.NULL),
              'clEnqueueWriteBuffer')


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


class Array:
    """A tensor kept on a tessera device: a cl_mem with a shape, element strides, an element offset
    and a dtype (float32, float16, or bfloat16 through ml_dtypes). Made by to_device(), empty(),
    and by ops called with device-resident inputs or keep_on_device=True; get() copies it to a
    NumPy array. Ops accept it wherever they accept a NumPy array."""

    def __init__(self, device, mem, shape, dtype, strides=None, offset=0):
        self.device = device
        self._mem = mem
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.strides = tuple(strides) if strides is not None else _contiguous_strides(self.shape)  # elements
        self.offset = int(offset)  # elements

    @property
    def mem(self):
        if self._mem is None:
            raise TesseraError(lib.TSR_ERR_INVALID_ARG, 'the array has been released')
        self.device.handle  # noqa: B018 (raises when the device is closed)
        return self._mem

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def is_contiguous(self):
        return self.strides == _contiguous_strides(self.shape)

    def get(self):
        """A NumPy copy (waits for the work that writes it)."""
        started = time.perf_counter()
        host = self._get()
        if _profile is not None:
            _profile.add('transfer', started)
        return host

    def _get(self):
        span = _span(self.shape, self.strides)
        flat = np.empty(span, self.dtype)
        _read(self.device, self.mem, self.offset * self.dtype.itemsize, flat)
        if self.is_contiguous():
            return flat.reshape(self.shape)
        view = np.lib.stride_tricks.as_strided(flat, self.shape, [s * self.dtype.itemsize for s in self.strides])
        return view.copy()

    numpy = get

    def set(self, x):
        """Copy a NumPy array (or anything np.asarray takes) of this array's shape into it, in
        place (a contiguous Array; the values are converted to its dtype)."""
        host = np.ascontiguousarray(x, dtype=self.dtype)
        if host.shape != self.shape:
            raise _invalid('set: the values have shape %s, the array %s' % (host.shape, self.shape))
        if not self.is_contiguous():
            raise _invalid('set: the array is a strided view (strides %s)' % (self.strides,))
        started = time.perf_counter()
        _write(self.device, self.mem, self.offset * self.dtype.itemsize, host)
        if _profile is not None:
            _profile.add('transfer', started)
        return self

    def __array__(self, dtype=None, copy=None):
        host = self.get()
        return host.astype(dtype) if dtype is not None else host

    def release(self):
        """Free the device buffer now (the array is unusable afterwards)."""
        if self._mem is not None:
            ffi.release(self._mem)
            self._mem = None

    def view(self, shape, strides=None, offset=0):
        """Another Array over the same buffer: `shape`, element `strides` (default contiguous) and
        an element `offset` from this array's start, checked to stay within the buffer."""
        shape = tuple(int(e) for e in shape)
        strides = tuple(int(e) for e in strides) if strides is not None else _contiguous_strides(shape)
        if len(strides) != len(shape) or any(e < 0 for e in shape + strides) or offset < 0:
            raise _invalid('view: shape %s, strides %s and offset %d must be non-negative and match'
                           % (shape, strides, offset))
        start = self.offset + int(offset)
        needed = (start + _span(shape, strides)) * self.dtype.itemsize
        size = _mem_info_size(self.mem, lib.CL_MEM_SIZE)
        if needed > size:
            raise TesseraError(lib.TSR_ERR_BUFFER_TOO_SMALL, 'view: %d bytes needed, the buffer has %d'
                               % (needed, size))
        return Array(self.device, self._mem, shape, self.dtype, strides, start)

    def __getitem__(self, index):
        """Views along the leading dimension: a[i] and a[i:j] (step 1) share the buffer."""
        if not self.shape:
            raise _invalid('a 0-d array has no items')
        if isinstance(index, (int, np.integer)):
            i = int(index) + (self.shape[0] if index < 0 else 0)
            if not 0 <= i < self.shape[0]:
                raise IndexError('index %d out of range for %d items' % (index, self.shape[0]))
            return Array(self.device, self._mem, self.shape[1:], self.dtype, self.strides[1:],
                         self.offset + i * self.strides[0])
        if isinstance(index, slice):
            start, stop, step = index.indices(self.shape[0])
            if step != 1:
                raise _invalid('tessera.Array slices take step 1')
            return Array(self.device, self._mem, (max(stop - start, 0),) + self.shape[1:], self.dtype,
                         self.strides, self.offset + start * self.strides[0])
        raise _invalid('tessera.Array takes an int or a slice as index')

    def __repr__(self):
        return '<tessera.Array shape=%s dtype=%s on %s>' % (self.shape, self.dtype, self.device)


def to_device(x, device=None, dtype=None):
    """Copy a NumPy array (or anything np.asarray takes) to a new tessera.Array."""
    started = time.perf_counter()
    dev = _as_device(device)
    host = np.ascontiguousarray(x, dtype=dtype)
    _tsr_type(host.dtype, 'to_device')
    result = Array(dev, _create_buffer(dev, host.nbytes, host if host.nbytes else None), host.shape, host.dtype)
    if _profile is not None:
        _profile.add('transfer', started)
    return result


def from_buffer(buffer, shape, dtype=np.float32, *, offset=0, strides=None, device=None):
    """A tessera.Array over an existing OpenCL buffer, zero-copy: a pyopencl.Buffer (anything with
    `int_ptr`) or a cffi cl_mem. shape, dtype, an element offset and element strides (default
    contiguous) say what it holds; they are checked against the buffer's size. The buffer must
    belong to the device's context (device: a Device, e.g. Device.from_pyopencl(queue); None: the
    default). The Array holds a reference (clRetainMemObject) until it is released."""
    dev = _as_device(device)
    dtype = np.dtype(dtype)
    _tsr_type(dtype, 'from_buffer')
    if hasattr(buffer, 'int_ptr'):
        mem = ffi.cast('cl_mem', buffer.int_ptr)
    elif isinstance(buffer, ffi.CData) and ffi.typeof(buffer) is ffi.typeof('cl_mem'):
        mem = buffer
    else:
        raise _invalid('from_buffer takes a pyopencl.Buffer or a cl_mem, not %s' % type(buffer).__name__)
    if mem == ffi.NULL:
        raise _invalid('from_buffer: a NULL buffer')
    if _mem_context(mem) != lib.tsr_device_context(dev.handle):
        raise _invalid('from_buffer: the buffer lives in another OpenCL context than device %r '
                       '(pass device=tessera.Device.from_pyopencl(queue))' % (dev,))
    shape = tuple(int(e) for e in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    strides = tuple(int(e) for e in strides) if strides is not None else _contiguous_strides(shape)
    if len(strides) != len(shape) or any(e < 0 for e in shape + strides) or offset < 0:
        raise _invalid('from_buffer: shape %s, strides %s and offset %d must be non-negative and match'
                       % (shape, strides, offset))
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
    dev = _as_device(device)
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if any(s < 0 for s in shape):
        raise _invalid('negative extent in shape %s' % (shape,))
    dtype = np.dtype(dtype)
    _tsr_type(dtype, 'empty')
    return Array(dev, _create_buffer(dev, math.prod(shape) * dtype.itemsize), shape, dtype)


# ------------------------------------------------------------------ profiling

_profile = None


class Profile:
    """Time per op name, filled while a profile() block runs: each op call (and each transfer of
    to_device / Array.get) waits for its queue and adds the wall time from its start. Waiting
    serialises host and device, so the total is a little above an unprofiled run's."""

    def __init__(self):
        self.seconds, self.calls = {}, {}

    def add(self, name, started, device=None, queue=None):
        if queue is not None:
            _cl_check(lib.clFinish(queue), 'clFinish')
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
        self.calls[name] = self.calls.get(name, 0) + 1

    def table(self):
        """Rows (name, calls, seconds, share), largest first."""
        total = sum(self.seconds.values()) or 1.0
        return [(name, self.calls[name], sec, sec / total)
                for name, sec in sorted(self.seconds.items(), key=lambda item: -item[1])]


@contextlib.contextmanager
def profile():
    """with tessera.profile() as p: ...; p.table() -> [(op, calls, seconds, share)]."""
    global _profile
    outer, _profile = _profile, Profile()
    try:
        yield _profile
    finally:
        _profile = outer


# ------------------------------------------------------------------ operands

def _is_pyopencl(x):
    cla = sys.modules.get('pyopencl.array')  # not imported by the caller: no pyopencl array can exist
    return cla is not None and isinstance(x, cla.Array)


_wrapped = {}  # pyopencl queue's cl_command_queue -> the Device wrapping it (the latest few)
_WRAPPED_MAX = 8


def _device_for_queue(queue):
    key = queue.int_ptr
    dev = _wrapped.get(key)
    if dev is None or dev.closed:
        while len(_wrapped) >= _WRAPPED_MAX:  # the oldest wrapper goes (its queue with it)
            _wrapped.pop(next(iter(_wrapped))).close()
        dev = _wrapped[key] = Device.from_pyopencl(queue)
    return dev


class Operand:
    """An op's tensor argument resolved for one call: buffer, element offset, shape, element
    strides, dtype and storage type. `kind` is 'numpy', 'array' or 'pyopencl'; a NumPy operand
    owns a temporary device buffer holding its data (`upload` False: allocated, not filled)."""

    __slots__ = ('kind', 'mem', 'offset', 'shape', 'strides', 'dtype', 'source', 'result', 'numpy_result')

    def __init__(self, kind, mem, offset, shape, strides, dtype, source):
        self.kind, self.mem, self.offset = kind, mem, offset
        self.shape, self.strides, self.dtype = shape, strides, dtype  # tuples, np.dtype
        self.source = source  # the caller's object (kept alive for the call)
        self.result = self.numpy_result = None

    @property
    def tsr_type(self):
        return _DTYPES[self.dtype]

    @property
    def ndim(self):
        return len(self.shape)


class Call:
    """The device, queue and operands of one op call: it checks that every device-resident input
    lives in the device's context, uploads NumPy inputs, allocates outputs of the right kind
    (NumPy, tessera.Array or pyopencl) and copies NumPy results back once the op ran."""

    def __init__(self, device, tensors, keep_on_device=False, op=None):
        self.op = op
        self.started = time.perf_counter() if _profile is not None else None
        self.pyopencl_queue = None
        arrays_device = None
        cla = sys.modules.get('pyopencl.array')
        for t in tensors:
            if t is None:
                continue
            if cla is not None and isinstance(t, cla.Array):
                if self.pyopencl_queue is None:
                    self.pyopencl_queue = t.queue
            elif isinstance(t, Array):
                if arrays_device is None:
                    arrays_device = t.device
                elif t.device is not arrays_device:
                    raise _invalid('tessera.Arrays of different devices in one call')
        if device is not None:
            self.device = _as_device(device)
        elif arrays_device is not None:
            self.device = arrays_device
        elif self.pyopencl_queue is not None:
            self.device = _device_for_queue(self.pyopencl_queue)
        else:
            self.device = default_device()
        if arrays_device is not None and arrays_device is not self.device:
            raise _invalid('a tessera.Array of device %r passed to a call on device %r' % (arrays_device, self.device))
        self.handle = self.device.handle
        self.context_int = self.device.context_int
        # Everything (op, uploads, read-backs) goes on the device's queue. A pyopencl queue that
        # is not the one the device wraps is finished before and the device's queue after the
        # call, so that work on either side is ordered with this call.
        self.queue = lib.tsr_device_queue(self.handle)
        self.foreign_queue = None
        pq = self.pyopencl_queue
        if pq is not None:
            wrapped = self.device._pyopencl
            if wrapped is None or wrapped[2] is not pq:
                self.foreign_queue = pq
                pq.finish()
        self.out_kind = ('pyopencl' if self.pyopencl_queue is not None else
                         'array' if arrays_device is not None or keep_on_device else 'numpy')
        self._readbacks = []

    def operand(self, x, role, contiguous=False):
        """Resolve input `x`; a NumPy input goes to the device as a C-contiguous copy."""
        if x is None:
            return None
        if _is_pyopencl(x):
            if x.base_data is None and x.size != 0:
                raise _invalid('%s: pyopencl array without a buffer' % role)
            dtype = x.dtype
            _tsr_type(dtype, role)
            item = dtype.itemsize
            strides = x.strides
            for s in strides:
                if s % item or s < 0:
                    raise _invalid('%s: strides must be non-negative multiples of the element size' % role)
            if x.offset % item:
                raise _invalid('%s: the offset must be a multiple of the element size' % role)
            if x.size == 0:
                return Operand('pyopencl', ffi.NULL, 0, x.shape, _contiguous_strides(x.shape), x.dtype, x)
            mem = ffi.cast('cl_mem', x.base_data.int_ptr)
            if x.context.int_ptr != self.context_int:  # pyopencl's record of the buffer's context
                raise _invalid('%s: the pyopencl array lives in another OpenCL context than device %r '
                               '(wrap its queue: tessera.Device.from_pyopencl(queue))' % (role, self.device))
            if x.events:  # pyopencl work still writing it
                import pyopencl as cl
                cl.wait_for_events(x.events)
            op = Operand('pyopencl', mem, x.offset // item, x.shape, tuple([s // item for s in strides]), dtype, x)
        elif isinstance(x, Array):
            _tsr_type(x.dtype, role)
            op = Operand('array', x.mem, x.offset, x.shape, x.strides, x.dtype, x)
        else:
            if not isinstance(x, np.ndarray):
                if hasattr(x, '__array__') or hasattr(x, '__cuda_array_interface__'):
                    x = np.asarray(x)  # a tensor of another library: its dtype must fit as is
                else:
                    x = np.asarray(x, dtype=np.float32)  # lists and scalars
            _tsr_type(x.dtype, role)
            host = np.ascontiguousarray(x)
            mem = _create_buffer(self.device, host.nbytes, host if host.nbytes else None)
            return Operand('numpy', mem, 0, host.shape, _contiguous_strides(host.shape), host.dtype, host)
        if contiguous and tuple(op.strides) != _contiguous_strides(op.shape) and op.shape and min(op.shape) > 0:
            raise _invalid('%s: a contiguous tensor is needed (shape %s, element strides %s): copy it first'
                           % (role, op.shape, tuple(op.strides)))
        return op

    def output(self, out, shape, dtype, role='out', needs_input=False):
        """The output operand: `out` if given (checked: shape, dtype, kind), else a new tensor
        of the call's output kind. `needs_input`: the op reads it (beta != 0), so a NumPy `out`
        is uploaded first."""
        if type(shape) is not tuple:
            shape = tuple(int(s) for s in shape)
        if out is None:
            dtype = np.dtype(dtype)
            _tsr_type(dtype, role)
            if self.out_kind == 'pyopencl':
                import pyopencl.array as cla
                result = cla.empty(self.pyopencl_queue, shape, dtype)
                op = self.operand(result, role) if result.size else Operand(
                    'pyopencl', _create_buffer(self.device, 0), 0, shape, _contiguous_strides(shape), dtype, result)
                op.result = result
                return op
            result = empty(shape, dtype, self.device)
            op = Operand('array', result.mem, 0, shape, result.strides, dtype, result)
            op.result = result if self.out_kind == 'array' else None
            if self.out_kind == 'numpy':
                op.numpy_result = np.empty(shape, dtype)
                self._readbacks.append(op)
            return op
        if tuple(getattr(out, 'shape', ())) != shape:
            raise _invalid('%s has shape %s, the result is %s' % (role, tuple(getattr(out, 'shape', ())), shape))
        if isinstance(out, np.ndarray):
            _tsr_type(out.dtype, role)
            if not out.flags.writeable:
                raise _invalid('%s is read-only' % role)
            host = np.ascontiguousarray(out) if needs_input else None
            mem = _create_buffer(self.device, out.nbytes, host if host is not None and host.nbytes else None)
            op = Operand('numpy', mem, 0, shape, _contiguous_strides(shape), out.dtype, out)
            op.numpy_result = out
            op.result = out
            self._readbacks.append(op)
            return op
        if not (_is_pyopencl(out) or isinstance(out, Array)):
            raise _invalid('%s must be a NumPy array, a tessera.Array or a pyopencl array' % role)
        op = self.operand(out, role)
        op.result = out
        return op

    def scratch(self, shape, dtype=np.float32):
        """A temporary device tensor for the call (freed with the operand)."""
        arr = empty(shape, dtype, self.device)
        return Operand('array', arr.mem, 0, arr.shape, arr.strides, arr.dtype, arr)

    def finish(self, *outputs):
        """Copy NumPy results back (blocking) and return the caller's result objects."""
        for op in self._readbacks:
            host = op.numpy_result
            if host.flags.c_contiguous:
                _read(self.device, op.mem, 0, host, self.queue)
            else:
                tmp = np.empty(host.shape, host.dtype)
                _read(self.device, op.mem, 0, tmp, self.queue)
                host[...] = tmp
            op.result = host
        results = tuple(op.result for op in outputs)
        if self.foreign_queue is not None:
            _cl_check(lib.clFinish(self.queue), 'clFinish')
        if self.started is not None and _profile is not None:
            _profile.add(self.op, self.started, self.device, self.queue)
        return results[0] if len(results) == 1 else results

    def check(self, status):
        _check(status)
