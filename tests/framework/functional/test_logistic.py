"""softplus and binary_cross_entropy_with_logits: hand-worked values, gradcheck, torch parity of
values and every gradient (extreme logits included), reductions, dtypes, errors."""
import math

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64

EXTREMES = [-800.0, -40.0, -1.0, 0.0, 1e-9, 2.0, 19.9, 20.1, 40.0, 800.0]


def test_hand_worked_values():
    x = sg.tensor(np.array([0.0, 1.0, -1.0, 1000.0, -1000.0]))
    np.testing.assert_allclose(F.softplus(x).data,
                               [math.log(2), math.log1p(math.e), math.log1p(1 / math.e), 1000.0, 0.0],
                               rtol=1e-15, atol=0)
    assert F.softplus(sg.tensor(np.array([-1000.0]))).data[0] == 0.0
    assert F.softplus(sg.tensor(np.array([-50.0]))).data[0] == pytest.approx(math.exp(-50), rel=1e-14)
    # beta 2 switches to the identity above x = threshold / beta
    np.testing.assert_array_equal(F.softplus(sg.tensor(np.array([10.5])), beta=2.0).data, [10.5])
    # BCE(0, t) = log 2 for every t; BCE(x, 1) = softplus(-x); BCE(x, 0) = softplus(x)
    t = np.array([0.0, 0.3, 1.0])
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(
        sg.tensor(np.zeros(3)), sg.tensor(t), reduction="none").data, [math.log(2)] * 3, rtol=1e-15)
    xs = np.array(EXTREMES)
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(
        sg.tensor(xs), sg.tensor(np.ones(10)), reduction="none").data, F.softplus(sg.tensor(-xs)).data,
        rtol=1e-15)
    tail = F.binary_cross_entropy_with_logits(sg.tensor(np.array([-30.0])), sg.tensor(np.zeros(1)))
    assert tail.item() == pytest.approx(math.exp(-30), rel=1e-14)  # log1p keeps it; log(1 + e) would not


@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (0.5, 3.0), (3.0, 1.0)])
@pytest.mark.parametrize("shape", [(2, 3, 5), (1,), (1, 1, 1, 1)])
def test_softplus_gradcheck(beta, threshold, shape, rng):
    x = t64(rng, *shape)
    x.data *= 3
    # away from the switch beta x = threshold, where the function has a (tiny) kink
    near = np.abs(x.data * beta - threshold) < 0.05
    x.data[near] += 0.2
    assert sg.gradcheck(lambda a: F.softplus(a, beta, threshold), (x,))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(2, 3, 5), (1,), (3, 1, 1, 1)])
def test_bce_with_logits_gradcheck(reduction, shape, rng):
    x = t64(rng, *shape)
    t = sg.tensor(rng.uniform(0, 1, shape), requires_grad=True)
    assert sg.gradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction), (x, t))


@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (2.0, 20.0), (0.5, 5.0), (1.0, -2.0)])
def test_softplus_matches_torch(beta, threshold, rng):
    torch = pytest.importorskip("torch")
    a = np.concatenate([np.array(EXTREMES), rng.standard_normal(20) * 10])
    g = rng.standard_normal(a.shape)
    x = sg.tensor(a, requires_grad=True)
    F.softplus(x, beta, threshold).backward(g)
    tx = torch.tensor(a, requires_grad=True)
    ty = torch.nn.functional.softplus(tx, beta, threshold)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(F.softplus(x, beta, threshold).data, ty.detach().numpy(), rtol=1e-14, atol=0)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-14, atol=0)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits_matches_torch(reduction, rng):
    torch = pytest.importorskip("torch")
    a = np.concatenate([np.array(EXTREMES), rng.standard_normal(14) * 5]).reshape(2, 3, 4)
    b = rng.uniform(0, 1, a.shape)
    b.flat[:3] = [0.0, 1.0, 0.5]
    x, t = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    y = F.binary_cross_entropy_with_logits(x, t, reduction)
    tx, tt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ty = torch.nn.functional.binary_cross_entropy_with_logits(tx, tt, reduction=reduction)
    g = rng.standard_normal(y.shape) if reduction == "none" else np.array(1.7)
    y.backward(g)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(t.grad.data, tt.grad.numpy(), rtol=1e-14, atol=0)


def test_float32_stays_float32_and_is_close_to_torch(rng):
    torch = pytest.importorskip("torch")
    a = (rng.standard_normal((4, 5)) * 8).astype(np.float32)
    b = rng.uniform(0, 1, a.shape).astype(np.float32)
    x = sg.tensor(a, requires_grad=True)
    y = F.binary_cross_entropy_with_logits(x, sg.tensor(b))
    y.backward()
    s = F.softplus(sg.tensor(a))
    assert y.dtype == s.dtype == x.grad.dtype == np.float32
    tx = torch.tensor(a, requires_grad=True)
    ty = torch.nn.functional.binary_cross_entropy_with_logits(tx, torch.tensor(b))
    ty.backward()
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(s.data, torch.nn.functional.softplus(torch.tensor(a)).numpy(), rtol=1e-6)


def test_target_without_grad_gets_none_and_plain_arrays_work(rng):
    x = t64(rng, 3)
    t = sg.tensor(np.array([0.0, 1.0, 0.5]))
    F.binary_cross_entropy_with_logits(x, t, "sum").backward()
    assert t.grad is None
    np.testing.assert_allclose(x.grad.data, 1 / (1 + np.exp(-x.data)) - t.data, rtol=1e-15)


def test_errors():
    x = sg.tensor(np.zeros((2, 3)))
    bce = F.binary_cross_entropy_with_logits
    with pytest.raises(ValueError, match=r"target shape \(3,\) must equal input shape \(2, 3\)"):
        bce(x, sg.tensor(np.zeros(3)))
    with pytest.raises(TypeError, match="input dtype float64 and target dtype float32 differ"):
        bce(x, sg.tensor(np.zeros((2, 3), np.float32)))
    with pytest.raises(ValueError, match="reduction must be one of 'mean', 'sum', 'none', got 'avg'"):
        bce(x, x, reduction="avg")
    with pytest.raises(TypeError, match="input must be float32 or float64"):
        bce(np.zeros(3, np.int64), np.zeros(3))
    with pytest.raises(ValueError, match="softplus: beta must be > 0"):
        F.softplus(x, beta=0)
    with pytest.raises(TypeError, match="softplus: threshold must be a number"):
        F.softplus(x, threshold="20")


# -- silu and mish -------------------------------------------------------------------------------------
def _sigmoid_pair(v):
    """(sigmoid(v), 1 - sigmoid(v)) in float64, each without cancellation."""
    e = math.exp(-abs(v))
    return (1 / (1 + e), e / (1 + e)) if v >= 0 else (e / (1 + e), 1 / (1 + e))


def _silu_ref(v):
    """x sigmoid(x) and its derivative in float64 from math (the exact reference)."""
    s, sc = _sigmoid_pair(v)
    return v * s, s * (1 + v * sc)


def _mish_ref(v):
    sp = v + math.log1p(math.exp(-v)) if v > 0 else math.log1p(math.exp(v))
    t, s = math.tanh(sp), _sigmoid_pair(v)[0]
    return v * t, t + v * s / math.cosh(sp) ** 2  # 1 - tanh^2 = sech^2: no cancellation


SELF_GATED = [(F.silu, _silu_ref, "silu"), (F.mish, _mish_ref, "mish")]


@pytest.mark.parametrize("fn,ref,name", SELF_GATED)
def test_self_gated_hand_worked_values(fn, ref, name):
    """f(0) = 0 with slope 1/2 (silu) or tanh(log 2) = 3/5 (mish); the far right tail is x itself
    with slope 1, the far left tail -0 with slope 0; NaN stays NaN, f(-inf) = -inf * 0 = NaN as torch."""
    x = sg.tensor(np.array([0.0, 1000.0, -1000.0, np.nan, np.inf, -np.inf]), requires_grad=True)
    y = fn(x)
    y.backward(np.ones(6))
    slope0 = 0.5 if name == "silu" else 0.6
    np.testing.assert_array_equal(y.data[:2], [0.0, 1000.0])
    assert y.data[2] == 0 and np.signbit(y.data[2])
    assert np.isnan(y.data[3]) and y.data[4] == np.inf and np.isnan(y.data[5])
    np.testing.assert_allclose(x.grad.data[:3], [slope0, 1.0, 0.0], rtol=1e-15, atol=0)


@pytest.mark.parametrize("fn,ref,name", SELF_GATED)
@pytest.mark.parametrize("shape", [(2, 3, 5), (1,), (3, 1, 4, 2)])
def test_self_gated_gradcheck(fn, ref, name, shape, rng):
    x = t64(rng, *shape)
    x.data *= 3
    assert sg.gradcheck(fn, (x,))


@pytest.mark.parametrize("dtype,bound", [(np.float64, 4), (np.float32, 4)])
@pytest.mark.parametrize("fn,ref,name", SELF_GATED)
def test_self_gated_within_a_few_ulps_of_exact(fn, ref, name, dtype, bound):
    """Values and derivatives against math's float64, in ulps of the dtype (derivatives, which cross
    zero, in ulps of at least 1: absolute near the crossing). float32 down to x = -80: below -87 float32's exp underflows and
    the left tail is 0 (torch's float32 too: x / (1 + e^-x) with e^-x = inf)."""
    a = np.concatenate([np.linspace(-80, 90, 4001), np.linspace(-3, 3, 1201)]).astype(dtype)
    x = sg.tensor(a, requires_grad=True)
    y = fn(x)
    y.backward(np.ones(a.shape, dtype))
    want = np.array([ref(float(v)) for v in a])
    for got, exact, what in ((y.data, want[:, 0], "value"), (x.grad.data, want[:, 1], "derivative")):
        assert got.dtype == dtype
        spacing = np.spacing(np.maximum(np.abs(exact), 1.0 if what == "derivative" else 0).astype(dtype))
        ulps = np.abs(got.astype(np.float64) - exact) / np.maximum(spacing.astype(np.float64), 1e-300)
        ok = (ulps <= bound) | (np.abs(exact) < np.finfo(dtype).tiny)
        assert ok.all(), (what, a[~ok][:3], ulps[~ok].max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fn,ref,name", SELF_GATED)
def test_self_gated_match_torch(fn, ref, name, dtype, rng):
    torch = pytest.importorskip("torch")
    a = np.concatenate([np.array(EXTREMES), rng.standard_normal(2000) * 5]).astype(dtype)
    g = rng.standard_normal(a.shape).astype(dtype)
    x = sg.tensor(a, requires_grad=True)
    y = fn(x)
    y.backward(g)
    tx = torch.tensor(a, requires_grad=True)
    ty = getattr(torch.nn.functional, name)(tx)
    ty.backward(torch.tensor(g))
    tol = 1e-14 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=tol, atol=tol * np.abs(g).max())


def test_self_gated_errors():
    with pytest.raises(TypeError, match="silu: input must be float32 or float64"):
        F.silu(np.zeros(3, np.int64))
    with pytest.raises(TypeError, match="mish: input must be float32 or float64"):
        F.mish(np.zeros(3, np.int32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_pass_within_a_few_ulps_of_exact(dtype):
    """F.sigmoid's one-pass kernel (logistic.sigmoid_pass) against math's float64: values within 4
    ulps of the dtype (down to x = -80 in float32, where its exp underflows), the derivative
    s (1 - s) within 4 ulps of 1 (absolute: the product of the rounded s)."""
    a = np.concatenate([np.linspace(-80, 90, 4001), np.linspace(-3, 3, 1201)]).astype(dtype)
    x = sg.tensor(a, requires_grad=True)
    y = F.sigmoid(x)
    y.backward(np.ones(a.shape, dtype))
    s = np.array([_sigmoid_pair(float(v))[0] for v in a])
    sc = np.array([_sigmoid_pair(float(v))[1] for v in a])
    spacing = np.spacing(s.astype(dtype)).astype(np.float64)
    assert y.dtype == dtype and (np.abs(y.data - s) <= 4 * spacing).all()
    assert np.abs(x.grad.data - s * sc).max() <= 4 * np.spacing(dtype(1))
