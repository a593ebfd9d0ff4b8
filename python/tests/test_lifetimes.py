"""Object lifetimes: an Array released through any of its views, a DeviceGroup whose member was
closed, a Device closed while other threads are inside ops on it. Every later use raises
TesseraError; nothing crashes, hangs or writes into another array's buffer."""
import threading

import numpy as np
import pytest

import tessera
from conftest import assert_close, uniform


def _refused(call, words='released'):
    with pytest.raises(tessera.TesseraError, match=words):
        call()


def test_release_reaches_every_view(device, rng):
    x, w = uniform(rng, (16, 8)), uniform(rng, (8, 4))
    a, dw = tessera.to_device(x), tessera.to_device(w)
    views = [a.view((8, 16)), a[0:8], a[3], a.view((4, 8), (16, 1), 8)]
    out = tessera.empty((8, 4))
    tessera.matmul(views[1], dw, out)  # twice: the second call is a replay of the first
    tessera.matmul(views[1], dw, out)
    a.release()
    for arr in [a] + views:
        _refused(arr.get)
        _refused(lambda: arr.set(np.zeros(arr.shape, np.float32)))
        _refused(lambda: arr.view((1,)))
        _refused(lambda: tessera.gelu(arr))
    _refused(lambda: a[0])
    _refused(lambda: tessera.gemm(views[0], tessera.to_device(uniform(rng, (16, 2)))))
    _refused(lambda: tessera.matmul(views[1], dw, out))  # the replayed call too
    _refused(lambda: tessera.matmul(dw.view((4, 8)), views[3]))
    assert all(arr.released and 'released' in repr(arr) for arr in [a] + views)
    a.release()  # idempotent


def test_release_through_a_view_frees_the_parent(device, rng):
    x = uniform(rng, (16, 8))
    a = tessera.to_device(x)
    s = a[2:6]
    s.release()
    _refused(a.get)
    _refused(lambda: a[0:1])
    # buffers made after the release may reuse the freed memory: a stale view must not reach them
    live = [tessera.to_device(np.full((16, 8), 5.0, np.float32)) for _ in range(4)]
    _refused(lambda: s.set(np.zeros((4, 8), np.float32)))
    _refused(lambda: tessera.gelu(s, s))
    for arr in live:
        assert np.all(arr.get() == 5.0)


def test_group_member_closed(rng):
    a, b = uniform(rng, (20, 8)), uniform(rng, (8, 6))
    q = uniform(rng, (1, 2, 4, 16))
    d = tessera.Device('cpu')
    g = tessera.DeviceGroup([d])
    assert_close(g.matmul(a, b), a.astype(np.float64) @ b, 1e-5, 'group before')
    other = tessera.DeviceGroup([d, d])
    d.close()
    for group in (g, other):
        for call in (lambda: group.matmul(a, b), lambda: group.attention(q, q, q), group.stats,
                     lambda: group.set_weights(None), lambda: group.set_weights([1.0] * len(group))):
            _refused(call, 'device group is closed: its device 0 was closed')
        assert 'closed' in repr(group)
        group.close()  # idempotent after the member closed it
    # devices the group opened itself close with it
    g = tessera.DeviceGroup(['cpu'])
    member = g.devices[0]
    g.close()
    assert member.closed
    _refused(lambda: g.matmul(a, b), 'closed')


def test_group_refuses_bad_members():
    with pytest.raises(tessera.InvalidArgument, match='devices\\[1\\]'):
        tessera.DeviceGroup(['cpu', 3])
    with pytest.raises(tessera.InvalidArgument, match='list of devices'):
        tessera.DeviceGroup('cpu')
    closed = tessera.Device('cpu')
    closed.close()
    _refused(lambda: tessera.DeviceGroup([closed]), 'closed')


def _worker(dev, rng, started, errors, op):
    x = uniform(rng, (96, 96))
    q = uniform(rng, (1, 2, 32, 16))
    try:
        dx = tessera.to_device(x, device=dev)
        for i in range(100000):
            if op == 0:
                tessera.matmul(x, x, device=dev)
            elif op == 1:
                tessera.gelu(dx, dx)
                dx.get()
            else:
                tessera.attention(q, q, q, device=dev, causal=True)
            started.set()
    except tessera.TesseraError as exc:
        if 'closed' not in str(exc):
            errors.append(exc)
        started.set()
        return
    except BaseException as exc:  # noqa: BLE001 (reported by the test)
        errors.append(exc)
    errors.append(AssertionError('worker %d never saw the device closed' % op))


def test_close_while_threads_are_inside_ops(rng):
    for trial in range(4):
        dev = tessera.Device('cpu')
        errors, threads = [], []
        for op in range(3):
            started = threading.Event()
            t = threading.Thread(target=_worker, args=(dev, np.random.default_rng([trial, op]), started, errors, op))
            t.start()
            threads.append((t, started))
        for t, started in threads:
            started.wait()
        dev.close()  # waits for the calls in flight; later calls raise
        assert dev.closed
        for t, _ in threads:
            t.join(600)  # a guard against a hang, not a timing check
            assert not t.is_alive(), 'a worker hung after Device.close()'
        assert not errors, errors
        _refused(lambda: tessera.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), device=dev),
                 'closed')
        _refused(lambda: dev.name, 'closed')
        _refused(dev.finish, 'closed')


def test_close_from_inside_a_call_on_the_same_thread_raises(tmp_path):
    dev = tessera.Device('cpu')
    with pytest.raises(tessera.TesseraError, match='cannot be closed from inside a call'):
        tessera.tune('gelu', device=dev, evaluations=1, budget=10, classes='large', dry_run=True,
                     db=tmp_path / 'db.json', progress=lambda p: dev.close())
    assert not dev.closed  # the refused close changed nothing
    tessera.gelu(np.ones(4, np.float32), device=dev)
    dev.close()
    dev.close()


def _loop_until_refused(fn, started, errors, words):
    try:
        for _ in range(100000):
            fn()
            started.set()
    except tessera.TesseraError as exc:
        if words not in str(exc):
            errors.append(exc)
        started.set()
        return
    except BaseException as exc:  # noqa: BLE001 (reported by the test)
        errors.append(exc)
    errors.append(AssertionError('a worker never saw the object closed'))


def _race(workers, close, words):
    errors, threads = [], []
    for fn in workers:
        started = threading.Event()
        t = threading.Thread(target=_loop_until_refused, args=(fn, started, errors, words))
        t.start()
        threads.append((t, started))
    for _, started in threads:
        started.wait()
    close()
    for t, _ in threads:
        t.join(600)  # a guard against a hang, not a timing check
        assert not t.is_alive(), 'a worker hung'
    assert not errors, errors


def test_group_and_buffer_closed_under_threads(rng):
    a, b = uniform(rng, (64, 32)), uniform(rng, (32, 16))
    q = uniform(rng, (1, 4, 16, 16))
    g = tessera.DeviceGroup(['cpu', 'cpu'])
    _race([lambda: g.matmul(a, b), lambda: g.attention(q, q, q), g.stats], g.close, 'closed')
    dev = tessera.Device('cpu')
    x = tessera.to_device(uniform(rng, (64, 64)), device=dev)
    views = [x[0:32], x.view((64, 64)), x[5]]
    out = tessera.empty((32, 64), device=dev)
    _race([lambda: tessera.matmul(views[0], views[1], out), lambda: tessera.gelu(views[2]), views[1].get],
          x.release, 'released')
    dev.close()
