"""A seeded batch loader whose every batch is a pure function of (seed, iteration).

Samples form one endless stream, epoch after epoch: global position p = iteration * batch_size + j
falls in epoch e = p // len(dataset) at position k = p % len(dataset); epoch e visits the images in
the order `np.random.default_rng([seed, e]).permutation(len(dataset))` (or 0..n-1 without shuffle),
and the sample's crop and augmentation draw from `np.random.default_rng([seed, e, k])`. Nothing
depends on earlier batches, so resuming at any iteration is exact with no loader state to save,
and any number of ranks can each build only their own rows of a global batch.
"""
from __future__ import annotations

import threading

import numpy as np

from .._check import int_arg

__all__ = ["BatchLoader"]


class BatchLoader:
    """Batches of dataset samples: `get_batch(iteration)` -> dict(lq=float32 (B, C, h, w),
    gt=float32 (B, C, H, W), names=list of str, and any other array key every sample has, stacked:
    e.g. gt_usm (B, C, H, W)).

    Args: dataset (has `len()` and `get(index, rng)`), batch_size (the GLOBAL batch), seed (int >= 0,
    default 0), shuffle (default True), rank / world_size (default 0 / 1): this process gets rows
    [rank * b, (rank + 1) * b) of each global batch, b = batch_size / world_size (must divide).
    Iterating yields batches 0, 1, 2, ... forever.
    """

    def __init__(self, dataset, batch_size: int, seed: int = 0, shuffle: bool = True,
                 rank: int = 0, world_size: int = 1):
        self.dataset = dataset
        self.batch_size = int_arg("BatchLoader", "batch_size", batch_size)
        self.seed = int_arg("BatchLoader", "seed", seed, 0)
        self.shuffle = bool(shuffle)
        self.world_size = int_arg("BatchLoader", "world_size", world_size)
        self.rank = int_arg("BatchLoader", "rank", rank, 0)
        if self.rank >= self.world_size:
            raise ValueError(f"BatchLoader: rank={rank} must be < world_size={world_size}")
        if self.batch_size % self.world_size:
            raise ValueError(f"BatchLoader: batch_size={batch_size} (global) must be divisible by "
                             f"world_size={world_size}")
        if len(dataset) == 0:
            raise ValueError("BatchLoader: the dataset is empty")
        self.local_batch_size = self.batch_size // self.world_size
        self._orders: dict[int, np.ndarray] = {}
        self._orders_lock = threading.Lock()

    def order(self, epoch: int) -> np.ndarray:
        """Dataset indices in the order epoch `epoch` visits them (safe from several threads: a
        Prefetcher's workers call it at once)."""
        perm = self._orders.get(epoch)
        if perm is None:
            n = len(self.dataset)
            perm = (np.random.default_rng([self.seed, epoch]).permutation(n) if self.shuffle
                    else np.arange(n))
            with self._orders_lock:
                self._orders[epoch] = perm
                while len(self._orders) > 4:  # a few epochs in flight at most; older ones recompute
                    self._orders.pop(min(self._orders))
        return perm  # the local one: another thread may have evicted it from the dict already

    def sample(self, position: int) -> dict:
        """The sample at global stream position `position` (see the module docstring)."""
        n = len(self.dataset)
        epoch, k = divmod(position, n)
        rng = np.random.default_rng([self.seed, epoch, k])
        return self.dataset.get(int(self.order(epoch)[k]), rng)

    def get_batch(self, iteration: int) -> dict:
        """This rank's rows of global batch `iteration` (int >= 0)."""
        iteration = int_arg("BatchLoader", "iteration", iteration, 0)
        start = iteration * self.batch_size + self.rank * self.local_batch_size
        samples = [self.sample(start + j) for j in range(self.local_batch_size)]
        shapes = {(s["lq"].shape, s["gt"].shape) for s in samples}
        if len(shapes) > 1:
            raise ValueError(f"BatchLoader: samples of batch {iteration} differ in size "
                             f"({sorted(shapes)}); set the dataset's gt_size to crop, or use "
                             f"batch_size=1 for full images")
        batch = {"lq": np.stack([s["lq"] for s in samples]),
                 "gt": np.stack([s["gt"] for s in samples]),
                 "names": [s["name"] for s in samples]}
        # any other array every sample holds (e.g. gt_usm) is stacked too
        for key in samples[0]:
            if key in ("lq", "gt", "name") or not all(isinstance(s.get(key), np.ndarray)
                                                      for s in samples):
                continue
            if len({s[key].shape for s in samples}) > 1:
                raise ValueError(f"BatchLoader: samples of batch {iteration} differ in the size "
                                 f"of {key!r}")
            batch[key] = np.stack([s[key] for s in samples])
        return batch

    def epoch_of(self, iteration: int) -> int:
        """The epoch in which batch `iteration` starts (for logging)."""
        return iteration * self.batch_size // len(self.dataset)

    def __iter__(self):
        iteration = 0
        while True:
            yield self.get_batch(iteration)
            iteration += 1
