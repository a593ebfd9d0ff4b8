"""The package's exceptions and the checks that raise them: a C status, an OpenCL error code, or
a Python-side refusal of an argument."""
from ._tessera_cffi import ffi, lib


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


TesseraError.__module__ = InvalidArgument.__module__ = 'tessera'


def _error(status, message):
    return InvalidArgument(status, message) if status == lib.TSR_ERR_INVALID_ARG else TesseraError(status, message)


def _check(status):
    if status != lib.TSR_SUCCESS:
        raise _error(status, _text(lib.tsr_last_error()))


def _invalid(message):
    return InvalidArgument(lib.TSR_ERR_INVALID_ARG, message)


def _closed(what):
    """The error of an object used after its release or close (a TesseraError, not a bad argument)."""
    return TesseraError(lib.TSR_ERR_INVALID_ARG, what)


def _cl_check(err, what):
    if err != lib.CL_SUCCESS:
        status = lib.TSR_ERR_OUT_OF_MEMORY if err in (-4, -5, -6, -61) else lib.TSR_ERR_OPENCL
        raise TesseraError(status, '%s failed with OpenCL error %d' % (what, err))
