"""rows.py, the row building blocks: the float32 exp against the exact value (2 ulp, 0 below -87,
NaN kept), the float64 one against libm's (1 ulp), softmax_rows picking the float32 one, and the
row reductions against exact sums (math.fsum) at lengths around their four-accumulator unrolling."""
import math

import numba
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.functional import rows


@numba.njit(cache=True)
def _exp_each(t, out):
    for i in range(t.size):
        out[i] = rows.vexp(t[i])  # the overload: exp32 for float32, math.exp for float64


def _exact_exp(t):
    """exp in x87 extended precision (64-bit mantissa): exact to far below a float64 ulp. Where long
    double is only double, libm's exp (math.exp, < 1 ulp). Never numpy's float64 exp: numpy picks
    an AVX-512 exp on such CPUs, 1 ulp off libm's (docs/numerics.md)."""
    if np.finfo(np.longdouble).nmant > 52:
        return np.exp(t.astype(np.longdouble))
    return np.array([math.exp(v) for v in t.tolist()], np.longdouble)


def test_float32_exp_accuracy():
    """The compiled float32 exp against the exact value: within 2 ulp where float32 is normal,
    exactly 0 below -87, NaN kept; float64 takes libm's exp (math.exp): within 1 ulp."""
    t = np.concatenate([-np.linspace(0, 87, 200001), [-1e-30, -87.5, -1e4, -np.inf, np.nan]])
    got = np.empty(t.size, np.float32)
    _exp_each(t.astype(np.float32), got)
    ref = _exact_exp(t.astype(np.float32).astype(np.float64))
    normal = t >= -87
    ulp = np.spacing(ref[normal].astype(np.float32)).astype(np.longdouble)
    assert np.max(np.abs(got[normal] - ref[normal]) / ulp) <= 2
    assert np.all(got[t < -87] == 0) and np.isnan(got[-1])
    got64 = np.empty(t.size)
    _exp_each(t, got64)
    finite = np.isfinite(t)
    ref64 = _exact_exp(t[finite])
    ulp64 = np.spacing(ref64.astype(np.float64)).astype(np.longdouble)
    assert np.max(np.abs(got64[finite] - ref64) / ulp64) <= 1
    assert got64[t == -np.inf][0] == 0 and np.isnan(got64[-1])


def test_float32_softmax_rows_use_the_fast_exp():
    """Inside the row kernel the overload picks exp32 for float32: its values, to rounding."""
    a = (np.random.default_rng(1234).standard_normal((4, 9)) * 3).astype(np.float32)
    y = F.softmax(sg.tensor(a), -1).data
    e = np.empty(a.size, np.float32)
    _exp_each((a - a.max(axis=1, keepdims=True)).ravel(), e)
    e = e.reshape(a.shape).astype(np.float64)
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=2e-7)


@numba.njit(cache=True)
def _reductions(a, b, w, mu):
    out = np.empty((a.shape[0], 7))
    for r in range(a.shape[0]):
        out[r, 0] = rows.row_dot(a, b, r, True)
        out[r, 1] = rows.row_dot(a, b, r, False)
        out[r, 2] = rows.row_max(a, r)
        out[r, 3], out[r, 4] = rows.row_moments(a, r, mu)
        out[r, 5], out[r, 6] = rows.row_grad_sums(b, a, w, r, mu)
    return out


@pytest.mark.parametrize("d", [1, 3, 4, 5, 8, 11])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_reductions_against_exact_sums(d, dtype):
    rng = np.random.default_rng(d)
    a, b = (rng.standard_normal((3, d)).astype(dtype) for _ in range(2))
    w = rng.standard_normal(d).astype(dtype)
    mu = 0.25
    got = _reductions(a, b, w, mu)
    eps = np.finfo(dtype).eps  # float32 rows multiply in float32, then add in float64
    for r in range(3):
        x, g = a[r].astype(np.float64), b[r].astype(np.float64)
        terms = [x * g, x, None, x - mu, (x - mu) ** 2, g * w, g * w * (x - mu)]
        for k, t in enumerate(terms):
            if t is None:
                assert got[r, k] == x.max()  # a maximum is exact
                continue
            bound = 2 * d * eps * math.fsum(np.abs(t)) + 1e-300
            assert abs(got[r, k] - math.fsum(t)) <= bound, (k, got[r, k], math.fsum(t))
