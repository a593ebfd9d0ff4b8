"""In-flight uses of an object that can be closed (a Device, a DeviceGroup): every call that uses
its C handle holds a use for the call's duration; close() refuses new uses at once, waits for the
uses in flight on other threads, and only then lets the owner release the handle. A thread that
holds a use and closes the object would wait for itself: that close raises instead."""
import threading

from ._errors import _check, _closed


class Uses:
    __slots__ = ('_lock', '_cond', '_count', '_threads', '_state', 'reason')

    OPEN, CLOSING, CLOSED = 0, 1, 2

    def __init__(self):
        self._lock = threading.Lock()  # the condition's: `with self._lock` skips Condition's Python-level __enter__
        self._cond = threading.Condition(self._lock)
        self._count = 0
        self._threads = {}  # thread id -> uses it holds
        self._state = self.OPEN
        self.reason = None  # why it was closed, for the error of a later use

    @property
    def open(self):
        return self._state == self.OPEN

    @property
    def busy(self):
        return self._count > 0

    def acquire(self, what):
        """Hold a use; raises TesseraError(`what` is closed: reason) once close() has begun."""
        tid = threading.get_ident()
        with self._lock:
            if self._state != self.OPEN:
                raise _closed('%s is closed%s' % (what, ': ' + self.reason if self.reason else ''))
            self._count += 1
            self._threads[tid] = self._threads.get(tid, 0) + 1

    def release(self):
        tid = threading.get_ident()
        with self._lock:
            self._count -= 1
            held = self._threads[tid] - 1
            if held:
                self._threads[tid] = held
            else:
                del self._threads[tid]
            if not self._count and self._state != self.OPEN:  # only close() waits
                self._cond.notify_all()

    def run(self, fn, calls):
        """status = fn(*args) for each args of `calls` while holding a use (acquire and release
        in one frame: a replay's hot path); raises on the first failing status. False, calling
        nothing, once close() has begun (the caller's full path then raises)."""
        tid = threading.get_ident()
        with self._lock:
            if self._state != self.OPEN:
                return False
            self._count += 1
            self._threads[tid] = self._threads.get(tid, 0) + 1
        try:
            for args in calls:
                status = fn(*args)
                if status:
                    _check(status)
        finally:
            self.release()
        return True

    def begin_close(self, what, reason=None):
        """Refuse new uses and wait for those in flight. True: the caller now releases the handle
        and then calls end_close(); False: it is closed already (or another thread closes it,
        and that close has finished when this returns)."""
        with self._cond:
            if self._state == self.CLOSED:
                return False
            if self._threads.get(threading.get_ident()):
                raise _closed('%s cannot be closed from inside a call that uses it (on this thread)' % what)
            if self._state == self.CLOSING:
                while self._state != self.CLOSED:
                    self._cond.wait()
                return False
            self._state = self.CLOSING
            if reason is not None:
                self.reason = reason
            while self._count:
                self._cond.wait()
            return True

    def end_close(self):
        with self._cond:
            self._state = self.CLOSED
            self._cond.notify_all()
