"""ResNet-50 image classification on tessera's ops.

    python -m tessera.examples.resnet50 --weights resnet50.safetensors [--labels FILE]
        [--device cpu] [--dtype f32|f16|bf16] [--top 5] IMAGE...

prints each image's top classes with their probabilities (and names, from the weights file's
metadata or --labels); on any error, one line starting with "resnet50:" on stderr and exit
status 2. Programs call

    model = resnet50.load('resnet50.safetensors', device=None, dtype='f32')
    model.classify(['cat.jpg', pil_image], top=5)   # per image [(class, name or None, probability)]
    model.logits(batch)                             # float32 [N, 3, H, W] -> float32 [N, classes]

The weights come from a safetensors file with torchvision's state-dict names (conv1.weight,
bn1.{weight,bias,running_mean,running_var}, layer1.0.conv1.weight, ..., layerN.M.downsample.0
and .1, fc.weight, fc.bias); the class count is fc.weight's first dimension, and the class
names may be in the file's metadata under "classes" (a JSON list of strings). The network is
torchvision's ResNet-50 (v1.5: a bottleneck's stride is on its 3x3 convolution) in inference
mode. Each BatchNorm (eps 1e-5) is folded at load time into a per-channel scale and bias,
which the convolution before it applies in its epilogue:

  stem     conv 7x7/2 -> scale, bias, ReLU -> max pool 3x3/2 (padding 1)
  block    conv 1x1 -> scale, bias, ReLU
           conv 3x3 (the block's stride) -> scale, bias, ReLU
           [first block of a stage: downsample conv 1x1 (stride) -> scale, bias]
           conv 1x1 -> scale, bias, + identity (or the downsample), ReLU: one pass
  head     global average pool -> fully connected (GEMM with bias)

Weights live on the device from load() on; between the upload of a batch and the read-back of
its logits nothing crosses to the host, and the host waits once per batch. The network is
input-size agnostic (global average pooling), so any H, W >= 1 runs; ImageNet models expect
preprocess()'s 224x224.

dtype: 'f32', or 'f16' / 'bf16' to store the weights and the activations between layers in 16
bits (each convolution sums in fp32; scales, biases and logits stay fp32).

Errors: a missing or unreadable file raises TesseraError (TSR_ERR_IO), a damaged weights file
or labels file, a tensor missing or of the wrong shape, or an image Pillow cannot decode
TesseraError (TSR_ERR_CORRUPT), naming the file and the tensor or problem; bad arguments raise
InvalidArgument naming the argument.
"""
import argparse
import json
import os
import sys
import threading
import time

import numpy as np

import tessera
from tessera._tessera_cffi import lib as _lib

from . import _safetensors
from ._safetensors import corrupt as _corrupt, one_line as _one_line, unreadable as _unreadable

# (blocks, width, stride) per stage; a block's output has 4 x width channels
STAGES = ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2))
EXPANSION = 4
FEATURES = 512 * EXPANSION
BN_EPS = 1e-5
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
RESIZE, CROP = 256, 224
CLASSES_KEY = 'classes'   # the safetensors metadata key of the class names (a JSON list of strings)

_DTYPES = {'f32': 'f32', 'fp32': 'f32', 'float32': 'f32', 'f16': 'f16', 'fp16': 'f16', 'float16': 'f16',
           'bf16': 'bf16', 'bfloat16': 'bf16'}


def _invalid(message):
    return tessera.InvalidArgument(_lib.TSR_ERR_INVALID_ARG, message)


# ------------------------------------------------------------------ the architecture

def _bn_names(prefix):
    return {prefix + '.' + p: None for p in ('weight', 'bias', 'running_mean', 'running_var')}


def layers():
    """The network's convolutions in order, each a dict: name (its weight's prefix), bn (its
    BatchNorm's prefix), shape (OIHW), stride, padding, relu, and role: 'stem', 'conv1',
    'conv2', 'conv3' (adds the residual) or 'downsample' (the residual of the block after it)."""
    out = [dict(name='conv1', bn='bn1', shape=(64, 3, 7, 7), stride=2, padding=3, relu=True, role='stem')]
    channels = 64
    for s, (blocks, width, stage_stride) in enumerate(STAGES):
        for b in range(blocks):
            p = 'layer%d.%d.' % (s + 1, b)
            stride = stage_stride if b == 0 else 1
            out.append(dict(name=p + 'conv1', bn=p + 'bn1', shape=(width, channels, 1, 1), stride=1, padding=0,
                            relu=True, role='conv1'))
            out.append(dict(name=p + 'conv2', bn=p + 'bn2', shape=(width, width, 3, 3), stride=stride, padding=1,
                            relu=True, role='conv2'))
            if b == 0:  # every stage's first block changes the channel count (and all but the first the size)
                out.append(dict(name=p + 'downsample.0', bn=p + 'downsample.1', shape=(width * EXPANSION, channels, 1, 1),
                                stride=stride, padding=0, relu=False, role='downsample'))
            out.append(dict(name=p + 'conv3', bn=p + 'bn3', shape=(width * EXPANSION, width, 1, 1), stride=1,
                            padding=0, relu=True, role='conv3'))
            channels = width * EXPANSION
    return out


def weight_shapes(classes=1000):
    """Every tensor the runner reads, with its shape (torchvision's names)."""
    shapes = {}
    for layer in layers():
        shapes[layer['name'] + '.weight'] = layer['shape']
        for name in _bn_names(layer['bn']):
            shapes[name] = (layer['shape'][0],)
    shapes['fc.weight'] = (classes, FEATURES)
    shapes['fc.bias'] = (classes,)
    return shapes


def fold_bn(gamma, beta, mean, var, eps=BN_EPS):
    """BatchNorm in inference as y = scale * x + bias: (scale, bias) in float32."""
    scale = np.asarray(gamma, np.float64) / np.sqrt(np.asarray(var, np.float64) + eps)
    return scale.astype(np.float32), (np.asarray(beta, np.float64) - np.asarray(mean, np.float64) * scale).astype(np.float32)


# ------------------------------------------------------------------ files

def _check_path(path, role):
    if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
        raise _invalid('%s must be a file path (str or os.PathLike of str), not %s' % (role, type(path).__name__))
    path = os.fspath(path)
    if '\0' in path:
        raise _invalid('%s %r contains a NUL character' % (role, path))
    return path


def _check_names(names, count, where):
    """A list of `count` class names (strings) or TSR_ERR_CORRUPT naming `where`."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _corrupt(where[0], '%s must be a list of strings' % where[1])
    if len(names) != count:
        raise _corrupt(where[0], '%s has %d class names, the model (fc.weight) %d classes' % (where[1], len(names), count))
    return names


def read_labels(path, count=None):
    """Class names from a text file, one per line (a last empty line is ignored)."""
    path = _check_path(path, 'labels')
    if os.path.isdir(path):
        raise _unreadable(path, 'is a directory, not a labels file')
    try:
        with open(path, 'rb') as f:
            data = f.read(64 << 20)
    except OSError as exc:
        raise _unreadable(path, 'cannot be read (%s)' % (exc.strerror or exc)) from None
    try:
        text = data.decode('utf-8-sig')
    except UnicodeDecodeError as exc:
        raise _corrupt(path, 'is not UTF-8 text (byte 0x%02x at offset %d)' % (data[exc.start], exc.start)) from None
    names = [line.strip() for line in text.splitlines()]
    if names and names[-1] == '':
        names.pop()
    if count is not None:
        _check_names(names, count, (path, 'the file'))
    return names


def _read_weights(path):
    """(float32 tensors by name, class names or None) from a safetensors file, every tensor
    checked (present, floating-point, shape, finite, running variances >= 0) before use."""
    with _safetensors.File(path) as st:
        fc = st.entries.get('fc.weight')
        classes = fc[1][0] if fc is not None and len(fc[1]) == 2 and fc[1][0] > 0 else 1000
        st.check(weight_shapes(classes), 'ResNet-50')
        w = {name: st.tensor(name) for name in weight_shapes(classes)}
        names = None
        if CLASSES_KEY in st.metadata:
            try:
                names = json.loads(st.metadata[CLASSES_KEY])
            except ValueError as exc:
                raise _corrupt(path, 'metadata "%s" is not JSON (%s)' % (CLASSES_KEY, _one_line(exc))) from None
            _check_names(names, classes, (path, 'metadata "%s"' % CLASSES_KEY))
    for layer in layers():
        var = layer['bn'] + '.running_var'
        if (w[var] < 0).any():
            raise _corrupt(path, 'tensor %s holds negative variances' % var)
    return w, names


# ------------------------------------------------------------------ images

def _pillow():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError('the ResNet-50 example reads images with Pillow: pip install pillow') from None
    return Image


def open_image(image, role='image'):
    """A PIL image in RGB from a path or a PIL image. A missing file raises TSR_ERR_IO, a file
    Pillow cannot decode TSR_ERR_CORRUPT, both naming the file."""
    Image = _pillow()
    if isinstance(image, Image.Image):
        try:
            return image.convert('RGB')
        except Exception as exc:  # noqa: BLE001 (Pillow raises many kinds on bad data)
            raise _invalid('%s: the PIL image cannot be converted to RGB (%s)' % (role, _one_line(exc))) from None
    path = _check_path(image, role + ' (a path or a PIL image)')
    if os.path.isdir(path):
        raise _unreadable(path, 'is a directory, not an image')
    try:
        f = open(path, 'rb')
    except OSError as exc:
        raise _unreadable(path, 'cannot be read (%s)' % (exc.strerror or exc)) from None
    with f:
        try:
            with Image.open(f) as img:
                return img.convert('RGB')  # decodes the whole image (the first frame of an animation)
        except Exception as exc:  # noqa: BLE001 (unidentified, truncated, decompression bomb, ...)
            raise _corrupt(path, 'is not an image Pillow can read (%s)' % _one_line(exc)) from None


def preprocess(image):
    """torchvision's ImageNet evaluation transform, as documented: the shorter side resized to
    256 (bilinear, Pillow's antialiased filter; the longer side int(256 * long / short)), the
    centre 224x224 (offsets int(round((size - 224) / 2))), values to [0, 1] and normalised per
    channel with the ImageNet mean and std. Returns float32 [3, 224, 224]."""
    Image = _pillow()
    img = open_image(image)
    w, h = img.size
    if w <= h:
        size = (RESIZE, int(RESIZE * h / w))
    else:
        size = (int(RESIZE * w / h), RESIZE)
    img = img.resize(size, Image.BILINEAR)
    left, top = int(round((size[0] - CROP) / 2.0)), int(round((size[1] - CROP) / 2.0))
    img = img.crop((left, top, left + CROP, top + CROP))
    x = np.asarray(img, np.float32) / np.float32(255.0)
    x = (x - np.asarray(MEAN, np.float32)) / np.asarray(STD, np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1))


# ------------------------------------------------------------------ on tessera

def _storage(dtype):
    """(canonical name, NumPy storage dtype) of a dtype argument."""
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise _invalid('dtype must be \'f32\', \'f16\' or \'bf16\', not %r' % (dtype,))
    name = _DTYPES[dtype]
    if name == 'bf16':
        try:
            import ml_dtypes
        except ImportError:
            raise ImportError('dtype=\'bf16\' needs ml_dtypes (NumPy\'s bfloat16): pip install ml_dtypes') from None
        return name, np.dtype(ml_dtypes.bfloat16)
    return name, np.dtype(np.float16 if name == 'f16' else np.float32)


class ResNet50:
    """ResNet-50 with its weights resident on one tessera device. Made by load(). One forward
    pass runs at a time (a lock orders concurrent callers); the activation buffers of the last
    two batch shapes are kept for reuse."""

    def __init__(self, weights, device=None, dtype='f32', labels=None, max_batch=32):
        self.dtype_name, self.dtype = _storage(dtype)
        if isinstance(max_batch, bool) or not isinstance(max_batch, (int, np.integer)) or max_batch < 1:
            raise _invalid('max_batch must be an integer >= 1, not %r' % (max_batch,))
        self.max_batch = int(max_batch)
        if labels is not None and not isinstance(labels, (list, tuple)):
            labels = _check_path(labels, 'labels (a file path or a list of names)')
        self.device = tessera.as_device(device)
        w, names = _read_weights(_check_path(weights, 'weights'))
        self.weights_path = os.fspath(weights)
        self.num_classes = w['fc.bias'].shape[0]
        if isinstance(labels, (list, tuple)):
            if len(labels) != self.num_classes or not all(isinstance(n, str) for n in labels):
                raise _invalid('labels: a list of %d strings (one per class of fc.weight) expected, not %d %s'
                               % (self.num_classes, len(labels), 'strings' if all(isinstance(n, str) for n in labels)
                                  else 'items of which some are not strings'))
            names = list(labels)
        elif labels is not None:
            names = read_labels(labels, self.num_classes)
        self.classes = names

        def up(a, dt, name):
            if dt == np.float16 and np.abs(a).max(initial=0) > 65504:
                raise _corrupt(self.weights_path, 'tensor %s has values beyond float16\'s range (65504): use '
                                                  'dtype=\'bf16\' or \'f32\'' % name)
            return tessera.to_device(np.ascontiguousarray(a).astype(dt), device=self.device)

        self.convs = []
        for layer in layers():
            scale, bias = fold_bn(*(w[n] for n in _bn_names(layer['bn'])))
            if not (np.isfinite(scale).all() and np.isfinite(bias).all()):
                raise _corrupt(self.weights_path, 'BatchNorm %s folds into a scale or bias beyond float32\'s range'
                               % layer['bn'])
            # the weights never change after loading: marked constant, conv2d keeps its Winograd
            # transform or 16-bit widening of them (docs/conv.md, "Kept weights")
            wt = up(w[layer['name'] + '.weight'], self.dtype, layer['name'] + '.weight').set_constant()
            self.convs.append(dict(layer, weight=wt,
                                   scale=up(scale, np.float32, layer['bn']), bias=up(bias, np.float32, layer['bn'])))
        # fc goes up transposed, [2048, classes]: the GEMM's untransposed B
        self.fc_weight = up(w['fc.weight'].T, self.dtype, 'fc.weight')
        self.fc_bias = up(w['fc.bias'], np.float32, 'fc.bias')
        self._plans = {}     # (batch, height, width) -> activation buffers
        self._lock = threading.Lock()

    def __repr__(self):
        return '<ResNet50 %d classes, %s on %s>' % (self.num_classes, self.dtype_name, self.device)

    # -------------------------------------------------------------- buffers

    def _plan(self, n, h, w):
        key = (n, h, w)
        plan = self._plans.pop(key, None)
        if plan is None:
            plan = self._make_plan(n, h, w)
        self._plans[key] = plan  # most recent last
        while len(self._plans) > 2:
            self._plans.pop(next(iter(self._plans)))
        return plan

    def _make_plan(self, n, h, w):
        """Every activation buffer of a batch [n, 3, h, w] (the input's, made when first needed,
        is not among them): the stem's output, the pooled map, per stage the block output and
        the two inner maps, the pooled features and the logits. Maps that are never live at once
        share memory, so a pass keeps writing where it wrote a moment before (still in the
        last-level cache) instead of into memory last touched a pass ago: the stem's output (dead
        once pooled) and the first and third stages' outputs take one buffer, the second and
        fourth stages' outputs another, and every stage's inner maps one pair: 77 MB instead of
        127 MB at batch 8."""
        dev, dt = self.device, self.dtype

        def out_size(size, k, s, p):
            return (size + 2 * p - k) // s + 1

        shapes = {}
        h, w = out_size(h, 7, 2, 3), out_size(w, 7, 2, 3)
        shapes['stem'] = (n, 64, h, w)
        h, w = out_size(h, 3, 2, 1), out_size(w, 3, 2, 1)
        shapes['pool'] = (n, 64, h, w)
        for s, (_, width, stride) in enumerate(STAGES):
            shapes['t1', s, 0] = (n, width, h, w)  # the first block's conv1 runs before its stride
            h, w = out_size(h, 3, stride, 1), out_size(w, 3, stride, 1)
            shapes['t1', s, 1] = (n, width, h, w)  # the other blocks'
            shapes['t2', s] = (n, width, h, w)
            shapes['out', s] = (n, width * EXPANSION, h, w)
        groups = {'stem': 0, 'pool': 1, ('out', 0): 0, ('out', 1): 2, ('out', 2): 0, ('out', 3): 2}
        for key in shapes:
            groups.setdefault(key, 3 if key[0] == 't1' else 4)
        size = {}
        for key, shape in shapes.items():
            size[groups[key]] = max(size.get(groups[key], 0), int(np.prod(shape)))
        buffers = {g: tessera.empty((count,), dt, device=dev) for g, count in size.items()}
        plan = {key: buffers[groups[key]].view(shape) for key, shape in shapes.items()}
        plan['features'] = tessera.empty((n, FEATURES, 1, 1), dt, device=dev)
        plan['logits'] = tessera.empty((n, self.num_classes), np.float32, device=dev)
        return plan

    # -------------------------------------------------------------- the forward pass

    def _conv(self, c, x, out, residual=None):
        return tessera.conv2d(x, c['weight'], c['bias'], c['stride'], c['padding'], scale=c['scale'],
                              residual=residual, activation='relu' if c['relu'] else None, out=out)

    def _forward(self, x, plan):
        """Enqueue the network on x (a device array [n, 3, h, w]); returns the logits' Array.
        Nothing waits here: the caller's read-back does."""
        convs = iter(self.convs)
        x = self._conv(next(convs), x, plan['stem'])
        x = tessera.max_pool2d(x, 3, 2, 1, out=plan['pool'])
        stage = -1
        for c in convs:
            if c['role'] == 'conv1':
                first = c['name'].endswith('.0.conv1')
                stage += first
                t1 = self._conv(c, x, plan['t1', stage, 0 if first else 1])
            elif c['role'] == 'conv2':
                t2 = self._conv(c, t1, plan['t2', stage])
            elif c['role'] == 'downsample':
                # the shortcut goes straight into the block's output, which conv3 then adds in place
                self._conv(c, x, plan['out', stage])
                x = plan['out', stage]
            else:  # conv3: + x (the identity, or the downsample just written there), then ReLU, into x
                self._conv(c, t2, x, residual=x)
        n, channels, h, w = x.shape
        pooled = tessera.avg_pool2d(x, (h, w), out=plan['features'])
        return tessera.gemm(pooled.view((n, channels)), self.fc_weight, plan['logits'], bias=self.fc_bias)

    def _check_batch(self, batch):
        if isinstance(batch, tessera.Array):
            if batch.device is not self.device:
                raise _invalid('batch is a tessera.Array of device %r, the model is on %r' % (batch.device, self.device))
            if batch.dtype not in (np.dtype(np.float32), self.dtype):
                raise _invalid('batch is a tessera.Array of %s: float32 or the model\'s %s expected'
                               % (batch.dtype, self.dtype))
            shape = batch.shape
        else:
            if not isinstance(batch, np.ndarray):
                try:
                    batch = np.asarray(batch, np.float32)
                except (TypeError, ValueError) as exc:
                    raise _invalid('batch cannot be read as a float32 array (%s)' % _one_line(exc)) from None
            if batch.dtype.kind not in 'fiu':
                raise _invalid('batch must hold real numbers, not %s' % batch.dtype)
            shape = batch.shape
        if len(shape) != 4 or shape[1] != 3 or min(shape) < 1:
            raise _invalid('batch must be [N, 3, H, W] with N, H, W >= 1 (NCHW, RGB), not %s' % (shape,))
        return batch

    def logits(self, batch):
        """float32 logits [N, classes] of a batch: a float32 NCHW [N, 3, H, W] NumPy array (as
        preprocess() makes, stacked; other real dtypes are converted), or a tessera.Array of this
        device (float32 or the model's dtype; a strided one is copied through the host). Runs in
        chunks of max_batch images, each one upload, one forward pass and one read-back."""
        batch = self._check_batch(batch)
        n = batch.shape[0]
        out = np.empty((n, self.num_classes), np.float32)
        with self._lock:
            for first in range(0, n, self.max_batch):
                chunk = batch[first:first + self.max_batch]
                m, _, h, w = chunk.shape
                plan = self._plan(m, h, w)
                if isinstance(chunk, tessera.Array) and chunk.is_contiguous():
                    x = chunk
                else:
                    host = chunk.get() if isinstance(chunk, tessera.Array) else chunk
                    if 'input' not in plan:
                        plan['input'] = tessera.empty((m, 3, h, w), np.float32, device=self.device)
                    x = plan['input'].set(host)
                out[first:first + m] = self._forward(x, plan).get()
        return out

    def classify(self, images, top=5):
        """The `top` classes of each image (paths or PIL images; one or a list), most probable
        first: per image a list of (class index, name or None, softmax probability)."""
        top = _check_top(top)
        images = _image_list(images)
        results = []
        for first in range(0, len(images), self.max_batch):
            batch = np.stack([preprocess(img) for img in images[first:first + self.max_batch]])
            results += self.top_classes(self.logits(batch), top)
        return results

    def top_classes(self, logits, top=5):
        """Per row of logits [N, classes] its `top` classes by softmax probability, most probable
        first: [(class index, name or None, probability)] (ties: the lower index first)."""
        top = _check_top(top)
        logits = np.asarray(logits, np.float64)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        return [[(int(k), self.classes[k] if self.classes else None, float(row[k]))
                 for k in np.argsort(-row, kind='stable')[:top]] for row in p]


def _check_top(top):
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise _invalid('top must be an integer >= 1, not %r' % (top,))
    return int(top)


def _image_list(images):
    if isinstance(images, (str, os.PathLike, _pillow().Image)):
        return [images]
    if isinstance(images, (bytes, bytearray, dict)):
        raise _invalid('images must be a path, a PIL image or a list of them, not %s' % type(images).__name__)
    try:
        images = list(images)
    except TypeError:
        raise _invalid('images must be a path, a PIL image or a list of them, not %s'
                       % type(images).__name__) from None
    if not images:
        raise _invalid('images is empty: give at least one image')
    return images


def load(weights, device=None, dtype='f32', labels=None, max_batch=32):
    """A ResNet50 from a safetensors file of torchvision's state dict, uploaded to `device`
    (None: the default). dtype 'f32', 'f16' or 'bf16' stores weights and activations; labels: a
    labels file (one class name per line) or a list of names, else the file's metadata names."""
    return ResNet50(weights, device, dtype, labels, max_batch)


# ------------------------------------------------------------------ command line

class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other failure
        self.exit(2, 'resnet50: %s (see --help)\n' % _one_line(message, 1000))


def main(argv=None):
    ap = _Parser(prog='python -m tessera.examples.resnet50', description='ResNet-50 image classification on tessera',
                 epilog='On any error it prints one line starting with "resnet50:" on stderr and exits with status 2.')
    ap.add_argument('images', nargs='+', metavar='IMAGE')
    ap.add_argument('--weights', required=True, help='safetensors file of torchvision\'s resnet50 state dict')
    ap.add_argument('--labels', help='class names, one per line (default: the weights file\'s "classes" metadata)')
    ap.add_argument('--device', help='tessera device selector (cpu, gpu, P:D, part of a name)')
    ap.add_argument('--dtype', choices=['f32', 'f16', 'bf16'], default='f32',
                    help='storage of weights and activations (sums stay fp32)')
    ap.add_argument('--top', type=int, default=5, help='classes printed per image (default 5)')
    args = ap.parse_args(argv)

    def fail(message):
        print('resnet50: %s' % _one_line(message, 1000), file=sys.stderr)
        return 2

    if args.top < 1:
        return fail('--top must be at least 1, not %d' % args.top)
    try:
        t0 = time.perf_counter()
        batch = np.stack([preprocess(image) for image in args.images])  # a bad image fails before the load
        t1 = time.perf_counter()
        model = load(args.weights, args.device, args.dtype, args.labels)
        t2 = time.perf_counter()
        results = model.top_classes(model.logits(batch), min(args.top, model.num_classes))
        t3 = time.perf_counter()
    except tessera.TesseraError as exc:
        return fail(exc.message)
    except ImportError as exc:
        return fail(exc)
    if hasattr(sys.stdout, 'reconfigure'):  # a name or path the terminal cannot show is escaped, not fatal
        sys.stdout.reconfigure(errors='backslashreplace')
    for image, top in zip(args.images, results):
        print(image)
        for k, name, p in top:
            print('  %6.2f%%  %4d  %s' % (100 * p, k, name if name is not None else ''))
    print('(%s, %s: images read in %.2f s, weights loaded in %.2f s, %d image%s classified in %.2f s)'
          % (model.device.name, model.dtype_name, t1 - t0, t2 - t1, len(results), '' if len(results) == 1 else 's',
             t3 - t2), file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
