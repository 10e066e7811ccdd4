"""l1_loss, mse_loss, charbonnier_loss, frobenius_loss: gradcheck for every reduction (input and
target), torch parity, sign(0) = 0, dtypes, errors."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64

LOSSES = {
    "l1": F.l1_loss,
    "mse": F.mse_loss,
    "charbonnier": F.charbonnier_loss,
    "charbonnier_eps0.1": lambda x, t, reduction="mean": F.charbonnier_loss(x, t, 0.1, reduction),
}
REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(2, 3, 2, 3), (1, 1, 1, 1)])
def test_gradcheck(name, reduction, shape, rng):
    x, t = t64(rng, *shape), t64(rng, *shape)
    x.data += 0.2 * np.sign(x.data - t.data)  # keep |x - t| away from l1's kink
    assert sg.gradcheck(lambda a, b: LOSSES[name](a, b, reduction=reduction), (x, t))


@pytest.mark.parametrize("name", ["l1", "mse"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_torch_parity(name, reduction, rng):
    torch = pytest.importorskip("torch")
    a, b = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 4, 5))
    b[0, 0, 0] = a[0, 0, 0]  # ties: l1's gradient is sign(0) = 0 there
    x, t = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    y = LOSSES[name](x, t, reduction=reduction)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    tx, tt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ty = getattr(torch.nn.functional, f"{name}_loss")(tx, tt, reduction=reduction)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(t.grad.data, tt.grad.numpy(), rtol=1e-13)
    if name == "l1":
        assert np.all(x.grad.data[0, 0, 0] == 0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_charbonnier_matches_torch_expression(reduction, rng):
    """The BasicSR-style formula written in torch: sqrt((x - y)^2 + eps^2), then reduced."""
    torch = pytest.importorskip("torch")
    a, b = rng.standard_normal((2, 3, 3, 3)), rng.standard_normal((2, 3, 3, 3))
    b[0, 0] = a[0, 0]
    x = sg.tensor(a, requires_grad=True)
    y = F.charbonnier_loss(x, sg.tensor(b), eps=1e-3, reduction=reduction)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    tx = torch.tensor(a, requires_grad=True)
    ty = torch.sqrt((tx - torch.tensor(b)) ** 2 + 1e-3 ** 2)
    ty = {"mean": ty.mean(), "sum": ty.sum(), "none": ty}[reduction]
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-12)


def test_hand_values():
    x, t = sg.tensor(np.array([1.0, -2.0, 0.5])), sg.tensor(np.array([0.0, 0.0, 0.5]))
    assert F.l1_loss(x, t).item() == pytest.approx(1.0)
    assert F.mse_loss(x, t, reduction="sum").item() == pytest.approx(5.0)
    np.testing.assert_allclose(F.charbonnier_loss(x, t, eps=0.5, reduction="none").data,
                               [np.sqrt(1.25), np.sqrt(4.25), 0.5])


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_float32_stays_float32(name, reduction, rng):
    x = sg.tensor(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    y = LOSSES[name](x, sg.tensor(np.zeros((2, 3), np.float32)), reduction=reduction)
    y.backward(np.ones(y.shape, np.float32))
    assert y.dtype == np.float32 and x.grad.dtype == np.float32


@pytest.mark.parametrize("fn", [F.l1_loss, F.mse_loss, F.charbonnier_loss])
def test_errors(fn):
    x = sg.tensor(np.ones((2, 3, 4, 4)))
    with pytest.raises(ValueError, match=r"input shape \(2, 3, 4, 4\) and target shape \(1, 3, 4, 4\) differ"):
        fn(x, sg.tensor(np.ones((1, 3, 4, 4))))
    with pytest.raises(ValueError, match="reduction must be one of .* got 'avg'"):
        fn(x, x, reduction="avg")
    with pytest.raises(TypeError, match="target must be float32 or float64, got dtype int64"):
        fn(x, sg.Tensor(np.ones((2, 3, 4, 4), np.int64)))
    with pytest.raises(TypeError, match="input dtype float64 and target dtype float32 differ"):
        fn(x, sg.tensor(np.ones((2, 3, 4, 4), np.float32)))


def test_charbonnier_eps_must_be_positive():
    x = sg.tensor(np.ones(3))
    with pytest.raises(ValueError, match="charbonnier_loss: eps must be > 0, got 0"):
        F.charbonnier_loss(x, x, eps=0)


# -- frobenius_loss --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3, 2, 3), (1,), (1, 1, 1, 1)])
def test_frobenius_gradcheck(shape, rng):
    assert sg.gradcheck(F.frobenius_loss, (t64(rng, *shape), t64(rng, *shape)))


def test_frobenius_hand_worked_and_torch_parity(rng):
    torch = pytest.importorskip("torch")
    x = sg.tensor(np.array([[3.0, 0.0], [1.0, 1.0]]))
    assert F.frobenius_loss(x, sg.tensor(np.array([[0.0, 0.0], [1.0, -3.0]]))).item() == 5.0
    a, b = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 4, 5))
    x, t = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    y = F.frobenius_loss(x, t)
    y.backward(np.array(0.7))
    tx, tt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ty = torch.norm(tx - tt, p="fro")
    ty.backward(torch.tensor(0.7, dtype=torch.float64))
    assert y.shape == () and y.dtype == np.float64
    np.testing.assert_allclose(y.item(), ty.item(), rtol=1e-14)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(t.grad.data, tt.grad.numpy(), rtol=1e-13)


def test_frobenius_at_zero_distance_has_zero_gradient_and_keeps_float32():
    a = np.ones((2, 3), np.float32)
    x = sg.tensor(a, requires_grad=True)
    y = F.frobenius_loss(x, sg.tensor(a))
    y.backward()
    assert y.item() == 0.0 and y.dtype == x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.data, 0.0)
    with pytest.raises(ValueError, match=r"frobenius_loss: input shape \(2, 3\) and target shape"):
        F.frobenius_loss(x, sg.tensor(np.ones(6, np.float32)))
