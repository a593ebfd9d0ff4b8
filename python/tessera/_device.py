"""Devices over the C API: what the machine has (devices(), DeviceInfo), an open device
(Device: by selector, or wrapping a pyopencl queue or context), the default device, and
as_device(), the one way from what a caller passes as `device=` to an open Device.

Lifetimes: every use of a Device's C handle (an op, a transfer, a query) holds a use of the
device (_lifetime.Uses) that close() waits for.
"""
import contextlib
import threading
import weakref

from . import _args
from ._errors import TesseraError, _check, _cl_check, _closed, _invalid, _text
from ._lifetime import Uses
from ._tessera_cffi import ffi, lib

__all__ = ['DeviceInfo', 'Device', 'devices', 'default_device', 'set_default_device', 'as_device']


class DeviceInfo:
    """One OpenCL device as tessera sees it (tsr_device_info); `selector` opens it."""

    _FIELDS = ('platform_index', 'device_index', 'type', 'name', 'vendor', 'platform_name', 'platform_vendor',
               'platform_version', 'device_version', 'driver_version', 'opencl_c_version', 'compute_units',
               'max_clock_mhz', 'global_mem_bytes', 'max_alloc_bytes', 'local_mem_bytes', 'max_work_group_size',
               'fp16', 'fp64', 'compiler_available', 'available', 'unusable', 'worker_threads',
               'host_cpu')

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
        known = self._context_int
        if known is not None:  # fixed for the device's life: no use to hold (a call's hot path)
            return known
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
    dev = as_device(device)
    with _default_lock:
        _default = dev
    return dev


def as_device(device=None):
    """The open Device that `device` names, as every op's `device=` argument reads it: a Device is
    returned as it is (a closed one raises TesseraError); a selector string ("cpu", "gpu",
    "accelerator", "P:D", or part of a name) opens that device on first use and returns the same
    Device for the same string later, so its compiled kernels stay cached; None gives
    default_device(). Anything else raises InvalidArgument."""
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
    raise _invalid('device must be a tessera.Device, a selector string or None, not %s' % type(device).__name__)

