"""framework.utils.data: torch.utils.data's datasets (TensorDataset, Subset, ConcatDataset,
random_split) and its DataLoader (framework.data's own)."""
import numpy as np
import pytest

import framework as sg
from framework.utils.data import (ConcatDataset, DataLoader, Dataset, Subset, TensorDataset,
                                  random_split)


def test_tensor_dataset_and_loader():
    ds = TensorDataset(sg.arange(10), sg.arange(10) * 2)
    assert len(ds) == 10 and [t.item() for t in ds[3]] == [3, 6]
    x, y = next(iter(DataLoader(ds, batch_size=4)))
    assert x.tolist() == [0, 1, 2, 3] and y.tolist() == [0, 2, 4, 6]
    assert DataLoader is sg.data.DataLoader
    with pytest.raises(ValueError, match="size mismatch"):
        TensorDataset(sg.zeros(3), sg.zeros(4))


def test_random_split_is_a_seeded_partition():
    ds = TensorDataset(sg.arange(10))
    a, b = random_split(ds, [7, 3], generator=np.random.default_rng(0))
    assert isinstance(a, Subset) and (len(a), len(b)) == (7, 3)
    assert sorted(a.indices + b.indices) == list(range(10))
    again = random_split(ds, [7, 3], generator=np.random.default_rng(0))
    assert again[0].indices == a.indices and a[0][0].item() == a.indices[0]
    assert [len(s) for s in random_split(range(10), [0.5, 0.3, 0.2])] == [5, 3, 2]
    assert [len(s) for s in random_split(range(7), [0.5, 0.5])] == [4, 3]  # torch's remainder rule
    with pytest.raises(ValueError, match="does not equal the length"):
        random_split(ds, [5, 4])


def test_dataset_base_and_concat():
    class Squares(Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return i * i

    both = Squares() + Squares()
    assert isinstance(both, ConcatDataset) and len(both) == 6 and both[4] == 1 and both[-1] == 4
    with pytest.raises(IndexError):
        both[6]
    with pytest.raises(NotImplementedError):
        Dataset()[0]
