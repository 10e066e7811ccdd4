"""Activations: gradcheck, torch parity (forward and gradients), kink conventions, dtypes, errors."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64

OPS = {
    "relu": (F.relu, lambda tF, x: tF.relu(x)),
    "leaky_relu": (F.leaky_relu, lambda tF, x: tF.leaky_relu(x)),
    "leaky_relu_0.2": (lambda x: F.leaky_relu(x, 0.2), lambda tF, x: tF.leaky_relu(x, 0.2)),
    # a negative slope flips the sign: the backward must read the input, not the output
    "leaky_relu_-0.5": (lambda x: F.leaky_relu(x, -0.5), lambda tF, x: tF.leaky_relu(x, -0.5)),
    "sigmoid": (F.sigmoid, lambda tF, x: tF.sigmoid(x)),
    "tanh": (F.tanh, lambda tF, x: tF.tanh(x)),
    "gelu": (F.gelu, lambda tF, x: tF.gelu(x)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda tF, x: tF.gelu(x, approximate="tanh")),
}


def _away_from_kinks(x):
    """gradcheck's central difference is wrong within eps of a kink; keep |x| >= 0.05."""
    d = x.data
    d[np.abs(d) < 0.05] += 0.1
    return x


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shape", [(2, 3, 3, 2), (1, 1, 1, 1), (5,)])
def test_gradcheck(name, shape, rng):
    assert sg.gradcheck(OPS[name][0], (_away_from_kinks(t64(rng, *shape)),))


@pytest.mark.parametrize("name", OPS)
def test_torch_parity(name, rng):
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((2, 3, 5, 4)) * 3
    a[0, 0, 0, :3] = [0.0, 40.0, -40.0]  # the kink and saturated tails
    g = rng.standard_normal(a.shape)
    x = sg.tensor(a, requires_grad=True)
    y = OPS[name][0](x)
    y.backward(g)
    tx = torch.tensor(a, requires_grad=True)
    ty = OPS[name][1](torch.nn.functional, tx)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-13, atol=1e-15)
    # atol: tanh saturates to 1 - t^2 ~ 1e-7, where the two formulas cancel differently
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 4, 3), (1, 3, 1, 1)])
def test_prelu_gradcheck(per_channel, shape, rng):
    x = _away_from_kinks(t64(rng, *shape))
    w = t64(rng, 3 if per_channel else 1)
    assert sg.gradcheck(F.prelu, (x, w))


@pytest.mark.parametrize("per_channel", [False, True])
def test_prelu_torch_parity(per_channel, rng):
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((2, 3, 4, 5))
    a[0, :, 0, 0] = 0.0  # torch's convention at zero: slope w for the input, nothing for the weight
    wa = rng.uniform(-0.5, 0.5, 3 if per_channel else 1)
    g = rng.standard_normal(a.shape)
    x, w = sg.tensor(a, requires_grad=True), sg.tensor(wa, requires_grad=True)
    y = F.prelu(x, w)
    y.backward(g)
    tx, tw = torch.tensor(a, requires_grad=True), torch.tensor(wa, requires_grad=True)
    ty = torch.nn.functional.prelu(tx, tw)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-14)
    np.testing.assert_allclose(w.grad.data, tw.grad.numpy(), rtol=1e-12)


def test_kink_gradients_follow_torch():
    x = sg.tensor(np.zeros(1), requires_grad=True)
    F.relu(x).backward(np.ones(1))
    assert x.grad.data[0] == 0.0
    x.grad = None
    F.leaky_relu(x, 0.3).backward(np.ones(1))
    assert x.grad.data[0] == pytest.approx(0.3)


def test_hand_values():
    x = sg.tensor(np.array([-2.0, 0.0, 1.0]))
    np.testing.assert_allclose(F.relu(x).data, [0, 0, 1])
    assert F.leaky_relu(x, 0.25).data.tolist() == [-0.5, 0.0, 1.0]
    assert F.leaky_relu(x, -0.5).data.tolist() == [1.0, 0.0, 1.0]
    assert np.isnan(F.leaky_relu(sg.tensor(np.array([np.nan], np.float32)), 0.2).data[0])
    np.testing.assert_allclose(F.sigmoid(x).data, 1 / (1 + np.exp([2.0, 0.0, -1.0])))
    # Phi(1) = 0.8413447460685429 (standard normal CDF), so gelu(1) = Phi(1)
    assert F.gelu(x).data[2] == pytest.approx(0.8413447460685429, abs=1e-15)
    assert F.sigmoid(sg.tensor(np.array([-800.0, 800.0]))).data.tolist() == [0.0, 1.0]


@pytest.mark.parametrize("name", OPS)
def test_float32_stays_float32(name, rng):
    x = sg.tensor(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    y = OPS[name][0](x)
    y.backward(np.ones((2, 3), np.float32))
    assert y.dtype == np.float32 and x.grad.dtype == np.float32
    w = sg.tensor(np.array([0.25], np.float32), requires_grad=True)
    assert F.prelu(x, w).dtype == np.float32


def test_errors():
    xi = sg.Tensor(np.arange(4))
    for fn in (F.relu, F.sigmoid, F.tanh, F.gelu, F.leaky_relu):
        with pytest.raises(TypeError, match="input must be float32 or float64.*int64"):
            fn(xi)
    x = sg.tensor(np.ones((2, 3, 4, 4)))
    with pytest.raises(ValueError, match=r"weight has 4 entries .* input of shape \(2, 3, 4, 4\)"):
        F.prelu(x, sg.tensor(np.ones(4)))
    with pytest.raises(ValueError, match=r"weight must be 1-D.*\(1, 3\)"):
        F.prelu(x, sg.tensor(np.ones((1, 3))))
    with pytest.raises(TypeError, match="weight dtype float32 differs from input dtype float64"):
        F.prelu(x, sg.tensor(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match="gelu: approximate must be one of 'none', 'tanh', got 'erf'"):
        F.gelu(x, approximate="erf")


def _gelu_reference(x):
    """float64 GELU and its derivative through erfc (0.5 (1 + erf) cancels in the negative tail)."""
    import math
    cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    return x * cdf, cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def test_gelu_float32_accuracy_against_float64():
    # float32 GELU has its own erfc approximation (float64 uses math.erf): bound its error in
    # float32 ulps of the exact value over a dense grid incl. the tails, per range (the negative
    # tail's exp(-x^2/2) inherits x^2's rounding); torch's float32 GELU is ~1e7 ulp off beyond -5
    x32 = np.concatenate([np.linspace(-14, 14, 140001), -np.logspace(-20, 1, 2001),
                          np.logspace(-20, 1, 2001)]).astype(np.float32)
    x = sg.tensor(x32, requires_grad=True)
    y = F.gelu(x)
    y.backward(np.ones_like(x32))
    ref, dref = _gelu_reference(x32.astype(np.float64))
    ulps = np.abs(y.data - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    for lo, hi, bound in ((-14, -5, 512), (-5, -1, 64), (-1, 15, 10)):
        inside = (x32 >= lo) & (x32 < hi) & (np.abs(ref) > 1e-37)
        assert ulps[inside].max() <= bound, (lo, hi, ulps[inside].max())
    # the derivative crosses 0 (at x ~ -0.75): an absolute bound, ~5 ulp of 1 (measured 2.45e-7; torch 3.1e-7)
    assert np.abs(x.grad.data - dref).max() <= 3e-7


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_special_values(dtype):
    """gelu's documented values (its docstring): x Phi(x) and Phi(x) + x phi(x) evaluated as IEEE
    does, so gelu(+inf) = +inf, gelu(-inf) = -inf * 0 = NaN, a gradient at +-inf is NaN, and the
    tails underflow to -0 / 0 and 1 / 0. Not torch's values: its float32 gelu runs oneDNN, whose
    AVX-512 kernel returns NaN at +inf where its AVX2 one and float64 return +inf
    (docs/numerics.md)."""
    v = np.array([0.0, np.inf, -np.inf, np.nan, -40.0, 40.0, -1e30, 1e30, 1e-30], dtype)
    x = sg.tensor(v, requires_grad=True)
    y = F.gelu(x)
    y.backward(np.ones_like(v))
    want_y = np.array([0.0, np.inf, np.nan, np.nan, -0.0, 40.0, -0.0, 1e30, 0.5 * 1e-30], dtype)
    want_g = np.array([0.5, np.nan, np.nan, np.nan, 0.0, 1.0, 0.0, 1.0, 0.5], dtype)
    np.testing.assert_array_equal(y.data, want_y)  # NaN == NaN here
    num = ~np.isnan(want_y)  # a NaN's sign means nothing
    np.testing.assert_array_equal(np.signbit(y.data[num]), np.signbit(want_y[num]))  # -0 on the left
    np.testing.assert_array_equal(x.grad.data, want_g)


def test_gelu_float32_torch_parity(rng):
    torch = pytest.importorskip("torch")
    a = (rng.standard_normal((3, 7, 5)) * 3).astype(np.float32)
    g = rng.standard_normal(a.shape).astype(np.float32)
    x = sg.tensor(a, requires_grad=True)
    F.gelu(x).backward(g)
    tx = torch.tensor(a, requires_grad=True)
    torch.nn.functional.gelu(tx).backward(torch.tensor(g))
    # both within a few float32 ulps of the exact values (torch's erf: 1.5e-7 absolute)
    np.testing.assert_allclose(F.gelu(sg.tensor(a)).data, torch.nn.functional.gelu(torch.tensor(a)).numpy(),
                               rtol=2e-6, atol=4e-7)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=2e-6, atol=6e-7)


def test_tanh_float32_accuracy_against_float64():
    # float32 tanh has its own kernel (Cephes' tanhf, vectorised): within 1.5 float32 ulps of the
    # exact value over a dense grid, both sides of the 0.625 switch, the tails and tiny inputs
    # (numpy's float32 tanh: 1.37 ulp, torch's 0.51)
    x32 = np.concatenate([np.linspace(-12, 12, 240001), np.linspace(0.6, 0.65, 5001),
                          -np.logspace(-40, 1, 2001), np.logspace(-40, 1, 2001)]).astype(np.float32)
    y = F.tanh(sg.tensor(x32)).data
    ref = np.tanh(x32.astype(np.float64))
    ulps = np.abs(y - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 1.5, (x32[ulps.argmax()], ulps.max())
    assert y.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanh_special_values_follow_torch(dtype):
    torch = pytest.importorskip("torch")
    v = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -40.0, 40.0, 9.5, -9.0, 1e-30, -1e-40], dtype)
    y = F.tanh(sg.tensor(v)).data
    ty = torch.tanh(torch.tensor(v)).numpy()
    # float32: equal (the saturated tail too); float64: libm's and torch's tanh differ by 1 ulp
    np.testing.assert_allclose(y, ty, rtol=3e-16, atol=0)  # NaN == NaN here
    np.testing.assert_array_equal(np.signbit(y), np.signbit(ty))  # tanh(-0) = -0


def test_gelu_keeps_a_channels_last_layout():
    """gelu of a channels-last view (a permutation of a contiguous array) works on it in place of a
    copy and returns the same layout; values and gradient are the bits of the contiguous input's."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((2, 5, 6, 24)) * 3).astype(np.float32).transpose(0, 3, 1, 2)
    g = rng.standard_normal(x.shape).astype(np.float32)
    out = []
    for arr in (x, np.ascontiguousarray(x)):
        xt = sg.tensor(arr, requires_grad=True)
        y = F.gelu(xt)
        y.backward(g)
        out.append((y.numpy(), xt.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)
    assert out[0][0].strides == x.strides and out[0][1].strides == x.strides
    from framework.functional._util import memory_order
    assert memory_order(x) == (0, 2, 3, 1) and memory_order(x[:, ::2]) is None
    assert memory_order(np.ones((2, 3))) is None  # contiguous: the plain flat view
    one = np.ones((1, 30, 8), np.float32).transpose(0, 2, 1).reshape(1, 8, 6, 5)  # batch stride 32 bytes
    assert memory_order(one) == (0, 2, 3, 1)  # an axis of one element goes first, whatever its stride
