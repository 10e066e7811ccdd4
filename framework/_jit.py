"""The one numba policy every kernel compiles through.

- `cache=True`, stamped by the whole kernel source: a kernel compiles once per machine and is reused
  by every later process, until any file that defines kernels changes. numba's own stamp hashes
  only the kernel's file, but a kernel inlines the kernels it calls from other files
  (`_direct` calls `_im2col.valid_range`), so an edit there would leave a stale machine code.
- no `fastmath`: kernels are gradchecked in float64, and reassociation would break the adjoint tests.
  Where a kernel wants fused multiply-adds it says so (_simd.vfma: exact IEEE, the same bits on
  every CPU); LLVM never contracts a * b + c on its own here.
- no explicit signatures: the same kernel compiles for float32 and float64 on first use.

How a kernel stays fast to run and to compile (docs/benchmarks.md has the figures):
- inner loops run over 1-D views from 0 (`d = dst[lo:hi]; for m in range(d.shape[0])`): numba wraps
  negative indices, and that select on every access keeps LLVM from vectorising a loop unless the
  index is provably >= 0, as a `range(n)` variable is.
- no reshape, slice assignment or array arithmetic inside a kernel: numba builds them from generic
  array code (with its error-message formatting) that takes seconds to compile on a cold cache.
"""
import contextlib
import functools
import hashlib
import pathlib

import numba
from numba.core import caching
from numba.core.registry import CPUDispatcher

_PACKAGES = ("framework", "models")  # the folders next to each other that hold every kernel


@functools.lru_cache(maxsize=None)
def source_stamp() -> str:
    """The stamp of this installation's kernels (`stamp_of` the folder that holds framework/)."""
    return stamp_of(pathlib.Path(__file__).resolve().parent.parent)


def stamp_of(root: pathlib.Path) -> str:
    """sha256 of every file under root/framework and root/models that imports this module (so
    defines kernels), and of _simd.py (its intrinsics become part of the kernels that use them), path
    and text: any edit to any of them invalidates every cached kernel."""
    digest = hashlib.sha256()
    for package in _PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_bytes()
            if b"_jit import" in text or path.name in ("_jit.py", "_simd.py"):
                digest.update(str(path.relative_to(root)).encode() + b"\0" + text + b"\0")
    return digest.hexdigest()


class _KernelSourceStamp:
    def get_source_stamp(self):
        return source_stamp()


# numba's own locators in numba's own order (NUMBA_CACHE_DIR, then __pycache__, then the user's
# cache folder), each with the stamp above instead of the one file's hash
_LOCATORS = [type(base.__name__, (_KernelSourceStamp, base), {})
             for base in (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator,
                          caching.UserWideCacheLocator)]


class _CacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = _LOCATORS


class _Cache(caching.FunctionCache):
    _impl_class = _CacheImpl


def kernel(fn=None, *, parallel: bool = False):
    """`@kernel` or `@kernel(parallel=True)` (use `numba.prange` in the outer loop)."""
    def deco(f):
        disp = numba.njit(parallel=parallel, fastmath=False, nogil=True, error_model="numpy")(f)
        disp._cache = _Cache(disp.py_func)  # what njit(cache=True) does, with our locators
        return disp
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


@contextlib.contextmanager
def recording():
    """Inside, a call of any numba kernel from Python appends (kernel, argument types) to the list
    this yields and returns None, WITHOUT compiling or running the kernel: its outputs keep whatever
    np.empty held. engine/precompile.py's dry run uses it to list the signatures a run will compile.
    Process-wide while it lasts: nothing else may call kernels meanwhile."""
    calls = []
    original = CPUDispatcher.__call__

    def record(self, *args, **kwargs):
        calls.append((self, tuple(self.typeof_pyval(a) for a in args)))

    CPUDispatcher.__call__ = record
    try:
        yield calls
    finally:
        CPUDispatcher.__call__ = original
