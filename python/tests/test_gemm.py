"""tessera.gemm / matmul against a float64 NumPy reference: layouts read in place (transposed
views), transposition flags, broadcast batches, bias and activation epilogues, beta, 16-bit
storage, and the three operand kinds."""
import numpy as np
import pytest

import tessera
from conftest import act_ref, assert_close, uniform


def ref(a, b, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, c=None, bias=None, activation=None):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if trans_a:
        a = np.swapaxes(a, -1, -2)
    if trans_b:
        b = np.swapaxes(b, -1, -2)
    y = alpha * np.matmul(a, b)
    if beta:
        y = y + beta * np.asarray(c, np.float64)
    if bias is not None:
        y = y + (np.asarray(bias, np.float64)[..., None, :] if np.ndim(bias) == 2 else np.asarray(bias, np.float64))
    return act_ref(y, activation)


def tol(k, dtype=np.float32):
    return 4e-7 * k + 2e-6 if dtype == np.float32 else 2e-3


@pytest.mark.parametrize('trans_a', [False, True])
@pytest.mark.parametrize('trans_b', [False, True])
def test_transposition_flags(device, rng, trans_a, trans_b):
    for _ in range(3):
        m, n, k = (int(x) for x in rng.integers(1, 150, 3))
        a = uniform(rng, (k, m) if trans_a else (m, k))
        b = uniform(rng, (n, k) if trans_b else (k, n))
        c = tessera.gemm(a, b, trans_a=trans_a, trans_b=trans_b, alpha=1.5)
        assert isinstance(c, np.ndarray) and c.dtype == np.float32
        assert_close(c, ref(a, b, trans_a, trans_b, alpha=1.5), tol(k), 'gemm %dx%dx%d' % (m, n, k))


def test_transposed_views_are_read_in_place(device, rng):
    a = uniform(rng, (90, 37))
    b = uniform(rng, (61, 90))
    # a.T and b.T are column-major views: uploaded as stored, read transposed
    assert_close(tessera.matmul(a.T, b.T), ref(a.T, b.T), tol(90), 'a.T @ b.T')
    lhs, rhs = a[:, 3:20].T, b.T[:, 5:50]  # column slices of transposed views: strided, read in place
    assert_close(tessera.matmul(lhs, rhs), ref(lhs, rhs), tol(90), 'strided views')


def test_batched_and_broadcast(device, rng):
    a = uniform(rng, (4, 33, 20))
    b = uniform(rng, (4, 20, 47))
    assert_close(tessera.matmul(a, b), ref(a, b), tol(20), 'batched')
    shared = uniform(rng, (20, 47))
    assert_close(tessera.matmul(a, shared), ref(a, shared), tol(20), 'B shared')
    assert_close(tessera.matmul(shared.T, np.swapaxes(a, 1, 2)), ref(shared.T, np.swapaxes(a, 1, 2)), tol(20),
                 'A shared, B transposed')
    four = uniform(rng, (2, 3, 9, 20))
    assert_close(tessera.matmul(four, shared), ref(four, shared), tol(20), '4-D batch')
    assert_close(tessera.matmul(np.broadcast_to(shared.T, (5, 47, 20)), a[0].T), ref(np.broadcast_to(shared.T, (5, 47, 20)), a[0].T),
                 tol(20), 'broadcast view')


@pytest.mark.parametrize('activation', [None, 'relu', 'gelu', 'gelu_tanh'])
def test_bias_and_activation_epilogue(device, rng, activation):
    a = uniform(rng, (3, 40, 64))
    w = uniform(rng, (96, 64))
    shared = uniform(rng, (96,))
    per_batch = uniform(rng, (3, 96))
    got = tessera.gemm(a, w, trans_b=True, bias=shared, activation=activation)
    assert_close(got, ref(a, w, trans_b=True, bias=shared, activation=activation), tol(64), 'shared bias')
    got = tessera.gemm(a, w, trans_b=True, bias=per_batch, activation=activation)
    assert_close(got, ref(a, w, trans_b=True, bias=per_batch, activation=activation), tol(64), 'per-batch bias')


def test_beta_reads_out(device, rng):
    a, b = uniform(rng, (30, 12)), uniform(rng, (12, 25))
    c0 = uniform(rng, (30, 25))
    c = c0.copy()
    got = tessera.gemm(a, b, c, alpha=0.5, beta=-2.0)
    assert got is c
    assert_close(c, ref(a, b, alpha=0.5, beta=-2.0, c=c0), tol(12), 'beta')
    # beta = 0 never reads out: NaN in it must not leak
    c[:] = np.nan
    tessera.gemm(a, b, c)
    assert_close(c, ref(a, b), tol(12), 'beta 0 over NaN')


def test_16_bit_storage(device, rng):
    a = uniform(rng, (50, 70), np.float16)
    b = uniform(rng, (70, 20), np.float16)
    got = tessera.gemm(a, b)  # gemm: fp32 C by default, as a BLAS
    assert got.dtype == np.float32
    assert_close(got, ref(a, b), tol(70), 'f16 in, f32 out')
    got = tessera.matmul(a, b, out_dtype=np.float32)
    assert got.dtype == np.float32
    assert_close(got, ref(a, b), tol(70), 'matmul f16 in, f32 out')
    for out_dtype in (None, np.float16, np.dtype(np.float16)):  # matmul: NumPy's result type by default
        got = tessera.matmul(a, b, out_dtype=out_dtype)
        assert got.dtype == np.float16 and np.matmul(a, b).dtype == np.float16
        assert_close(got, ref(a, b), 2e-3, 'f16 out')
    assert tessera.matmul(a, b.astype(np.float32)).dtype == np.float32  # mixed: float32, as NumPy


def test_device_resident_arrays(device, rng):
    a, b = uniform(rng, (64, 48)), uniform(rng, (48, 32))
    da, db = tessera.to_device(a), tessera.to_device(b)
    dc = tessera.matmul(da, db)
    assert isinstance(dc, tessera.Array) and dc.shape == (64, 32)
    assert_close(dc.get(), ref(a, b), tol(48), 'Array in, Array out')
    kept = tessera.matmul(a, b, keep_on_device=True)
    assert isinstance(kept, tessera.Array)
    # chained on the device: (a @ b) @ b.T without a host round trip
    chained = tessera.matmul(kept, db, trans_b=True)
    assert_close(np.asarray(chained), ref(ref(a, b), b, trans_b=True), tol(48) * 4, 'chained')
    assert_close(tessera.matmul(da[8:40], db).get(), ref(a[8:40], b), tol(48), 'row slice view')
    a2 = uniform(rng, (64, 48))
    assert da.set(a2) is da  # new values, same buffer
    assert_close(tessera.matmul(da, db).get(), ref(a2, b), tol(48), 'after set')
    with pytest.raises(tessera.InvalidArgument, match='shape'):
        da.set(a2[:3])
    with pytest.raises(tessera.InvalidArgument, match='strided'):
        da.view((32, 48), (96, 1)).set(a2[:32])


def test_pyopencl_arrays_in_place(device, rng):
    cl = pytest.importorskip('pyopencl')
    cla = pytest.importorskip('pyopencl.array')
    ctx = cl.Context([cl.get_platforms()[device.info.platform_index].get_devices()[device.info.device_index]])
    queue = cl.CommandQueue(ctx)
    a, b = uniform(rng, (3, 40, 30)), uniform(rng, (30, 20))
    ga, gb = cla.to_device(queue, a), cla.to_device(queue, b)
    gc = tessera.matmul(ga, gb)
    assert isinstance(gc, cla.Array) and gc.queue is queue
    assert_close(gc.get(), ref(a, b), tol(30), 'pyopencl')
    out = cla.zeros(queue, (3, 40, 20), np.float32)
    assert tessera.matmul(ga, gb, out, bias=cla.to_device(queue, np.ones(20, np.float32))) is out
    assert_close(out.get(), ref(a, b) + 1.0, tol(30), 'pyopencl out with bias')
    # a transposed pyopencl view (strides swapped) is read in place
    gt = cla.to_device(queue, np.ascontiguousarray(b.T))
    assert_close(tessera.matmul(ga, gt.T).get(), ref(a, b), tol(30), 'pyopencl transposed view')
    # one device wrapping the queue
    dev = tessera.Device.from_pyopencl(queue)
    assert_close(tessera.matmul(ga, gb, device=dev).get(), ref(a, b), tol(30), 'explicit wrapped device')
    dev.close()
    # a device on another queue of the context: the call is ordered with both queues
    other = tessera.Device.from_pyopencl(cl.CommandQueue(ctx))
    for _ in range(3):
        gc = tessera.matmul(ga, gb, device=other)
        assert_close(gc.get(), ref(a, b), tol(30), 'device on another queue')
    out = cla.zeros(queue, (3, 40, 20), np.float32)
    tessera.matmul(ga, gb, out, device=other)
    tessera.matmul(ga, gb, out, device=other, beta=1.0)  # not replayed: it must stay ordered
    assert_close(out.get(), 2 * ref(a, b), tol(30) * 2, 'another queue, beta')
    other.close()


def test_bad_input_raises_and_writes_nothing(device, rng):
    a, b = uniform(rng, (10, 8)), uniform(rng, (8, 6))
    out = np.full((10, 6), 7.0, np.float32)
    cases = [
        (lambda: tessera.matmul(a.astype(np.float64), b), 'dtype float64'),
        (lambda: tessera.matmul(a, uniform(rng, (9, 6))), 'inner dimensions'),
        (lambda: tessera.matmul(a, b, np.zeros((10, 7), np.float32)), 'shape'),
        (lambda: tessera.matmul(a, b, out, out_dtype=np.float16, bias=np.ones(5, np.float32)), 'bias'),
        (lambda: tessera.gemm(a, b, beta=1.0), 'pass out='),
        (lambda: tessera.gemm(a[0], b), 'rank'),
        (lambda: tessera.gemm(a, b, out, activation='swish'), 'activation'),
        (lambda: tessera.matmul(uniform(rng, (2, 10, 8)), uniform(rng, (3, 8, 6))), 'broadcast'),
        (lambda: tessera.matmul(a, b, device='no such device'), 'TSR_ERR_NO_DEVICE'),
    ]
    for call, words in cases:
        with pytest.raises(tessera.TesseraError) as info:
            call()
        assert words in str(info.value), str(info.value)
        assert np.all(out == 7.0), 'a refused call wrote out (%s)' % words
    ro = np.zeros((10, 6), np.float32)
    ro.flags.writeable = False
    with pytest.raises(tessera.InvalidArgument, match='read-only'):
        tessera.matmul(a, b, ro)
    assert isinstance(tessera.InvalidArgument(-1, 'x'), ValueError)


def test_closed_device_and_released_array(rng):
    dev = tessera.Device('cpu')
    a = tessera.to_device(uniform(rng, (4, 4)), device=dev)
    dev.close()
    with pytest.raises(tessera.TesseraError, match='closed'):
        tessera.matmul(a, a)
    with pytest.raises(tessera.TesseraError, match='closed'):
        tessera.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), device=dev)
    dev2 = tessera.Device('cpu')
    b = tessera.to_device(uniform(rng, (4, 4)), device=dev2)
    b.release()
    with pytest.raises(tessera.TesseraError, match='released'):
        b.get()
    dev2.close()


def test_pyopencl_array_of_another_context(device, rng):
    cl = pytest.importorskip('pyopencl')
    cla = pytest.importorskip('pyopencl.array')
    ctx = cl.Context([cl.get_platforms()[device.info.platform_index].get_devices()[device.info.device_index]])
    queue = cl.CommandQueue(ctx)
    ga = cla.to_device(queue, uniform(rng, (8, 8)))
    with pytest.raises(tessera.InvalidArgument, match='another OpenCL context'):
        tessera.matmul(ga, ga, device=device)


def test_raw_pyopencl_buffers(device, rng):
    cl = pytest.importorskip('pyopencl')
    ctx = cl.Context([cl.get_platforms()[device.info.platform_index].get_devices()[device.info.device_index]])
    queue = cl.CommandQueue(ctx)
    dev = tessera.Device.from_pyopencl(queue)
    a, b = uniform(rng, (24, 16)), uniform(rng, (16, 8))
    mf = cl.mem_flags
    ba = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
    bb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
    bc = cl.Buffer(ctx, mf.READ_WRITE, size=24 * 8 * 4 + 64)
    ta, tb = tessera.from_buffer(ba, (24, 16), device=dev), tessera.from_buffer(bb, (16, 8), device=dev)
    tc = tessera.from_buffer(bc, (24, 8), offset=16, device=dev)
    assert tessera.matmul(ta, tb, tc) is tc
    host = np.empty(24 * 8 + 16, np.float32)
    cl.enqueue_copy(queue, host, bc)
    assert_close(host[16:].reshape(24, 8), ref(a, b), tol(16), 'raw buffers, offset out')
    with pytest.raises(tessera.TesseraError) as info:
        tessera.from_buffer(ba, (25, 16), device=dev)
    assert info.value.status_name == 'TSR_ERR_BUFFER_TOO_SMALL'
    with pytest.raises(tessera.InvalidArgument, match='another OpenCL context'):
        tessera.from_buffer(ba, (24, 16), device=device)
    del ta, tb, tc
    dev.close()


def test_repeated_calls_replay_and_stay_correct(device, rng):
    """Repeated calls on the same device-resident operands replay the C call they resolved; new
    contents, other scalars, another out or a closed device must all still be honoured."""
    dev = tessera.Device('cpu')
    a, b = uniform(rng, (30, 20)), uniform(rng, (20, 10))
    da, db = tessera.to_device(a, device=dev), tessera.to_device(b, device=dev)
    dc, dc2 = tessera.empty((30, 10), device=dev), tessera.empty((30, 10), device=dev)
    for i in range(3):
        a2 = uniform(rng, (30, 20))
        da2 = tessera.to_device(a2, device=dev)
        for alpha in (1.0, -2.0):
            assert tessera.matmul(da, db, dc, alpha=alpha) is dc
            assert_close(dc.get(), ref(a, b, alpha=alpha), tol(20), 'replay alpha %g' % alpha)
        tessera.matmul(da2, db, dc2)
        assert_close(dc2.get(), ref(a2, b), tol(20), 'other operand')
    tessera.gemm(da, db, dc, beta=1.0)  # C += A B, replayed twice: reads what the last call wrote
    tessera.gemm(da, db, dc, beta=1.0)
    assert_close(dc.get(), ref(a, b, alpha=-2.0) + 2 * ref(a, b), tol(20) * 3, 'beta replayed')
    dev.close()
    with pytest.raises(tessera.TesseraError, match='closed'):
        tessera.matmul(da, db, dc)


def test_replays_found_by_identity_honour_every_change(device, rng):
    """A repeat found by its argument objects (the replay's cheap path) must still see: a released
    operand (also through a view), a reassigned Array attribute, another out, a scalar of a type
    the full path refuses, a graph being recorded, profiling, and for gelu and layernorm a released
    out; each case runs the full path, which raises or computes the new call."""
    dev = tessera.Device('cpu')
    a, b = uniform(rng, (12, 8)), uniform(rng, (8, 6))
    da, db = tessera.to_device(a, device=dev), tessera.to_device(b, device=dev)
    dc, dc2 = tessera.empty((12, 6), device=dev), tessera.empty((12, 6), device=dev)
    for _ in range(3):
        assert tessera.matmul(da, db, dc) is dc
    assert_close(dc.get(), ref(a, b), tol(8), 'replayed')
    tessera.matmul(da, db, dc2)  # another out: its own call
    assert_close(dc2.get(), ref(a, b), tol(8), 'another out')
    for bad, words in (({'alpha': True}, 'alpha'), ({'trans_a': 0}, 'trans_a'), ({'beta': np.nan}, 'beta'),
                       ({'keep_on_device': 1}, 'keep_on_device'), ({'activation': 'gelu2'}, 'activation')):
        with pytest.raises(tessera.InvalidArgument, match=words):
            tessera.matmul(da, db, dc, **bad)
    with pytest.raises(tessera.InvalidArgument, match='activation'):
        tessera.gemm(da, db, dc, activation=['gelu'])  # unhashable: the full path refuses it
    # an Array attribute reassigned after the replay was learned: the full path sees the new layout
    view = dc.view((12, 6))
    tessera.matmul(da, db, view)
    tessera.matmul(da, db, view)
    view.shape, view.strides = (6, 12), (12, 1)
    with pytest.raises(tessera.InvalidArgument, match='shape'):
        tessera.matmul(da, db, view)
    # recording: the repeat is recorded (the full path), not replayed behind the recording's back
    with tessera.graph(dev) as g:
        tessera.matmul(da, db, dc)
    assert g.launches >= 1
    # profiling: counted as a call of its own
    with tessera.profile() as p:
        tessera.matmul(da, db, dc)
        dev.finish()
    assert any(row[0] == 'gemm' and row[1] == 1 for row in p.table()), p.table()
    # a released operand, released through another view of its buffer
    b_view = db.view((8, 6))
    db2 = tessera.to_device(b, device=dev)
    for _ in range(2):
        tessera.matmul(da, db2, dc)
    db2.view((8, 6)).release()
    with pytest.raises(tessera.TesseraError, match='released'):
        tessera.matmul(da, db2, dc)
    b_view.release()
    with pytest.raises(tessera.TesseraError, match='released'):
        tessera.matmul(da, db, dc)
    # gelu and layernorm: a released out raises, a reassigned out is followed
    x = tessera.to_device(uniform(rng, (4, 16)), device=dev)
    y, g_, b_ = tessera.empty((4, 16), device=dev), tessera.to_device(uniform(rng, (16,)), device=dev), \
        tessera.to_device(uniform(rng, (16,)), device=dev)
    for _ in range(2):
        tessera.gelu(x, y)
        tessera.layernorm(x, g_, b_, out=y)
    y.release()
    with pytest.raises(tessera.TesseraError, match='released'):
        tessera.gelu(x, y)
    with pytest.raises(tessera.TesseraError, match='released'):
        tessera.layernorm(x, g_, b_, out=y)
    y2 = tessera.empty((4, 16), device=dev)
    for _ in range(2):
        tessera.gelu(x, y2)
    y2.offset = 16  # past the buffer's end for a [4, 16] result: refused, not a stale launch
    with pytest.raises(tessera.TesseraError, match='needs'):
        tessera.gelu(x, y2)
    dev.close()
    with pytest.raises(tessera.TesseraError, match='closed'):
        tessera.matmul(da, dc2.view((6, 12))[0:6], dc2)


def test_pyopencl_replays_follow_a_repointed_array(device, rng):
    """A pyopencl array is plain attributes: one re-pointed at another buffer (or another offset)
    after its call was learned must be resolved again, never replayed on the old buffer."""
    cl = pytest.importorskip('pyopencl')
    cla = pytest.importorskip('pyopencl.array')
    ctx = cl.Context([cl.get_platforms()[device.info.platform_index].get_devices()[device.info.device_index]])
    queue = cl.CommandQueue(ctx)
    a, b = uniform(rng, (10, 7)), uniform(rng, (7, 5))
    qa, qb = cla.to_device(queue, a), cla.to_device(queue, b)
    qc, other = cla.empty(queue, (10, 5), np.float32), cla.zeros(queue, (10, 5), np.float32)
    for _ in range(3):
        tessera.matmul(qa, qb, qc)
    qc.base_data = other.base_data
    tessera.matmul(qa, qb, qc)
    assert_close(other.get(), ref(a, b), tol(7), 'the new buffer')
    b2 = uniform(rng, (7, 5))
    qb2 = cla.to_device(queue, np.concatenate([b2.ravel(), b.ravel()]))
    qb.base_data, qb.offset = qb2.base_data, 7 * 5 * 4  # b again, at an offset of another buffer
    tessera.matmul(qa, qb, qc)
    assert_close(qc.get(), ref(a, b), tol(7), 'the operand at its new offset')


BROADCASTS = [((2, 3), (3,)), ((3,), (3, 4)), ((5,), (5,)), ((2, 3, 4, 5), (5,)), ((5,), (2, 3, 5, 4)),
              ((2, 1, 4, 5), (1, 3, 5, 2)), ((6, 1, 4, 5), (3, 5, 2)), ((1, 4, 5), (3, 5, 2)),
              ((2, 3, 4, 5), (3, 5, 6)), ((2, 1), (1, 3)), ((3, 0, 5), (5, 2)), ((4, 0), (0, 3))]


@pytest.mark.parametrize('case', range(len(BROADCASTS)))
def test_matmul_broadcasts_as_numpy(device, rng, case):
    """NumPy's matmul: leading dimensions broadcast (also partly: [2, 1] with [1, 3]), a 1-D
    operand is a vector, the result has NumPy's shape; NumPy, Array and pyopencl operands, and
    a given out (poisoned first)."""
    sa, sb = BROADCASTS[case]
    a, b = uniform(rng, sa), uniform(rng, sb)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    got = tessera.matmul(a, b)
    assert got.shape == want.shape
    assert_close(got, want, tol(sa[-1]), 'matmul %s @ %s' % (sa, sb))
    da, db = tessera.to_device(a), tessera.to_device(b)
    out = tessera.to_device(np.full(want.shape, np.nan, np.float32))
    assert tessera.matmul(da, db, out) is out
    assert_close(out.get(), want, tol(sa[-1]), 'Arrays into out')
    if len(sa) >= 2 and len(sb) >= 2 and want.size:  # a per-entry bias over the broadcast batch
        batch = int(np.prod(want.shape[:-2]))
        bias = uniform(rng, (batch, want.shape[-1]))
        got = tessera.matmul(da, db, bias=bias.reshape(batch, -1) if batch > 1 else bias[0])
        want_b = want + (bias.reshape(want.shape[:-2] + (1, want.shape[-1])) if batch > 1 else bias[0])
        assert_close(got.get(), want_b, tol(sa[-1]), 'per-entry bias')
    cla = pytest.importorskip('pyopencl.array')
    cl = pytest.importorskip('pyopencl')
    ctx = cl.Context([cl.get_platforms()[device.info.platform_index].get_devices()[device.info.device_index]])
    queue = cl.CommandQueue(ctx)
    got = tessera.matmul(cla.to_device(queue, a), cla.to_device(queue, b))
    assert isinstance(got, cla.Array) and got.shape == want.shape
    assert_close(got.get(), want, tol(sa[-1]), 'pyopencl')


def test_matmul_refusals(device, rng):
    a, v = uniform(rng, (4, 3)), uniform(rng, (3,))
    out = tessera.to_device(np.full((4,), 7.0, np.float32))
    for call, words in [
        (lambda: tessera.matmul(a, uniform(rng, (4,)), out), 'inner dimensions'),
        (lambda: tessera.matmul(np.float32(2), a), '0-d'),
        (lambda: tessera.matmul(v, a.T, trans_a=True), '1-D operand'),
        (lambda: tessera.gemm(a, v), 'rank'),
        (lambda: tessera.matmul(a, v, tessera.to_device(np.zeros((4, 1), np.float32))), 'shape'),
        (lambda: tessera.matmul(uniform(rng, (2, 4, 3)), uniform(rng, (3, 3, 2))), 'do not broadcast'),
        (lambda: tessera.matmul(a, uniform(rng, (3, 2)), tessera.empty((4, 2)).view((4, 2), (1, 4))),
         'contiguous rows'),
        (lambda: tessera.matmul(uniform(rng, (3, 4, 3)), uniform(rng, (3, 2)),
                                tessera.empty((3, 4, 2)).view((3, 4, 2), (4, 2, 1))), 'overlap'),
    ]:
        with pytest.raises(tessera.InvalidArgument) as info:
            call()
        assert words in str(info.value), str(info.value)
        assert np.all(out.get() == 7.0)
    # a row of one with strided columns is refused too (it was written as if contiguous)
    with pytest.raises(tessera.InvalidArgument, match='contiguous rows'):
        tessera.matmul(uniform(rng, (1, 3)), uniform(rng, (3, 4)), tessera.empty((1, 8)).view((1, 4), (8, 2)))


def test_scale_and_residual_epilogue(device, rng):
    """activation(scale * a @ b + bias + residual): per-column scales shared and per batch entry,
    a float16 residual from the host, and a device result that is its own residual (in place)."""
    a, b = uniform(rng, (3, 17, 24)), uniform(rng, (24, 29))
    scale, bias = uniform(rng, (3, 29), lo=-2, hi=2), uniform(rng, (29,))
    res = uniform(rng, (3, 17, 29)).astype(np.float16)
    got = tessera.matmul(a, b, bias=bias, scale=scale, residual=res, activation='relu')
    want = act_ref(np.matmul(a.astype(np.float64), b) * scale[:, None, :] + bias + res.astype(np.float64), 'relu')
    assert_close(got, want, tol(24), 'scale + residual')
    c0 = uniform(rng, (17, 29))
    dc = tessera.to_device(c0)
    assert tessera.gemm(a[0], b, dc, scale=scale[0], residual=dc) is dc
    assert_close(dc.get(), np.matmul(a[0].astype(np.float64), b) * scale[0] + c0, tol(24), 'in place')
    for call, words in [
        (lambda: tessera.gemm(a[0], b, scale=np.ones(28, np.float32)), 'scale'),
        (lambda: tessera.gemm(a[0], b, residual=np.ones((17, 28), np.float32)), 'residual'),
    ]:
        with pytest.raises(tessera.TesseraError) as info:
            call()
        assert words in str(info.value), str(info.value)


def _layernorm_ref(s, gamma, beta, eps):
    mean = s.mean(axis=-1, keepdims=True)
    var = ((s - mean) ** 2).mean(axis=-1, keepdims=True)
    return (s - mean) / np.sqrt(var + eps) * gamma + beta


def test_layernorm_epilogue(device, rng):
    """gemm(..., residual=x, layernorm=(gamma, beta, eps)) in place on x: a transformer's Add & Norm
    after a linear layer, against float64 (16 rows, the small-M kernel's fused epilogue on PoCL;
    40 rows, a LayerNorm launch after the GEMM; B transposed), inside a graph replayed on new
    input, and its argument errors (the result untouched)."""
    eps = 1e-12
    for m, k, n, trans_b in ((16, 96, 80, False), (40, 33, 70, False), (5, 40, 24, True)):
        h = uniform(rng, (m, k))
        w = uniform(rng, (n, k) if trans_b else (k, n))
        bias, gamma, beta = uniform(rng, (n,)), uniform(rng, (n,), lo=0.5, hi=1.5), uniform(rng, (n,))
        x0 = uniform(rng, (m, n))
        x = tessera.to_device(x0)
        g, be = tessera.to_device(gamma), tessera.to_device(beta)
        assert tessera.gemm(h, w, x, bias=bias, residual=x, trans_b=trans_b, layernorm=(g, be, eps)) is x
        s = h.astype(np.float64) @ (w.T if trans_b else w).astype(np.float64) + bias + x0
        want = _layernorm_ref(s, gamma, beta, eps)
        assert_close(x.get(), want, 1e-5, 'layernorm epilogue %dx%dx%d' % (m, k, n))
    # recorded and replayed on new contents of x and h
    m, k, n = 16, 64, 48
    hd, wd = tessera.to_device(uniform(rng, (m, k))), tessera.to_device(uniform(rng, (k, n)))
    x = tessera.empty((m, n), device=device)
    gamma, beta = uniform(rng, (n,), lo=0.5, hi=1.5), uniform(rng, (n,))
    g, be = tessera.to_device(gamma), tessera.to_device(beta)
    with tessera.graph(device) as graph:
        tessera.gemm(hd, wd, x, residual=x, layernorm=(g, be, eps))
    for _ in range(2):
        h1, x1 = uniform(rng, (m, k)), uniform(rng, (m, n))
        hd.set(h1)
        x.set(x1)
        graph.replay()
        want = _layernorm_ref(h1.astype(np.float64) @ wd.get().astype(np.float64) + x1, gamma, beta, eps)
        assert_close(x.get(), want, 1e-5, 'replayed layernorm epilogue')
    graph.release()
    out = tessera.to_device(np.full((4, 6), 7.0, np.float32))
    a, b = uniform(rng, (4, 3)), uniform(rng, (3, 6))
    ok = np.ones(6, np.float32)
    for call, words, error in [
        (lambda: tessera.gemm(a, b, out, layernorm=(ok, ok)), 'layernorm must be', tessera.InvalidArgument),
        (lambda: tessera.gemm(a, b, out, layernorm=(ok, np.ones(5, np.float32), 1e-5)), 'layernorm beta',
         tessera.InvalidArgument),
        (lambda: tessera.gemm(a, b, out, layernorm=(ok.astype(np.float16), ok, 1e-5)), 'layernorm gamma',
         tessera.InvalidArgument),
        (lambda: tessera.gemm(a, b, out, layernorm=(ok, ok, 0.0)), 'norm_eps', tessera.TesseraError),
        (lambda: tessera.gemm(a, b, out, layernorm=(ok, ok, float('nan'))), 'eps', tessera.TesseraError),
        (lambda: tessera.gemm(uniform(rng, (2, 4, 3)), b, layernorm=(ok, ok, 1e-5)), '2-D', tessera.InvalidArgument),
    ]:
        with pytest.raises(error) as info:
            call()
        assert words in str(info.value), str(info.value)
        assert np.all(out.get() == 7.0)
