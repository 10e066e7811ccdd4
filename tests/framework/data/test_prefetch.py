"""Prefetcher: background batches equal the synchronous ones bit for bit, in order whatever the
thread timing, with a bound on batches in flight, errors raised at the batch that failed, a
prompt close, and loader threads that run numba serially next to a training step."""
import itertools
import sys
import threading
import time
import warnings

import numba
import numpy as np
import pytest
from PIL import Image

import framework as sg
import framework.functional as F
from framework.data import BatchLoader, HRImageDataset, Prefetcher
from framework.data import prefetch as prefetch_module

from ...conftest import smooth_image


class _Recorder:
    """get_batch(i) -> {"i": i, "threads": numba threads of the calling thread}; records when
    each call starts (and where the consumer was), sleeps `delay(i)` seconds, fails at `fail_at`."""

    def __init__(self, delay=lambda i: 0.0, fail_at=None):
        self.delay, self.fail_at = delay, fail_at
        self.lock = threading.Lock()
        self.started, self.running, self.max_running = [], 0, 0
        self.consumed = None  # the last batch index the consumer received (set by the test)
        self.raised = None

    def get_batch(self, i):
        with self.lock:
            self.started.append((i, self.consumed))
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            time.sleep(self.delay(i))
            if i == self.fail_at:
                self.raised = ValueError(f"bad image in batch {i}: truncated file x.png")
                raise self.raised
            return {"i": i, "threads": numba.get_num_threads()}
        finally:
            with self.lock:
                self.running -= 1


def _loader_threads():
    return [t for t in threading.enumerate() if t.name.startswith("srgrad-loader")]


@pytest.fixture(scope="module")
def hr_loader(tmp_path_factory):
    """A BatchLoader over HRImageDataset(cache=False): every batch decodes and runs imresize."""
    root = tmp_path_factory.mktemp("prefetch_hr")
    rng = np.random.default_rng(3)
    for i, (h, w) in enumerate([(120, 96), (33, 48), (64, 90), (30, 30)]):
        Image.fromarray(smooth_image(rng, h, w)).save(root / f"p{i}.png")
    ds = HRImageDataset(root, scale=2, gt_size=16, cache=False)
    return lambda: BatchLoader(ds, batch_size=3, seed=7)


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            assert a[key].dtype == b[key].dtype
            np.testing.assert_array_equal(a[key], b[key])
        else:
            assert a[key] == b[key]


@pytest.mark.parametrize("workers,depth,start", [(2, 3, 0), (1, 1, 5), (3, 2, 2)])
def test_batches_equal_the_synchronous_ones_bit_for_bit(hr_loader, workers, depth, start):
    reference = [hr_loader().get_batch(i) for i in range(start, start + 7)]
    with Prefetcher(hr_loader(), start, start + 7, workers=workers, depth=depth) as p:
        got = list(p)
    assert len(got) == 7
    for a, b in zip(got, reference):
        _assert_same(a, b)


def test_order_under_random_worker_delays():
    rng = np.random.default_rng(0)
    delays = rng.uniform(0, 0.01, 40)
    delays[::7] = 0.03  # some batches much slower than the ones after them
    loader = _Recorder(lambda i: delays[i])
    with Prefetcher(loader, 0, 40, workers=4, depth=6) as p:
        assert [b["i"] for b in p] == list(range(40))
    assert loader.max_running > 1  # the batches really were built concurrently


def test_bound_on_batches_in_flight():
    loader = _Recorder(lambda i: 0.002)
    depth = 3
    p = Prefetcher(loader, 10, 30, workers=2, depth=depth)
    assert len(p) == 20
    deadline = time.perf_counter() + 5
    while len(loader.started) < depth and time.perf_counter() < deadline:
        time.sleep(0.005)
    time.sleep(0.05)  # workers run ahead as far as they may, and no further
    assert sorted(i for i, _ in loader.started) == [10, 11, 12]
    for batch in p:
        loader.consumed = batch["i"]
        time.sleep(0.005)  # a slow consumer: unbounded workers would run far ahead
    # a batch started only while the consumer held one at most `depth` before it
    for i, consumed in loader.started:
        assert i - (9 if consumed is None else consumed) <= depth
    assert sorted(i for i, _ in loader.started) == list(range(10, 30))  # each batch built once
    assert loader.max_running <= 2
    assert len(p) == 0


def test_a_worker_error_is_raised_at_the_batch_that_failed():
    loader = _Recorder(lambda i: 0.001 * (i % 3), fail_at=5)
    p = Prefetcher(loader, 0, 20, workers=2, depth=4)
    got = []
    with pytest.raises(ValueError) as info:
        for batch in p:
            got.append(batch["i"])
    assert got == [0, 1, 2, 3, 4]
    assert info.value is loader.raised  # the worker's exception itself
    assert str(info.value) == "bad image in batch 5: truncated file x.png"
    assert "loading batch 5" in " ".join(info.value.__notes__)
    assert next(p, None) is None  # closed: no more batches, no second error
    assert not _loader_threads()


def test_close_is_prompt_and_starts_nothing_more():
    loader = _Recorder(lambda i: 0.15)
    p = Prefetcher(loader, 0, None, workers=2, depth=16)
    assert next(p)["i"] == 0
    t = time.perf_counter()
    p.close()
    # waits only for the batches being built (one per thread, <= 0.15 s), not the 15 queued
    assert time.perf_counter() - t < 0.5
    started = len(loader.started)
    assert started <= 4  # batch 0, then at most one more per thread
    time.sleep(0.2)
    assert len(loader.started) == started
    assert not _loader_threads()
    assert next(p, None) is None
    p.close()  # idempotent


def test_an_early_break_in_a_with_block_stops_the_threads():
    loader = _Recorder(lambda i: 0.01)
    with Prefetcher(loader, 0, 1000, workers=2, depth=4) as p:
        for batch in p:
            if batch["i"] == 3:
                break
    assert not _loader_threads()
    assert len(loader.started) <= 3 + 1 + 4


def test_ctrl_c_in_the_consumer_does_not_wait_for_the_workers():
    loader = _Recorder(lambda i: 0.5 if i > 0 else 0.0)
    t = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        with Prefetcher(loader, 0, 100, workers=2, depth=2) as p:
            next(p)
            time.sleep(0.02)  # batches 1 and 2 are now being built
            raise KeyboardInterrupt
    assert time.perf_counter() - t < 0.3  # a wait for the workers would take 0.5 s
    assert sorted(i for i, _ in loader.started) == [0, 1, 2]
    time.sleep(0.6)  # the running batches end; nothing new starts
    assert sorted(i for i, _ in loader.started) == [0, 1, 2]
    assert not _loader_threads()


def test_dropping_the_prefetcher_stops_it():
    loader = _Recorder(lambda i: 0.01)
    p = Prefetcher(loader, 0, None, workers=2, depth=2)
    next(p)
    del p
    time.sleep(0.1)
    assert not _loader_threads()


def test_workers_zero_is_synchronous():
    loader = _Recorder()
    p = Prefetcher(loader, 3, 6, workers=0)
    assert loader.started == []  # nothing built before it is asked for
    assert next(p)["i"] == 3 and [i for i, _ in loader.started] == [3]
    assert [b["i"] for b in p] == [4, 5]
    assert not _loader_threads()


def test_endless_prefetcher():
    loader = _Recorder()
    with Prefetcher(loader, 2, None, workers=1, depth=2) as p:
        assert [b["i"] for b in itertools.islice(p, 5)] == [2, 3, 4, 5, 6]
        with pytest.raises(TypeError, match="endless"):
            len(p)


def test_loader_threads_run_numba_on_one_thread_and_leave_the_main_thread_alone():
    main_threads = numba.get_num_threads()
    with Prefetcher(_Recorder(), 0, 4, workers=2, depth=2) as p:
        assert [b["threads"] for b in p] == [1, 1, 1, 1]
    assert numba.get_num_threads() == main_threads


@numba.njit(parallel=True, nogil=True)  # not @kernel: no cache files from a test module
def _team_ids(n):
    """The numba thread id that ran each of n prange iterations (each iteration long enough that
    a team of two threads splits them)."""
    out = np.empty(n, np.int64)
    for i in numba.prange(n):
        s = 0.0
        for j in range(20000):
            s += np.sin(j * 1e-3)
        out[i] = numba.get_thread_id() + (s > 1e9)
    return out


class _TeamLoader:
    def get_batch(self, i):
        return {"ids": np.unique(_team_ids(32))}


def test_parallel_kernels_run_serially_in_loader_threads_beside_the_main_threads_team():
    if numba.get_num_threads() < 2:
        pytest.skip("needs two numba threads")
    team = list(range(min(32, numba.get_num_threads())))  # prange's static schedule uses them all
    assert list(np.unique(_team_ids(32))) == team
    with Prefetcher(_TeamLoader(), 0, 6, workers=2, depth=3) as p:
        for batch in p:
            assert list(batch["ids"]) == [0]  # a team of one: the loader thread itself
            assert list(np.unique(_team_ids(32))) == team  # the main thread's team is whole


def test_the_threading_layer_allows_concurrent_regions_here():
    """The docs/benchmarks.md machine runs OpenMP; workqueue would make the Prefetcher fall back."""
    assert prefetch_module.threads_are_safe() == (numba.threading_layer() != "workqueue")


def test_an_unsafe_threading_layer_falls_back_to_synchronous(monkeypatch):
    monkeypatch.setattr(prefetch_module, "threads_are_safe", lambda: False)
    loader = _Recorder()
    with pytest.warns(RuntimeWarning, match="workqueue"):
        p = Prefetcher(loader, 0, 3, workers=2)
    assert p.workers == 0 and loader.started == []
    assert [b["i"] for b in p] == [0, 1, 2]


@pytest.mark.parametrize("kwargs,match", [
    ({"start": -1}, "start must be an int >= 0"),
    ({"start": 4, "stop": 3}, "stop must be an int >= 4"),
    ({"workers": -1}, "workers must be an int >= 0"),
    ({"depth": 0}, "depth must be a positive int"),
    ({"workers": 1.5}, "workers must be"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        Prefetcher(_Recorder(), **{"start": 0, **kwargs})


def test_loading_alongside_a_training_step(hr_loader):
    """conv2d + interpolate forward and backward in the main thread (parallel numba regions and
    conv's tile threads) while two loader threads decode and imresize: both sides give exactly
    what they give alone."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8, 48, 48))
    w = rng.standard_normal((8, 8, 3, 3))

    def step():
        xt, wt = sg.tensor(x, requires_grad=True), sg.tensor(w, requires_grad=True)
        y = F.interpolate(F.conv2d(xt, wt, padding=1), scale_factor=2, mode="bicubic")
        (y * y).sum().backward()
        return xt.grad.data.copy(), wt.grad.data.copy()

    alone = step()
    reference = [hr_loader().get_batch(i) for i in range(12)]
    loads, steps = [], []

    class Timed:  # records when each batch was built
        def __init__(self, loader):
            self.loader = loader

        def get_batch(self, i):
            t = time.perf_counter()
            batch = self.loader.get_batch(i)
            loads.append((t, time.perf_counter()))
            return batch

    with Prefetcher(Timed(hr_loader()), 0, 12, workers=2, depth=3) as p:
        for i, batch in enumerate(p):
            _assert_same(batch, reference[i])
            t = time.perf_counter()
            gx, gw = step()
            steps.append((t, time.perf_counter()))
            np.testing.assert_array_equal(gx, alone[0])
            np.testing.assert_array_equal(gw, alone[1])
    assert len(steps) == 12
    assert any(a0 < b1 and b0 < a1 for a0, a1 in loads for b0, b1 in steps)  # they overlapped


class _Tiny:
    """Three one-pixel samples: a batch of 8 spans three epochs, so BatchLoader.order is called
    for new epochs all the time."""

    def __len__(self):
        return 3

    def get(self, index, rng):
        x = np.full((1, 1, 1), index + rng.random(), np.float32)
        return {"lq": x, "gt": x, "name": str(index)}


def test_batchloader_epoch_orders_from_several_threads():
    """Many epoch changes in flight at once, with a tiny GIL switch interval to make the threads
    interleave inside BatchLoader.order: every batch still equals the synchronous one."""
    reference = [BatchLoader(_Tiny(), 8, seed=1).get_batch(i)["lq"] for i in range(400)]
    old = sys.getswitchinterval()
    try:
        sys.setswitchinterval(1e-6)
        for _ in range(20):
            with Prefetcher(BatchLoader(_Tiny(), 8, seed=1), 0, 400, workers=4, depth=8) as p:
                assert all(np.array_equal(b["lq"], reference[i]) for i, b in enumerate(p))
    finally:
        sys.setswitchinterval(old)
