#!/usr/bin/env python3
"""What the weights' layout is worth to MiniLM's batch-1 forward (1 x 16 tokens): upper bounds,
measured side by side in one process (a measurement only: most variants compute a wrong result).

    PY=build/python-venv/bin/python   # tessera installed, plus the model package (docs/minilm.md)
    $PY bench/minilm_strips_ab.py [--rounds 21] [--calls 20] [--variants LIST] [--json FILE]

Variants (each on its own device, opened with $TSR_KERNEL_DIR on a copy of this checkout's cl/ so
that every side reads its kernels the same way, and with the same GEMM configuration forced,
--config, the small-m classes' built-in one by default):
  runner         the runner as it is (epilogues: bias, GELU, residual + LayerNorm; since the kept
                 strip weights, its Linear weights marked constant: read in strips by the smallm
                 kernel), with the row prefetch at 32 rows
  runner-kept    the runner as it is, the kernel's own prefetch distance (64 rows)
  runner-unmarked  the runner with its Linear weights not marked constant (read as stored, the
                 runner before the kept strips; -pf32: with the 32-row prefetch)
  plain          the encoder's launches with its four GEMMs without the Add & Norm (bias, and GELU
                 after the first feed-forward GEMM, in the epilogue) on the weights as the runner
                 keeps them ([in, out], row-major): the reference of the next ones
  strips         the same GEMMs as one batched GEMM each over 32-column strips of the weights,
                 stored packed [out / 32, in, 32] (each strip's K x 32 block contiguous), A
                 broadcast (stride 0), into a [out / 32, 16, 32] scratch output (the same bias and
                 GELU in the epilogue, the bias read per strip): each work-item
                 (MWI=8 x 32 columns) reads its weights as one sequential stream
  strips-pf64    strips with the smallm kernel's row prefetch 64 rows ahead (SM_PF_ROWS: 8 KB at
                 32 columns); the variants without -pf64 set it to 32 rows (4 KB in a strip), the
                 kernel's value before session 22
  plain-pf64     plain with that prefetch (64 rows of [in, out] = 96-384 KB ahead)
  part-plain     plain for the QKV and first feed-forward GEMMs only, the other two as the runner
                 calls them (bias, residual, LayerNorm in the epilogue: not expressible over strips);
                 the same launches and epilogues as the runner
  part-strips    the same with those two GEMMs over strips (-pf64: and the 64-row prefetch)
  runner-pf64    the runner with the 64-row prefetch
  strips-shared  strips-pf64 with every layer's strips layer 0's (7 MB, L3-resident): what the
                 weights' stream still costs in strips
  runner-strips  the runner on a copy of cl/ whose smallm kernel reads a B of K >= 128 as if in
                 strips (STRIP_HACK below), with its Linear weights uploaded so: every epilogue and
                 launch as the runner has them, and its result checked against the runner's
                 (-pf64: with the 64-row prefetch)
  shared         the runner with every layer's weights made layer 0's (7 MB, L3-resident): what
                 the weights' stream from DRAM costs
  no-ln0         the runner without the embedding's LayerNorm launch
Printed: medians over rounds of the wall and process CPU time per forward (PoCL's workers
included), each as a ratio to the first variant, with the load average before and after."""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile

import numpy as np

import tessera
from tessera.examples import minilm
from tessera.examples.minilm import HEADS, HIDDEN

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_rounds import alternate  # noqa: E402
from minilm_profile import tokens  # noqa: E402

STRIP = 32  # the strip width: the small-m configuration's columns per work-item (VW 16 x NVW 2)


class Plain(minilm.Runner):
    """The encoder's launches with plain GEMMs (no epilogue); strips=True: batched over strips.
    part=True: only the QKV and first feed-forward GEMMs so, the other two as the runner calls them
    (bias, residual and LayerNorm in their epilogue). Its Linear weights are not marked constant
    (read as stored, as when these variants were measured: no kept strips)."""
    strips = False
    part = False
    shared = False

    def _linear_weights(self, layout):
        return unmarked(super()._linear_weights(layout))

    def _strip_weights(self):
        if not hasattr(self, '_packed'):
            w, self._packed = self.model.w, []
            for i in range(minilm.LAYERS):
                p = 'encoder.layer.%d.' % i
                qkv = [p + 'attention.self.' + s + '.weight' for s in ('query', 'key', 'value')]
                mats = [np.concatenate([w[n] for n in qkv]).T, w[p + 'attention.output.dense.weight'].T,
                        w[p + 'intermediate.dense.weight'].T, w[p + 'output.dense.weight'].T]
                self._packed.append([self._up(m.reshape(m.shape[0], m.shape[1] // STRIP, STRIP).transpose(1, 0, 2))
                                     for m in mats])
                if self.shared:
                    self._packed = [self._packed[0]] * minilm.LAYERS
                    break
            self._scratch = {n: tessera.empty((n // STRIP, 16, STRIP), device=self.device)
                             for n in (HIDDEN, 3 * HIDDEN, self.model.intermediate)}
        return self._packed

    def _encoder(self, state, batch, seq, kv_lengths):
        eps, d, row = self.model.eps, HIDDEN // HEADS, 3 * HIDDEN
        x, qkv, context, hidden = (state[n] for n in ('x', 'qkv', 'context', 'hidden'))
        tessera.layernorm(x, *self.ln0, eps=eps, out=x)
        q, k, v = (qkv.view((batch, HEADS, seq, d), (seq * row, d, row, 1), i * HIDDEN) for i in range(3))
        o = context.view((batch, HEADS, seq, d), (seq * HIDDEN, d, HIDDEN, 1))
        packed = self._strip_weights()
        tokens_ = batch * seq

        def gemm(a, w, wp, out, bias, activation=None):
            if self.strips:
                n, kk = wp.shape[0] * STRIP, wp.shape[1]
                tessera.gemm(a.view((n // STRIP, tokens_, kk), (0, kk, 1)), wp, self._scratch[n],
                             bias=bias.view((n // STRIP, STRIP), (STRIP, 1)), activation=activation)
            else:
                tessera.gemm(a, w, out, bias=bias, activation=activation)
        for layer, lw, pk in zip(self.layers, self._linear_weights('in_out'), packed):
            gemm(x, lw['qkv_w'], pk[0], qkv, layer['qkv_b'])
            tessera.attention(q, k, v, kv_lengths=kv_lengths, out=o)
            if self.part:
                tessera.gemm(context, lw['out_w'], x, bias=layer['out_b'], residual=x, layernorm=layer['ln1'] + (eps,))
            else:
                gemm(context, lw['out_w'], pk[1], x, layer['out_b'])
            gemm(x, lw['ffn1_w'], pk[2], hidden, layer['ffn1_b'], 'gelu')
            if self.part:
                tessera.gemm(hidden, lw['ffn2_w'], x, bias=layer['ffn2_b'], residual=x, layernorm=layer['ln2'] + (eps,))
            else:
                gemm(hidden, lw['ffn2_w'], pk[3], x, layer['ffn2_b'])
        tessera.matmul(state['pool_w'], x.view((batch, seq, HIDDEN)), out=state['pooled'])


class Strips(Plain):
    strips = True


class PartPlain(Plain):
    part = True


class StripsShared(Plain):
    strips = shared = True


class PartStrips(Plain):
    strips = part = True


class NoLN0(minilm.Runner):
    def _encoder(self, state, batch, seq, kv_lengths):
        layernorm = tessera.layernorm
        tessera.layernorm = lambda *a, **k: None
        try:
            super()._encoder(state, batch, seq, kv_lengths)
        finally:
            tessera.layernorm = layernorm


def shared(model, dev):
    r = minilm.Runner(model, dev, weights='in_out')
    r._linear['in_out'] = [r._linear['in_out'][0]] * minilm.LAYERS
    return r


# The in-kernel strips (a measurement hack on a copy of cl/gemm_smallm.cl): in the pointer loop
# (A and B row-major, a whole column tile), a B with K >= 128 is read as if stored in strips of NWI
# columns ([N / NWI, K, NWI]) although the host passes it as [K, N]: the same bytes when NWI divides
# N. MiniLM's four Linear GEMMs (K 384, 1536) then read strip weights with every epilogue as the
# runner has it (Add & Norm included); the pooling GEMM (K = the tokens, 16) reads as before.
STRIP_HACK = ('        const __global B_ELT *bp = bbase + j0;\n        const size_t bstep = (size_t)ldb;\n',
              '        const __global B_ELT *bp = K >= 128 ? bbase + (size_t)(j0 / NWI) * K * NWI : bbase + j0;\n'
              '        const size_t bstep = K >= 128 ? (size_t)NWI : (size_t)ldb;\n')


def kernel_dir(root, pf_rows, strips=False):
    """A copy of this checkout's cl/ with the smallm kernel's row prefetch distance set (and the
    in-kernel strips hack)."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'cl')
    d = os.path.join(root, 'pf%d%s' % (pf_rows, '-strips' if strips else ''), 'cl')
    if not os.path.isdir(d):
        shutil.copytree(src, d)
        path = os.path.join(d, 'gemm_smallm.cl')
        with open(path) as f:
            text = f.read()
        text, n = re.subn(r'(?m)^#define SM_PF_ROWS \d+$', '#define SM_PF_ROWS %d' % pf_rows, text)
        if n != 1:
            sys.exit('minilm_strips_ab: SM_PF_ROWS not found in %s' % path)
        if strips:
            if text.count(STRIP_HACK[0]) != 1:
                sys.exit('minilm_strips_ab: the pointer loop\'s B set-up not found in %s' % path)
            text = text.replace(*STRIP_HACK)
        with open(path, 'w') as f:
            f.write(text)
    return d


class InKernelStrips(minilm.Runner):
    """The runner with its Linear weights uploaded in strips of STRIP columns (for the hacked kernel)."""

    def _up(self, a, dt=np.float32):
        a = np.asarray(a)
        if getattr(self, '_packing', False) and a.ndim == 2 and a.shape[0] >= 128 and a.shape[1] % STRIP == 0:
            a = a.reshape(a.shape[0], a.shape[1] // STRIP, STRIP).transpose(1, 0, 2).reshape(a.shape)
        return super()._up(a, dt)

    def _linear_weights(self, layout):
        self._packing = True
        try:
            return unmarked(super()._linear_weights(layout))  # the hacked kernel reads them as uploaded
        finally:
            self._packing = False


def unmarked(layers):
    """The runner's Linear weights with their constant mark removed (no kept strips: B as stored)."""
    for lw in layers:
        for w in lw.values():
            w.set_constant(False)
    return layers


class Unmarked(minilm.Runner):
    """The runner with its Linear weights not marked constant: the GEMMs read them as stored
    ([in, out], row-major), as before the kept strips."""

    def _linear_weights(self, layout):
        return unmarked(super()._linear_weights(layout))



# name -> (runner factory, SM_PF_ROWS[, the in-kernel strips hack])
VARIANTS = {'runner-strips': (InKernelStrips, 32, True), 'runner-strips-pf64': (InKernelStrips, 64, True),
            'plain': (Plain, 32), 'strips': (Strips, 32), 'strips-pf64': (Strips, 64), 'plain-pf64': (Plain, 64),
            'part-plain': (PartPlain, 32), 'part-strips': (PartStrips, 32), 'part-strips-pf64': (PartStrips, 64),
            'strips-shared': (StripsShared, 64),
            'runner': (minilm.Runner, 32), 'runner-pf64': (minilm.Runner, 64),
            'runner-kept': (minilm.Runner, 64), 'runner-unmarked': (Unmarked, 64), 'runner-unmarked-pf32': (Unmarked, 32), 'shared': (shared, 32), 'no-ln0': (NoLN0, 32)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--rounds', type=int, default=21)
    ap.add_argument('--calls', type=int, default=20)
    ap.add_argument('--variants', default='plain,strips,strips-pf64,plain-pf64',
                    help='comma-separated, the first the reference (%s)' % ', '.join(VARIANTS))
    ap.add_argument('--config', default='KERNEL=2 MWI=8 VW=16 NVW=2 KU=4', help='GEMM configuration on every side')
    ap.add_argument('--json')
    args = ap.parse_args()
    names = args.variants.split(',')
    for n in names:
        if n not in VARIANTS:
            sys.exit('minilm_strips_ab: unknown variant %r (%s)' % (n, ', '.join(VARIANTS)))
    model = minilm.Model()
    ids, lengths = tokens(model, 16)
    root = tempfile.mkdtemp(prefix='tsr-strips-')
    try:
        sides, results = {}, {}
        for n in names:
            make, pf, *hack = VARIANTS[n]
            os.environ['TSR_KERNEL_DIR'] = kernel_dir(root, pf, bool(hack))  # read when the device is opened
            dev = tessera.Device(args.device)
            os.environ.pop('TSR_KERNEL_DIR')
            dev.override('gemm', args.config)
            run = make(model, dev).forward
            run(ids, lengths)  # the warm forward (the runner's kept strips are made here)
            run(ids, lengths)  # records the graph
            results[n] = run(ids, lengths)
            sides[n] = (lambda r=run: r(ids, lengths))
        base = 'runner-unmarked' if 'runner-unmarked' in results else 'runner' if 'runner' in results else None
        for n in names:
            if base and n != base and (n.startswith('runner-strips') or n.startswith('runner-kept')):
                cos = float(np.min((results[n] * results[base]).sum(axis=1)))
                print('%s against %s: cosine %.9f' % (n, base, cos))
                if cos < 0.9999999:
                    sys.exit('minilm_strips_ab: %s disagrees with %s' % (n, base))
        stats, med, loads = alternate(sides, args.rounds, args.calls)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ref = med[names[0]]
    print('1 x 16 tokens, %d rounds x %d forwards, gemm %s, load %.2f -> %.2f' % (
        args.rounds, args.calls, args.config, loads[0], loads[1]))
    for n in names:
        print('  %-12s wall %6.3f ms (%.3f)  process CPU %6.3f ms (%.3f)' % (
            n, med[n]['wall'], med[n]['wall'] / ref['wall'], med[n]['cpu'], med[n]['cpu'] / ref['cpu']))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'bench': 'minilm_strips_ab', 'device': args.device, 'config': args.config,
                       'rounds': args.rounds, 'calls': args.calls, 'load': loads, 'median_ms': med,
                       'ratio_to_first': {n: {k: med[n][k] / ref[k] for k in ('wall', 'cpu')} for n in names},
                       'samples_ms': stats}, f, indent=1)


if __name__ == '__main__':
    main()
