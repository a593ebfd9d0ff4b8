#!/usr/bin/env python3
"""ResNet-50 inference on tessera against PyTorch eager (torchvision) and ONNX Runtime on CPU.

    PY=build/python-venv/bin/python   # with tessera installed (pip install .)
    $PY -m pip install torch torchvision onnxruntime onnx pillow safetensors   # the peers (not part of CI)
    $PY bench/resnet50_bench.py [--weights resnet50.safetensors] [--device cpu] [--dtype f32]
        [--batches 1,8] [--reps 7] [--threads N] [--json docs/data/resnet50-bench.json]

Every implementation classifies the same batch of 224x224 images from the same weights (a
weights file, or random weights written to a temporary file when --weights is not given:
speed does not depend on the values) and is checked against tessera's logits, so that all of
them computed the same network:
  tessera              resnet50.load(weights, device, dtype).logits(batch), host array in and out
  pytorch              torchvision resnet50, eval(), torch.inference_mode(), NCHW (default layout)
  pytorch_cl           the same in channels_last (the model and each batch converted)
  onnxruntime          the model exported with torch.onnx, CPU execution provider (if importable)
PyTorch and ONNX Runtime run with --threads intra-op threads, by default the tessera device's
compute units (PoCL's CPU device uses every core). Implementations alternate in blocks: per
repetition each runs --block calls back to back (after --settle seconds of idle, so that
another library's spinning worker threads are quiet), timed per call; a block's mean is one
sample, and the median of --reps samples (>= 5) is reported with the samples' spread. One
warm-up block each comes first. Then a per-op breakdown of tessera's forward pass from
tessera.profile() and conv2d's time and rate per kind of layer (role, kernel, stride); each
op waits for its queue there, so the totals are a little above the unprofiled time.
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
from tessera.examples import resnet50


def random_weights(path, seed=0):
    """torchvision's resnet50 state-dict names with He-initialised random values, as safetensors."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in resnet50.weight_shapes().items():
        if len(shape) == 4:
            tensors[name] = rng.normal(0.0, np.sqrt(2.0 / np.prod(shape[1:])), shape)
        elif name.endswith('running_var'):
            tensors[name] = rng.uniform(0.5, 2.0, shape)
        elif name.endswith('.weight') and len(shape) == 1:
            tensors[name] = rng.uniform(0.2, 1.0, shape)
        else:
            tensors[name] = rng.normal(0.0, 0.05, shape)
    tensors = {k: np.ascontiguousarray(v, np.float32) for k, v in tensors.items()}
    header, offset = {}, 0
    for name, a in tensors.items():
        header[name] = {'dtype': 'F32', 'shape': list(a.shape), 'data_offsets': [offset, offset + a.nbytes]}
        offset += a.nbytes
    raw = json.dumps(header).encode()
    with open(path, 'wb') as f:
        f.write(len(raw).to_bytes(8, 'little') + raw)
        for a in tensors.values():
            f.write(a.tobytes())
    return tensors


def read_state(path):
    from tessera.examples import _safetensors
    with _safetensors.File(path) as st:
        return {name: st.tensor(name) for name in resnet50.weight_shapes(st.entries['fc.weight'][1][0])}


def torch_peers(state, threads, tmp, with_onnx):
    import torch
    import torchvision
    torch.set_num_threads(threads)
    net = torchvision.models.resnet50(weights=None, num_classes=state['fc.bias'].shape[0])
    missing, unexpected = net.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    if unexpected or [k for k in missing if not k.endswith('num_batches_tracked')]:
        raise RuntimeError('the weights do not fit torchvision\'s resnet50: %s %s' % (missing[:3], unexpected[:3]))
    net.eval()
    net_cl = torchvision.models.resnet50(weights=None, num_classes=state['fc.bias'].shape[0])
    net_cl.load_state_dict(net.state_dict())
    net_cl = net_cl.eval().to(memory_format=torch.channels_last)

    def eager(x):
        with torch.inference_mode():
            return net(torch.from_numpy(x)).numpy()

    def channels_last(x):
        with torch.inference_mode():
            return net_cl(torch.from_numpy(x).contiguous(memory_format=torch.channels_last)).numpy()

    name = 'PyTorch %s eager, torchvision %s, %d threads' % (torch.__version__, torchvision.__version__, threads)
    peers = {'pytorch': (eager, name + ', NCHW'), 'pytorch_cl': (channels_last, name + ', channels_last')}
    skipped = {}
    if with_onnx:
        try:
            import onnxruntime as ort
            path = os.path.join(tmp, 'resnet50.onnx')
            torch.onnx.export(net, (torch.zeros(1, 3, 224, 224),), path, input_names=['x'], output_names=['logits'],
                              dynamic_axes={'x': {0: 'batch'}, 'logits': {0: 'batch'}}, opset_version=17, dynamo=False)
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            session = ort.InferenceSession(path, options, providers=['CPUExecutionProvider'])
            peers['onnxruntime'] = (lambda x: session.run(None, {'x': x})[0],
                                    'ONNX Runtime %s CPU, %d threads' % (ort.__version__, threads))
        except Exception as exc:  # noqa: BLE001 (a peer that cannot be set up is reported, not fatal)
            skipped['onnxruntime'] = '%s: %s' % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else '')
    return peers, skipped


def spread(samples):
    q = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    return {'min_s': min(samples), 'q1_s': q[0], 'q3_s': q[2], 'max_s': max(samples)}


def layer_breakdown(model, x, settle):
    """conv2d time per kind of layer (role, kernel, stride) over one forward pass, each call
    waited for (as tessera.profile() does), with its rate."""
    rows = {}
    conv = model._conv

    def timed(c, inp, out, residual=None):
        t = time.perf_counter()
        y = conv(c, inp, out, residual)
        model.device.finish()
        n, k, h, w = y.shape
        o, ci, kh, kw = c['shape']
        kind = '%s %dx%d/%d' % (c['role'], kh, kw, c['stride'])
        row = rows.setdefault(kind, {'kind': kind, 'calls': 0, 'seconds': 0.0, 'flop': 0.0})
        row['calls'] += 1
        row['seconds'] += time.perf_counter() - t
        row['flop'] += 2.0 * n * k * h * w * ci * kh * kw
        return y

    time.sleep(settle)
    model._conv = timed
    try:
        model.logits(x)
    finally:
        del model._conv
    out = sorted(rows.values(), key=lambda r: -r['seconds'])
    for row in out:
        row['gflop_per_s'] = row['flop'] / row['seconds'] / 1e9
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--weights', help='safetensors file of torchvision\'s resnet50 state dict (default: random)')
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--dtype', choices=['f32', 'f16', 'bf16'], default='f32')
    ap.add_argument('--batches', default='1,8', help='comma-separated batch sizes (default 1,8)')
    ap.add_argument('--size', type=int, default=224, help='image height and width (default 224)')
    ap.add_argument('--threads', type=int, help='PyTorch/ONNX Runtime threads (default: the device\'s compute units)')
    ap.add_argument('--reps', type=int, default=7, help='samples per implementation and batch (>= 5 for a result)')
    ap.add_argument('--block', type=int, default=2, help='calls per block (one sample is their mean)')
    ap.add_argument('--settle', type=float, default=0.3, help='seconds of idle before each block')
    ap.add_argument('--no-peers', action='store_true', help='tessera only')
    ap.add_argument('--no-onnx', action='store_true', help='leave ONNX Runtime out')
    ap.add_argument('--json', help='write the results here')
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(',')]
    if args.reps < 1 or args.block < 1 or min(batches) < 1 or args.size < 32:
        ap.error('--reps, --block and batches must be >= 1, --size >= 32')
    if args.reps < 5:
        print('resnet50_bench: --reps %d < 5: a smoke run, not a result' % args.reps, file=sys.stderr)

    tmp = tempfile.mkdtemp(prefix='resnet50-bench-')
    weights = args.weights
    if weights is None:
        weights = os.path.join(tmp, 'random.safetensors')
        random_weights(weights)
    t0 = time.perf_counter()
    model = resnet50.load(weights, device=args.device, dtype=args.dtype, max_batch=max(batches))
    load_s = time.perf_counter() - t0
    threads = args.threads or model.device.info.compute_units
    impls = {'tessera': (model.logits, 'tessera %s on %s (%s storage)' % (tessera.__version__, model.device.name,
                                                                        model.dtype_name))}
    skipped = {}
    if not args.no_peers:
        try:
            peers, skipped = torch_peers(read_state(weights), threads, tmp, not args.no_onnx)
            impls.update(peers)
        except Exception as exc:  # noqa: BLE001
            skipped['pytorch'] = '%s: %s' % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else '')
    for name, why in skipped.items():
        print('resnet50_bench: %s skipped (%s)' % (name, why), file=sys.stderr)

    rng = np.random.default_rng(1)
    result = {'machine': platform.processor() or platform.machine(), 'cpu_count': os.cpu_count(),
              'load_average_before': os.getloadavg(), 'device': model.device.name,
              'compute_units': model.device.info.compute_units, 'threads': threads, 'dtype': model.dtype_name,
              'size': args.size, 'reps': args.reps, 'block': args.block, 'settle_s': args.settle,
              'load_s': load_s, 'skipped': skipped, 'implementations': {k: v[1] for k, v in impls.items()},
              'cases': {}, 'breakdown': {}}
    for batch in batches:
        x = rng.normal(0.0, 1.0, (batch, 3, args.size, args.size)).astype(np.float32)
        outputs = {}
        for name, (run, _) in impls.items():  # warm-up block, and the outputs to compare
            for _ in range(args.block):
                outputs[name] = run(x)
        samples = {name: [] for name in impls}
        for _ in range(args.reps):
            for name, (run, _) in impls.items():
                time.sleep(args.settle)
                t = time.perf_counter()
                for _ in range(args.block):
                    run(x)
                samples[name].append((time.perf_counter() - t) / args.block)
        ref = outputs['tessera'].astype(np.float64)
        row = {'batch': batch}
        for name in impls:
            med = statistics.median(samples[name])
            diff = np.abs(outputs[name] - ref).max() / max(np.abs(ref).max(), 1e-30)
            row[name] = dict({'median_s': med, 'images_per_s': batch / med, 'samples_s': samples[name],
                              'max_rel_diff_vs_tessera': float(diff),
                              'top1_equal_vs_tessera': bool((outputs[name].argmax(1) == ref.argmax(1)).all())},
                             **spread(samples[name]))
        for name in impls:
            if name != 'tessera':
                row['tessera_speedup_over_' + name] = row[name]['median_s'] / row['tessera']['median_s']
        result['cases']['batch%d' % batch] = row
        print('batch %2d: %s' % (batch, ', '.join('%s %.2f img/s (%.1f ms, spread %.1f-%.1f)' % (
            n, row[n]['images_per_s'], row[n]['median_s'] * 1e3, row[n]['min_s'] * 1e3, row[n]['max_s'] * 1e3)
            for n in impls)))
        for name in impls:
            if name != 'tessera':
                print('          tessera / %s: %.2fx; logits differ by %.2g relative' % (
                    name, row['tessera_speedup_over_' + name], row[name]['max_rel_diff_vs_tessera']))

        time.sleep(args.settle)
        with tessera.profile() as prof:
            t = time.perf_counter()
            model.logits(x)
            profiled = time.perf_counter() - t
        result['breakdown']['batch%d' % batch] = {'profiled_s': profiled, 'ops': [
            {'op': n, 'calls': c, 'seconds': s, 'share': sh} for n, c, s, sh in prof.table()]}
        print('  tessera per op (batch %d, %.1f ms profiled):' % (batch, profiled * 1e3))
        for name, calls, sec, share in prof.table():
            print('    %-12s %4d calls %9.2f ms %5.1f%%' % (name, calls, sec * 1e3, share * 100))
        layers = layer_breakdown(model, x, args.settle)
        result['breakdown']['batch%d' % batch]['conv_layers'] = layers
        print('  tessera conv2d by layer kind (batch %d):' % batch)
        for row in layers:
            print('    %-34s %3d calls %9.2f ms %7.1f GFLOP/s' % (row['kind'], row['calls'], row['seconds'] * 1e3,
                                                               row['gflop_per_s']))
    result['load_average_after'] = os.getloadavg()
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)
            f.write('\n')


if __name__ == '__main__':
    main()
