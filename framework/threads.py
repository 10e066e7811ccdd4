"""Thread counts: torch.set_num_threads / get_num_threads (one count for numba's kernels, conv's tile
workers and the BLAS library), and THE place that changes the BLAS library's thread count, through
threadpoolctl (which finds whichever BLAS numpy loaded: OpenBLAS, MKL, BLIS, ...).

Conv's tile workers (functional/_tiles.py) run many small products at once, each on a
single-threaded BLAS: `limit_blas_threads(1)` before, `restore_blas_threads(previous)` after. Any
thread may call these: threadpoolctl 3.8 lets only one Python thread change OpenBLAS's shared pool
and silently ignores the others, so each change here takes that control and gives it back, under
one lock.
"""
from __future__ import annotations

import threading

import numba

from ._check import int_arg

__all__ = ["set_num_threads", "get_num_threads", "blas_controllable", "blas_threads",
           "limit_blas_threads", "restore_blas_threads"]

_BLAS = {"libs": None}
_LOCK = threading.Lock()


def _blas_libraries() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded now (numpy's among them: `import
    framework` loaded numpy), found once; a library loaded later (torch's) is left alone."""
    if _BLAS["libs"] is None:
        from threadpoolctl import ThreadpoolController
        _BLAS["libs"] = ThreadpoolController().select(user_api="blas").lib_controllers
    return _BLAS["libs"]


def blas_controllable() -> bool:
    """Whether the BLAS library's thread count can be set (conv's tile workers need it: else one)."""
    return bool(_blas_libraries())


def blas_threads() -> tuple:
    """The thread count of each BLAS library (in threadpoolctl's order; () when none is known)."""
    return tuple(lib.get_num_threads() for lib in _blas_libraries())


def _set(lib, n: int) -> None:
    release = getattr(type(lib), "clear_controlling_thread", None)
    if release is not None:  # OpenBLAS's controller obeys one thread: make it this one, then free it
        release(force=True)
    lib.set_num_threads(n)
    if release is not None:
        release()


def limit_blas_threads(n: int) -> tuple:
    """Give every BLAS library `n` threads; returns the previous counts for restore_blas_threads."""
    with _LOCK:
        previous = blas_threads()
        for lib in _blas_libraries():
            _set(lib, n)
        return previous


def restore_blas_threads(previous: tuple) -> None:
    """Put back the counts limit_blas_threads returned."""
    with _LOCK:
        for lib, n in zip(_blas_libraries(), previous):
            if n is not None:
                _set(lib, n)


def set_num_threads(n: int) -> None:
    """Use `n` threads (int >= 1) for numba kernels, conv's workers and BLAS products. numba
    cannot go above the pool it started with (NUMBA_NUM_THREADS, the core count by default): a
    larger n is capped there. numba's setting is per calling thread, as torch's is per process:
    call it from the thread that trains."""
    n = int_arg("set_num_threads", "n", n)
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    limit_blas_threads(n)


def get_num_threads() -> int:
    """numba's thread count (which conv's workers follow)."""
    return numba.get_num_threads()
