"""The tile machinery of conv.py: a pool of Python worker threads that run tiles with single-threaded
BLAS, column buffers kept between calls, and the split of (images, output rows) into tiles.

Per-tile multithreaded BLAS calls between numba kernels stall on a shared machine, hence one
fork/join per call over threads of single-threaded BLAS (measured: docs/benchmarks.md, "Where the
code's thresholds come from"). A call of one task runs inline, and on single-threaded BLAS too: the
threads of a threaded BLAS call spin between the numba kernels around it, and on a busy machine
small images and small inference tiles (one task per convolution) cost several times their pixels
(docs/benchmarks.md, "Tiled inference"). The policy (the buffer cap, the worker count) stays in
conv.py; these functions take it as arguments.
"""
from __future__ import annotations

import contextlib
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from ..threads import blas_controllable, limit_blas_threads, restore_blas_threads


_POOL = {"size": 0, "pid": 0, "executor": None, "active": 0, "blas_before": (), "lock": threading.Lock()}


def default_workers():
    """Worker threads for tiles: numba's thread count, or 1 when BLAS threads cannot be limited."""
    return numba.get_num_threads() if blas_controllable() else 1


@contextlib.contextmanager
def _single_threaded_blas():
    """BLAS single-threaded from the first call in flight until the last leaves (calls may come
    from several threads at once: a data loader's and the training loop's)."""
    with _POOL["lock"]:
        if _POOL["pid"] != os.getpid():  # a forked child: no worker threads, no calls in flight
            _POOL.update(executor=None, size=0, pid=os.getpid(), active=0)
        if _POOL["active"] == 0:
            _POOL["blas_before"] = limit_blas_threads(1)
        _POOL["active"] += 1
    try:
        yield
    finally:
        with _POOL["lock"]:
            _POOL["active"] -= 1
            if _POOL["active"] == 0:
                restore_blas_threads(_POOL["blas_before"])


def _executor(n):
    """The executor of n threads (a new one after a change of thread count or a fork)."""
    with _POOL["lock"]:
        if _POOL["size"] != n:
            if _POOL["executor"] is not None:
                _POOL["executor"].shutdown(wait=False)
            _POOL.update(executor=ThreadPoolExecutor(n, thread_name_prefix="srgrad-conv"), size=n)
        return _POOL["executor"]


# Column buffers kept between calls: a fresh one page-faults on first touch, which costs as much as
# its im2col. At most one per worker thread, so they stay within the cap (conv.COL_BUFFER_BYTES).
_SPARE = {"buffers": [], "lock": threading.Lock()}


def _take_buffer(nbytes):
    with _SPARE["lock"]:
        spare = _SPARE["buffers"]
        for i, buf in enumerate(spare):
            if buf.nbytes >= nbytes:
                return spare.pop(i)
        if spare:
            spare.pop()  # too small: let it go, its replacement is larger
    return np.empty(nbytes, np.uint8)


def _give_buffer(buf, keep):
    with _SPARE["lock"]:
        if len(_SPARE["buffers"]) < keep:
            _SPARE["buffers"].append(buf)


def run(tasks, work, buffer_elems, dtype, workers):
    """[work(task, buffer) for task in tasks] on `workers` threads, each with its own column buffer
    and single-threaded BLAS; results in task order. A single task runs inline, on single-threaded
    BLAS too; with one worker BLAS keeps the caller's thread count (set_num_threads(1) set it)."""
    n = min(workers, len(tasks))
    nbytes = buffer_elems * np.dtype(dtype).itemsize
    raw = [_take_buffer(nbytes) for _ in range(max(n, 1))]
    try:
        with _single_threaded_blas() if workers > 1 else contextlib.nullcontext():
            if n <= 1:
                return [work(t, raw[0][:nbytes].view(dtype)) for t in tasks]
            buffers = queue.SimpleQueue()
            for buf in raw:
                buffers.put(buf[:nbytes].view(dtype))

            def job(task):
                buf = buffers.get()
                try:
                    return work(task, buf)
                finally:
                    buffers.put(buf)

            return list(_executor(workers).map(job, tasks))
    finally:  # kept for as many workers as the pool has: a one-worker call (conv.py's small
        for buf in raw:  # products) must not drop the buffers the next parallel call takes
            _give_buffer(buf, max(workers, default_workers()))


def split(n_images, out_rows, row_bytes, cap, workers=1):
    """Split (images, output rows) into tiles whose column matrix fits `cap` bytes: whole images when
    one fits and there are as many images as workers (at most half a worker's share of the batch per
    tile, for balance), else bands of rows of one image (at least one row). The tile count is a
    multiple of the workers where the shapes allow (5 bands on 2 workers leave one idle for a fifth of
    the time). Returns (tiles, bytes per buffer), each tile (b0, b1, r0, r1)."""
    image_bytes = out_rows * row_bytes
    if image_bytes <= cap and n_images >= workers:
        step = max(1, min(cap // max(image_bytes, 1), -(-n_images // (2 * workers))))
        step = next((s for s in range(step, 0, -1) if -(-n_images // s) % workers == 0), step)
        tiles = [(b, min(n_images, b + step), 0, out_rows) for b in range(0, n_images, step)]
        return tiles, min(step, n_images) * image_bytes
    fit = max(1, min(cap // row_bytes, -(-out_rows // workers)))  # rows per band at most
    bands = -(-out_rows // fit)
    bands = -(-bands // workers) * workers  # a multiple of the workers
    rows = max(1, -(-out_rows // bands))
    tiles = [(b, b + 1, r, min(out_rows, r + rows))
             for b in range(n_images) for r in range(0, out_rows, rows)]
    return tiles, min(rows, out_rows) * row_bytes
