"""nn.init: distributions checked against their theoretical bounds and std, fans and gains as torch,
in-place on .data with dtype kept, reproducible from manual_seed / rng."""
import math

import numpy as np
import pytest

import framework as sg
from framework import nn
from framework.nn import init


def _w(*shape, dtype=np.float32):
    return nn.Parameter(np.zeros(shape, dtype))


def test_fans_match_torch():
    torch = pytest.importorskip("torch")
    from torch.nn.init import _calculate_fan_in_and_fan_out as torch_fans
    for shape in [(64, 3, 3, 3), (3, 56, 9, 9), (10, 20), (4, 2, 1, 5)]:
        assert init._calculate_fan_in_and_fan_out(_w(*shape)) == torch_fans(torch.empty(shape))
    with pytest.raises(ValueError, match=r"fewer than 2 dimensions \(shape \(5,\)\)"):
        init._calculate_fan_in_and_fan_out(_w(5))


@pytest.mark.parametrize("name,param", [("linear", None), ("conv2d", None), ("sigmoid", None),
                                        ("tanh", None), ("relu", None), ("leaky_relu", None),
                                        ("leaky_relu", 0.2), ("leaky_relu", math.sqrt(5)), ("selu", None)])
def test_gain_matches_torch(name, param):
    torch = pytest.importorskip("torch")
    assert init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param),
                                                             rel=1e-15)


def test_gain_errors():
    with pytest.raises(ValueError, match="unsupported nonlinearity 'swish'"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="negative_slope 'a' is not a valid number"):
        init.calculate_gain("leaky_relu", "a")


SHAPE = (128, 64, 3, 3)  # fan_in 576, fan_out 1152; 73728 samples


def _check_uniform(w, bound):
    assert np.abs(w.data).max() <= bound
    assert np.abs(w.data).max() > 0.99 * bound  # the whole interval is used
    assert w.data.std() == pytest.approx(bound / math.sqrt(3), rel=0.1)
    assert abs(w.data.mean()) < 0.05 * bound


def _check_normal(w, std):
    assert w.data.std() == pytest.approx(std, rel=0.1)
    assert abs(w.data.mean()) < 0.05 * std


@pytest.mark.parametrize("mode,fan", [("fan_in", 576), ("fan_out", 1152)])
def test_kaiming(mode, fan):
    _check_uniform(init.kaiming_uniform_(_w(*SHAPE), a=math.sqrt(5), mode=mode),
                   math.sqrt(3) * math.sqrt(2 / 6) / math.sqrt(fan))  # = 1/sqrt(fan) for a = sqrt(5)
    _check_uniform(init.kaiming_uniform_(_w(*SHAPE), mode=mode, nonlinearity="relu"),
                   math.sqrt(6 / fan))
    _check_normal(init.kaiming_normal_(_w(*SHAPE), mode=mode, nonlinearity="relu"), math.sqrt(2 / fan))


def test_xavier():
    _check_uniform(init.xavier_uniform_(_w(*SHAPE), gain=2.0), 2.0 * math.sqrt(6 / (576 + 1152)))
    _check_normal(init.xavier_normal_(_w(*SHAPE)), math.sqrt(2 / (576 + 1152)))


def test_uniform_normal_constant():
    w = init.uniform_(_w(100000), -3.0, 5.0)
    assert w.data.min() >= -3 and w.data.max() <= 5 and w.data.mean() == pytest.approx(1.0, abs=0.05)
    _check_normal(init.normal_(_w(100000), 0.0, 0.02), 0.02)
    assert np.all(init.constant_(_w(3, 3), 0.5).data == 0.5)
    assert np.all(init.ones_(_w(2, 2)).data == 1) and np.all(init.zeros_(nn.Parameter(np.ones(3))).data == 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_in_place_and_dtype_kept(dtype):
    w = _w(8, 4, 3, 3, dtype=dtype)
    arr = w.data
    out = init.kaiming_normal_(w)
    assert out is w and w.data is arr and w.data.dtype == dtype and np.any(arr != 0)


def test_reproducible_from_seed_and_rng():
    init.manual_seed(7)
    a = init.kaiming_uniform_(_w(4, 3, 3, 3)).data.copy()
    init.manual_seed(7)
    b = init.kaiming_uniform_(_w(4, 3, 3, 3)).data.copy()
    np.testing.assert_array_equal(a, b)
    c = init.normal_(_w(5), rng=np.random.default_rng(3)).data
    d = init.normal_(_w(5), rng=np.random.default_rng(3)).data
    np.testing.assert_array_equal(c, d)
    init.manual_seed(7)
    m1 = nn.Conv2d(3, 4, 3)
    init.manual_seed(7)
    m2 = nn.Conv2d(3, 4, 3)
    np.testing.assert_array_equal(m1.weight.data, m2.weight.data)
    np.testing.assert_array_equal(m1.bias.data, m2.bias.data)


def test_zero_element_is_a_no_op():
    w = _w(0, 3, 3, 3)
    assert init.kaiming_uniform_(w) is w


def test_bad_mode_and_type():
    with pytest.raises(ValueError, match="mode must be 'fan_in' or 'fan_out', got 'fan_avg'"):
        init.kaiming_normal_(_w(3, 3), mode="fan_avg")
    with pytest.raises(TypeError, match="expected a Tensor or Parameter, got ndarray"):
        init.zeros_(np.zeros(3))
    assert isinstance(init.ones_(sg.tensor(np.zeros(2))), sg.Tensor)


# -- trunc_normal_ -----------------------------------------------------------------------------------
def test_normal_quantile_matches_the_exact_one():
    from statistics import NormalDist
    from framework.nn.init import _normal_quantile
    p = np.array([1e-300, 1e-12, 1e-4, 0.02, 0.02425, 0.1, 0.5, 0.77, 0.97575, 0.999, 1 - 1e-12])
    want = np.array([NormalDist().inv_cdf(v) for v in p])
    np.testing.assert_allclose(_normal_quantile(p), want, rtol=2e-9, atol=1e-12)


def _truncated_moments(mean, std, a, b):
    """Mean and std of N(mean, std^2) truncated to [a, b] (the textbook formulas)."""
    pdf = (lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi))
    cdf = (lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2))))
    al, be = (a - mean) / std, (b - mean) / std
    z = cdf(be) - cdf(al)
    m = mean + std * (pdf(al) - pdf(be)) / z
    var = std ** 2 * (1 + (al * pdf(al) - be * pdf(be)) / z - ((pdf(al) - pdf(be)) / z) ** 2)
    return m, math.sqrt(var)


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (1.0, 2.0, 0.0, 3.0),
                                          (0.0, 1.0, 1.5, 4.0), (0.0, 0.02, -2.0, 2.0)])
def test_trunc_normal_moments_and_bounds(mean, std, a, b):
    w = init.trunc_normal_(_w(200_000, dtype=np.float64), mean, std, a, b, rng=np.random.default_rng(0))
    m, s = _truncated_moments(mean, std, a, b)
    assert w.data.min() >= a and w.data.max() <= b
    assert w.data.mean() == pytest.approx(m, abs=5 * s / math.sqrt(w.data.size))
    assert w.data.std() == pytest.approx(s, rel=0.01)
    if (a - mean) / std < -3:  # [a, b] holds the lower tail: the sample reaches within 0.5 std of a
        assert w.data.min() < -3 * std + mean


def test_trunc_normal_distribution_matches_torch():
    """The same distribution as torch's trunc_normal_: deciles of two 100k samples agree to within
    sampling error (std 1, truncated to [-0.5, 2])."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = torch.nn.init.trunc_normal_(torch.empty(100_000, dtype=torch.float64), 0.0, 1.0, -0.5, 2.0)
    ours = init.trunc_normal_(_w(100_000, dtype=np.float64), 0.0, 1.0, -0.5, 2.0,
                              rng=np.random.default_rng(1)).data
    q = np.linspace(0.1, 0.9, 9)
    np.testing.assert_allclose(np.quantile(ours, q), np.quantile(theirs.numpy(), q), atol=0.02)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_trunc_normal_in_place_dtype_and_reproducible(dtype):
    w = _w(4, 5, dtype=dtype)
    arr = w.data
    assert init.trunc_normal_(w, std=0.02) is w and w.data is arr and arr.dtype == dtype
    assert np.all(arr != 0)
    init.manual_seed(3)
    x = init.trunc_normal_(_w(6)).data.copy()
    init.manual_seed(3)
    np.testing.assert_array_equal(init.trunc_normal_(_w(6)).data, x)


@pytest.mark.parametrize("kw,match", [
    ({"std": 0.0}, r"trunc_normal_: std must be > 0"),
    ({"a": 1.0, "b": 1.0}, r"trunc_normal_: the interval \[a, b\] must have a < b"),
    ({"a": 40.0, "b": 50.0}, r"holds no probability"),
    ({"mean": float("nan")}, r"trunc_normal_: mean must be a finite number"),
    ({"b": "2"}, r"trunc_normal_: b must be a finite number")])
def test_trunc_normal_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        init.trunc_normal_(_w(3), **kw)
