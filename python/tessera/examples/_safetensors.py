"""A checked reader of safetensors files (the format: an 8-byte little-endian header length, a
JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then the data),
for the example runners. No dependency beyond NumPy: the safetensors package is not needed to
read a file, only to write one from PyTorch.

Every header entry is checked against the file before any tensor is read: a missing or
unreadable file raises TesseraError with status TSR_ERR_IO, a damaged or foreign one
TSR_ERR_CORRUPT, the message naming the file and the problem (and the tensor, where one is at
fault)."""
import json
import os
import struct

import numpy as np

import tessera
from tessera._tessera_cffi import lib as _lib

HEADER_LIMIT = 100_000_000        # safetensors' own limit on its JSON header
ITEMSIZE = {'F64': 8, 'F32': 4, 'F16': 2, 'BF16': 2, 'I64': 8, 'I32': 4, 'I16': 2, 'I8': 1,
            'U64': 8, 'U32': 4, 'U16': 2, 'U8': 1, 'BOOL': 1, 'F8_E4M3': 1, 'F8_E5M2': 1}
FLOAT = {'F64': '<f8', 'F32': '<f4', 'F16': '<f2', 'BF16': '<u2'}  # BF16: the top half of an f32


def unreadable(path, problem):
    return tessera.TesseraError(_lib.TSR_ERR_IO, '%s: %s' % (path, problem))


def corrupt(path, problem):
    return tessera.TesseraError(_lib.TSR_ERR_CORRUPT, '%s: %s' % (path, problem))


def one_line(text, limit=200):
    text = ' '.join(str(text).split())
    return text if len(text) <= limit else text[:limit] + '...'


def describe(value):
    """A JSON value for a message: its JSON type and (shortened) value."""
    kind = ('null' if value is None else 'a boolean' if isinstance(value, bool) else
            'a number' if isinstance(value, (int, float)) else 'a string' if isinstance(value, str) else
            'an array' if isinstance(value, list) else 'an object')
    return kind if value is None else '%s (%s)' % (kind, one_line(json.dumps(value), 40))


def _no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError('the key %r appears twice' % key)
        obj[key] = value
    return obj


class File:
    """An open safetensors file whose header has been checked: `metadata` (the __metadata__
    object, {} when absent) and `entries` {name: (dtype, shape, begin, end)}. Use as a context
    manager, or close()."""

    def __init__(self, path):
        if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
            raise tessera.InvalidArgument(_lib.TSR_ERR_INVALID_ARG, 'weights must be a file path (str or '
                                          'os.PathLike of str), not %s' % type(path).__name__)
        path = os.fspath(path)
        if '\0' in path:
            raise tessera.InvalidArgument(_lib.TSR_ERR_INVALID_ARG, 'weights path %r contains a NUL character' % path)
        self.path = path
        if os.path.isdir(path):
            raise unreadable(path, 'is a directory, not a safetensors file')
        try:
            self._f = open(path, 'rb')
        except OSError as exc:
            raise unreadable(path, 'cannot be read (%s)' % (exc.strerror or exc)) from None
        try:
            self._read_header()
        except BaseException:
            self._f.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._f.close()

    def _read_header(self):
        f, path = self._f, self.path
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise corrupt(path, 'is %d bytes, too short for a safetensors file (it starts with an 8-byte header '
                                'length)' % size)
        (length,) = struct.unpack('<Q', f.read(8))
        if length > size - 8:
            raise corrupt(path, 'header length %d runs past the end of the file (%d bytes): not a safetensors file?'
                          % (length, size))
        if length > HEADER_LIMIT:
            raise corrupt(path, 'header length %d is over safetensors\' limit of %d bytes' % (length, HEADER_LIMIT))
        raw = f.read(length)
        if len(raw) != length:
            raise corrupt(path, 'the file ends inside its header (it changed while being read)')
        try:
            header = json.loads(raw.decode('utf-8'), object_pairs_hook=_no_duplicates)
        except UnicodeDecodeError as exc:
            raise corrupt(path, 'the header is not UTF-8 text (byte 0x%02x at offset %d)'
                          % (raw[exc.start], exc.start)) from None
        except (ValueError, RecursionError) as exc:
            raise corrupt(path, 'the header is not valid JSON (%s)' % one_line(exc)) from None
        if not isinstance(header, dict):
            raise corrupt(path, 'the header must hold a JSON object, not %s' % describe(header))
        self.data_start, data_size = 8 + length, size - 8 - length
        self.metadata, self.entries = {}, {}
        for name, entry in header.items():
            if name == '__metadata__':
                if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                    raise corrupt(path, 'the header\'s __metadata__ must be an object of strings, not %s'
                                  % describe(entry))
                self.metadata = entry
                continue
            what = 'tensor %s' % name
            if not isinstance(entry, dict):
                raise corrupt(path, '%s: its header entry must be an object, not %s' % (what, describe(entry)))
            dtype, shape, offsets = entry.get('dtype'), entry.get('shape'), entry.get('data_offsets')
            if not isinstance(dtype, str) or dtype not in ITEMSIZE:
                raise corrupt(path, '%s: dtype %s is not a safetensors dtype (%s)'
                              % (what, describe(dtype), ', '.join(ITEMSIZE)))
            if (not isinstance(shape, list) or
                    not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
                raise corrupt(path, '%s: shape must be an array of non-negative integers, not %s'
                              % (what, describe(shape)))
            if (not isinstance(offsets, list) or len(offsets) != 2 or
                    not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets) or
                    not 0 <= offsets[0] <= offsets[1]):
                raise corrupt(path, '%s: data_offsets must be [begin, end] with 0 <= begin <= end, not %s'
                              % (what, describe(offsets)))
            begin, end = offsets
            if end > data_size:
                raise corrupt(path, '%s: data_offsets [%d, %d] run past the data (%d bytes after the header)'
                              % (what, begin, end, data_size))
            nbytes = ITEMSIZE[dtype]
            for d in shape:
                nbytes *= d
            if end - begin != nbytes:
                raise corrupt(path, '%s: data_offsets [%d, %d] hold %d bytes, but shape %s of %s needs %d'
                              % (what, begin, end, end - begin, shape, dtype, nbytes))
            self.entries[name] = (dtype, tuple(shape), begin, end)
        spans = sorted((begin, end, name) for name, (_, _, begin, end) in self.entries.items() if end > begin)
        for (_, end0, name0), (begin1, _, name1) in zip(spans, spans[1:]):
            if begin1 < end0:
                raise corrupt(path, 'tensors %s and %s overlap in the data' % (name0, name1))

    def check(self, shapes, model='the model'):
        """Every tensor named in `shapes` {name: shape} is present, floating-point and of that
        shape; else TSR_ERR_CORRUPT naming the (first four) missing tensors or the tensor at fault."""
        missing = [name for name in shapes if name not in self.entries]
        if missing:
            more = ' and %d more' % (len(missing) - 4) if len(missing) > 4 else ''
            raise corrupt(self.path, 'lacks tensor%s %s%s (%s needs them)'
                          % ('s' if len(missing) > 1 else '', ', '.join(missing[:4]), more, model))
        for name, want in shapes.items():
            dtype, shape = self.entries[name][:2]
            if dtype not in FLOAT:
                raise corrupt(self.path, 'tensor %s has dtype %s; floating-point weights are read (%s)'
                              % (name, dtype, ', '.join(FLOAT)))
            if shape != tuple(want):
                raise corrupt(self.path, 'tensor %s has shape %s, but %s needs %s'
                              % (name, list(shape), model, list(want)))

    def tensor(self, name):
        """The tensor `name` (present and floating-point: see check()) as a float32 array; a value
        that is not finite in float32 is refused (TSR_ERR_CORRUPT)."""
        dtype, shape, begin, end = self.entries[name]
        self._f.seek(self.data_start + begin)
        a = np.empty(shape, np.dtype(FLOAT[dtype]))
        if self._f.readinto(memoryview(a).cast('B')) != end - begin:
            raise corrupt(self.path, 'the file ends inside tensor %s (it changed while being read)' % name)
        if dtype == 'BF16':
            a = (a.astype(np.uint32) << 16).view(np.float32)
        with np.errstate(over='ignore', invalid='ignore'):
            a = np.ascontiguousarray(a, dtype=np.float32)
        bad = a.size - int(np.count_nonzero(np.isfinite(a)))
        if bad:
            raise corrupt(self.path, 'tensor %s holds %d value%s that %s not finite in float32 (NaN, Inf or out of '
                          'range)' % (name, bad, '' if bad == 1 else 's', 'is' if bad == 1 else 'are'))
        return a
