import numba
import pytest

import framework as sg
from framework.functional import _tiles


def test_set_num_threads_sets_numba_and_conv_workers():
    before = sg.get_num_threads()
    try:
        sg.set_num_threads(1)
        assert sg.get_num_threads() == numba.get_num_threads() == 1
        if _tiles.BLAS_THREADS is not None:
            assert _tiles.default_workers() == 1 and _tiles.BLAS_THREADS[0]() == 1
        sg.set_num_threads(10 ** 6)  # capped at numba's pool
        assert sg.get_num_threads() == numba.config.NUMBA_NUM_THREADS
    finally:
        sg.set_num_threads(before)


def test_set_num_threads_checks_its_argument():
    with pytest.raises(ValueError, match="set_num_threads: n must be a positive int, got 0"):
        sg.set_num_threads(0)
    with pytest.raises(TypeError, match="set_num_threads: n must be a positive int, got 2.0"):
        sg.set_num_threads(2.0)
