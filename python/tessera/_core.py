"""Devices and device-resident arrays over the C API (through the cffi extension).

Operands of the ops come in three kinds, and _call.py turns each into what a tessera call
takes (a cl_mem, an element offset, element strides, a storage type):
  - NumPy arrays: copied to a device buffer for the call (and results copied back);
  - tessera.Array: a buffer tessera allocated and keeps on the device;
  - pyopencl arrays: used in place, zero-copy, when they live in the device's context.

Lifetimes: every use of a Device's C handle (an op, a transfer, a query) holds a use of the
device (_lifetime.Uses) that close() waits for; an Array and its views share one _Buffer, so
release() through any of them frees the buffer for all, and each later use raises.
"""
import contextlib
import math
import threading
import time
import weakref

import numpy as np

from . import _args
from ._errors import InvalidArgument, TesseraError, _check, _cl_check, _closed, _error, _invalid, _text  # noqa: F401
from ._lifetime import Uses
from ._tessera_cffi import ffi, lib

__all__ = ['TesseraError', 'InvalidArgument', 'DeviceInfo', 'Device', 'Array', 'devices', 'default_device',
           'set_default_device', 'to_device', 'empty', 'from_buffer', 'profile', 'version']


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
    try:
        found = _DTYPES.get(dtype)
    except TypeError:  # unhashable: no dtype
        found = None
    if found is not None:
        return found
    try:
        dtype = np.dtype(dtype)
    except (TypeError, ValueError):
        raise _invalid('%s: %r is not a dtype' % (role, dtype)) from None
    if dtype not in _DTYPES:
        names = ', '.join(str(d) for d in _DTYPES)
        raise _invalid('%s: dtype %s is not supported (tessera stores %s; convert with .astype(np.float32))'
                       % (role, dtype, names))
    return _DTYPES[dtype]


def _dtype(dtype, role):
    """np.dtype of a storage type tessera supports (InvalidArgument otherwise)."""
    _tsr_type(dtype, role)
    return np.dtype(dtype)


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
    block) releases it once the calls in flight on other threads have returned; using a closed
    device raises TesseraError, and so does a DeviceGroup that holds it."""

    def __init__(self, selector=None):
        if selector is not None:
            selector = _args.text(selector, 'device selector')
        handle = ffi.new('tsr_device **')
        _check(lib.tsr_device_open(selector if selector else ffi.NULL, handle))
        self._setup(handle[0], None, False)

    def _setup(self, handle, pyopencl, out_of_order):
        self._handle = handle
        self._pyopencl = pyopencl  # (context, device, queue): keeps the pyopencl objects alive with us
        self._out_of_order = out_of_order  # a wrapped out-of-order queue: calls are fenced with barriers
        self._context_int = None
        self._uses = Uses()
        self._groups = weakref.WeakSet()  # DeviceGroups holding this device: closed before it

    @classmethod
    def from_pyopencl(cls, queue_or_context, device=None):
        """Wrap a pyopencl.CommandQueue (its context, device and queue; in-order or out-of-order)
        or a pyopencl.Context (with `device`, default its first device; tessera then makes its own
        queue)."""
        import pyopencl as cl
        if isinstance(queue_or_context, cl.CommandQueue):
            queue = queue_or_context
            context, cl_device = queue.context, queue.device
        elif isinstance(queue_or_context, cl.Context):
            queue, context = None, queue_or_context
            cl_device = device if device is not None else context.devices[0]
            if not isinstance(cl_device, cl.Device):
                raise _invalid('from_pyopencl: device must be a pyopencl.Device, not %s' % type(cl_device).__name__)
        else:
            raise _invalid('from_pyopencl takes a pyopencl CommandQueue or Context, not %s'
                           % type(queue_or_context).__name__)
        self = cls.__new__(cls)
        self._handle = None
        handle = ffi.new('tsr_device **')
        _check(lib.tsr_device_wrap(ffi.cast('cl_context', context.int_ptr),
                                   ffi.cast('cl_device_id', cl_device.int_ptr),
                                   ffi.cast('cl_command_queue', queue.int_ptr) if queue is not None else ffi.NULL,
                                   handle))
        ooo = queue is not None and bool(queue.properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
        self._setup(handle[0], (context, cl_device, queue), ooo)
        return self

    @property
    def handle(self):
        """The tsr_device pointer (cffi); raises when the device is closed (or closing)."""
        if self._handle is None or not self._uses.open:
            raise self._closed_error()
        return self._handle

    def _closed_error(self):
        return _closed('the device is closed')

    def _acquire(self):
        """Hold a use of the device for a call (close() waits for it); returns the handle."""
        self._uses.acquire('the device')
        return self._handle

    def _release(self):
        self._uses.release()

    @contextlib.contextmanager
    def _held(self):
        handle = self._acquire()
        try:
            yield handle
        finally:
            self._uses.release()

    @property
    def context_int(self):
        """The device's cl_context as an integer (pyopencl's int_ptr)."""
        with self._held() as handle:
            if self._context_int is None:
                self._context_int = int(ffi.cast('intptr_t', lib.tsr_device_context(handle)))
            return self._context_int

    @property
    def closed(self):
        return self._handle is None or not self._uses.open

    def close(self):
        """Finish the device's queue and release it (idempotent). Calls in flight on other
        threads finish first; calls that start later raise TesseraError. DeviceGroups holding
        the device are closed with it. Raises TesseraError when called from inside a call on
        this device on the same thread (a tuning progress callback, say)."""
        uses = getattr(self, '_uses', None)
        if uses is None or not uses.begin_close('the device'):
            return
        try:
            for group in list(self._groups):
                group._member_closed(self)
            if self._handle is not None:
                lib.tsr_device_close(self._handle)
        finally:
            self._handle = None
            uses.end_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, '_handle', None) is not None:
            try:
                self.close()
            except Exception:  # noqa: BLE001 (interpreter shutdown: modules half torn down)
                pass

    @property
    def info(self):
        with self._held() as handle:
            return DeviceInfo(lib.tsr_device_get_info(handle)[0])

    @property
    def name(self):
        with self._held() as handle:
            return _text(lib.tsr_device_get_info(handle).name)

    @property
    def fingerprint(self):
        with self._held() as handle:
            return _text(lib.tsr_device_fingerprint(handle))

    def finish(self):
        """Wait for everything enqueued on the device's queue."""
        with self._held() as handle:
            _cl_check(lib.clFinish(lib.tsr_device_queue(handle)), 'clFinish')

    def config(self, op, problem_class):
        """The configuration `op` uses here for `problem_class` and where it comes from."""
        op, problem_class = _args.text(op, 'op'), _args.text(problem_class, 'problem_class')
        info = ffi.new('tsr_config_info *')
        with self._held() as handle:
            _check(lib.tsr_config_lookup(handle, op, problem_class, info))
        return {'op': _text(info.op), 'class': _text(info.problem_class), 'used_class': _text(info.used_class),
                'config': _text(info.config), 'source': _text(lib.tsr_config_source_str(info.source)),
                'origin': _text(info.origin), 'tuned_gflops': info.tuned_gflops,
                'stale_passed_over': info.stale_passed_over}

    def override(self, op, config):
        """Force `op`'s configuration ("MWI=4 VW=8 ..."); None or "" goes back to tuned/defaults."""
        op, config = _args.text(op, 'op'), _args.text(config, 'config', allow_none=True)
        with self._held() as handle:
            _check(lib.tsr_config_override(handle, op, config if config else ffi.NULL))

    def __repr__(self):
        if self.closed:
            return '<tessera.Device (closed)>'
        try:
            return '<tessera.Device %r>' % self.name
        except TesseraError:  # closed meanwhile
            return '<tessera.Device (closed)>'


_default = None
_default_lock = threading.Lock()
_by_selector = {}
_selector_lock = threading.Lock()


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
        with _selector_lock:
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
        self.device = device
        self._buf = mem if isinstance(mem, _Buffer) else _Buffer(mem)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.strides = tuple(strides) if strides is not None else _contiguous_strides(self.shape)  # elements
        self.offset = int(offset)  # elements

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
        if _profile is not None:
            _profile.add('transfer', started)
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
        if _profile is not None:
            _profile.add('transfer', started)
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
    dev = _as_device(device)
    if dtype is not None:
        dtype = _dtype(dtype, 'to_device: dtype')
    try:
        host = np.asarray(x, dtype=dtype, order="C")  # a 0-d array stays 0-d
    except (TypeError, ValueError) as exc:
        raise _invalid('to_device: the values cannot be read as an array (%s)' % exc) from None
    _tsr_type(host.dtype, 'to_device')
    with dev._held() as handle:
        result = Array(dev, _create_buffer(handle, host.nbytes, host if host.nbytes else None), host.shape, host.dtype)
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
    dev = _as_device(device)
    shape = _args.extents(shape, 'empty: shape')
    dtype = _dtype(dtype, 'empty: dtype')
    with dev._held() as handle:
        return Array(dev, _create_buffer(handle, math.prod(shape) * dtype.itemsize), shape, dtype)


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


# The operand resolution of the ops (kept importable from here: bench/python_overhead.py uses it).
from ._call import Call, Operand, _device_for_queue, _is_pyopencl  # noqa: E402,F401
