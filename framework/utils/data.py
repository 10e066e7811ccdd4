"""torch.utils.data's datasets for scripts written the torch way: Dataset (the base class),
TensorDataset, Subset, ConcatDataset, random_split, and DataLoader / default_collate (the same
objects as framework.data's). Random splits draw from a numpy Generator (`generator=`) or
framework.random's global one (seeded by framework.manual_seed): the same seed gives the same
split here, not torch's split (torch's generator is not numpy's)."""
from __future__ import annotations

import bisect
import math

import numpy as np

from .. import random as _random
from .._check import ArgumentTypeError
from ..data.dataloader import DataLoader, default_collate

__all__ = ["Dataset", "TensorDataset", "Subset", "ConcatDataset", "random_split", "DataLoader",
           "default_collate"]


class Dataset:
    """Base class of a map-style dataset: subclasses define __getitem__ (and __len__).
    `a + b` concatenates two datasets, as torch's."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors): tensors (or numpy arrays) sharing their first size."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: give at least one tensor")
        sizes = {len(t) for t in tensors}
        if len(sizes) != 1:
            raise ValueError(f"TensorDataset: size mismatch between tensors, first sizes "
                             f"{[len(t) for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return len(self.tensors[0])


class Subset(Dataset):
    """dataset restricted to `indices` (sample i is dataset[indices[i]])."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index):
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self):
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise IndexError(f"ConcatDataset: index {index} out of range for {len(self)}")
            index += len(self)
        d = bisect.bisect_right(self.cumulative_sizes, index)
        start = 0 if d == 0 else int(self.cumulative_sizes[d - 1])
        if d >= len(self.datasets):
            raise IndexError(f"ConcatDataset: index {index} out of range for {len(self)}")
        return self.datasets[d][index - start]


def random_split(dataset, lengths, generator=None) -> list:
    """torch.utils.data.random_split: Subsets of a random permutation of `dataset`, of sizes
    `lengths` (ints adding up to len(dataset), or fractions adding up to 1: floor(f n) each, the
    remainder handed out one by one from the first, as torch). generator: a numpy Generator or
    None (framework.random's global one)."""
    n = len(dataset)
    lengths = list(lengths)
    if not lengths or not all(isinstance(v, (int, float, np.integer, np.floating))
                              and not isinstance(v, bool) for v in lengths):
        raise ArgumentTypeError(f"random_split: lengths must be ints or fractions, got {lengths}")
    if all(isinstance(v, (float, np.floating)) for v in lengths) and math.isclose(sum(lengths), 1) \
            and sum(lengths) <= 1:
        if any(not 0 <= f <= 1 for f in lengths):
            raise ValueError(f"random_split: fractions must be in [0, 1], got {lengths}")
        sizes = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if any(int(v) != v or v < 0 for v in lengths) or sum(lengths) != n:
        raise ValueError(f"random_split: sum of input lengths {lengths} does not equal the length "
                         f"of the input dataset ({n})")
    rng = _random.generator_or_default("random_split", generator)
    order = rng.permutation(n).tolist()
    out, start = [], 0
    for size in lengths:
        out.append(Subset(dataset, order[start:start + int(size)]))
        start += int(size)
    return out
