"""Background loading: the next batches are decoded, cropped and degraded in worker threads while
the current training step runs.

Order and values do not depend on thread timing: batch i is `loader.get_batch(i)` exactly (a pure
function of (seed, i)), so exact resume and MPI consistency are those of the loader itself.

Why threads work here: Pillow's decoders and srgrad's numba kernels (`nogil=True`) release the GIL.
Why the loader threads run numba single-threaded: the training step in the main thread runs its own
parallel regions (and conv's tile threads) at the same time; the OpenMP and TBB threading layers
accept parallel regions launched from several Python threads at once, but extra team threads per
loader thread would only oversubscribe the cores. `numba.set_num_threads` is thread-local, so each
loader thread sets 1 for itself once and `_jit.launch` (which reads and restores the calling
thread's count) then runs every kernel serially in it. The workqueue layer aborts the process when
two threads launch parallel regions concurrently, even at one thread each, so under it the
Prefetcher falls back to synchronous loading with a warning.
"""
from __future__ import annotations

import collections
import warnings
from concurrent.futures import ThreadPoolExecutor

import numba

from .._check import int_arg

__all__ = ["Prefetcher", "threads_are_safe"]


def threads_are_safe() -> bool:
    """Whether numba's threading layer lets several Python threads launch parallel regions at once
    (omp and tbb do; workqueue aborts the process). Starts the threading layer if needed."""
    numba.get_num_threads()  # launches the layer, so that threading_layer() can answer
    return numba.threading_layer() != "workqueue"


def _loader_thread_start():
    numba.set_num_threads(1)  # this thread only: see the module docstring


def _load(loader, iteration: int):
    # a module-level function, not a bound method: a pending task must not keep the Prefetcher
    # alive, so that dropping it runs __del__ -> close()
    return loader.get_batch(iteration)


class Prefetcher:
    """Iterator over `loader.get_batch(i)` for i = start, start + 1, ..., stop - 1, in order.

    Args: loader (anything with `get_batch(i)`; its calls must be safe from several threads),
    start (int >= 0, default 0), stop (int >= start, or None: endless), workers (threads building
    batches, default 2; 0 = synchronous, each batch built when asked for, the current behaviour),
    depth (default 2): while the consumer holds batch i, only batches i+1 .. i+depth exist or are
    being built, so at most depth + 1 batches are held at once (+1 if the consumer keeps the
    previous one). Threads beyond `depth` would idle: min(workers, depth) are started.

    An exception in a worker is raised in the consumer when it asks for that batch (batches before
    it arrive normally), the same exception object with its message intact and a note naming the
    batch; the Prefetcher is then closed. `close()` (also on leaving a `with` block) cancels every
    batch not yet started and waits for those being built (at most one per thread);
    `close(wait=False)` does not wait, and is what a Ctrl-C in the consumer, or dropping the
    object, does (the threads then end after their current batch).
    """

    def __init__(self, loader, start: int = 0, stop: int | None = None, workers: int = 2,
                 depth: int = 2):
        self.loader = loader
        self.start = int_arg("Prefetcher", "start", start, 0)
        self.stop = None if stop is None else int_arg("Prefetcher", "stop", stop, self.start)
        self.workers = int_arg("Prefetcher", "workers", workers, 0)
        self.depth = int_arg("Prefetcher", "depth", depth)
        self._next = self.start        # the batch the consumer gets next
        self._submitted = self.start   # the next batch to hand to a worker
        self._futures = collections.deque()
        self._executor = None
        self._closed = False
        if self.workers and not threads_are_safe():
            warnings.warn("Prefetcher: numba's workqueue threading layer cannot run kernels from "
                          "several threads at once; loading synchronously (install tbb, or use "
                          "the omp layer, for background loading)", RuntimeWarning, stacklevel=2)
            self.workers = 0
        if self.workers:
            self._executor = ThreadPoolExecutor(min(self.workers, self.depth),
                                                thread_name_prefix="srgrad-loader",
                                                initializer=_loader_thread_start)
            self._fill()

    def __len__(self) -> int:
        """Batches still to come (TypeError when endless)."""
        if self.stop is None:
            raise TypeError("Prefetcher: an endless Prefetcher (stop=None) has no length")
        return 0 if self._closed else self.stop - self._next

    def _fill(self):
        while (not self._closed and (self.stop is None or self._submitted < self.stop)
               and self._submitted - self._next < self.depth):
            self._futures.append(self._executor.submit(_load, self.loader, self._submitted))
            self._submitted += 1

    def __iter__(self):
        return self

    def __next__(self) -> dict:
        if self._closed or (self.stop is not None and self._next >= self.stop):
            self.close()
            raise StopIteration
        i = self._next
        if self._executor is None:
            batch = self.loader.get_batch(i)
        else:
            try:
                batch = self._futures.popleft().result()
            except Exception as exc:
                exc.add_note(f"(raised in a Prefetcher thread while loading batch {i})")
                self.close()
                raise
            except BaseException:  # Ctrl-C while waiting: do not wait for the workers as well
                self.close(wait=False)
                raise
        self._next = i + 1
        if self._executor is not None:
            self._fill()
        return batch

    def close(self, wait: bool = True) -> None:
        """Stop: cancel the batches not started; with `wait`, join the threads (each finishes the
        batch it is building). Idempotent."""
        self._closed = True
        futures, self._futures = self._futures, collections.deque()
        for future in futures:
            future.cancel()
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close(wait=exc[0] is None or not issubclass(exc[0], KeyboardInterrupt))

    def __del__(self):
        try:
            self.close(wait=False)
        except Exception:  # at interpreter exit the modules may be gone already
            pass
