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
