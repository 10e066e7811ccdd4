"""Data races: every routine that splits work across threads, run on 2+ workers with shapes that force
each split, against one worker and float64 (issue 11: one image's col2im bands raced in the last
column). These tests assert that more than one worker really ran."""
import threading

import numba
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.functional import _direct, _im2col, _tiles
from framework.functional import conv as conv_module
from framework.functional import pool as pool_module
from framework.functional import resample as resample_module

REPEATS = 4


@pytest.fixture(autouse=True)
def two_threads():
    assert numba.config.NUMBA_NUM_THREADS >= 2, "the race tests need NUMBA_NUM_THREADS >= 2"
    before = numba.get_num_threads()
    numba.set_num_threads(2)
    yield
    numba.set_num_threads(before)


def _geometry(x_shape, w_shape, stride=1, padding=0, dilation=1, transpose=False):
    """conv.py's _Geometry of conv2d / conv_transpose2d on these shapes (through the public call)."""
    seen = {}
    fn = conv_module.ConvTranspose2dFunction if transpose else conv_module.Conv2dFunction
    real = fn.forward

    def spy(ctx, *args, geo):
        seen["geo"] = geo
        return real(ctx, *args, geo=geo)

    x = np.zeros(x_shape)
    w = np.zeros(w_shape)
    fn.forward = staticmethod(spy)
    try:
        (F.conv_transpose2d if transpose else F.conv2d)(
            sg.tensor(x, dtype=np.float64), sg.tensor(w, dtype=np.float64), stride=stride,
            padding=padding, dilation=dilation)
    finally:
        fn.forward = staticmethod(real)
    return seen["geo"]


def _col2im(col, x, *args):
    """_im2col.col2im on x (N, C, H, W), given as the kernel's flat planes."""
    _im2col.col2im(col, conv_module._planes(x), x.shape[3], *args)


def _footprint(task, x_shape, geo):
    """The elements of x that col2im of this task reads and writes back: x starts as -0.0 and every
    add is of +0.0, which turns -0.0 into +0.0 and leaves untouched elements negative zeros."""
    x = np.full(x_shape, -0.0)
    K = x_shape[1] * geo.kernel[0] * geo.kernel[1]
    row_lo, row_hi, tiles = task
    for b0, b1, r0, r1 in tiles:
        col = np.zeros((b1 - b0, K, (r1 - r0) * geo.features[1]))
        _col2im(col, x, b0, r0, geo.features[1], row_lo, row_hi, *geo.flat())
    return ~np.signbit(x)


# (image side (N, C, H, W), kernel, stride, padding, dilation): 3x3 padding 1 (the issue's case),
# odd widths, 5x5, dilation, a stride of 2, a padding wider than the kernel's reach.
FOOTPRINT_CASES = [
    ((1, 2, 14, 9), 3, 1, 1, 1),
    ((1, 2, 15, 8), 3, 1, 1, 1),
    ((1, 2, 13, 7), 5, 1, 2, 1),
    ((1, 2, 16, 9), 3, 1, 2, 2),
    ((1, 2, 17, 9), 3, 2, 1, 1),
    ((1, 2, 11, 9), 3, 1, 3, 1),
    ((2, 2, 12, 5), 3, 1, 1, 1),
]


@pytest.mark.parametrize("x_shape,k,stride,padding,dilation", FOOTPRINT_CASES)
@pytest.mark.parametrize("rows", [1, 2, 3])
def test_adjoint_tasks_touch_disjoint_elements(x_shape, k, stride, padding, dilation, rows,
                                               monkeypatch):
    """The tasks of _correlate_adjoint, which run in parallel, never read-modify-write the same
    element of x (found without timing luck: the footprint of each task, exactly), and together
    they add every term of a serial pass, in its order."""
    geo = _geometry(x_shape, (3, x_shape[1], k, k), stride, padding, dilation)
    row_bytes = x_shape[1] * k * k * geo.features[1] * 8
    monkeypatch.setattr(conv_module, "COL_BUFFER_BYTES", 2 * rows * row_bytes)  # 2 workers
    monkeypatch.setattr(conv_module, "_workers", lambda: 2)
    monkeypatch.setattr(conv_module, "_SERIAL_MACS", 0)  # tiles even for these small shapes
    monkeypatch.setattr(conv_module, "_BLAS_SERIAL_MACS", 0)  # and on the workers
    tiles, _, _ = conv_module._column_tiles((x_shape[0], x_shape[1], np.float64), geo, 3)
    tasks = conv_module._adjoint_tasks(tiles, geo, 2)
    assert len(tasks) >= 2, "the split must give several tasks"
    prints = [_footprint(task, x_shape, geo) for task in tasks]
    for i in range(len(prints)):
        for j in range(i + 1, len(prints)):
            both = prints[i] & prints[j]
            assert not both.any(), (
                f"tasks {tasks[i]} and {tasks[j]} both update x at {np.argwhere(both)[:3].tolist()}")
    # the same terms in the same order as one pass over all tiles: random columns, exact equality
    K = x_shape[1] * k * k
    cols = {t: np.random.default_rng(sum(t)).standard_normal((t[1] - t[0], K, (t[3] - t[2]) * geo.features[1]))
            for t in tiles}
    serial, split = np.zeros(x_shape), np.zeros(x_shape)
    for t in tiles:
        _col2im(cols[t].copy(), serial, t[0], t[2], geo.features[1], 0, x_shape[2], *geo.flat())
    for lo, hi, task_tiles in tasks:
        for b0, b1, r0, r1 in task_tiles:
            whole = next(t for t in tiles if t[0] == b0 and t[2] <= r0 and r1 <= t[3])
            part = cols[whole][:, :, (r0 - whole[2]) * geo.features[1]:(r1 - whole[2]) * geo.features[1]]
            _col2im(part.copy(), split, b0, r0, geo.features[1], lo, hi, *geo.flat())
    np.testing.assert_array_equal(split, serial)


def _record_workers(monkeypatch):
    """Thread ids that ran conv tiles. A pool thread waits (at most 10 s) until a second thread has
    taken a tile: on a busy machine one thread can otherwise drain the queue before the other wakes,
    and the test would measure the scheduler, not the split."""
    seen = set()
    lock = threading.Lock()
    two = threading.Event()
    real = _tiles.run

    def run(tasks, work, *args):
        def traced(task, buf):
            with lock:
                seen.add(threading.get_ident())
                if len(seen - {threading.main_thread().ident}) >= 2:
                    two.set()
            if threading.current_thread() is not threading.main_thread():
                two.wait(10)
            return work(task, buf)
        return real(tasks, traced, *args)

    monkeypatch.setattr(_tiles, "run", run)
    return seen


def _record_direct_tiles(monkeypatch):
    """Tile counts of the direct route's forwards (_direct.py), which run their tiles in one numba
    parallel region, not through _tiles.run."""
    counts = []
    real = _direct.correlate

    def correlate(x, w, features, padding, bias, slope, tiles, elems):
        counts.append(len(tiles))
        return real(x, w, features, padding, bias, slope, tiles, elems)

    monkeypatch.setattr(_direct, "correlate", correlate)
    return counts


def _conv_all(fn, x, w, b, options, g):
    X, W, B = (sg.tensor(a, requires_grad=True) for a in (x, w, b))
    y = fn(X, W, B, **options)
    y.backward(g)
    return [y.numpy(), X.grad.numpy(), W.grad.numpy(), B.grad.numpy()]


# One image, so bands of one image go to different workers; a small cap forces 2-row chunks.
CONV_STRESS = [
    # (fn, x (1, C, H, W), w, options, cap in bytes)
    ("conv2d", (1, 40, 30, 61), (32, 40, 3, 3), dict(padding=1), 200_000),     # the issue's case
    ("conv2d", (1, 6, 25, 33), (4, 6, 5, 5), dict(padding=2), 30_000),         # flipped 5x5
    ("conv2d", (1, 6, 27, 31), (5, 6, 3, 3), dict(stride=2, padding=1), 9_000),   # strided col2im
    ("conv2d", (1, 20, 22, 37), (24, 20, 3, 3), dict(padding=1), 60_000),     # F(2,3), im2col dW
    ("conv2d", (1, 20, 41, 40), (24, 20, 3, 3), dict(padding=1), 60_000),     # F(4,3), F(2,3) dW
    ("conv_transpose2d", (1, 6, 13, 17), (6, 3, 3, 3),
     dict(stride=2, padding=1, output_padding=1), 9_000),
]


@pytest.mark.parametrize("name,x_shape,w_shape,options,cap", CONV_STRESS)
def test_one_image_conv_on_two_workers_is_exact_every_time(name, x_shape, w_shape, options, cap,
                                                           monkeypatch):
    """Forward, input and weight gradient of one image on 2 workers: bit-identical from run to run;
    forward and input gradient bit-identical to that image in a batch of two (one task per image,
    the serial order); all three equal to float64."""
    fn = getattr(F, name)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) * 0.05).astype(np.float32)
    b = rng.standard_normal(w_shape[1] if name == "conv_transpose2d" else w_shape[0]).astype(
        np.float32)
    with sg.no_grad():
        shape = fn(sg.tensor(x), sg.tensor(w), sg.tensor(b), **options).shape
    g = rng.standard_normal(shape).astype(np.float32)
    monkeypatch.setattr(conv_module, "COL_BUFFER_BYTES", cap)
    monkeypatch.setattr(conv_module, "_SERIAL_MACS", 0)  # these small shapes still split
    monkeypatch.setattr(conv_module, "_BLAS_SERIAL_MACS", 0)  # and on the workers
    assert conv_module._workers() >= 2
    workers, direct = _record_workers(monkeypatch), _record_direct_tiles(monkeypatch)
    runs = [_conv_all(fn, x, w, b, options, g) for _ in range(REPEATS)]
    assert len(workers) >= 2 or (direct and min(direct) >= 2 and numba.get_num_threads() >= 2), \
        "the tiles must run on more than one thread"
    for other in runs[1:]:
        for a, ref in zip(other, runs[0]):
            np.testing.assert_array_equal(a, ref)
    pair = _conv_all(fn, np.concatenate([x, x]), w, b, options, np.concatenate([g, g]))
    np.testing.assert_array_equal(runs[0][0], pair[0][:1])
    np.testing.assert_array_equal(runs[0][1], pair[1][:1])
    exact = _conv_all(fn, *(a.astype(np.float64) for a in (x, w, b)), options, g.astype(np.float64))
    for a, ref in zip(runs[0], exact):  # F(4, 3) (maps from 40 x 40) is ~5e-6 off: docs/benchmarks.md
        np.testing.assert_allclose(a, ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def test_issue_reproducer_in_small(monkeypatch):
    """The issue's shape family (one image, 40 -> 32 channels, 3x3, padding 1) where a band is
    1 row: chunks of 2 rows, the split that raced; 8 runs all equal the batch-of-two result exactly."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 40, 40, 300)).astype(np.float32)
    w = (rng.standard_normal((32, 40, 3, 3)) * 0.05).astype(np.float32)
    b = np.zeros(32, np.float32)
    monkeypatch.setattr(conv_module, "COL_BUFFER_BYTES", 2 * 288 * 300 * 4)  # 1 row per band
    with sg.no_grad():
        ref = F.conv2d(sg.tensor(np.concatenate([x, x])), sg.tensor(w), sg.tensor(b),
                       padding=1).numpy()[0]
        for _ in range(8):
            y = F.conv2d(sg.tensor(x), sg.tensor(w), sg.tensor(b), padding=1).numpy()[0]
            np.testing.assert_array_equal(y, ref)


# -- numba prange kernels: each iteration owns its output plane; 2 threads equal 1 exactly -----------

def _both_thread_counts(call, module, monkeypatch):
    """call() on 2 threads REPEATS times equals call() on 1 thread, bit for bit; module.launch (or,
    for resample, also its pool runner) must have gone parallel at least once (a call below the
    serial threshold proves nothing)."""
    parallel = []
    if hasattr(module, "launch"):
        real = module.launch
        monkeypatch.setattr(module, "launch", lambda kern, small, *a: parallel.append(not small) or
                            real(kern, small, *a))
    if hasattr(module, "_tiles"):
        run = module._tiles.run
        monkeypatch.setattr(module._tiles, "run", lambda tasks, work, n, dtype, workers: parallel.append(
            workers > 1 and len(tasks) > 1) or run(tasks, work, n, dtype, workers))
    results = [call() for _ in range(REPEATS)]
    assert any(parallel), "the kernels must run on more than one thread"
    numba.set_num_threads(1)
    try:
        serial = call()
    finally:
        numba.set_num_threads(2)
    for got in results:
        for a, ref in zip(got, serial):
            np.testing.assert_array_equal(a, ref)


def _value_and_grad(op, x, g):
    X = sg.tensor(x, requires_grad=True)
    y = op(X)
    y.backward(g(y.shape))
    return [y.numpy(), X.grad.numpy()]


def _wave(shape):
    return np.cos(np.arange(np.prod(shape))).reshape(shape).astype(np.float32)


@pytest.mark.parametrize("op", [
    lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"),
    lambda x: F.interpolate(x, size=(17, 9), mode="lanczos", antialias=True),
    lambda x: F.imresize(x, scale_factor=0.5),
    lambda x: F.interpolate(x, size=(100, 90), mode="area"),
])
def test_resample_on_two_threads_equals_one(op, monkeypatch):
    x = np.random.default_rng(1).standard_normal((4, 8, 130, 140)).astype(np.float32)
    _both_thread_counts(lambda: _value_and_grad(op, x, _wave), resample_module, monkeypatch)


@pytest.mark.parametrize("op,module", [
    (lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), resample_module),  # window tables
    (lambda x: F.adaptive_avg_pool2d(x, (45, 37)), resample_module),
    (lambda x: F.adaptive_avg_pool2d(x, 1), resample_module),  # a global pool: resample's parallel loop
    (lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), resample_module),  # nearest x2's
    (lambda x: F.max_pool2d(x, 3, stride=1, padding=1), pool_module),
])
def test_pools_on_two_threads_equal_one(op, module, monkeypatch):
    x = np.random.default_rng(2).standard_normal((8, 8, 90, 110)).astype(np.float32)
    _both_thread_counts(lambda: _value_and_grad(op, x, _wave), module, monkeypatch)


def test_gelu_on_two_threads_equals_one():
    """gelu's prange loop writes element i only in iteration i (no launch threshold: always parallel)."""
    x = np.random.default_rng(3).standard_normal((4, 16, 60, 60)).astype(np.float32)
    results = [_value_and_grad(F.gelu, x, np.ones) for _ in range(REPEATS)]
    numba.set_num_threads(1)
    try:
        serial = _value_and_grad(F.gelu, x, np.ones)
    finally:
        numba.set_num_threads(2)
    for got in results:
        for a, ref in zip(got, serial):
            np.testing.assert_array_equal(a, ref)
