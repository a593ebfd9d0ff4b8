"""One op call's device, queue and operands: NumPy arrays, tessera.Arrays and pyopencl arrays
resolved into what a tessera call takes (a cl_mem, an element offset, element strides, a
storage type), uploads, outputs of the caller's kind, read-backs, and the ordering of the call
with the caller's queue.

A Call holds a use of its device from its start to its end (`with Call(...) as call:`), so that
Device.close() on another thread waits for it and never releases the handle under it."""
import sys
import threading
import time

import numpy as np

from . import _profiling
from . import _graph
from ._array import Array, _contiguous_strides, _create_buffer, _fence, _read
from ._device import Device, as_device, default_device
from ._dtypes import _DTYPES, _tsr_type
from ._errors import _check, _cl_check, _invalid
from ._tessera_cffi import ffi, lib


def _is_pyopencl(x):
    cla = sys.modules.get('pyopencl.array')  # not imported by the caller: no pyopencl array can exist
    return cla is not None and isinstance(x, cla.Array)


_wrapped = {}  # pyopencl queue's cl_command_queue -> the Device wrapping it (the latest few)
_wrapped_lock = threading.Lock()
_WRAPPED_MAX = 8


def _device_for_queue(queue):
    key = queue.int_ptr
    with _wrapped_lock:
        dev = _wrapped.get(key)
        if dev is None or dev.closed:
            # the oldest idle wrappers go (their queues with them); one in use by a call stays
            for old in [k for k, d in _wrapped.items() if d.closed or not d._uses.busy]:
                if len(_wrapped) < _WRAPPED_MAX:
                    break
                _wrapped.pop(old).close()
            dev = _wrapped[key] = Device.from_pyopencl(queue)
        return dev


def result_dtype(out, out_dtype, default):
    """The dtype of an op's result: out's (checked to be an output at all), else out_dtype, else
    the op's default."""
    if out is not None:
        if not (isinstance(out, (np.ndarray, Array)) or _is_pyopencl(out)):
            raise _invalid('out must be a NumPy array, a tessera.Array or a pyopencl array, not %s'
                           % type(out).__name__)
        return out.dtype
    return out_dtype if out_dtype is not None else default


class Operand:
    """An op's tensor argument resolved for one call: buffer, element offset, shape, element
    strides, dtype and storage type. `kind` is 'numpy', 'array' or 'pyopencl'; a NumPy operand
    owns a temporary device buffer holding its data. `mem` holds the buffer for the call (a
    tessera.Array released meanwhile on another thread is freed after it)."""

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
    (NumPy, tessera.Array or pyopencl) and copies NumPy results back once the op ran. Used as
    `with Call(...) as call:`, which holds a use of the device for the call."""

    def __init__(self, device, tensors, keep_on_device=False, op=None):
        if not isinstance(keep_on_device, (bool, np.bool_)):
            raise _invalid('keep_on_device must be True or False, not %r' % (keep_on_device,))
        self.op = op
        self.started = time.perf_counter() if _profiling.current is not None else None
        self.pyopencl_queue = None
        self._held = False
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
            self.device = as_device(device)
        elif arrays_device is not None:
            self.device = arrays_device
        elif self.pyopencl_queue is not None:
            self.device = _device_for_queue(self.pyopencl_queue)
        else:
            self.device = default_device()
        if arrays_device is not None and arrays_device is not self.device:
            raise _invalid('a tessera.Array of device %r passed to a call on device %r' % (arrays_device, self.device))
        self.out_kind = ('pyopencl' if self.pyopencl_queue is not None else
                         'array' if arrays_device is not None or keep_on_device else 'numpy')
        self._readbacks = []

    def __enter__(self):
        self.handle = self.device._acquire()
        self._held = True
        try:
            self.context_int = self.device.context_int
            # Everything (op, uploads, read-backs) goes on the device's queue. A pyopencl queue that
            # is not the one the device wraps is finished before and the device's queue after the
            # call, so that work on either side is ordered with this call. On a wrapped
            # out-of-order queue, barriers order the call after earlier work and later work
            # (pyopencl's .get(), tessera's reads) after it.
            self.queue = lib.tsr_device_queue(self.handle)
            self.foreign_queue = None
            pq = self.pyopencl_queue
            if pq is not None:
                wrapped = self.device._pyopencl
                if wrapped is None or wrapped[2] is not pq:
                    self.foreign_queue = pq
                    pq.finish()
            self.barrier()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        if self._held:
            self._held = False
            self.device._release()

    def barrier(self):
        """Order what follows on the device's queue after what came before (out-of-order queues;
        a no-op on in-order ones). Returns the barrier's pyopencl event or None."""
        return _fence(self.device)

    def operand(self, x, role, contiguous=False, optional=False):
        """Resolve input `x`; a NumPy input goes to the device as a C-contiguous copy."""
        if x is None:
            if optional:
                return None
            raise _invalid('%s is required, not None' % role)
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
            if x.size == 0:  # no buffer behind it: a placeholder the C checks accept (nothing is read)
                return Operand('pyopencl', _create_buffer(self.handle, 0), 0, x.shape, _contiguous_strides(x.shape),
                               x.dtype, x)
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
            try:
                if not isinstance(x, np.ndarray):
                    if hasattr(x, '__array__') or hasattr(x, '__cuda_array_interface__'):
                        x = np.asarray(x)  # a tensor of another library: its dtype must fit as is
                    else:
                        x = np.asarray(x, dtype=np.float32)  # lists and scalars
            except (TypeError, ValueError) as exc:
                raise _invalid('%s: %s cannot be read as an array (%s)' % (role, type(x).__name__, exc)) from None
            _tsr_type(x.dtype, role)
            host = np.asarray(x, order="C")  # (ascontiguousarray would make a 0-d array 1-D)
            mem = _create_buffer(self.handle, host.nbytes, host if host.nbytes else None)
            op = Operand('numpy', mem, 0, host.shape, _contiguous_strides(host.shape), host.dtype, host)
            if _graph.recording() is not None:
                _graph.note_operand(op, role)
            return op
        if _graph.recording() is not None:
            _graph.note_operand(op, role)
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
            _tsr_type(dtype, 'out_dtype' if role == 'out' else role)
            dtype = np.dtype(dtype)
            if self.out_kind == 'pyopencl':
                import pyopencl.array as cla
                result = cla.empty(self.pyopencl_queue, shape, dtype)
                op = self.operand(result, role) if result.size else Operand(
                    'pyopencl', _create_buffer(self.handle, 0), 0, shape, _contiguous_strides(shape), dtype, result)
                op.result = result
                return op
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize if shape else dtype.itemsize
            result = Array(self.device, _create_buffer(self.handle, nbytes), shape, dtype)
            op = Operand('array', result.mem, 0, shape, result.strides, dtype, result)
            op.result = result if self.out_kind == 'array' else None
            if self.out_kind == 'numpy':
                if _graph.recording() is not None:
                    raise _invalid('%s: a NumPy result cannot be made while recording a graph (it is read back at '
                                   'call time): pass device-resident inputs or keep_on_device=True' % role)
                op.numpy_result = np.empty(shape, dtype)
                self._readbacks.append(op)
            return op
        if tuple(getattr(out, 'shape', ())) != shape:
            raise _invalid('%s has shape %s, the result is %s' % (role, tuple(getattr(out, 'shape', ())), shape))
        if isinstance(out, np.ndarray):
            _tsr_type(out.dtype, role)
            if not out.flags.writeable:
                raise _invalid('%s is read-only' % role)
            host = np.asarray(out, order="C") if needs_input else None
            mem = _create_buffer(self.handle, out.nbytes, host if host is not None and host.nbytes else None)
            op = Operand('numpy', mem, 0, shape, _contiguous_strides(shape), out.dtype, out)
            if _graph.recording() is not None:
                _graph.note_operand(op, role)
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
        dtype = np.dtype(dtype)
        arr = Array(self.device, _create_buffer(self.handle, int(np.prod(shape)) * dtype.itemsize), shape, dtype)
        return Operand('array', arr.mem, 0, arr.shape, arr.strides, arr.dtype, arr)

    def finish(self, *outputs):
        """Copy NumPy results back (blocking) and return the caller's result objects; on an
        out-of-order queue, pyopencl results carry the event of a barrier after the call."""
        done = self.barrier()
        for op in self._readbacks:
            host = op.numpy_result
            if host.flags.c_contiguous:
                _read(self.queue, op.mem, 0, host)
            else:
                tmp = np.empty(host.shape, host.dtype)
                _read(self.queue, op.mem, 0, tmp)
                host[...] = tmp
            op.result = host
        if done is not None:
            for op in outputs:
                if op is not None and op.kind == 'pyopencl':
                    op.source.add_event(done)
        results = tuple(op.result for op in outputs)
        if self.foreign_queue is not None:
            _cl_check(lib.clFinish(self.queue), 'clFinish')
        if self.started is not None and _profiling.current is not None:
            _profiling.current.add(self.op, self.started, self.device, self.queue)
        return results[0] if len(results) == 1 else results

    def check(self, status):
        _check(status)
