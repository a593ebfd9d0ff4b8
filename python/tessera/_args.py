"""Checks of scalar and small arguments: each returns the value in the type the C call takes, or
raises InvalidArgument naming the argument. Nothing is coerced silently: a bool is no integer or
number here, a float no integer (2.9 is not 2), a string no number, NaN and infinities no count."""
import math
import operator

import numpy as np

from ._errors import _invalid

_BOOLS = (bool, np.bool_)


def integer(value, name, low=None, high=None):
    """An int (Python or NumPy integer, not a bool) in [low, high]."""
    if isinstance(value, _BOOLS) or not isinstance(value, (int, np.integer)):
        raise _invalid('%s must be an integer, not %r (%s)' % (name, value, type(value).__name__))
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = ('at least %d' % low if high is None else 'at most %d' % high if low is None
                  else 'in %d..%d' % (low, high))
        raise _invalid('%s must be %s, not %d' % (name, bounds, value))
    return value


def index(value, name):
    """A Python or NumPy integer for indexing (operator.index, bools refused)."""
    if isinstance(value, _BOOLS):
        raise _invalid('%s must be an integer, not %r' % (name, value))
    try:
        return operator.index(value)
    except TypeError:
        raise _invalid('%s must be an integer, not %r (%s)' % (name, value, type(value).__name__)) from None


def real(value, name, finite=True, positive=False):
    """A real number (int, float or NumPy scalar; not a bool, a string or a complex) as float."""
    if isinstance(value, _BOOLS) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _invalid('%s must be a real number, not %r (%s)' % (name, value, type(value).__name__))
    value = float(value)
    if finite and not math.isfinite(value):
        raise _invalid('%s must be finite, not %r' % (name, value))
    if positive and not value > 0:
        raise _invalid('%s must be > 0, not %r' % (name, value))
    return value


_FLOAT32_OVERFLOW = 3.4028235677973366e38  # the smallest magnitude that rounds to infinity as a float32


def c_float(value, name):
    """A finite real number that stays finite as a C float (float32)."""
    value = real(value, name)
    if abs(value) >= _FLOAT32_OVERFLOW:
        raise _invalid('%s = %r overflows a float32' % (name, value))
    return value


def flag(value, name):
    """A bool (Python or NumPy); 0, 1, strings and None are refused."""
    if not isinstance(value, _BOOLS):
        raise _invalid('%s must be True or False, not %r' % (name, value))
    return bool(value)


def choice(value, name, table, hint=None):
    """table[value] for a hashable value of one of the keys' types (so 1 is not True)."""
    if type(value) is str or value is None:  # the common case, without the scan below
        found = value in table
    else:
        if isinstance(value, np.bool_):
            value = bool(value)
        try:
            found = value in table and any(isinstance(value, type(key)) for key in table)
        except TypeError:  # unhashable
            found = False
    if found:
        return table[value]
    raise _invalid('%s must be %s, not %r' % (name, hint or ' or '.join(repr(k) for k in table), value))


def text(value, name, allow_none=False):
    """A str without NUL characters, as UTF-8 bytes (None stays None where allowed)."""
    if value is None and allow_none:
        return None
    if not isinstance(value, str):
        raise _invalid('%s must be a string, not %s' % (name, type(value).__name__))
    if '\0' in value:
        raise _invalid('%s contains a NUL character: %r' % (name, value))
    return value.encode()


def extents(value, name):
    """A shape: an integer or a sequence of integers, each >= 0."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    return tuple(integer(e, '%s[%d]' % (name, i), 0) for i, e in enumerate(items))


def counts(value, name, length, low, high):
    """A host sequence of `length` integers in low..high (kv_lengths): an integer array or a list of
    integers; floats (even integral ones), bools, NaN and infinities are refused."""
    if isinstance(value, (list, tuple)):
        items = list(value)
        for i, x in enumerate(items):
            integer(x, '%s[%d]' % (name, i))
        arr = np.asarray(items, dtype=np.int64) if items else np.zeros(0, np.int64)
    else:
        arr = np.asarray(value)
        if arr.dtype.kind not in 'iu':
            raise _invalid('%s must hold integers, not %s values' % (name, arr.dtype))
        arr = arr.reshape(-1)
    if arr.size != length:
        raise _invalid('%s must hold %d counts, not %d' % (name, length, arr.size))
    bad = np.flatnonzero((arr < low) | (arr > high))
    if bad.size:
        raise _invalid('%s[%d] = %d is outside %d..%d' % (name, bad[0], arr[bad[0]], low, high))
    return [int(x) for x in arr]
