"""Paired crop and flips/transposition keep LR and HR aligned."""
import numpy as np
import pytest

from framework.data import apply_flags, augment, paired_random_crop, random_flags


def _block_mean(gt, s):
    c, h, w = gt.shape
    return gt.reshape(c, h // s, s, w // s, s).mean(axis=(2, 4))


@pytest.mark.parametrize("scale", [1, 2, 3])
def test_paired_crop_aligned(scale):
    rng = np.random.default_rng(0)
    gt = rng.random((2, 7 * scale, 5 * scale))
    lq = _block_mean(gt, scale)
    tops_lefts = set()
    for seed in range(20):
        lq_p, gt_p = paired_random_crop(lq, gt, 3 * scale, scale, np.random.default_rng(seed))
        assert lq_p.shape == (2, 3, 3) and gt_p.shape == (2, 3 * scale, 3 * scale)
        np.testing.assert_allclose(_block_mean(gt_p, scale), lq_p, atol=1e-15)
        # locate the patch in the LR image: its HR twin sits at scale x the offset
        (top,), (left,) = np.nonzero([[np.array_equal(lq[:, t:t + 3, l:l + 3], lq_p)
                                       for l in range(3)] for t in range(5)])
        np.testing.assert_array_equal(gt[:, top * scale:(top + 3) * scale,
                                         left * scale:(left + 3) * scale], gt_p)
        tops_lefts.add((top, left))
    assert len(tops_lefts) > 5  # the offsets really are random, corners included over seeds


def test_paired_crop_whole_image_and_errors():
    gt, lq = np.zeros((1, 8, 6)), np.zeros((1, 4, 3))
    lq_p, gt_p = paired_random_crop(lq, gt, 6, 2, np.random.default_rng(0))
    assert gt_p.shape == (1, 6, 6)
    with pytest.raises(ValueError, match=r"cat\.png: image is 6x8 .*smaller than the 10x10 crop"):
        paired_random_crop(lq, gt, 10, 2, np.random.default_rng(0), name="cat.png")
    with pytest.raises(ValueError, match="gt_size=5 must be a multiple of scale=2"):
        paired_random_crop(lq, gt, 5, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="not scale=2 x LR size"):
        paired_random_crop(lq, gt[:, :6], 4, 2, np.random.default_rng(0))


def test_eight_distinct_dihedral_transforms():
    img = np.arange(6.0).reshape(1, 2, 3)
    flags = [(h, v, t) for h in (0, 1) for v in (0, 1) for t in (0, 1)]
    outs = {apply_flags(img, f).tobytes() + bytes(apply_flags(img, f).shape) for f in flags}
    assert len(outs) == 8
    np.testing.assert_array_equal(apply_flags(img, (1, 0, 0))[0], [[2, 1, 0], [5, 4, 3]])
    np.testing.assert_array_equal(apply_flags(img, (0, 1, 0))[0], [[3, 4, 5], [0, 1, 2]])
    np.testing.assert_array_equal(apply_flags(img, (0, 0, 1))[0], [[0, 3], [1, 4], [2, 5]])
    # hflip then transpose = rotation by 90 degrees counter-clockwise
    np.testing.assert_array_equal(apply_flags(img, (1, 0, 1))[0], np.rot90(img[0]))


def test_augment_same_transform_for_lq_and_gt():
    rng = np.random.default_rng(3)
    gt = rng.random((3, 8, 12))
    lq = _block_mean(gt, 2)
    seen = set()
    for seed in range(16):
        lq_a, gt_a = augment([lq, gt], np.random.default_rng(seed))
        np.testing.assert_allclose(_block_mean(gt_a, 2), lq_a, atol=1e-15)
        seen.add(random_flags(np.random.default_rng(seed)))
    assert len(seen) > 4


def test_flags_options_and_generator_advance():
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert random_flags(a, use_flip=False, use_rot=False) == (False, False, False)
    random_flags(b)
    assert a.random() == b.random()  # same number of draws whatever the options
    draws = [random_flags(np.random.default_rng(s), use_flip=True, use_rot=False) for s in range(20)]
    assert {d[1:] for d in draws} == {(False, False)} and {d[0] for d in draws} == {False, True}
