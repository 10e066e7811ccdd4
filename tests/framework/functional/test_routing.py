"""keep_topk (mixture-of-experts routing): torch parity of values and the gradient with SeemoRe's
scatter(topk) form, float64 gradcheck, ties to the lower index, rows of any leading shape, errors."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F

from ._parity import parity, rand


def _torch_keep(k):
    import torch

    def fn(w):  # SeemoRe's MoELayer: zeros.scatter(1, topk indices, the weights gathered there)
        idx = torch.topk(w, k, dim=-1).indices
        return torch.zeros_like(w).scatter(-1, idx, w.gather(-1, idx))
    return fn


@pytest.mark.parametrize("shape,k", [((4, 6), 1), ((3, 5), 2), ((2, 3, 4), 3), ((5, 1), 1)])
def test_matches_torch_and_gradcheck(shape, k):
    parity(lambda w: F.keep_topk(w, k), _torch_keep(k), [rand(*shape)])


def test_keeps_the_largest_and_zeroes_the_rest():
    w = np.array([[0.1, 0.5, 0.2, 0.9], [3.0, -1.0, 2.0, 2.5]])
    np.testing.assert_array_equal(F.keep_topk(sg.tensor(w), 2).data,
                                  [[0, 0.5, 0, 0.9], [3.0, 0, 0, 2.5]])


def test_ties_go_to_the_lower_index_and_only_kept_entries_get_gradient():
    x = sg.tensor(np.array([[0.25, 0.25, 0.25, 0.25], [0.1, 0.4, 0.4, 0.1]]), requires_grad=True)
    y = F.keep_topk(x, 1)
    np.testing.assert_array_equal(y.data, [[0.25, 0, 0, 0], [0, 0.4, 0, 0]])
    y.backward(np.full((2, 4), 2.0))
    np.testing.assert_array_equal(x.grad.data, [[2, 0, 0, 0], [0, 2, 0, 0]])


@pytest.mark.parametrize("k,match", [(0, r"keep_topk: k must be a positive int"),
                                     (5, r"keep_topk: k must be at most the last axis' size")])
def test_errors(k, match):
    with pytest.raises(ValueError, match=match):
        F.keep_topk(sg.tensor(np.ones((2, 4))), k)
