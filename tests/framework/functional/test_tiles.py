"""The pool's BLAS policy (functional/_tiles.py): every call that runs on more than one worker runs
its products on single-threaded BLAS, a one-task call too (a threaded BLAS call between numba
kernels spins its threads: issue 28), and the caller's thread count comes back afterwards."""
import pytest

from framework import threads
from framework.functional import _tiles

needs_blas = pytest.mark.skipif(not threads.blas_controllable(),
                                reason="threadpoolctl finds no BLAS library to control")


def _blas_seen(tasks, workers):
    """The BLAS thread counts each task saw, run through _tiles.run with `workers`."""
    return _tiles.run(tasks, lambda task, buf: threads.blas_threads(), 4, "float32", workers)


@needs_blas
@pytest.mark.parametrize("n_tasks", [1, 3])
def test_tasks_run_on_single_threaded_blas_one_task_included(n_tasks):
    before = threads.limit_blas_threads(2)
    try:
        seen = _blas_seen(list(range(n_tasks)), workers=2)
        assert [set(s) for s in seen] == [{1}] * n_tasks
        assert set(threads.blas_threads()) == {2}  # given back
    finally:
        threads.restore_blas_threads(before)


@needs_blas
def test_one_worker_keeps_the_callers_blas_threads():
    """workers=1 is the caller's choice (set_num_threads(1) set BLAS to 1 as well, or a small
    call): its BLAS is left as it is, with no thread-count change per call."""
    before = threads.limit_blas_threads(2)
    try:
        assert [set(s) for s in _blas_seen([0, 1], workers=1)] == [{2}, {2}]
    finally:
        threads.restore_blas_threads(before)


def test_results_come_in_task_order_on_any_worker_count():
    for workers in (1, 2, 3):
        assert _tiles.run(list(range(7)), lambda t, buf: t * t, 4, "float32", workers) == \
            [t * t for t in range(7)]


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_split_gives_each_worker_the_same_share(workers):
    """Bands of one image: a multiple of the workers, of equal rows (to one); the direct route runs
    them in a numba parallel region whose static schedule would leave a worker idle otherwise (5
    bands of 60 rows on 2 workers: one did 180 rows, the other 76). Whole images the same way."""
    row_bytes = 132_096  # a 64-channel 256 px row of the direct route
    tiles, nbytes = _tiles.split(1, 256, row_bytes, 8 * 2**20, workers)
    assert len(tiles) % workers == 0 and len(tiles) >= 5
    sizes = [r1 - r0 for _, _, r0, r1 in tiles]
    assert max(sizes) - min(sizes) <= max(sizes) // 2 and sum(sizes) == 256
    assert nbytes == max(sizes) * row_bytes <= 8 * 2**20
    covered = [r for _, _, r0, r1 in tiles for r in range(r0, r1)]
    assert covered == list(range(256))
    # one image that fits the cap whole (ESPCN's 3-channel first layer at 512 px) is still cut into
    # bands, one share per worker
    small = _tiles.split(1, 512, 3 * 516 * 8, 8 * 2**20, workers)[0]
    assert len(small) == workers and sum(t[3] - t[2] for t in small) == 512
    images, _ = _tiles.split(6 * workers, 16, 1000, 2**30, workers)
    assert len(images) % workers == 0
    assert [b for b0, b1, _, _ in images for b in range(b0, b1)] == list(range(6 * workers))


@needs_blas
def test_a_product_below_blas_own_threshold_leaves_its_threads_alone(monkeypatch):
    """conv.py's GEMM routes below _BLAS_SERIAL_MACS (RCAN's channel attention: 1x1 convs on 1x1
    maps) run without the two thread-count changes; a larger one still limits BLAS to one thread."""
    import numpy as np

    import framework as sg
    import framework.functional as F
    from framework.functional import conv
    seen = []
    monkeypatch.setattr(_tiles, "_single_threaded_blas", lambda real=_tiles._single_threaded_blas: seen.append(1) or real())
    monkeypatch.setattr(conv, "_workers", lambda: 2)
    rng = np.random.default_rng(0)
    x, w = sg.tensor(rng.random((1, 32, 1, 1), np.float32)), sg.tensor(rng.random((4, 32, 1, 1), np.float32))
    y = F.conv2d(x, w).numpy()
    np.testing.assert_allclose(y.reshape(4), w.numpy().reshape(4, 32) @ x.numpy().reshape(32), rtol=1e-6)
    assert 4 * 32 < conv._BLAS_SERIAL_MACS and seen == []
    F.conv2d(sg.tensor(rng.random((1, 32, 64, 64), np.float32)), w)  # 524288 multiply-adds
    assert seen == [1]


def test_a_one_worker_call_keeps_the_pools_column_buffers():
    """A call on one worker (conv.py's small products) gives its buffer back to a pool kept for
    every worker: it must not drop the buffers the next parallel call takes (tiled inference's
    peak memory grew by two fresh ones per tile)."""
    if _tiles.default_workers() < 2:
        pytest.skip("one worker thread: the pool holds one buffer")
    _tiles._SPARE["buffers"].clear()
    _tiles.run([0, 1], lambda task, buf: buf.size, 1000, "float32", 2)
    kept = [id(b) for b in _tiles._SPARE["buffers"]]
    assert len(kept) == 2
    _tiles.run([0], lambda task, buf: buf.size, 1000, "float32", 1)
    assert sorted(id(b) for b in _tiles._SPARE["buffers"]) == sorted(kept)  # the same two, reused
