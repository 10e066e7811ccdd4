"""Self-ensemble x8: the 8 transforms are the dihedral group, the ensemble is the mean of the 8
undone runs (checked against an independent rot90/flip enumeration), an equivariant model is left
unchanged, tiles still assemble seamlessly, and the mean comes before clipping."""
import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework import nn
from framework.engine import build_model, upscale
from framework.engine.inference.upscale import super_resolve
from framework.engine.inference.tta import dihedral, self_ensemble, undo_dihedral
from framework.nn import init


def fsrcnn64():
    init.manual_seed(0)
    model = build_model({"type": "FSRCNN", "d": 8, "s": 4, "m": 1}, scale=2)
    return model.to(np.float64).eval()


def rot_flip_group(x):
    """The 8 (transform, inverse) pairs as rotations and flip-then-rotations: another enumeration
    of the dihedral group than tta.py's bit-numbered flips and transposes."""
    pairs = []
    for k in range(4):
        pairs.append((lambda a, k=k: np.rot90(a, k, axes=(1, 2)),
                      lambda b, k=k: np.rot90(b, -k, axes=(1, 2))))
        pairs.append((lambda a, k=k: np.rot90(a[:, ::-1], k, axes=(1, 2)),
                      lambda b, k=k: np.rot90(b, -k, axes=(1, 2))[:, ::-1]))
    return pairs


def test_the_eight_transforms_are_the_dihedral_group_and_undo_inverts_them():
    x = np.arange(2 * 3 * 5, dtype=np.float64).reshape(2, 3, 5)  # non-square, every value distinct
    got = [dihedral(x, k) for k in range(8)]
    want = [t(x) for t, _ in rot_flip_group(x)]
    key = lambda a: (a.shape, a.tobytes())  # noqa: E731
    assert sorted(map(key, map(np.ascontiguousarray, got))) == \
        sorted(map(key, map(np.ascontiguousarray, want)))
    assert len({key(np.ascontiguousarray(a)) for a in got}) == 8
    assert [g.shape for g in got] == [(2, 3, 5)] * 4 + [(2, 5, 3)] * 4
    for k in range(8):
        np.testing.assert_array_equal(undo_dihedral(dihedral(x, k), k), x)
    # BasicSR's numbering: bit 0 a vertical flip, bit 1 a horizontal flip, bit 2 the transpose
    np.testing.assert_array_equal(got[1], x[:, ::-1])
    np.testing.assert_array_equal(got[2], x[:, :, ::-1])
    np.testing.assert_array_equal(got[5], x[:, ::-1].transpose(0, 2, 1))


def test_a_batch_is_transformed_image_by_image():
    """Tiles run as batches (N, C, H, W): each transform acts on the last two axes."""
    x = np.arange(2 * 2 * 3 * 5, dtype=np.float64).reshape(2, 2, 3, 5)
    for k in range(8):
        got = dihedral(x, k)
        np.testing.assert_array_equal(got, np.stack([dihedral(one, k) for one in x]))
        np.testing.assert_array_equal(undo_dihedral(got, k), x)


@pytest.mark.parametrize("hw", [(5, 7), (1, 4), (6, 6)])
def test_ensemble_is_the_mean_of_the_eight_undone_runs(hw):
    model = fsrcnn64()
    lq = np.random.default_rng(1).random((3,) + hw)
    outs = []
    for t, inv in rot_flip_group(lq):
        outs.append(inv(upscale(model, np.ascontiguousarray(t(lq)))))
    expected = np.mean(outs, axis=0)
    got = upscale(model, lq, self_ensemble=True)
    assert got.shape == (3, 2 * hw[0], 2 * hw[1]) and got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    # FSRCNN is not equivariant: the ensemble really changes the result
    assert np.abs(got - upscale(model, lq)).max() > 1e-4


class Equivariant(nn.Module):
    """Nearest x2, a 3x3 convolution whose kernels have the square's symmetry, a 1x1 channel mix:
    flipping or transposing the input flips or transposes the output the same way."""

    def __init__(self, rng):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv = nn.Conv2d(3, 4, 3, padding=1, dtype=np.float64)
        self.mix = nn.Conv2d(4, 3, 1, dtype=np.float64)
        a, b, c = rng.standard_normal((3, 4, 3, 1, 1))
        self.conv.weight.data = np.concatenate([np.concatenate([a, b, a], 3),
                                                np.concatenate([b, c, b], 3),
                                                np.concatenate([a, b, a], 3)], 2)
        self.conv.bias.data = rng.standard_normal(4)
        self.mix.weight.data = rng.standard_normal((3, 4, 1, 1))

    def forward(self, x):
        return self.mix(self.conv(self.up(x)))


def test_an_equivariant_model_is_unchanged_by_the_ensemble():
    rng = np.random.default_rng(2)
    model = Equivariant(rng).eval()
    lq = rng.random((3, 6, 9))
    plain = upscale(model, lq)
    np.testing.assert_allclose(upscale(model, lq, self_ensemble=True), plain, rtol=0, atol=1e-12)
    np.testing.assert_allclose(upscale(model, lq, tile=4, overlap=3, self_ensemble=True), plain,
                               rtol=0, atol=1e-12)


def test_tiled_ensemble_equals_untiled():
    model = fsrcnn64()
    lq = np.random.default_rng(3).random((3, 19, 23))
    whole = upscale(model, lq, self_ensemble=True)
    np.testing.assert_allclose(upscale(model, lq, tile=8, overlap=10, self_ensemble=True), whole,
                               rtol=0, atol=1e-10)
    assert np.abs(upscale(model, lq, tile=8, overlap=0, self_ensemble=True) - whole).max() > 1e-3


def test_the_mean_is_taken_before_clipping():
    model = fsrcnn64()
    lq = np.random.default_rng(4).random((3, 7, 5))
    raw = upscale(model, lq, self_ensemble=True)
    got = super_resolve(model, lq, 2, 3, self_ensemble=True)
    np.testing.assert_allclose(got, np.clip(raw, 0, 1), rtol=0, atol=1e-12)
    clipped_first = np.mean([undo_dihedral(np.clip(upscale(model, np.ascontiguousarray(
        dihedral(lq, k))), 0, 1), k) for k in range(8)], axis=0)
    assert np.abs(clipped_first - got).max() > 1e-3  # the order matters for this model


def test_float32_stays_float32_and_a_shape_breaking_model_is_an_error():
    fn = self_ensemble(lambda p: np.repeat(np.repeat(p, 2, 1), 2, 2))
    x = np.random.default_rng(5).random((1, 3, 4), dtype=np.float32)
    y = fn(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, np.repeat(np.repeat(x, 2, 1), 2, 2), rtol=2e-7)  # equivariant
    bad = self_ensemble(lambda p: np.zeros((1, 6, 8)))  # ignores the transposed patch's shape
    with pytest.raises(ValueError, match=r"self-ensemble: the model maps transform 4 of the patch "
                       r"\(1, 3, 4\) to \(1, 6, 8\), inconsistent with \(1, 6, 8\)"):
        bad(x)
