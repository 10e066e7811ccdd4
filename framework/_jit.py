"""The one numba policy every kernel compiles through.

- `cache=True`, stamped by the whole kernel source: a kernel compiles once per machine and is reused
  by every later process, until any file of framework/ that defines kernels changes. numba's own
  stamp hashes only the kernel's file, but a kernel inlines the kernels it calls from other files
  (`_direct` calls `_im2col.valid_range`), so an edit there would leave a stale machine code.
  A kernel defined outside framework/ (a user's own layer file) is stamped by the framework's
  kernels and its own file: it may inline framework kernels, and its edits recompile it alone.
- no `fastmath`: kernels are gradchecked in float64, and reassociation would break the adjoint tests.
  It also keeps results bit-identical whatever instruction set the host has (no reassociated
  sums, no FMA contraction): docs/numerics.md. A kernel that wants fused multiply-adds says so
  (`_simd.vfma`: IEEE's fma, rounded once, the same bits with or without FMA hardware).
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

_PACKAGE = pathlib.Path(__file__).resolve().parent  # framework/: every kernel of the library


@functools.lru_cache(maxsize=None)
def source_stamp() -> str:
    """The stamp of this installation's kernels (`stamp_of` the folder that holds framework/)."""
    return stamp_of(_PACKAGE.parent)


def stamp_of(root: pathlib.Path) -> str:
    """sha256 of every file under root/framework that imports this module (so defines kernels), and
    of _simd.py and _amx.py (their intrinsics become part of the kernels that call them), path and
    text: any edit to any of them invalidates every cached kernel."""
    digest = hashlib.sha256()
    for path in sorted((root / "framework").rglob("*.py")):
        text = path.read_bytes()
        if b"_jit import" in text or path.name in ("_jit.py", "_simd.py", "_amx.py"):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + text + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def file_stamp(py_file: str) -> str:
    """The stamp of the kernels defined in `py_file`: source_stamp() for a file of framework/, else
    sha256 of source_stamp() and the file's text (read once per process, as numba reads a
    kernel's source once)."""
    path = pathlib.Path(py_file).resolve()
    if path.is_relative_to(_PACKAGE):
        return source_stamp()
    return hashlib.sha256(source_stamp().encode() + b"\0" + path.read_bytes()).hexdigest()


class _KernelSourceStamp:
    def get_source_stamp(self):
        return file_stamp(self._py_file)


# numba's own locators in numba's own order (NUMBA_CACHE_DIR, then __pycache__, then the user's
# cache folder), each with the stamp above instead of the one file's hash
_LOCATORS = [type(base.__name__, (_KernelSourceStamp, base), {})
             for base in (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator,
                          caching.UserWideCacheLocator)]


class _CacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = _LOCATORS


class _Cache(caching.FunctionCache):
    _impl_class = _CacheImpl


def kernel(fn=None, *, parallel: bool = False, inline: bool = False):
    """`@kernel` or `@kernel(parallel=True)` (use `numba.prange` in the outer loop); `inline=True`: a
    small helper numba copies into each caller (a call numba does not inline costs an inner loop
    its vectorisation)."""
    def deco(f):
        disp = numba.njit(parallel=parallel, fastmath=False, nogil=True, error_model="numpy",
                          inline="always" if inline else "never")(f)
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
def recording(run: bool = False):
    """Inside, a call of any kernel (made by `kernel`) from Python appends (kernel, argument types) to the list
    this yields. Without `run` the call returns None WITHOUT compiling or running the kernel: its
    outputs keep whatever np.empty held. With `run` the kernel then runs (compiling it if needed):
    for code that uses a kernel's result in Python. engine/run/precompile.py's dry run uses it to list
    the signatures a run will compile. Process-wide while it lasts: nothing else may call kernels
    meanwhile."""
    calls = []
    original = CPUDispatcher.__call__

    def record(self, *args, **kwargs):
        if not isinstance(self._cache, _Cache):  # numba's own jitted code (typed.List's) runs
            return original(self, *args, **kwargs)
        calls.append((self, tuple(self.typeof_pyval(a) for a in args)))
        return original(self, *args, **kwargs) if run else None

    CPUDispatcher.__call__ = record
    try:
        yield calls
    finally:
        CPUDispatcher.__call__ = original
