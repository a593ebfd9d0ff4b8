"""Recorded launch sequences (docs/graph.md): `with tessera.graph(device) as g:` records the
kernel launches of the ops called inside it on this thread (they also run), `g.replay()` (or
`g()`) enqueues them again with nothing else: no argument checks, no look-ups, no allocation."""
import threading

from ._array import Array
from ._device import as_device
from ._errors import _check, _closed, _invalid
from ._tessera_cffi import ffi, lib

_local = threading.local()
recorders = 0  # threads recording now: while 0, no thread is (the replays' hot path reads this alone)
_recorders_lock = threading.Lock()


def recording():
    """The Graph this thread records, or None."""
    return getattr(_local, 'graph', None)


def note_operand(op, role):
    """Called by every op operand while this thread records: Arrays are kept (a replay refuses
    once one was released); NumPy data would be read or written on the host at call time, which
    a replay cannot repeat."""
    g = recording()
    if g is None or op is None:
        return
    if op.kind == 'numpy':
        raise _invalid('%s: a NumPy array cannot be used while recording a graph (its values are copied at call '
                       'time, which a replay does not repeat): pass a tessera.Array (tessera.to_device)' % role)
    if isinstance(op.source, Array):
        g._buffers[id(op.source._buf)] = op.source._buf


class Graph:
    """A recorded sequence of kernel launches on one device. It keeps the device buffers it uses
    alive (the C graph retains them) and refuses to replay once a tessera.Array it uses was
    released, once its device was closed, or after the device's configuration changed
    (tessera's config override, a re-tune): record it again then."""

    def __init__(self, device=None, name=None):
        self.device = as_device(device)
        self.name = name
        self._handle = None
        self._buffers = {}
        self._recording = False

    def __enter__(self):
        if recording() is not None:
            raise _invalid('this thread is already recording a graph')
        if self._handle is not None or self._recording:
            raise _invalid('a graph is recorded once: make a new tessera.graph()')
        handle = self.device._acquire()
        try:
            self._name_c = ffi.new('char[]', self.name.encode()) if self.name else ffi.NULL
            desc = ffi.new('tsr_graph_desc *', {'name': self._name_c})
            _check(lib.tsr_graph_begin(handle, desc))
        except BaseException:
            self.device._release()
            raise
        self._recording = True
        global recorders
        with _recorders_lock:
            recorders += 1
        _local.graph = self
        return self

    def __exit__(self, exc_type, exc, tb):
        global recorders
        _local.graph = None
        with _recorders_lock:
            recorders -= 1
        self._recording = False
        out = ffi.new('tsr_graph **')
        try:
            status = lib.tsr_graph_end(self.device._handle, out)
        finally:
            self.device._release()
        if exc_type is not None:  # the body's error counts; the recording is dropped
            if out[0] != ffi.NULL:
                lib.tsr_graph_destroy(out[0])
            return False
        _check(status)
        self._handle = ffi.gc(out[0], lib.tsr_graph_destroy)
        return False

    @property
    def launches(self):
        """How many kernel launches the graph holds."""
        n = ffi.new('size_t *')
        _check(lib.tsr_graph_info(self._live(), n, ffi.NULL))
        return int(n[0])

    def _live(self):
        if self._handle is None:
            raise _closed('the graph was not recorded (or was released)')
        return self._handle

    def replay(self):
        """Enqueue the recorded launches on the device's queue (in order, after what is queued
        before). Raises TesseraError when an Array the graph uses was released, the device was
        closed or its configuration changed since the recording, or when it reads data kept for
        a buffer marked constant (set_constant) that changed since (record it again)."""
        handle = self._live()
        for buf in self._buffers.values():
            if buf.mem is None:
                raise _closed('graph %s uses a tessera.Array that was released since it was recorded: record '
                              'it again' % (repr(self.name) if self.name else ''))
        self.device._acquire()
        try:
            _check(lib.tsr_graph_launch(handle, ffi.NULL, ffi.NULL))
        finally:
            self.device._release()

    __call__ = replay

    def release(self):
        """Free the graph now (its kernels and its hold on the buffers); idempotent."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            ffi.gc(handle, None)  # no destructor left to run
            lib.tsr_graph_destroy(handle)


def graph(device=None, name=None):
    """Record the ops called in a `with` block on this thread as a tessera.Graph:

        with tessera.graph(dev) as g:
            h = tessera.matmul(x, w, out=h_buf)   # x, w, h_buf: tessera.Arrays
            tessera.gelu(h, out=h)
        x.set(new_values); g.replay()            # the same launches on x's new contents

    Only device-resident arrays (tessera.Array, pyopencl) may be used inside: a NumPy input or
    result, and tessera.embedding (which uploads its ids), raise while recording."""
    return Graph(device, name)
