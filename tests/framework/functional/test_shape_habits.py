"""flip, repeat and x[i] = v (index_put): float64 gradcheck and torch parity of values and every
gradient; item assignment's autograd rules (issue 42)."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F

from ._parity import parity, rand, torch


@pytest.mark.parametrize("shape,dims", [((2, 3, 4), (0,)), ((2, 3, 4), (1, 2)), ((5,), -1),
                                        ((2, 1, 3), (0, 1, 2))])
def test_flip(shape, dims):
    parity(lambda x: F.flip(x, dims), lambda x: torch.flip(x, dims if isinstance(dims, tuple)
                                                            else (dims,)), [rand(*shape)])


@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 1)), ((2, 3), (1, 2, 3)), ((3,), (2, 2)),
                                        ((2, 1, 2), (1, 3, 2)), ((2, 3), (0, 1))])
def test_repeat(shape, reps):
    parity(lambda x: x.repeat(*reps), lambda x: x.repeat(*reps), [rand(*shape)])


@pytest.mark.parametrize("index,vshape", [((0, slice(None)), (4,)), ((slice(1, 3),), (1, 4)),
                                          ((Ellipsis, 1), ()), ((np.array([0, 2]),), (4,)),
                                          ((slice(None), slice(None, None, 2)), (3, 1))])
def test_setitem_gradients_reach_the_rest_and_the_value(index, vshape):
    def ours(x, v):
        y = x * 2
        y[index] = v * 3
        return y

    def theirs(x, v):
        y = x * 2
        y[tuple(torch.tensor(i) if isinstance(i, np.ndarray) else i for i in index)] = v * 3
        return y
    parity(ours, theirs, [rand(3, 4), rand(*vshape, seed=1)])


def test_setitem_on_a_leaf_that_requires_grad_is_refused_as_in_torch():
    x = sg.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[0] = 1.0
    with sg.no_grad():
        x[0] = 1.0
    assert x.tolist() == [1.0, 0.0, 0.0] and x.is_leaf
    y = sg.zeros(2, 3)
    y[y == 0] = 2
    y[0, :] = sg.tensor([1, 2, 3])  # an int value is cast to the float tensor
    assert y.tolist() == [[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]]
    with pytest.raises(ValueError, match="does not broadcast to the indexed shape"):
        y[0] = sg.zeros(2)
