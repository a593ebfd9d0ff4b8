"""Tuning (through the C API) and the CLI's bench, report and peak (through the `tessera`
executable installed beside the package)."""
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from . import _args
from ._device import Device, as_device
from ._errors import TesseraError, _check, _invalid, _text
from ._tessera_cffi import ffi, lib

__all__ = ['tune', 'bench', 'report', 'cli', 'cli_path']

_STRATEGIES = {None: 0, 'exhaustive': lib.TSR_TUNE_EXHAUSTIVE, 'random': lib.TSR_TUNE_RANDOM,
               'anneal': lib.TSR_TUNE_ANNEAL, 'climb': lib.TSR_TUNE_CLIMB}


def tune(op, device=None, *, budget=None, evaluations=0, strategy=None, classes=None, space=None, db=None,
         seed=0, dry_run=False, log=None, progress=None):
    """Auto-tune `op` ("gemm", "gelu", "conv2d", "attention", ..., or "all": every op's classes in
    one budget) on a device into the tuning database (db: a path; None: $TSR_TUNING_DB or the
    default). budget: seconds for the whole op, or for all of them (None: the library's default);
    evaluations: per class (0: no limit); strategy: "anneal"
    (default), "climb", "random" or "exhaustive"; classes: a list or comma-separated names;
    progress(dict) is called after each candidate. Returns one dict per tuned class."""
    strategy = _args.choice(strategy, 'strategy', _STRATEGIES, 'one of anneal, climb, random, exhaustive')
    op = _args.text(op, 'op')
    budget = _args.real(budget, 'budget', positive=True) if budget is not None else 0.0
    evaluations = _args.integer(evaluations, 'evaluations', 0, 2 ** 31 - 1)
    seed = _args.integer(seed, 'seed', 0, 2 ** 64 - 1)
    dry_run = _args.flag(dry_run, 'dry_run')
    if isinstance(classes, (list, tuple)):
        classes = ','.join(_args.text(c, 'classes[%d]' % i).decode() for i, c in enumerate(classes))
    if progress is not None and not callable(progress):
        raise _invalid('progress must be callable, not %s' % type(progress).__name__)
    keep = []

    def c_str(value, name):
        if value is None:
            return ffi.NULL
        if name in ('db', 'log'):
            try:
                value = os.fsdecode(os.fspath(value))
            except TypeError:
                raise _invalid('%s must be a path, not %s' % (name, type(value).__name__)) from None
        buf = ffi.new('char[]', _args.text(value, name))
        keep.append(buf)
        return buf

    opts = ffi.new('tsr_tune_options *')
    opts.strategy = strategy
    opts.budget_seconds = budget
    opts.budget_evaluations = evaluations
    opts.seed = seed
    opts.space = c_str(space, 'space')
    opts.classes = c_str(classes, 'classes')
    opts.db_path = c_str(db, 'db')
    opts.dry_run = dry_run
    opts.log_path = c_str(log, 'log')
    dev = as_device(device)
    errors = []
    if progress is not None:
        def on_progress(p, user):
            try:
                progress({'op': _text(p.op), 'class': _text(p.problem_class), 'unit': _text(p.unit),
                          'evaluated': p.evaluated, 'planned': p.planned, 'best': p.best_gflops,
                          'elapsed_s': p.elapsed_s, 'eta_s': p.eta_s})
            except BaseException as exc:  # reported after the C call returns
                errors.append(exc)
        callback = ffi.callback('void(*)(const struct tsr_tune_progress *, void *)', on_progress)
        keep.append(callback)
        opts.progress = callback
    results = ffi.new('tsr_tune_result[128]')
    count = ffi.new('size_t *')
    with dev._held() as handle:
        _check(lib.tsr_tune(handle, op, opts, results, 128, count))
    if errors:
        raise errors[0]
    out = []
    for i in range(count[0]):
        r = results[i]
        out.append({'op': _text(r.op), 'class': _text(r.problem_class), 'problem': _text(r.problem),
                    'best_config': _text(r.best_config), 'best': r.best_gflops, 'default': r.default_gflops,
                    'unit': _text(r.unit), 'spread': r.best_spread, 'evaluated': r.evaluated,
                    'wrong_results': r.wrong_results, 'build_failures': r.build_failures,
                    'seconds': r.seconds, 'stale_seeds': r.stale_seeds,
                    'reduced_from': _text(r.reduced_from),
                    'second_problem': _text(r.second_problem), 'second_gain': r.second_gain,
                    'second_wrong': bool(r.second_wrong), 'kept_before': bool(r.kept_before)})
    return out


def cli_path():
    """The `tessera` executable installed with the package ($TESSERA_CLI overrides)."""
    candidates = [os.environ.get('TESSERA_CLI'),
                  os.path.join(sysconfig.get_path('scripts'), 'tessera'),
                  os.path.join(os.path.dirname(sys.executable), 'tessera'),
                  shutil.which('tessera')]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise TesseraError(lib.TSR_ERR_NOT_FOUND, 'the tessera executable is not installed beside the package '
                       '(set TESSERA_CLI to its path)')


def cli(*args, check=True, capture=False):
    """Run the CLI with `args` (`tessera.cli("devices")`); returns the CompletedProcess. With
    check, a non-zero exit raises TesseraError with its stderr."""
    argv = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    for i, a in enumerate(argv):
        if '\0' in a:
            raise _invalid('cli: argument %d contains a NUL character: %r' % (i, a))
    proc = subprocess.run([cli_path()] + argv, capture_output=capture or check, text=True)
    if check and proc.returncode != 0:
        raise TesseraError(lib.TSR_ERR_INVALID_ARG if proc.returncode == 2 else lib.TSR_ERR_OPENCL,
                           'tessera %s exited %d: %s' % (' '.join(map(str, args)), proc.returncode,
                                                         proc.stderr.strip()))
    if not capture and check:
        sys.stdout.write(proc.stdout)
    return proc


def _selector(device):
    if device is None:
        return []
    if isinstance(device, str):
        _args.text(device, 'device')
        return ['--device', device]
    if isinstance(device, Device):
        return ['--device', device.info.selector]
    raise _invalid('device must be a tessera.Device or a selector string, not %s' % type(device).__name__)


def _extra(extra):
    if isinstance(extra, (str, bytes)) or not isinstance(extra, (list, tuple)):
        raise _invalid('extra must be a list of CLI arguments, not %r' % (extra,))
    return [_args.text(a, 'extra[%d]' % i).decode() for i, a in enumerate(extra)]


def _seconds(value, name):
    value = _args.real(value, name)
    if value < 0:
        raise _invalid('%s must be >= 0, not %r' % (name, value))
    return repr(value)


def bench(op, *, sizes=None, device=None, budget=None, peers=True, extra=()):
    """`tessera bench OP` (against CLBlast/OpenBLAS where present); returns its JSON rows."""
    args = _selector(device)
    if sizes is not None:
        if isinstance(sizes, (list, tuple)):
            sizes = ','.join(str(_args.integer(x, 'sizes[%d]' % i, 1)) if not isinstance(x, str) else x
                             for i, x in enumerate(sizes))
        elif not isinstance(sizes, str):
            sizes = str(_args.integer(sizes, 'sizes', 1))
        args += ['--sizes', _args.text(sizes, 'sizes').decode()]
    if budget is not None:
        args += ['--budget', _seconds(budget, 'budget')]
    if not _args.flag(peers, 'peers'):
        args.append('--no-peers')
    args += _extra(extra)
    op = _args.text(op, 'op').decode()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'bench.json')
        cli(*(['bench', op, '--json', path] + args), capture=True)
        with open(path) as f:
            return json.load(f)


def report(out='tessera-report', *, device=None, quick=False, budget=None, tune_budget=None, extra=()):
    """`tessera report` (peaks, tuning where untuned, the op suite, charts) into directory `out`;
    returns report.json's content."""
    try:
        out = os.fsdecode(os.fspath(out))
    except TypeError:
        raise _invalid('out must be a path, not %s' % type(out).__name__) from None
    args = ['report', '--out', _args.text(out, 'out').decode()] + _selector(device)
    if _args.flag(quick, 'quick'):
        args.append('--quick')
    if budget is not None:
        args += ['--budget', _seconds(budget, 'budget')]
    if tune_budget is not None:
        args += ['--tune-budget', _seconds(tune_budget, 'tune_budget')]
    cli(*(args + _extra(extra)), capture=True)
    with open(os.path.join(out, 'report.json')) as f:
        return json.load(f)
