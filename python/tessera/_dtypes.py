"""The storage types tessera supports, as NumPy dtypes: float32, float16, and bfloat16 where
ml_dtypes is installed; each maps to the C library's tsr_dtype."""
import numpy as np

from ._errors import _invalid
from ._tessera_cffi import lib

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
