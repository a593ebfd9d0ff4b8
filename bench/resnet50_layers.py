#!/usr/bin/env python3
"""ResNet-50 layer by layer, tessera against PyTorch channels_last, alternated in one process.

    PY=build/python-venv/bin/python   # tessera installed, with torch and torchvision
    $PY bench/resnet50_layers.py [--batch 8] [--rounds 7] [--reps 3] [--settle 0]
        [--variant NAME=CONFIG ...] [--json FILE]

Both sides run the same network on the same weights (random, He-initialised: speed does not
depend on the values). One forward pass of each records every layer's input; then each round
times, layer after layer in network order, tessera's call and PyTorch's, in alternating order
(tessera first in even rounds), --reps calls back to back each (tessera enqueues them and waits
once, as the network does), after --settle seconds of idle (default 0: back to back, as users
call; on the 2-core Zen 5 VM an idle gap of 0.02 s before each sample slowed PyTorch's next calls
far more than tessera's, docs/conv.md "where issue #35 stands"). A layer is what the network runs
for it:
  tessera   conv2d with its folded BatchNorm, ReLU and residual in the epilogue (the runner's
            own call and buffers); max_pool2d; avg_pool2d + the classifier GEMM ("head")
  pytorch   torchvision's modules in channels_last, eager, torch.inference_mode(): conv, then
            BatchNorm, the residual add and ReLU as separate ops; maxpool; avgpool + flatten + fc
Each row's time is the median over rounds of the per-call mean; min is the fastest round; the
JSON also has each row's median process CPU time (PoCL's and PyTorch's worker threads included).
On a shared machine the CPU time is the measure to compare: other jobs' load stretches the wall
time of both sides (PyTorch's spinning OpenMP barriers far more than tessera), not the CPU time
each spends working. For that PyTorch's OpenMP threads sleep when idle (OMP_WAIT_POLICY=PASSIVE,
--omp-wait; with spinning threads its CPU time would count the spinning too).
Rows of identical layers (same shape, stride, epilogue) are grouped with their count. The
network rows time the whole forward pass (tessera: logits() of a host batch, upload and
read-back included; PyTorch: the channels_last model on a channels_last batch) in the same
rounds, so sum(layers) can be set against the network's wall time: the difference is what runs
between layers (Python, launches, host waits, conversions).

--variant NAME=CONFIG adds a tessera row per conv layer run with tsr_config_override("conv2d",
CONFIG) (CONFIG "gemm:..." overrides GEMM's configuration instead, which the 1x1 layers run on) (e.g. im2col="ALGO=1", or "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=3 WGN=16"): which configuration
is fastest for which layer at this batch size. --only ROLE[,ROLE] restricts the conv layers
timed ('stem', 'conv1', 'conv2', 'conv3', 'downsample'; the pool, head and network rows stay);
--stride S to the layers of that stride (--only conv2 --stride 2: the three 3x3/2 layers).
Measurements on a shared machine are noise unless the load is stated: the JSON records the load
average before and after.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import tessera
from tessera.examples import resnet50

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resnet50_bench  # noqa: E402  (random weights, the state reader)


def torch_model(state, threads):
    import torch
    import torchvision
    torch.set_num_threads(threads)
    net = torchvision.models.resnet50(weights=None, num_classes=state['fc.bias'].shape[0])
    net.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    return net.eval().to(memory_format=torch.channels_last)


def op_config(text):
    """A --variant's CONFIG: "OP:CONFIG" overrides OP (e.g. gemm:PACKB=0), else conv2d."""
    op, sep, config = text.partition(':')
    return (op, config) if sep else ('conv2d', text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--batch', type=int, default=8)
    ap.add_argument('--size', type=int, default=224)
    ap.add_argument('--rounds', type=int, default=7)
    ap.add_argument('--reps', type=int, default=3, help='calls back to back per sample')
    ap.add_argument('--settle', type=float, default=0.0,
                    help='idle seconds before each sample (default 0: calls back to back)')
    ap.add_argument('--threads', type=int, help='PyTorch threads (default: the device\'s compute units)')
    ap.add_argument('--variant', action='append', default=[], help='NAME=CONFIG: a tessera conv2d override')
    ap.add_argument('--only', help='conv roles to time (comma-separated)')
    ap.add_argument('--stride', type=int, help='conv layers of this stride only (e.g. 2: the strided ones)')
    ap.add_argument('--no-torch', action='store_true', help='tessera rows only')
    ap.add_argument('--omp-wait', default='PASSIVE',
                    help='OMP_WAIT_POLICY for PyTorch\'s OpenMP threads (default PASSIVE: idle threads sleep, so the '
                         'process CPU time counts work, not spinning; ACTIVE: PyTorch\'s own default behaviour)')
    ap.add_argument('--json', help='write the results here')
    args = ap.parse_args()
    variants = []
    for v in args.variant:
        name, _, config = v.partition('=')
        if not name or not config:
            ap.error('--variant takes NAME=CONFIG, not %r' % v)
        variants.append((name, config))
    roles = set(args.only.split(',')) if args.only else None
    if 'torch' in sys.modules:
        ap.error('torch was imported before OMP_WAIT_POLICY could be set')
    os.environ['OMP_WAIT_POLICY'] = args.omp_wait  # read once, when torch's OpenMP runtime loads

    tmp = tempfile.mkdtemp(prefix='resnet50-layers-')
    weights = os.path.join(tmp, 'random.safetensors')
    resnet50_bench.random_weights(weights)
    model = resnet50.load(weights, max_batch=args.batch)
    dev = model.device
    threads = args.threads or dev.info.compute_units
    rng = np.random.default_rng(1)
    xh = rng.normal(0.0, 1.0, (args.batch, 3, args.size, args.size)).astype(np.float32)

    # tessera: one pass recording each call's operands (the runner's buffers, reused as they are)
    calls = []
    conv = model._conv

    def record(c, inp, out, residual=None):
        calls.append((c, inp, out, residual))
        return conv(c, inp, out, residual)

    model._conv = record
    try:
        model.logits(xh)
    finally:
        del model._conv
    plan = model._plan(args.batch, args.size, args.size)
    stem_out = calls[0][2]
    feats = calls[-1][2]

    def t_conv(c, inp, out, residual):
        return lambda: conv(c, inp, out, residual)

    def t_pool():
        tessera.max_pool2d(stem_out, 3, 2, 1, out=plan['pool'])

    def t_head():
        n, ch, h, w = feats.shape
        pooled = tessera.avg_pool2d(feats, (h, w), out=plan['features'])
        tessera.gemm(pooled.view((n, ch)), model.fc_weight, plan['logits'], bias=model.fc_bias)

    rows = []  # name, kind key, tessera fn, torch fn, flop
    torch = None
    if not args.no_torch:
        import torch
        net = torch_model(resnet50_bench.read_state(weights), threads)
        xt = torch.from_numpy(xh).contiguous(memory_format=torch.channels_last)
        inputs = {}
        hooks = []
        for name, mod in net.named_modules():
            if isinstance(mod, (torch.nn.Conv2d, torch.nn.MaxPool2d, torch.nn.AdaptiveAvgPool2d)):
                hooks.append(mod.register_forward_hook(
                    lambda m, i, o, name=name: inputs.__setitem__(name, (i[0], o))))
        with torch.inference_mode():
            net(xt)
        for h in hooks:
            h.remove()
    for c, inp, out, residual in calls:
        if roles and c['role'] not in roles:
            continue
        if args.stride and c['stride'] != args.stride:
            continue
        n, k, p, q = out.shape
        o, ci, kh, kw = c['shape']
        flop = 2.0 * n * k * p * q * ci * kh * kw
        key = '%s %dx%dx%dx%d k%d %dx%d/%d%s' % (c['role'], n, ci, inp.shape[2], inp.shape[3], k, kh, kw, c['stride'],
                                                  ' +res' if residual is not None else '')
        tfn = None
        if torch is not None:
            cm = net.get_submodule(c['name'])
            bn = net.get_submodule(c['bn'])
            ti = inputs[c['name']][0]
            if c['role'] == 'conv3':
                # the identity: the block's input, or its downsample's output
                block = net.get_submodule(c['name'].rsplit('.', 1)[0])
                ident = inputs[c['name'].rsplit('.', 1)[0] + '.downsample.0'][1] if block.downsample is not None \
                    else inputs[c['name'].rsplit('.', 1)[0] + '.conv1'][0]
                if block.downsample is not None:
                    with torch.inference_mode():
                        ident = block.downsample[1](ident)

                def tfn(cm=cm, bn=bn, ti=ti, ident=ident):
                    y = bn(cm(ti))
                    y += ident
                    return torch.relu_(y)
            elif c['relu']:
                def tfn(cm=cm, bn=bn, ti=ti):
                    return torch.relu_(bn(cm(ti)))
            else:
                def tfn(cm=cm, bn=bn, ti=ti):
                    return bn(cm(ti))
        rows.append({'name': c['name'], 'key': key, 'flop': flop, 'tessera': t_conv(c, inp, out, residual),
                     'torch': tfn, 'conv': True})
    pfn = hfn = None
    if torch is not None:
        mp = net.maxpool
        pi = inputs['maxpool'][0]
        fi = inputs['avgpool'][0]

        def pfn():
            return mp(pi)

        def hfn():
            return net.fc(torch.flatten(net.avgpool(fi), 1))
    rows.append({'name': 'maxpool', 'key': 'maxpool 3x3/2', 'flop': 0.0, 'tessera': t_pool, 'torch': pfn, 'conv': False})
    rows.append({'name': 'head', 'key': 'avgpool + fc', 'flop': 0.0, 'tessera': t_head, 'torch': hfn, 'conv': False})

    def net_t():
        model.logits(xh)

    def net_torch():
        with torch.inference_mode():
            return net(xt).numpy()

    nets = {'tessera': net_t}
    if torch is not None:
        nets['torch'] = net_torch

    samples = {}  # (row index or 'net', side) -> [per-call seconds]

    def timeit(fn, tessera_side):
        time.sleep(args.settle)
        t = time.perf_counter()
        c0 = time.process_time()
        for _ in range(args.reps):
            fn()
        if tessera_side:
            dev.finish()
        return (time.perf_counter() - t) / args.reps, (time.process_time() - c0) / args.reps

    def side_fns(row):
        out = [('tessera', row['tessera'], True, None)]
        if row['conv']:
            out += [(name, row['tessera'], True, cfg) for name, cfg in variants]
        if row['torch'] is not None:
            out.append(('torch', row['torch'], False, None))
        return out

    ctx = torch.inference_mode() if torch is not None else None
    load_before = os.getloadavg()
    # warm-up: every program built, every path once
    for row in rows:
        for side, fn, is_t, cfg in side_fns(row):
            if cfg:
                dev.override(*op_config(cfg))
            if ctx is not None and not is_t:
                with torch.inference_mode():
                    fn()
            else:
                fn()
            if cfg:
                dev.finish()
                dev.override(op_config(cfg)[0], None)
    dev.finish()
    for fn in nets.values():
        fn()
    for r in range(args.rounds):
        for i, row in enumerate(rows):
            order = side_fns(row)
            if r % 2:
                order = order[::-1]
            for side, fn, is_t, cfg in order:
                if cfg:
                    dev.override(*op_config(cfg))
                if is_t:
                    s = timeit(fn, True)
                else:
                    with torch.inference_mode():
                        s = timeit(fn, False)
                if cfg:
                    dev.override(op_config(cfg)[0], None)
                samples.setdefault((i, side), []).append(s)
        names = list(nets) if r % 2 == 0 else list(nets)[::-1]
        for side in names:
            time.sleep(args.settle * 5)
            t = time.perf_counter()
            c0 = time.process_time()
            nets[side]()
            samples.setdefault(('net', side), []).append((time.perf_counter() - t, time.process_time() - c0))
        print('round %d/%d done (load %.2f)' % (r + 1, args.rounds, os.getloadavg()[0]), file=sys.stderr)
    load_after = os.getloadavg()

    sides = ['tessera'] + [n for n, _ in variants] + (['torch'] if torch is not None else [])

    def med(key):
        s = samples.get(key)
        if not s:
            return None
        return {'median_s': statistics.median(x[0] for x in s), 'min_s': min(x[0] for x in s),
                'cpu_median_s': statistics.median(x[1] for x in s)}

    layer_rows = []
    for i, row in enumerate(rows):
        layer_rows.append(dict({'name': row['name'], 'key': row['key'], 'flop': row['flop']},
                               **{side: med((i, side)) for side in sides}))
    # group identical layers; per side the sum over the group of the medians, wall and CPU
    groups = {}
    for lr in layer_rows:
        g = groups.setdefault(lr['key'], {'key': lr['key'], 'count': 0, 'flop': lr['flop'],
                                          **{side: 0.0 for side in sides}, **{side + '_cpu': 0.0 for side in sides}})
        g['count'] += 1
        for side in sides:
            if lr.get(side):
                g[side] += lr[side]['median_s']
                g[side + '_cpu'] += lr[side]['cpu_median_s']
    total = {side: sum(g[side] for g in groups.values()) for side in sides}
    total_cpu = {side: sum(g[side + '_cpu'] for g in groups.values()) for side in sides}
    netrow = {side: med(('net', side)) for side in nets}
    print('batch %d, %d rounds of %d calls, load %.2f -> %.2f, OMP_WAIT_POLICY=%s; ms per layer kind (the sum '
          'over its count of the medians), wall | process CPU; ratio = torch / tessera by CPU time (> 1: tessera '
          'faster); GFLOP/s by CPU time per core' % (args.batch, args.rounds, args.reps, load_before[0],
                                                     load_after[0], args.omp_wait))
    print('%-44s %3s' % ('layer', 'n') + ''.join(' %9s' % s[:9] for s in sides) + ' |'
          + ''.join(' %9s' % s[:9] for s in sides) + '  ratio  GF/s')
    for g in sorted(groups.values(), key=lambda g: -g['tessera_cpu']):
        ratio = g['torch_cpu'] / g['tessera_cpu'] if 'torch' in sides and g['tessera_cpu'] else float('nan')
        gf = g['flop'] * g['count'] / g['tessera_cpu'] / 1e9 if g['tessera_cpu'] and g['flop'] else 0.0
        print('%-44s %3d' % (g['key'][:44], g['count']) + ''.join(' %9.2f' % (g[s] * 1e3) for s in sides) + ' |'
              + ''.join(' %9.2f' % (g[s + '_cpu'] * 1e3) for s in sides) + '  %5.2f  %4.0f' % (ratio, gf))
    print('%-44s %3s' % ('sum of layers', '') + ''.join(' %9.2f' % (total[s] * 1e3) for s in sides) + ' |'
          + ''.join(' %9.2f' % (total_cpu[s] * 1e3) for s in sides))
    print('%-44s %3s' % ('network (median)', '') + ''.join(
        ' %9.2f' % (netrow[s]['median_s'] * 1e3) if s in netrow else ' %9s' % '' for s in sides) + ' |' + ''.join(
        ' %9.2f' % (netrow[s]['cpu_median_s'] * 1e3) if s in netrow else ' %9s' % '' for s in sides))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'batch': args.batch, 'rounds': args.rounds, 'reps': args.reps, 'threads': threads,
                       'omp_wait_policy': args.omp_wait,
                       'device': dev.name, 'variants': dict(variants), 'load_average_before': load_before,
                       'load_average_after': load_after, 'layers': layer_rows, 'groups': list(groups.values()),
                       'sum_of_layers_s': total, 'sum_of_layers_cpu_s': total_cpu,
                       'network': netrow}, f, indent=1)
            f.write('\n')


if __name__ == '__main__':
    main()
