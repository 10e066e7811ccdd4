"""softmax and log_softmax: gradcheck over axes and odd / one-element sizes, torch parity of values
and gradients (float64 tight, float32 close), stability at extreme values, -inf and NaN as torch,
threads, errors (the row kernels and their float32 exp: test_rows.py)."""
import numba
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64

OPS = {"softmax": F.softmax, "log_softmax": F.log_softmax}
CASES = [((2, 3, 5), -1), ((2, 3, 5), 1), ((2, 3, 5), 0), ((2, 3, 5), -3), ((7,), 0), ((1,), 0),
         ((), 0), ((), -1), ((2, 1, 3), 1), ((3, 4), 1)]


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shape,dim", CASES)
def test_gradcheck(name, shape, dim, rng):
    assert sg.gradcheck(lambda x: OPS[name](x, dim), (t64(rng, *shape),))


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shape,dim", CASES + [((4, 6, 64), -1)])
def test_torch_parity(name, shape, dim, rng):
    torch = pytest.importorskip("torch")
    a, g = rng.standard_normal(shape) * 4, rng.standard_normal(shape)
    x = sg.tensor(a, requires_grad=True)
    y = OPS[name](x, dim)
    y.backward(g)
    tx = torch.tensor(a, requires_grad=True)
    ty = getattr(torch, name)(tx, dim)
    ty.backward(torch.tensor(g))
    assert y.shape == tuple(ty.shape)
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", OPS)
def test_float32_as_accurate_as_torch_and_stays_float32(name, rng):
    """float32 values and gradients against the float64 result: no further off than torch's float32
    (the two round differently, so they are compared through the exact answer, not to each other)."""
    torch = pytest.importorskip("torch")
    a = (rng.standard_normal((3, 5, 64)) * 5).astype(np.float32)
    g = rng.standard_normal(a.shape).astype(np.float32)
    x = sg.tensor(a, requires_grad=True)
    y = OPS[name](x, -1)
    y.backward(g)
    assert y.dtype == np.float32 and x.grad.dtype == np.float32
    results = {}
    for dtype in (torch.float32, torch.float64):
        tx = torch.tensor(a, dtype=dtype, requires_grad=True)
        ty = getattr(torch, name)(tx, -1)
        ty.backward(torch.tensor(g, dtype=dtype))
        results[dtype] = (ty.detach().numpy().astype(np.float64), tx.grad.numpy().astype(np.float64))
    exact = results[torch.float64]
    for ours, theirs, ref in zip((y.data, x.grad.data), results[torch.float32], exact):
        ours_err, torch_err = np.abs(ours - ref).max(), np.abs(theirs - ref).max()
        assert ours_err <= 1.25 * torch_err + 1e-8, (ours_err, torch_err)


def test_hand_values():
    x = sg.tensor(np.array([0.0, np.log(3.0)]))  # exp: 1 and 3
    np.testing.assert_allclose(F.softmax(x, 0).data, [0.25, 0.75], rtol=1e-15)
    np.testing.assert_allclose(F.log_softmax(x, 0).data, np.log([0.25, 0.75]), rtol=1e-15)
    np.testing.assert_array_equal(F.softmax(sg.tensor(np.float64(5.0)), 0).data, 1.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_stable_at_extreme_values(dtype):
    a = np.array([[1000.0, 1000.0, -1000.0], [-1e30, 0.0, 1e30]], dtype)
    y = F.softmax(sg.tensor(a), 1).data
    np.testing.assert_allclose(y, [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]], atol=1e-30)
    ly = F.log_softmax(sg.tensor(a), 1).data
    np.testing.assert_allclose(ly[0], [-np.log(2.0), -np.log(2.0), -2000.0 - np.log(2.0)],
                               rtol=1e-6 if dtype == np.float32 else 1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_masked_entries_and_nan_as_torch(dtype):
    """-inf (a masked attention entry) gets probability 0; a NaN spreads over its row only; an
    all -inf row is NaN, as in torch."""
    torch = pytest.importorskip("torch")
    a = np.array([[0.5, -np.inf, 1.0, -np.inf], [0.0, np.nan, 1.0, 2.0], [-np.inf] * 4,
                  [1.0, 2.0, 3.0, 4.0]], dtype)
    for name in OPS:
        ours = OPS[name](sg.tensor(a), -1).data
        theirs = getattr(torch, name)(torch.tensor(a), -1).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-6 if dtype == np.float32 else 1e-15)
        assert np.array_equal(np.isnan(ours), np.isnan(theirs))


def test_parallel_equals_serial(rng):
    x = t64(rng, 300, 7, 64)  # above the serial threshold
    g = rng.standard_normal(x.shape)
    before = numba.get_num_threads()
    results = []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        try:
            for fn in OPS.values():
                x.grad = None
                y = fn(x, -1)
                y.backward(g)
                results.append((threads, y.data, x.grad.data))
        finally:
            numba.set_num_threads(before)
    for (_, y1, g1), (_, y2, g2) in zip(results[:2], results[2:]):
        np.testing.assert_array_equal(y1, y2)
        np.testing.assert_array_equal(g1, g2)


def test_empty_input():
    x = sg.tensor(np.zeros((0, 3)), requires_grad=True)
    y = F.softmax(x, 1)
    y.backward(np.zeros((0, 3)))
    assert y.shape == (0, 3) and x.grad.shape == (0, 3)
    assert F.log_softmax(sg.tensor(np.zeros((2, 0))), 1).shape == (2, 0)


def test_errors():
    x = sg.tensor(np.ones((2, 3)))
    for name, fn in OPS.items():
        with pytest.raises(ValueError, match=rf"{name}: dim 2 is out of range for an input of shape "
                                             r"\(2, 3\)"):
            fn(x, 2)
        with pytest.raises(ValueError, match=f"{name}: dim must be given"):
            fn(x, None)
        with pytest.raises(TypeError, match=f"{name}: dim must be an int, got 1.0"):
            fn(x, 1.0)
        with pytest.raises(TypeError, match=f"{name}: input must be float32 or float64, got dtype int64"):
            fn(sg.Tensor(np.ones(3, np.int64)), 0)


def test_softmax_takes_numpy_axis_and_the_tensor_methods(rng):
    x = t64(rng, 2, 5)
    want = F.softmax(x, dim=1).numpy()
    np.testing.assert_array_equal(F.softmax(x, axis=1).numpy(), want)
    np.testing.assert_array_equal(x.softmax(-1).numpy(), want)
    np.testing.assert_array_equal(x.log_softmax(dim=1).numpy(), F.log_softmax(x, 1).numpy())
    with pytest.raises(TypeError, match="softmax: got both dim and axis"):
        F.softmax(x, 1, axis=1)
