"""imresize with a numeric kernel (ZSSR's rule): kernel_shift's centre of mass and sum, the strided
correlation against a float64 loop over the definition, hand-worked box kernels, gradcheck, and
the refusals."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.data.degradations import bivariate_Gaussian
from framework.functional.imresize import kernel_shift
from tests.conftest import t64

ANISO = bivariate_Gaussian(13, 2.5, 1.0, 0.6, isotropic=False)


def _com(k):
    return [float((k.sum(axis=1 - a) * np.arange(k.shape[a])).sum() / k.sum()) for a in (0, 1)]


@pytest.mark.parametrize("s", [1, 2, 3, 4])
@pytest.mark.parametrize("kernel", [ANISO, np.ones((2, 3)), np.arange(1.0, 26.0).reshape(5, 5)])
def test_kernel_shift_moves_the_centre_of_mass_and_keeps_the_sum(s, kernel):
    k = kernel_shift(kernel, s)
    assert k.shape[0] == k.shape[1] and k.shape[0] % 2 == 1
    np.testing.assert_allclose(_com(k), [k.shape[0] // 2 + (s - 1) / 2] * 2, atol=1e-12)
    assert abs(k.sum() - kernel.sum()) < 1e-12 * kernel.sum()


def test_kernel_shift_by_whole_pixels_is_exact():
    delta = np.zeros((3, 3))
    delta[1, 1] = 1.0
    k = kernel_shift(delta, 3)  # centre of mass one pixel past the centre: a moved delta
    c = k.shape[0] // 2
    want = np.zeros_like(k)
    want[c + 1, c + 1] = 1.0
    np.testing.assert_array_equal(k, want)


def _mirror(i, n):
    period = list(range(n)) + list(range(n - 1, -1, -1))
    return period[i % (2 * n)]


def _reference(x, kernel, s):
    """The definition, one output value at a time in float64."""
    k = kernel_shift(kernel, s)
    c = k.shape[0] // 2
    h, w = x.shape[-2:]
    ho, wo = -(-h // s), -(-w // s)
    out = np.zeros(x.shape[:-2] + (ho, wo))
    for i in range(ho):
        for j in range(wo):
            for u in range(k.shape[0]):
                for v in range(k.shape[1]):
                    out[..., i, j] += k[u, v] * x[..., _mirror(s * i + u - c, h),
                                                  _mirror(s * j + v - c, w)]
    return out


@pytest.mark.parametrize("s,hw", [(2, (8, 10)), (2, (7, 5)), (3, (9, 11)), (4, (6, 4))])
def test_against_the_definition(s, hw, rng):
    x = rng.random((2, *hw))
    y = F.imresize(x, 1 / s, kernel=ANISO).data
    np.testing.assert_allclose(y, _reference(x, ANISO, s), rtol=0, atol=1e-13)


def test_box_kernels_are_block_means(rng):
    x = rng.random((1, 3, 8, 12)).astype(np.float32)
    y = F.imresize(x, 0.5, kernel=np.ones((2, 2))).data  # used as given: sum 4, 4 x the mean
    np.testing.assert_allclose(y, 4 * x.reshape(1, 3, 4, 2, 6, 2).mean(axis=(3, 5)), rtol=1e-6)
    y = F.imresize(x, (0.25, 0.25), kernel=np.full((4, 4), 1 / 16)).data
    np.testing.assert_allclose(y, x.reshape(1, 3, 2, 4, 3, 4).mean(axis=(3, 5)), rtol=1e-6)
    assert y.dtype == np.float32


def test_constant_image_stays_constant():
    y = F.imresize(np.full((3, 9, 7), 0.25), 0.5, kernel=ANISO).data
    np.testing.assert_allclose(y, 0.25, rtol=1e-14)
    assert y.shape == (3, 5, 4)


@pytest.mark.parametrize("s,hw", [(2, (6, 5)), (3, (4, 7))])
def test_gradcheck(s, hw, rng):
    x = t64(rng, 1, 2, *hw)
    assert sg.gradcheck(lambda t: F.imresize(t, 1 / s, kernel=ANISO[3:-3, 2:-2]), (x,))


@pytest.mark.parametrize("kwargs,match", [
    (dict(scale_factor=0.4), "integer factor"),
    (dict(scale_factor=2), "integer factor"),
    (dict(scale_factor=(0.5, 0.25)), "integer factor"),
    (dict(size=(2, 2)), "not size"),
    (dict(scale_factor=0.5, kernel=np.ones(3)), "2-D"),
    (dict(scale_factor=0.5, kernel=np.full((3, 3), np.nan)), "finite"),
    (dict(scale_factor=0.5, kernel=-np.ones((3, 3))), "positive sum"),
])
def test_refusals(kwargs, match):
    kwargs = {"kernel": ANISO, **kwargs}
    with pytest.raises(ValueError, match=match):
        F.imresize(np.zeros((1, 1, 8, 8)), **kwargs)
