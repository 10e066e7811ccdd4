"""BatchLoader: batches are a pure function of (seed, iteration); epochs cover every image once;
ranks take disjoint rows of the same global batch."""
import numpy as np
import pytest
from PIL import Image

from framework.data import BatchLoader, HRImageDataset


class _Tagged:
    """Sample i is filled with i and carries the first draw of its generator, so a batch shows
    exactly which images (and which random streams) it used."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def get(self, index, rng=None):
        draw = rng.random() if rng is not None else 0.0
        lq = np.array([[[index, draw]]], np.float32)
        return {"lq": lq, "gt": np.repeat(lq, 2, axis=1), "name": f"img{index}"}


def _ids(batch):
    return [int(v) for v in batch["lq"][:, 0, 0, 0]]


def test_same_seed_and_iteration_same_batch_across_instances():
    a, b = BatchLoader(_Tagged(7), 3, seed=5), BatchLoader(_Tagged(7), 3, seed=5)
    for it in (0, 4, 2, 11):
        x, y = a.get_batch(it), b.get_batch(it)
        np.testing.assert_array_equal(x["lq"], y["lq"])
        np.testing.assert_array_equal(x["gt"], y["gt"])
        assert x["names"] == y["names"]
    assert not np.array_equal(a.get_batch(0)["lq"], a.get_batch(1)["lq"])
    other_seed = BatchLoader(_Tagged(7), 3, seed=6)
    assert not np.array_equal(a.get_batch(0)["lq"], other_seed.get_batch(0)["lq"])


def test_resume_is_exact_and_iter_starts_at_zero():
    straight = BatchLoader(_Tagged(5), 2, seed=1)
    it = iter(straight)
    batches = [next(it) for _ in range(9)]
    resumed = BatchLoader(_Tagged(5), 2, seed=1)  # a fresh process resuming at iteration 6
    for i in (6, 7, 8):
        np.testing.assert_array_equal(resumed.get_batch(i)["lq"], batches[i]["lq"])


def test_every_epoch_covers_each_image_once_in_a_new_order():
    loader = BatchLoader(_Tagged(5), 2, seed=3)
    stream = sum((_ids(loader.get_batch(i)) for i in range(10)), [])  # 20 samples = 4 epochs
    epochs = [stream[k:k + 5] for k in range(0, 20, 5)]
    assert all(sorted(e) == [0, 1, 2, 3, 4] for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1
    assert epochs[0] == list(np.random.default_rng([3, 0]).permutation(5))
    assert loader.epoch_of(2) == 0 and loader.epoch_of(3) == 1  # batch 3 starts at sample 6


def test_per_sample_generator_is_seed_epoch_position():
    loader = BatchLoader(_Tagged(4), 4, seed=2)
    draws = loader.get_batch(1)["lq"][:, 0, 0, 1]  # epoch 1, positions 0..3
    expected = [np.random.default_rng([2, 1, k]).random() for k in range(4)]
    np.testing.assert_allclose(draws, np.float32(expected))


def test_no_shuffle_is_dataset_order():
    loader = BatchLoader(_Tagged(3), 2, shuffle=False)
    stream = sum((_ids(loader.get_batch(i)) for i in range(3)), [])
    assert stream == [0, 1, 2] * 2


@pytest.mark.parametrize("world_size", [2, 4])
def test_ranks_split_the_global_batch(world_size):
    full = BatchLoader(_Tagged(9), 8, seed=4)
    shards = [BatchLoader(_Tagged(9), 8, seed=4, rank=r, world_size=world_size)
              for r in range(world_size)]
    for it in (0, 3):
        parts = [s.get_batch(it) for s in shards]
        assert all(p["lq"].shape[0] == 8 // world_size for p in parts)
        np.testing.assert_array_equal(np.concatenate([p["lq"] for p in parts]),
                                      full.get_batch(it)["lq"])


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(batch_size=0), ValueError, "BatchLoader: batch_size must be a positive int, got 0"),
    (dict(batch_size=2.0), TypeError, "BatchLoader: batch_size must be a positive int, got 2.0"),
    (dict(seed=-1), ValueError, "BatchLoader: seed must be an int >= 0, got -1"),
    (dict(world_size=3), ValueError, "batch_size=4 .* divisible by world_size=3"),
    (dict(rank=2, world_size=2), ValueError, "rank=2 must be < world_size=2"),
])
def test_argument_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        BatchLoader(_Tagged(3), **{"batch_size": 4, **kwargs})
    with pytest.raises(ValueError, match="dataset is empty"):
        BatchLoader(_Tagged(0), 1)
    with pytest.raises(ValueError, match="BatchLoader: iteration must be an int >= 0, got -1"):
        BatchLoader(_Tagged(3), 1).get_batch(-1)


def test_real_dataset_batches(tmp_path):
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate([(16, 20), (18, 16), (20, 22)]):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    ds = HRImageDataset(tmp_path, scale=2, gt_size=8)
    a = BatchLoader(ds, 4, seed=7)
    b = BatchLoader(HRImageDataset(tmp_path, scale=2, gt_size=8), 4, seed=7)  # a fresh process
    x = a.get_batch(5)
    assert x["lq"].shape == (4, 3, 4, 4) and x["gt"].shape == (4, 3, 8, 8)
    assert x["lq"].dtype == np.float32 and x["gt"].dtype == np.float32
    np.testing.assert_array_equal(x["gt"], b.get_batch(5)["gt"])
    np.testing.assert_array_equal(x["lq"], b.get_batch(5)["lq"])
    full = BatchLoader(HRImageDataset(tmp_path, scale=2), 2)
    with pytest.raises(ValueError, match="differ in size.*gt_size"):
        full.get_batch(0)
