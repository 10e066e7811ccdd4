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


def test_sum_of_a_zero_dimensional_tensor_backpropagates():
    x = sg.tensor(np.float64(3.0), requires_grad=True)
    x.sum().backward()
    assert x.grad.shape == () and x.grad.item() == 1.0


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


# -- torch's spelling (dim=, keepdim=) beside numpy's: framework/functional/_util.dims ------------
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "var", "std"])
def test_torch_and_numpy_spellings_agree(op, rng):
    x = t64(rng, 3, 4, 5)
    fn = getattr(F, op)
    want = fn(x, axis=(0, 2), keepdims=True).numpy()
    for kw in ({"dim": (0, 2), "keepdim": True}, {"axis": (0, 2), "keepdim": True},
               {"dim": (0, 2), "keepdims": True}):
        np.testing.assert_array_equal(fn(x, **kw).numpy(), want)
        np.testing.assert_array_equal(getattr(x, op)(**kw).numpy(), want)
    positional = ((0, 2), None, True) if op in ("var", "std") else ((0, 2), True)  # torch's order
    np.testing.assert_array_equal(getattr(x, op)(*positional).numpy(), want)


def test_dims_rule_refuses_both_spellings_and_unknown_keywords():
    x = sg.zeros(2, 3)
    with pytest.raises(TypeError, match="sum: got both axis and dim"):
        x.sum(axis=1, dim=1)
    with pytest.raises(TypeError, match="mean: got both axis and dim"):
        x.mean(1, dim=1)
    with pytest.raises(TypeError, match="max: unexpected keyword argument 'keepdm'; did you mean "
                                        "'keepdim"):
        x.max(dim=1, keepdm=True)
    with pytest.raises(TypeError, match="var: got both correction and ddof"):
        x.var(ddof=0, correction=1)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 2), False),
                                           (-1, True)])
def test_min_gradcheck_and_values(axis, keepdims, rng):
    x = t64(rng, 2, 3, 4)
    assert sg.gradcheck(lambda a: F.min(a, axis=axis, keepdims=keepdims), (x,))
    np.testing.assert_array_equal(F.min(x, axis=axis, keepdims=keepdims).numpy(),
                                  np.min(x.numpy(), axis=axis, keepdims=keepdims))


def test_min_ties_share_the_gradient_as_torch_amin():
    torch = pytest.importorskip("torch")
    x = sg.tensor([[2.0, 1.0, 1.0], [0.0, 5.0, 0.0]], requires_grad=True, dtype=np.float64)
    (x.min(dim=1) * sg.tensor([1.0, 3.0], dtype=np.float64)).sum().backward()
    tx = torch.tensor(x.numpy(), requires_grad=True)
    (tx.amin(dim=1) * torch.tensor([1.0, 3.0], dtype=torch.float64)).sum().backward()
    assert x.grad.numpy().tolist() == [[0.0, 0.5, 0.5], [1.5, 0.0, 1.5]]
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("shape", [(1,), (5,), (3, 1), (2, 3, 5)])
@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin_match_torch(shape, dim, keepdim, rng):
    torch = pytest.importorskip("torch")
    x = rng.integers(0, 3, shape).astype(np.float32)  # ties: the first index wins, as torch
    for op in ("argmax", "argmin"):
        got = getattr(F, op)(sg.tensor(x), dim=dim, keepdim=keepdim)
        want = getattr(torch.tensor(x), op)(dim=dim, keepdim=keepdim).numpy()
        assert got.dtype == np.int64 and not got.requires_grad
        assert got.shape == want.shape and np.array_equal(got.numpy(), want), op


def test_argmax_of_a_graph_tensor_has_no_gradient_and_checks_dim(rng):
    x = t64(rng, 2, 3)
    i = x.argmax(1)
    assert i.numpy().tolist() == np.argmax(x.numpy(), 1).tolist() and not i.requires_grad
    with pytest.raises(TypeError, match="argmax: dim must be an int or None, got \\(0, 1\\)"):
        x.argmax(dim=(0, 1))
    with pytest.raises(ValueError, match="argmax: axis 2 is out of range"):
        x.argmax(2)
    with pytest.raises(ValueError, match="argmin: the tensor is empty"):
        sg.zeros(0).argmin()


@pytest.mark.parametrize("shape,dim", [((7,), None), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), (0, 2)),
                                       ((1, 4), -1)])
@pytest.mark.parametrize("spelling", [{}, {"correction": 0}, {"correction": 2}, {"unbiased": False}])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_std_gradcheck_and_torch_parity(shape, dim, spelling, keepdim, rng):
    torch = pytest.importorskip("torch")
    x = t64(rng, *shape)
    tx = torch.tensor(x.numpy(), requires_grad=True)
    for op in ("var", "std"):
        fn = lambda a: getattr(F, op)(a, dim=dim, keepdim=keepdim, **spelling)
        assert sg.gradcheck(fn, (x,))
        w = np.cos(np.arange(fn(x).numel())).reshape(fn(x).shape)
        x.grad = tx.grad = None
        y = fn(x)
        (y * sg.tensor(w)).sum().backward()
        ty = getattr(torch, op)(tx, dim=dim, keepdim=keepdim, **spelling)
        (ty * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_var_values_by_hand_and_numpy_ddof_alias():
    x = sg.tensor([1.0, 2.0, 4.0], dtype=np.float64)  # mean 7/3, squared deviations sum 14/3
    assert np.isclose(x.var().item(), 7 / 3)            # torch's default: / (n - 1)
    assert np.isclose(x.var(ddof=0).item(), 14 / 9)     # numpy's spelling of correction
    assert np.isclose(x.var(unbiased=False).item(), 14 / 9)
    assert np.isclose(x.std(correction=0).item(), np.sqrt(14 / 9))
    assert np.isclose(x.var(0, True, True).item(), 7 / 3) and x.var(0, True, True).shape == (1,)


def test_var_keeps_float32_and_refuses_ints_and_bad_corrections():
    x = sg.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    v = x.var(dim=1)
    v.sum().backward()
    assert v.dtype == np.float32 and x.grad.dtype == np.float32
    np.testing.assert_allclose(v.numpy(), [1.0, 1.0])
    with pytest.raises(TypeError, match="var: input must be float32 or float64, got dtype int64"):
        sg.tensor(np.arange(3)).var()
    with pytest.raises(TypeError, match="var: give unbiased or correction, not both"):
        x.var(unbiased=True, correction=1)
    with pytest.raises(ValueError, match="var: correction must be >= 0, got -1"):
        x.var(correction=-1)
    with pytest.raises(TypeError, match="var: unbiased must be a bool, got 1"):
        x.var(1, 1)


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")
def test_var_with_no_degrees_of_freedom_is_nan_or_inf_as_torch():
    torch = pytest.importorskip("torch")
    for data, c in (([3.0], 1), ([1.0, 2.0], 2), ([1.0, 2.0, 4.0], 5)):
        got = sg.tensor(data, dtype=np.float64).var(correction=c).item()
        want = torch.tensor(data, dtype=torch.float64).var(correction=c).item()
        assert np.isnan(got) == np.isnan(want) and (np.isnan(got) or got == want)
