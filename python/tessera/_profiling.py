"""tessera.profile(): time per op name while a block runs. `current` is the Profile being filled
(None outside a profile() block); op calls and transfers add to it."""
import contextlib
import time

from ._errors import _cl_check
from ._tessera_cffi import lib

__all__ = ['Profile', 'profile']

current = None


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
    global current
    outer, current = current, Profile()
    try:
        yield current
    finally:
        current = outer
