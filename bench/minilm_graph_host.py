"""Host time of a replayed MiniLM encoder graph against its device time, at batch 1 x 16 tokens
(docs/graph.md, "Measured"; issue #36: host time <= 20% of the device time).

    python bench/minilm_graph_host.py [--rounds 7] [--replays 30] [--tokens 16] [--json FILE]

Per replay, with the queue empty first and the embedding's call run (and finished) before it, as
the runner does: the calling thread's CPU time (time.thread_time) and the wall time spent inside
graph.replay() until it returns (enqueue only, no wait), then the wall time of replay() plus
the device's finish (the forward's device time, the host's enqueue overlapping the first
kernels). Medians per round, then the median of the rounds; the ratio is host / device. The
embedding, the pooled read-back and the normalisation are outside both figures.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

import tessera
from tessera.examples import minilm


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=int, default=7)
    ap.add_argument('--replays', type=int, default=30, help='replays per round (median per round)')
    ap.add_argument('--tokens', type=int, default=16)
    ap.add_argument('--json')
    args = ap.parse_args()
    dev = tessera.default_device()
    runner = minilm.Runner(minilm.Model(), dev)
    rng = np.random.default_rng(1)
    ids = rng.integers(1000, 20000, size=(1, args.tokens)).astype(np.int64)
    ids[0, 0], ids[0, -1] = 101, 102
    lengths = np.array([args.tokens])
    for _ in range(3):  # warm forward, the recording, a replay
        want = runner.forward(ids, lengths)
    state = runner._shapes[(1, args.tokens, None)]
    graph = state['graph']
    assert graph is not None, 'the runner recorded no graph'

    def embed():
        tessera.embedding(ids, runner.word, runner.position, runner.token_type, out=state['x3'], device=dev)
        dev.finish()

    rounds = []
    for _ in range(args.rounds):
        cpu, wall, device = [], [], []
        for _ in range(args.replays):
            embed()
            c0, t0 = time.thread_time(), time.perf_counter()
            graph.replay()
            c1, t1 = time.thread_time(), time.perf_counter()
            dev.finish()
            t2 = time.perf_counter()
            cpu.append(c1 - c0)
            wall.append(t1 - t0)
            device.append(t2 - t0)
        rounds.append({'host_thread_cpu_us': statistics.median(cpu) * 1e6, 'host_wall_us': statistics.median(wall) * 1e6,
                       'device_wall_us': statistics.median(device) * 1e6})
    got = runner.forward(ids, lengths)
    assert np.array_equal(got, want), 'the replays changed the embedding'
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    result = {'device': dev.info.name, 'tokens': args.tokens, 'launches': graph.launches, 'rounds': args.rounds,
              'replays': args.replays, **med,
              'ratio_thread_cpu': med['host_thread_cpu_us'] / med['device_wall_us'],
              'ratio_wall': med['host_wall_us'] / med['device_wall_us'],
              'load': os.getloadavg(), 'round_medians': rounds}
    print('MiniLM 1x%d encoder graph (%d launches) on %s: replay() host %.0f us thread CPU, %.0f us wall; '
          'replay + finish %.0f us; host / device %.1f%% (CPU), %.1f%% (wall); load %.2f'
          % (args.tokens, graph.launches, dev.info.name, med['host_thread_cpu_us'], med['host_wall_us'],
             med['device_wall_us'], 100 * result['ratio_thread_cpu'], 100 * result['ratio_wall'], result['load'][0]))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)


if __name__ == '__main__':
    main()
