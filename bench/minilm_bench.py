#!/usr/bin/env python3
"""all-MiniLM-L6-v2 on tessera against PyTorch (sentence-transformers) and ONNX Runtime on CPU.

    PY=build/python-venv/bin/python   # with tessera installed (pip install .)
    $PY -m pip install torch sentence-transformers onnxruntime onnx   # the peers (not part of CI)
    $PY bench/minilm_bench.py [--device cpu] [--threads 2] [--reps 7] [--cases latency,throughput]
                              [--peers pytorch,onnxruntime] [--json docs/data/minilm-bench.json]

Two cases, each on the same token ids for every implementation:
  latency     batch 1, one sentence (--latency-tokens, default 16 tokens with [CLS]/[SEP])
  throughput  batch 32 x 128 tokens (sentences cut to exactly 128 tokens)
Implementations alternate within each repetition (tessera, PyTorch, ONNX Runtime, then again),
after one warm-up call each and --settle seconds of idle before each timed call (PoCL's and
PyTorch's worker threads spin for a while after their work and would slow the next one down);
medians are reported with sentences per second. With --calls N > 1 each implementation's turn is
N + 1 calls back to back after the idle, the first untimed (its threads wake) and the sample the
median of the other N: back to back with itself, as a service's stream of requests runs, and
never right after a peer whose threads still spin (with --settle 0 and --calls 1, a call that
follows ONNX Runtime or PyTorch shares the cores with their spinning threads: tessera's latency
measured 2x its own back-to-back time that way, under load 6). PyTorch and ONNX
Runtime run with --threads intra-op threads (PoCL's CPU device uses every core: 2 here). Every
implementation's embeddings are checked against tessera's (cosine similarity) so that all of
them computed the same thing. A per-op breakdown of tessera's cases comes from
tessera.profile() over the runner's calls one by one (its graph's replay has no per-op records;
each op waits for its queue, so its total is above the unprofiled time; bench/minilm_profile.py
measures each op back to back instead).
"""
import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

import tessera
from tessera.examples import minilm


def token_batches(model, args):
    words = ('the quick brown fox jumps over the lazy dog while a small crowd of people watches from '
             'the stands and talks about the weather in the city ').split()
    rng = np.random.default_rng(0)

    def sentence(n_words):
        return ' '.join(rng.choice(words, n_words))

    ids, lengths = model.tokenize([sentence(args.latency_tokens - 2)])
    ids, lengths = ids[:, :args.latency_tokens], np.minimum(lengths, args.latency_tokens)
    cases = {'latency': (ids, lengths)}
    ids, lengths = model.tokenize([sentence(200) for _ in range(32)])
    sep = ids[0, lengths[0] - 1]
    ids = ids[:, :128].copy()
    ids[:, 127] = sep  # [SEP] ends each cut sentence
    cases['throughput'] = (ids, np.full(32, 128, np.int32))
    return cases


def torch_peer(model, threads):
    import torch
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(threads)
    st = SentenceTransformer(model.path, device='cpu').eval()

    def run(ids, lengths):
        mask = (np.arange(ids.shape[1])[None, :] < lengths[:, None]).astype(np.int64)
        features = {'input_ids': torch.from_numpy(ids.astype(np.int64)), 'attention_mask': torch.from_numpy(mask),
                    'token_type_ids': torch.zeros(ids.shape, dtype=torch.int64)}
        with torch.inference_mode():
            return st(features)['sentence_embedding'].numpy()
    return run, 'PyTorch %s (sentence-transformers, %d threads)' % (torch.__version__, threads)


def onnx_peer(model, threads, tmp):
    import onnxruntime as ort
    import torch
    from transformers import AutoModel
    class Hidden(torch.nn.Module):  # keyword arguments, whatever the order of BertModel.forward's
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    bert = Hidden(AutoModel.from_pretrained(model.path)).eval()
    path = os.path.join(tmp, 'minilm.onnx')
    ids = torch.ones((2, 16), dtype=torch.int64)
    torch.onnx.export(bert, (ids, torch.ones_like(ids), torch.zeros_like(ids)), path,
                      input_names=['input_ids', 'attention_mask', 'token_type_ids'], output_names=['hidden'],
                      dynamic_axes={n: {0: 'batch', 1: 'seq'} for n in ('input_ids', 'attention_mask', 'token_type_ids')},
                      opset_version=17, dynamo=False)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=['CPUExecutionProvider'])

    def run(ids, lengths):
        mask = (np.arange(ids.shape[1])[None, :] < lengths[:, None]).astype(np.int64)
        hidden = session.run(None, {'input_ids': ids.astype(np.int64), 'attention_mask': mask,
                                    'token_type_ids': np.zeros(ids.shape, np.int64)})[0]
        pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return run, 'ONNX Runtime %s (%d threads)' % (ort.__version__, threads)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--dtype', choices=['fp32', 'fp16'], default='fp32')
    ap.add_argument('--threads', type=int, default=os.cpu_count())
    ap.add_argument('--reps', type=int, default=7)
    ap.add_argument('--latency-tokens', type=int, default=16)
    ap.add_argument('--no-peers', action='store_true')
    ap.add_argument('--peers', default='pytorch,onnxruntime',
                    help='comma-separated peers to run (pytorch, onnxruntime): e.g. onnxruntime alone, so that '
                         "PyTorch's threads are not in the process")
    ap.add_argument('--settle', type=float, default=0.2,
                    help='seconds of idle before each timed call (thread pools that spin after work settle)')
    ap.add_argument('--calls', type=int, default=1,
                    help='timed calls back to back per turn, after one untimed call (a sample: their median)')
    ap.add_argument('--cases', default='latency,throughput',
                    help='comma-separated cases to run (latency, throughput)')
    ap.add_argument('--json')
    args = ap.parse_args()
    if args.calls < 1 or args.reps < 1:
        ap.error('--calls and --reps must be at least 1')
    peers = [c for c in args.peers.split(',') if c]
    if any(c not in ('pytorch', 'onnxruntime') for c in peers):
        ap.error('--peers takes pytorch and/or onnxruntime, comma-separated')
    wanted = [c for c in args.cases.split(',') if c]
    if not wanted or any(c not in ('latency', 'throughput') for c in wanted):
        ap.error('--cases takes latency and/or throughput, comma-separated')
    model = minilm.Model()
    runner = minilm.Runner(model, args.device, args.dtype)
    impls = {'tessera': (runner.forward, 'tessera %s on %s (%s weights)' % (tessera.__version__, runner.device.name,
                                                                            args.dtype))}
    skipped = {}
    if not args.no_peers:
        for name, make in (('pytorch', lambda: torch_peer(model, args.threads)),
                           ('onnxruntime', lambda: onnx_peer(model, args.threads, tempfile.mkdtemp()))):
            if name not in peers:
                continue
            try:
                impls[name] = make()
            except Exception as exc:  # a peer that cannot be set up is reported, not fatal
                skipped[name] = '%s: %s' % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else '')
                print('minilm_bench: %s skipped (%s)' % (name, skipped[name]), file=sys.stderr)
    cases = {k: v for k, v in token_batches(model, args).items() if k in wanted}
    result = {'load_before': os.getloadavg()[0], 'machine': platform.processor() or platform.machine(), 'threads': args.threads,
              'device': runner.device.name, 'dtype': args.dtype, 'reps': args.reps, 'settle_s': args.settle,
              'calls': args.calls, 'skipped': skipped,
              'implementations': {k: v[1] for k, v in impls.items()}, 'cases': {}}
    for case, (ids, lengths) in cases.items():
        times = {name: [] for name in impls}
        cpu = {name: [] for name in impls}  # process CPU time per call (every thread of this process)
        outputs = {name: run(ids, lengths) for name, (run, _) in impls.items()}  # warm-up, and the check
        for rep in range(args.reps):
            for name, (run, _) in impls.items():
                time.sleep(args.settle)  # the previous implementation's spinning worker threads go idle
                if args.calls > 1:
                    run(ids, lengths)  # untimed: this implementation's own threads wake
                each = []
                c0 = time.process_time()
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    run(ids, lengths)
                    each.append(time.perf_counter() - t0)
                cpu[name].append((time.process_time() - c0) / args.calls)
                times[name].append(statistics.median(each))
        row = {'batch': int(ids.shape[0]), 'tokens': int(ids.shape[1])}
        for name in impls:
            med = statistics.median(times[name])
            row[name] = {'median_s': med, 'sentences_per_s': ids.shape[0] / med, 'times_s': times[name],
                         'cpu_median_s': statistics.median(cpu[name]),
                         'cosine_vs_tessera': float(np.min((outputs[name] * outputs['tessera']).sum(axis=1)))}
        for name in impls:
            if name != 'tessera':
                row['tessera_over_' + name] = row[name]['median_s'] / row['tessera']['median_s']
        result['cases'][case] = row
        print('%-10s batch %2d x %3d tokens: %s' % (case, row['batch'], row['tokens'], ', '.join(
            '%s %.1f sent/s (%.2f ms, CPU %.2f ms)' % (n, row[n]['sentences_per_s'], row[n]['median_s'] * 1e3,
                                                       row[n]['cpu_median_s'] * 1e3) for n in impls)))
    result['breakdown'] = {}
    for case, (ids, lengths) in cases.items():
        time.sleep(args.settle)
        runner.use_graph = False  # the calls one by one: a graph's replay has no per-op records
        try:
            with tessera.profile() as prof:
                t0 = time.perf_counter()
                runner.forward(ids, lengths)
                profiled = time.perf_counter() - t0
        finally:
            runner.use_graph = True
        result['breakdown'][case] = {'profiled_s': profiled, 'ops': [
            {'op': n, 'calls': c, 'seconds': s, 'share': sh} for n, c, s, sh in prof.table()]}
        print('tessera per op (%s case, %.2f ms profiled):' % (case, profiled * 1e3))
        for name, calls, sec, share in prof.table():
            print('  %-10s %4d calls %8.2f ms %5.1f%%' % (name, calls, sec * 1e3, share * 100))
    result['load_after'] = os.getloadavg()[0]
    print('load average %.2f -> %.2f' % (result['load_before'], result['load_after']))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)


if __name__ == '__main__':
    main()
