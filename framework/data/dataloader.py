"""torch.utils.data.DataLoader's shape, on numpy: finite epochs of collated batches.

    loader = DataLoader(dataset, batch_size=4, shuffle=True)
    for epoch in range(10):
        for batch in loader:        # one pass over the dataset
            ...

The trainer (framework.engine) does not use this: it keeps BatchLoader (framework/data/loader.py),
whose every batch is a pure function of (seed, iteration), so a resumed or distributed run sees
exactly the batches it would have. DataLoader is for scripts written the torch way.
"""
from __future__ import annotations

import collections
import numbers
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import random as _random
from .._check import ArgumentTypeError, flag, int_arg
from ..tensor import Tensor

__all__ = ["DataLoader", "default_collate"]


def default_collate(batch):
    """torch's default_collate, on numpy: a list of samples -> one batch of the same structure.
    numpy arrays are stacked (a new first axis; np.stack), srgrad Tensors stacked into a Tensor,
    Python floats / ints / bools become float64 / int64 / bool arrays, numpy scalars an array of
    their dtype, str and bytes a list; dicts collate key by key, named tuples field by field,
    tuples and lists position by position (into a list, as torch). None or another type is a
    TypeError; arrays of different shapes a ValueError naming the entry."""
    return _collate(list(batch), "")


def _where(path):
    return f" at {path}" if path else ""


def _collate(batch, path):
    elem = batch[0]
    if isinstance(elem, (np.ndarray, Tensor)):
        arrays = [b.data if isinstance(b, Tensor) else b for b in batch]
        if isinstance(elem, np.ndarray) and elem.dtype.kind in "OUSV":
            raise TypeError(f"default_collate: arrays of dtype {elem.dtype}{_where(path)} cannot be "
                            f"batched; return numbers or str")
        shapes = {np.shape(a) for a in arrays}
        if len(shapes) > 1:
            raise ValueError(f"default_collate: samples differ in shape{_where(path)}: "
                             f"{sorted(shapes)}; crop them to one size, or use batch_size=1")
        out = np.stack(arrays)
        return Tensor._wrap(out) if isinstance(elem, Tensor) else out
    if isinstance(elem, np.generic):  # before the Python types: np.float64 is a float
        return np.stack(batch)
    if isinstance(elem, bool):
        return np.asarray(batch, dtype=np.bool_)
    if isinstance(elem, numbers.Integral):
        return np.asarray(batch, dtype=np.int64)
    if isinstance(elem, numbers.Real):
        return np.asarray(batch, dtype=np.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {k: _collate([b[k] for b in batch], f"{path}[{k!r}]") for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple keeps its type
        return type(elem)(*(_collate(list(s), f"{path}.{f}") for f, s in zip(elem._fields,
                                                                              zip(*batch))))
    if isinstance(elem, collections.abc.Sequence):
        if len({len(b) for b in batch}) > 1:
            raise ValueError(f"default_collate: each element in list of batch should be of equal "
                             f"size{_where(path)}")
        return [_collate(list(s), f"{path}[{i}]") for i, s in enumerate(zip(*batch))]
    raise TypeError(f"default_collate: batch must contain numpy arrays, Tensors, numbers, str, "
                    f"dicts or lists; found {type(elem).__name__}{_where(path)}")


class DataLoader:
    """Batches of `dataset[i]` (any object with `__len__` and `__getitem__`), torch's way.

    Args:
        dataset: len(dataset) samples, dataset[i] the i-th.
        batch_size: samples per batch (default 1).
        shuffle: visit the samples in a new random order every epoch (default False). The order is
            drawn from `generator` (a numpy Generator) or framework.random's global one (seeded by
            framework.manual_seed) when each pass starts.
        drop_last: drop a last batch smaller than batch_size (default False).
        num_workers: 0 (default) loads in this thread; n > 0 loads batches in n threads (each batch
            by one thread, at most 2 n ahead), yielding them in order.
        collate_fn: list of samples -> batch (default: default_collate).
        generator: numpy Generator for shuffle.
        pin_memory: accepted for torch scripts; nothing to pin on the CPU.

    Iterating makes one pass (an epoch); `len(loader)` is the number of batches in it. The
    trainer does not use this class: its BatchLoader makes every batch a pure function of (seed,
    iteration), which exact resume and data-parallel ranks need.
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, num_workers=0,
                 collate_fn=None, generator=None, pin_memory=False):
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise ArgumentTypeError(f"DataLoader: dataset must have __len__ and __getitem__, got "
                                    f"{type(dataset).__name__}")
        self.dataset = dataset
        self.batch_size = int_arg("DataLoader", "batch_size", batch_size)
        self.shuffle = flag("DataLoader", "shuffle", shuffle)
        self.drop_last = flag("DataLoader", "drop_last", drop_last)
        self.num_workers = int_arg("DataLoader", "num_workers", num_workers, 0)
        if collate_fn is not None and not callable(collate_fn):
            raise ArgumentTypeError(f"DataLoader: collate_fn must be callable, got {collate_fn!r}")
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        if generator is not None and not isinstance(generator, np.random.Generator):
            raise ArgumentTypeError(f"DataLoader: generator must be a numpy Generator "
                                    f"(np.random.default_rng(seed)), got {type(generator).__name__}")
        self.generator = generator
        self.pin_memory = flag("DataLoader", "pin_memory", pin_memory)

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _batches(self):
        """This pass's lists of dataset indices."""
        n = len(self.dataset)
        if self.shuffle:
            gen = self.generator if self.generator is not None else _random.default_generator()
            order = gen.permutation(n)
        else:
            order = np.arange(n)
        return [order[i:i + self.batch_size].tolist() for i in range(0, len(self) * self.batch_size,
                                                                     self.batch_size)]

    def _load(self, indices):
        return self.collate_fn([self.dataset[i] for i in indices])

    def __iter__(self):
        batches = self._batches()
        if self.num_workers == 0:
            for indices in batches:
                yield self._load(indices)
            return
        ahead = 2 * self.num_workers  # torch's prefetch_factor 2 per worker
        pool = ThreadPoolExecutor(self.num_workers, thread_name_prefix="srgrad-data")
        pending = collections.deque()
        try:
            for indices in batches:
                pending.append(pool.submit(self._load, indices))
                if len(pending) >= ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()
            pool.shutdown(wait=True)
