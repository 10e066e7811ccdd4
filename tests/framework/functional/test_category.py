"""sort.py and category.py: argsort against torch.sort / torch.argsort on CPU (its unstable order
among equal keys, exactly: rows with many ties, sorted, reversed, constant, NaN, an adversarial row
that reaches the heapsort; stable and descending too), no gradient, a valid permutation in a dry
run; category_group / category_ungroup by hand, against ATD's own torch
code (feature_shuffle, the flip padding, index_reverse) in values and every gradient, float64
gradcheck through argmax -> argsort -> group -> ungroup (the indices carry no gradient, the
gathers do), errors."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.gradcheck import gradcheck

from ._parity import parity, rand, torch


@pytest.mark.parametrize("n,high", [(5, 2), (17, 3), (100, 7), (1000, 64), (4096, 128),
                                    (300, 1000)])
@pytest.mark.parametrize("descending", [False, True])
def test_argsort_is_torchs_cpu_order(n, high, descending):
    """Integer keys with ties (ATD's categories): torch.sort(stable=False)'s indices exactly
    (they differ from a stable sort's from 17 keys on: libstdc++'s introsort)."""
    keys = np.random.default_rng(n + high).integers(0, high, (3, n))
    want = torch.sort(torch.from_numpy(keys), dim=-1, descending=descending,
                      stable=False)[1].numpy()
    got = F.argsort(sg.tensor(keys), -1, descending=descending)
    assert got.dtype == np.int64 and not got.requires_grad
    np.testing.assert_array_equal(got.data, want)
    if n >= 100:  # the ties are where the order is torch's own
        assert not (want == np.argsort(-keys if descending else keys, -1, kind="stable")).all()


@pytest.mark.parametrize("keys", [np.arange(3000), np.arange(3000)[::-1].copy(), np.zeros(3000),
                                  np.r_[np.arange(1500), np.arange(1500)[::-1]],
                                  np.tile(np.arange(3), 1000)])
def test_argsort_adversarial_rows(keys):
    want = torch.sort(torch.from_numpy(keys[None]), stable=False)[1].numpy()
    np.testing.assert_array_equal(F.argsort(sg.tensor(keys[None])).data, want)


_KERNELS = ("_less", "_swap", "_adjust_heap", "_heap_sort", "_median_to_first", "_partition",
            "_linear_insert", "_introsort", "_introsort_rows")


def _python_introsort(monkeypatch, row):
    """The kernels' introsort run as plain Python (their py_func) on one row of any objects that
    compare: (the order, how many ranges the depth limit sent to the heapsort)."""
    S = importlib.import_module("framework.functional.sort")
    for name in _KERNELS:
        monkeypatch.setattr(S, name, getattr(S, name).py_func)
    heaps, heap_sort = [0], S._heap_sort

    def counted(*args):
        heaps[0] += 1
        return heap_sort(*args)
    monkeypatch.setattr(S, "_heap_sort", counted)
    keys = np.empty((1, len(row)), object if isinstance(row, list) else row.dtype)
    keys[0] = row
    out = np.empty(keys.shape, np.int64)
    S._introsort_rows(keys, out, False)
    monkeypatch.undo()
    return out, heaps[0]


def _killer(monkeypatch, n):
    """McIlroy's adversary ("A killer adversary for quicksort", 1999) against the introsort:
    keys start as "gas" (larger than all) and freeze to increasing values as comparisons need them,
    so that every partition is as uneven as it can be. Returns the keys and the heapsort count."""
    state = {"solid": 0, "candidate": None}
    val = [n - 1] * n

    class Gas:
        def __init__(self, i):
            self.i = i

        def __eq__(self, other):
            return val[self.i] == val[other.i]

        def __lt__(self, other):
            x, y = self.i, other.i
            if val[x] == val[y] == n - 1 and x != y:
                z = x if x == state["candidate"] else y
                val[z], state["solid"] = state["solid"], state["solid"] + 1
            if val[x] == n - 1:
                state["candidate"] = x
            elif val[y] == n - 1:
                state["candidate"] = y
            return val[x] < val[y]

        __gt__ = lambda self, other: other.__lt__(self)  # noqa: E731

    _, heaps = _python_introsort(monkeypatch, [Gas(i) for i in range(n)])
    return np.asarray(val, np.int64), heaps


def test_argsort_is_torchs_order_where_the_introsort_falls_back_to_heapsort(monkeypatch):
    """An adversarial row drives the quicksort past its depth limit (the heapsort path); with ties
    (keys // 2, which still reach the heapsort) torch's order is neither a stable sort's nor any
    other."""
    killer, heaps = _killer(monkeypatch, 200)
    assert heaps >= 1
    keys = killer // 2
    order, heaps = _python_introsort(monkeypatch, keys)
    assert heaps >= 1
    want = torch.sort(torch.from_numpy(keys[None]), dim=-1, stable=False)[1].numpy()
    np.testing.assert_array_equal(F.argsort(sg.tensor(keys[None])).data, want)
    np.testing.assert_array_equal(order, want)
    assert not (want == np.argsort(keys[None], -1, kind="stable")).all()


def test_argsort_floats_nan_axis_and_stable():
    x = np.random.default_rng(1).standard_normal((4, 300, 2)).round(1).astype(np.float32)
    x[:, ::7] = np.nan
    for descending in (False, True):
        for stable in (False, True):
            want = torch.sort(torch.from_numpy(x), dim=1, descending=descending,
                              stable=stable)[1].numpy()
            got = F.argsort(sg.tensor(x), dim=1, descending=descending, stable=stable).data
            np.testing.assert_array_equal(got, want, err_msg=f"{descending} {stable}")


def test_a_dry_run_that_skips_kernels_still_gets_a_permutation():
    """precompile's dry run records kernel calls without running them: argsort then returns the
    identity (never np.empty's garbage), so ATD's category_group accepts it."""
    from framework import _jit
    keys = sg.tensor(np.random.default_rng(0).integers(0, 3, (2, 40)))
    with _jit.recording() as calls:
        order = F.argsort(keys)
        y = F.category_group(sg.tensor(np.ones((2, 40, 3))), order, 16)
    assert calls and y.shape == (6, 16, 3)
    np.testing.assert_array_equal(order.data, np.tile(np.arange(40), (2, 1)))


def test_argsort_errors():
    with pytest.raises(ValueError, match="argsort: x must have at least one dimension"):
        F.argsort(sg.tensor(np.float32(1)))
    with pytest.raises(TypeError, match="argsort: dim must be an int"):
        F.argsort(sg.tensor(np.zeros(3)), dim=0.5)


def test_category_group_by_hand():
    """5 tokens, groups of 2: order (2, 0, 4, 1, 3), one mirrored pad row (token 3 again)."""
    x = np.arange(5, dtype=np.float64).reshape(1, 5, 1) * 10
    order = np.asarray([[2, 0, 4, 1, 3]])
    y = F.category_group(sg.tensor(x), sg.tensor(order), 2)
    np.testing.assert_array_equal(y.data.ravel(), [20, 0, 40, 10, 30, 30])
    assert y.shape == (3, 2, 1)
    back = F.category_ungroup(y, sg.tensor(order))
    np.testing.assert_array_equal(back.data, x)
    big = F.category_group(sg.tensor(x), sg.tensor(order), 9)  # one group of all 5, no padding
    assert big.shape == (1, 5, 1)


def _torch_group(qkv, sim, gs_max):
    """ATD's AC_MSA around the attention, in torch (its own code's steps)."""
    b, n, c = qkv.shape
    gs = min(n, gs_max)
    ng = (n + gs - 1) // gs
    idx = torch.sort(torch.argmax(sim, -1), dim=-1, stable=False)[1]
    rev = torch.zeros_like(idx)
    for i in range(b):
        rev[i, idx[i]] = torch.arange(n)
    shuffled = torch.gather(qkv, 1, idx[..., None].expand(qkv.shape))
    pad = ng * gs - n
    padded = torch.cat((shuffled, torch.flip(shuffled[:, n - pad:n], dims=[1])), 1)
    y = padded.reshape(b * ng, gs, c) * torch.arange(1.0, gs + 1, dtype=qkv.dtype)[:, None]
    y = y.reshape(b, ng * gs, c)[:, :n]
    return torch.gather(y, 1, rev[..., None].expand(y.shape))


def _ours_group(qkv, sim, gs_max):
    order = F.argsort(F.argmax(sim, -1), -1)
    y = F.category_group(qkv, order, gs_max)
    y = y * sg.tensor(np.arange(1.0, y.shape[1] + 1)[:, None])
    return F.category_ungroup(y, order)


@pytest.mark.parametrize("b,n,c,m,gs", [(2, 40, 3, 4, 16), (1, 7, 2, 3, 16), (2, 33, 2, 5, 8)])
def test_group_ungroup_match_atds_torch_code(b, n, c, m, gs):
    """Values and both gradients (qkv's through the gathers and the mirrored rows; sim's is
    none: argmax / argsort carry no gradient, the twin's too) against torch, then gradcheck."""
    qkv, sim = rand(b, n, c), rand(b, n, m, seed=1).round(0)  # ties among the categories
    parity(lambda a, s: _ours_group(a, s, gs), lambda a, s: _torch_group(a, s, gs), [qkv, sim],
           grads=[True, False])


def test_grouped_gradients_by_gradcheck_with_sim_requiring_grad():
    """sim requires grad: its gradient is zero (the indices carry none), numerically too."""
    qkv = sg.tensor(rand(1, 21, 2), requires_grad=True)
    sim = sg.tensor(rand(1, 21, 3, seed=2), requires_grad=True)
    assert gradcheck(lambda a, s: _ours_group(a, s, 8) + 0 * F.sum(s), (qkv, sim))


def test_category_errors():
    x = sg.tensor(np.zeros((1, 4, 2)))
    with pytest.raises(ValueError, match=r"category_group: each row of order must be a "
                                         r"permutation"):
        F.category_group(x, sg.tensor(np.asarray([[0, 1, 1, 3]])), 2)
    with pytest.raises(ValueError, match=r"category_group: order \(1, 3\) is not \(B, N\)"):
        F.category_group(x, sg.tensor(np.asarray([[0, 1, 2]])), 2)
    with pytest.raises(TypeError, match="category_group: order must be an integer tensor"):
        F.category_group(x, sg.tensor(np.zeros((1, 4))), 2)
    with pytest.raises(ValueError, match=r"category_ungroup: y \(3, 2, 2\) is not"):
        F.category_ungroup(sg.tensor(np.zeros((3, 2, 2))),
                           sg.tensor(np.asarray([[0, 1, 2, 3]] * 2)))
