"""The one numba policy every kernel compiles through.

- `cache=True`: a kernel compiles once per machine and is reused by every later process.
- no `fastmath`: kernels are gradchecked in float64, and reassociation would break the adjoint tests.
- no explicit signatures: the same kernel compiles for float32 and float64 on first use.

How a kernel stays fast to run and to compile (docs/benchmarks.md has the figures):
- inner loops run over 1-D views from 0 (`d = dst[lo:hi]; for m in range(d.shape[0])`): numba wraps
  negative indices, and that select on every access keeps LLVM from vectorising a loop unless the
  index is provably >= 0, as a `range(n)` variable is.
- no reshape, slice assignment or array arithmetic inside a kernel: numba builds them from generic
  array code (with its error-message formatting) that takes seconds to compile on a cold cache.
"""
import numba


def kernel(fn=None, *, parallel: bool = False):
    """`@kernel` or `@kernel(parallel=True)` (use `numba.prange` in the outer loop)."""
    deco = numba.njit(cache=True, parallel=parallel, fastmath=False, nogil=True, error_model="numpy")
    return deco if fn is None else deco(fn)


prange = numba.prange


def launch(kern, small: bool, *args):
    """kern(*args), on one numba thread when `small`. A parallel region waits for its slowest
    thread, and on a shared machine a descheduled thread stalls it for a whole time slice, so tiny
    calls run serially (each op family measures its own threshold)."""
    if not small:
        return kern(*args)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return kern(*args)
    finally:
        numba.set_num_threads(threads)
