"""DataLoader: torch's loop shape and default_collate rules, on numpy."""
import collections
import threading
import time

import numpy as np
import pytest

import framework as sg
from framework.data import DataLoader, default_collate


class Squares:
    """Sample i: a dict of an array, a number, a name and a (label, weight) pair."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": np.full((2, 3), i, np.float32), "i": i, "name": f"s{i}", "pair": (i * 0.5, i % 2 == 0)}


def test_one_pass_per_iteration_collated_like_torch():
    loader = DataLoader(Squares(5), batch_size=2)
    assert len(loader) == 3
    for epoch in range(2):  # finite, and the same again
        batches = list(loader)
        assert len(batches) == 3
        b = batches[0]
        assert b["x"].shape == (2, 2, 3) and b["x"].dtype == np.float32
        assert b["i"].dtype == np.int64 and b["i"].tolist() == [0, 1]
        assert b["name"] == ["s0", "s1"]
        assert isinstance(b["pair"], list) and b["pair"][0].dtype == np.float64
        assert b["pair"][0].tolist() == [0.0, 0.5] and b["pair"][1].tolist() == [True, False]
        assert batches[-1]["i"].tolist() == [4]  # the short last batch
    assert [b["i"].tolist() for b in DataLoader(Squares(5), 2, drop_last=True)] == [[0, 1], [2, 3]]
    assert len(DataLoader(Squares(5), 2, drop_last=True)) == 2


def test_collate_matches_torch_default_collate():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate
    Point = collections.namedtuple("Point", "x y")
    samples = [{"a": np.arange(3.0) + k, "b": [k, float(k)], "p": Point(np.float32(k), k), "s": "t"}
               for k in range(3)]
    ours, theirs = default_collate(samples), torch_collate(samples)

    def same(o, t):
        if isinstance(t, torch.Tensor):
            assert isinstance(o, np.ndarray) and o.dtype == t.numpy().dtype
            np.testing.assert_array_equal(o, t.numpy())
        elif isinstance(t, dict):
            assert list(o) == list(t) and all(same(o[k], t[k]) is None for k in t)
        elif isinstance(t, (list, tuple)):
            assert type(o) is type(t) and len(o) == len(t)
            for a, b in zip(o, t):
                same(a, b)
        else:
            assert o == t
    same(ours, theirs)


def test_tensors_stack_into_a_tensor_and_errors_name_the_entry():
    out = default_collate([(sg.tensor([1.0, 2.0]),), (sg.tensor([3.0, 4.0]),)])
    assert isinstance(out[0], sg.Tensor) and out[0].numpy().tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ValueError, match=r"samples differ in shape at \['gt'\]: \[\(2,\), \(3,\)\]"):
        default_collate([{"gt": np.zeros(2)}, {"gt": np.zeros(3)}])
    with pytest.raises(TypeError, match=r"found NoneType at \[1\]"):
        default_collate([(1, None), (2, None)])


def test_shuffle_draws_from_the_generator_or_the_global_one():
    def order(**kw):
        return [i for b in DataLoader(Squares(10), 3, shuffle=True, **kw) for i in b["i"].tolist()]
    a = order(generator=np.random.default_rng(7))
    assert sorted(a) == list(range(10)) and a != list(range(10))
    assert a == order(generator=np.random.default_rng(7))
    sg.manual_seed(5)
    b1, b2 = order(), order()  # a new order every pass
    sg.manual_seed(5)
    assert order() == b1 and b1 != b2
    gen = np.random.default_rng(1)
    loader = DataLoader(Squares(4), 4, shuffle=True, generator=gen)
    assert [next(iter(loader))["i"].tolist() for _ in range(2)] == \
        [np.random.default_rng(1).permutation(4).tolist(), _second_permutation(1, 4)]


def _second_permutation(seed, n):
    g = np.random.default_rng(seed)
    g.permutation(n)
    return g.permutation(n).tolist()


class Slow(Squares):
    def __init__(self, n):
        super().__init__(n)
        self.threads = set()

    def __getitem__(self, i):
        self.threads.add(threading.get_ident())
        time.sleep(0.002 * ((7 * i) % 5))  # out-of-order completion
        return super().__getitem__(i)


def test_workers_load_in_threads_and_keep_the_order():
    data = Slow(24)
    loader = DataLoader(data, batch_size=2, num_workers=3, collate_fn=lambda s: [d["i"] for d in s])
    assert list(loader) == [[i, i + 1] for i in range(0, 24, 2)]
    assert len(data.threads) > 1 and threading.get_ident() not in data.threads
    it = iter(loader)  # leaving a pass early stops the workers
    assert next(it) == [0, 1]
    it.close()


def test_errors():
    with pytest.raises(ValueError, match="DataLoader: batch_size must be a positive int, got 0"):
        DataLoader(Squares(3), batch_size=0)
    with pytest.raises(TypeError, match="DataLoader: dataset must have __len__ and __getitem__"):
        DataLoader(iter(range(3)))
    with pytest.raises(TypeError, match="DataLoader: generator must be a numpy Generator"):
        DataLoader(Squares(3), shuffle=True, generator=3)
    with pytest.raises(ValueError, match="num_workers must be an int >= 0"):
        DataLoader(Squares(3), num_workers=-1)


def test_errors_in_a_worker_reach_the_loop():
    class Broken(Squares):
        def __getitem__(self, i):
            if i == 3:
                raise OSError("cannot read sample 3")
            return super().__getitem__(i)
    with pytest.raises(OSError, match="cannot read sample 3"):
        list(DataLoader(Broken(6), 2, num_workers=2))


def test_an_srgrad_dataset_through_the_loader(tiny_train):
    from framework.data import HRImageDataset
    ds = HRImageDataset(tiny_train, scale=2)
    batches = list(DataLoader(ds, batch_size=2, num_workers=2))
    assert [b["gt"].shape for b in batches] == [(2, 3, 16, 16), (1, 3, 16, 16)]
    assert batches[0]["lq"].shape == (2, 3, 8, 8) and batches[1]["name"] == [ds.names[2]]
    np.testing.assert_array_equal(batches[0]["gt"][1], ds[1]["gt"])
