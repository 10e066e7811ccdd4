"""torch.set_num_threads / get_num_threads: one count for numba's kernels, conv's tile workers
(they follow numba's count: functional/_tiles.default_workers) and the BLAS library."""
from __future__ import annotations

import numba

from ._check import int_arg

__all__ = ["set_num_threads", "get_num_threads"]


def set_num_threads(n: int) -> None:
    """Use `n` threads (int >= 1) for numba kernels, conv's workers and BLAS products. numba
    cannot go above the pool it started with (NUMBA_NUM_THREADS, the core count by default): a
    larger n is capped there. numba's setting is per calling thread, as torch's is per process:
    call it from the thread that trains."""
    n = int_arg("set_num_threads", "n", n)
    # the BLAS setter lives with the MPI launch code, which applies the same count per rank
    from .engine.distributed import _limit_blas_threads

    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    _limit_blas_threads(n)


def get_num_threads() -> int:
    """numba's thread count (which conv's workers follow)."""
    return numba.get_num_threads()
