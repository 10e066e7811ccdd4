"""The sinc kernel and the Bessel J1 (framework/data/degradations/sinc.py): J1 against Bessel's
integral and torch, the kernel against its formula, argument errors."""
import math

import numpy as np
import pytest

from framework.data import degradations as D


def _normalised(rows):
    a = np.array(rows, dtype=np.float64)
    return a / a.sum()


def _j1_integral(x):
    """Bessel's integral J1(x) = (1/pi) int_0^pi cos(t - x sin t) dt (midpoint rule: exponentially
    accurate for this periodic integrand)."""
    t = (np.arange(2000) + 0.5) * np.pi / 2000
    return np.array([np.cos(t - xi * np.sin(t)).mean() for xi in np.atleast_1d(x)])


def test_circular_lowpass_kernel_formula_and_padding():
    cut = math.pi / 2
    edge = cut * _j1_integral(cut)[0] / (2 * math.pi)
    corner = cut * _j1_integral(cut * math.sqrt(2))[0] / (2 * math.pi * math.sqrt(2))
    centre = cut ** 2 / (4 * math.pi)
    want = _normalised([[corner, edge, corner], [edge, centre, edge], [corner, edge, corner]])
    np.testing.assert_allclose(D.circular_lowpass_kernel(cut, 3), want, rtol=0, atol=1e-15)
    padded = D.circular_lowpass_kernel(math.pi / 3, 7, pad_to=21)
    assert padded.shape == (21, 21) and abs(padded.sum() - 1) < 1e-15
    np.testing.assert_array_equal(padded[7:14, 7:14], D.circular_lowpass_kernel(math.pi / 3, 7))
    assert padded[:7].sum() == 0 and padded[:, 14:].sum() == 0
    assert D.circular_lowpass_kernel(1.0, 5, pad_to=False).shape == (5, 5)  # BasicSR's call


def test_bessel_j1_hand_values_symmetry_and_zero():
    table = {1.0: 0.44005058574493351596, 2.0: 0.57672480775687338720,
             5.0: -0.32757913759146522204, 10.0: 0.04347274616886143667}
    for x, want in table.items():
        assert abs(D.bessel_j1(x) - want) < 2e-16, x
    assert abs(D.bessel_j1(3.8317059702075123156)) < 1e-15  # its first zero
    x = np.linspace(0, 40, 101)
    np.testing.assert_array_equal(D.bessel_j1(-x), -D.bessel_j1(x))
    assert D.bessel_j1(0.0) == 0.0 and abs(D.bessel_j1(1e-9) - 5e-10) < 1e-25


def test_bessel_j1_matches_bessels_integral_over_every_branch():
    x = np.concatenate([np.linspace(0, 60, 601), [0.999, 1.0, 1.001, 24.99, 25.0, 25.01]])
    np.testing.assert_allclose(D.bessel_j1(x), _j1_integral(x), rtol=0, atol=1e-15)


def test_bessel_j1_against_torch():
    torch = pytest.importorskip("torch")
    x = np.linspace(-50, 50, 4001)
    ref = torch.special.bessel_j1(torch.from_numpy(x)).numpy()
    # torch 2.13's CPU bessel_j1 is itself only good to ~5e-7 near x = 5 (measured against the
    # integral above, which ours matches to 1e-15)
    np.testing.assert_allclose(D.bessel_j1(x), ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize("call, match", [
    (lambda: D.circular_lowpass_kernel(1.0, 6), "kernel_size must be odd"),
    (lambda: D.circular_lowpass_kernel(1.0, 5, pad_to=20), "pad_to must be odd"),
    (lambda: D.circular_lowpass_kernel(0.0, 5), "cutoff must be > 0"),
])
def test_bad_arguments_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
