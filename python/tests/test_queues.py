"""Results are ordered on the caller's pyopencl queue, in-order or out-of-order: pyopencl outputs
carry the call's event, and later work on the queue (pyopencl's .get(), tessera's reads, a raw
enqueue_copy) waits for the call. Sizes are large enough that a read which does not wait sees
the poisoned output."""
import numpy as np
import pytest

import tessera
from conftest import assert_close, attention_ref, gelu_ref, uniform

cl = pytest.importorskip('pyopencl')
cla = pytest.importorskip('pyopencl.array')


def _queue(device, out_of_order):
    info = device.info
    ctx = cl.Context([cl.get_platforms()[info.platform_index].get_devices()[info.device_index]])
    props = cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE if out_of_order else 0
    try:
        return cl.CommandQueue(ctx, properties=props)
    except cl.Error as exc:
        pytest.skip('this device has no out-of-order queues (%s)' % exc)


def _poisoned(queue, shape):
    return cla.to_device(queue, np.full(shape, np.nan, np.float32))


@pytest.mark.parametrize('out_of_order', [False, True])
def test_pyopencl_results_are_ordered(device, rng, out_of_order):
    queue = _queue(device, out_of_order)
    n = 256
    a, b = uniform(rng, (n, n)), uniform(rng, (n, n))
    ref = a.astype(np.float64) @ b
    q, k, v = (uniform(rng, (2, 4, 128, 64)) for _ in range(3))
    g, beta = uniform(rng, (n,)), uniform(rng, (n,))
    for trial in range(3):
        ga, gb = cla.to_device(queue, a), cla.to_device(queue, b)
        assert_close(tessera.matmul(ga, gb).get(), ref, 2e-4, 'matmul, trial %d' % trial)
        out = _poisoned(queue, (n, n))
        assert tessera.matmul(ga, gb, out) is out
        host = np.empty((n, n), np.float32)
        cl.enqueue_copy(queue, host, out.data)  # a raw copy: ordered by the queue alone
        queue.finish()
        assert_close(host, ref, 2e-4, 'matmul into out, raw copy')
        assert_close(tessera.gelu(ga).get(), gelu_ref(a), 2e-6, 'gelu')
        y = _poisoned(queue, (n, n))
        tessera.gelu(ga, y)
        tessera.gelu(y, y)  # in place, after the call that wrote it
        assert_close(y.get(), gelu_ref(gelu_ref(a)), 1e-5, 'gelu chained')
        got = tessera.attention(*(cla.to_device(queue, t) for t in (q, k, v)), causal=True)
        assert_close(got.get(), attention_ref(q, k, v, 'bottom_right')[0], 2e-5, 'attention')
        got = tessera.layernorm(ga, cla.to_device(queue, g), cla.to_device(queue, beta))
        mean = a.mean(-1, keepdims=True, dtype=np.float64)
        want = (a - mean) / np.sqrt(((a - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * g + beta
        assert_close(got.get(), want, 1e-5, 'layernorm')


@pytest.mark.parametrize('out_of_order', [False, True])
def test_arrays_and_numpy_on_a_wrapped_queue(device, rng, out_of_order):
    queue = _queue(device, out_of_order)
    dev = tessera.Device.from_pyopencl(queue)
    n = 256
    a, b = uniform(rng, (n, n)), uniform(rng, (n, n))
    ref = a.astype(np.float64) @ b
    try:
        for trial in range(3):
            da, db = tessera.to_device(a, device=dev), tessera.to_device(b, device=dev)
            dc = tessera.matmul(da, db)
            assert_close(dc.get(), ref, 2e-4, 'Arrays, trial %d' % trial)
            dc.set(np.zeros((n, n), np.float32))  # written after the call that read... and wrote it
            tessera.matmul(da, db, dc)
            tessera.gelu(dc, dc)
            assert_close(dc.get(), gelu_ref(ref), 2e-4, 'Arrays chained')
            assert_close(tessera.matmul(a, b, device=dev), ref, 2e-4, 'NumPy through the wrapped queue')
            # top-left with Lq > Lk: two calls, their LSE rows copied into place after them
            q, k, v = uniform(rng, (1, 2, 64, 16)), uniform(rng, (1, 2, 48, 16)), uniform(rng, (1, 2, 48, 16))
            o, lse = tessera.attention(q, k, v, return_lse=True, causal='top_left', device=dev)
            want, want_lse = attention_ref(q, k, v, 'top_left')
            assert_close(o, want, 2e-5, 'attention through the wrapped queue')
            assert_close(lse, want_lse, 2e-5, 'its LSE')
    finally:
        dev.close()
