import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 2), False), (-1, True)])
def test_reduce_gradcheck_and_values(op, axis, keepdims, rng):
    x = t64(rng, 2, 3, 4)
    fn = lambda a: getattr(F, op)(a, axis=axis, keepdims=keepdims)
    assert sg.gradcheck(fn, (x,))
    expected = getattr(np, {"max": "max"}.get(op, op))(x.numpy(), axis=axis, keepdims=keepdims)
    assert np.allclose(fn(x).numpy(), expected)


def test_max_ties_share_the_gradient():
    x = sg.tensor([1.0, 3.0, 3.0], requires_grad=True)
    x.max().backward()
    assert x.grad.numpy().tolist() == [0.0, 0.5, 0.5]


def test_reduce_errors():
    x = sg.zeros(2, 3)
    with pytest.raises(ValueError, match="sum: axis 2 is out of range for a tensor with 2 dimensions"):
        x.sum(axis=2)
    with pytest.raises(ValueError, match="mean: the tensor is empty"):
        sg.zeros(0).mean()


def test_mean_keeps_float32():
    x = sg.tensor(np.ones((3, 3), np.float32), requires_grad=True)
    m = x.mean()
    m.backward()
    assert m.dtype == np.float32 and x.grad.dtype == np.float32 and np.allclose(x.grad.numpy(), 1 / 9)


def test_reduce_parity_with_torch(rng):
    torch = pytest.importorskip("torch")
    x = t64(rng, 3, 4, 5)
    out = (x.sum(axis=1) * x.mean(axis=(0, 2), keepdims=True).sum()).max(axis=1).sum()
    out.backward()
    tx = torch.tensor(x.numpy(), requires_grad=True)
    tout = (tx.sum(1) * tx.mean((0, 2), keepdim=True).sum()).amax(1).sum()
    tout.backward()
    assert np.allclose(out.item(), tout.item(), rtol=1e-13)
    assert np.allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
