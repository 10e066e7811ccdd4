import threading

import numba
import pytest

import framework as sg
from framework import threads
from framework.functional import _tiles

needs_blas = pytest.mark.skipif(not threads.blas_controllable(),
                                reason="threadpoolctl finds no BLAS library to control")


def test_set_num_threads_sets_numba_blas_and_conv_workers():
    before, blas_before = sg.get_num_threads(), threads.blas_threads()
    try:
        sg.set_num_threads(1)
        assert sg.get_num_threads() == numba.get_num_threads() == 1
        if threads.blas_controllable():
            assert _tiles.default_workers() == 1 and set(threads.blas_threads()) == {1}
        sg.set_num_threads(10 ** 6)  # capped at numba's pool
        assert sg.get_num_threads() == numba.config.NUMBA_NUM_THREADS
    finally:
        sg.set_num_threads(before)
        threads.restore_blas_threads(blas_before)


def test_set_num_threads_checks_its_argument():
    with pytest.raises(ValueError, match="set_num_threads: n must be a positive int, got 0"):
        sg.set_num_threads(0)
    with pytest.raises(TypeError, match="set_num_threads: n must be a positive int, got 2.0"):
        sg.set_num_threads(2.0)


@needs_blas
def test_blas_limit_and_restore_work_from_any_thread():
    """threadpoolctl 3.8 lets one Python thread control OpenBLAS and silently ignores the others:
    a limit set from a second thread (a user thread or the loader running conv's tiles), after the
    main thread set one, must still take effect, and the restore put the count back."""
    before = threads.limit_blas_threads(2)  # the main thread sets first
    seen = {}

    def other():
        previous = threads.limit_blas_threads(1)
        seen["inside"] = threads.blas_threads()
        threads.restore_blas_threads(previous)
        seen["after"] = threads.blas_threads()

    try:
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        assert set(seen["inside"]) == {1} and set(seen["after"]) == {2}
        threads.limit_blas_threads(3)  # and the main thread still can afterwards
        assert set(threads.blas_threads()) == {3}
    finally:
        threads.restore_blas_threads(before)
    assert threads.blas_threads() == before
