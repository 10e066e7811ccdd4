"""ZSSRDataset (framework/data/zssr.py): the pyramid's sizes, levels drawn by area, sons made with
the image's kernel, draws pure in the generator, a gradual stage's source, refusals."""
import numpy as np
import pytest

import framework.functional as F
from framework.data import degradations as D
from framework.data.zssr import ZSSRDataset, downscale


def _img(h=60, w=80, seed=0):
    return np.random.default_rng(seed).random((3, h, w)).astype(np.float32)


def test_pyramid_sizes_and_probabilities_by_area():
    ds = ZSSRDataset(2, image=_img(), crop_size=128)
    sizes = [p.shape[1:] for p in ds.pyramid]
    ratios = np.linspace(1.0, 0.5, 6)
    assert sizes == [(round(60 * r), round(80 * r)) for r in ratios]
    areas = np.array([h * w for h, w in sizes], np.float64)
    np.testing.assert_allclose(ds.probabilities, areas / areas.sum(), rtol=1e-15)
    assert ds.crop == 30  # the smallest level's side, a multiple of the scale


def test_pairs_are_pure_in_the_generator_and_sons_use_the_kernel():
    k = D.bivariate_Gaussian(13, 2.0, 0.8, 0.6, isotropic=False)
    ds = ZSSRDataset(2, image=_img(), kernel=k, crop_size=16)
    a = ds.get(0, np.random.default_rng([4, 9]))
    b = ds.get(0, np.random.default_rng([4, 9]))
    np.testing.assert_array_equal(a["gt"], b["gt"])
    np.testing.assert_array_equal(a["lq"], b["lq"])
    assert a["gt"].shape == (3, 16, 16) and a["lq"].shape == (3, 8, 8)
    np.testing.assert_allclose(a["lq"], F.imresize(a["gt"], 0.5, kernel=k).data, atol=1e-6)
    c = ds.get(0, np.random.default_rng([4, 10]))
    assert not np.array_equal(a["gt"], c["gt"])
    bic = ZSSRDataset(2, image=_img(), crop_size=16).son(a["gt"])
    np.testing.assert_allclose(bic, downscale(a["gt"], 2), atol=0)
    assert np.abs(bic - a["lq"]).max() > 0.01  # another kernel, another son


def test_a_gradual_stage_adds_its_output_as_a_source():
    ds = ZSSRDataset(2, image=_img(40, 40), crop_size=16)
    n = len(ds.pyramid)
    ds.add_source(_img(80, 80, 1), 2.0)
    # the new levels span 80 px down to the first source's 40 px
    assert [p.shape[1] for p in ds.pyramid[n:]] == [round(80 * r) for r in np.linspace(1, 0.5, 6)]
    assert ds.probabilities.sum() == pytest.approx(1.0) and ds.probabilities[n] > \
        ds.probabilities[0]


def test_refusals():
    with pytest.raises(ValueError, match="exactly one of path"):
        ZSSRDataset(2)
    with pytest.raises(ValueError, match="kernel must be"):
        ZSSRDataset(2, image=_img(), kernel="gaussian")
    with pytest.raises(ValueError, match="too small"):
        ZSSRDataset(4, image=_img(4, 4))
