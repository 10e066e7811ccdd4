"""Parity with the PyTorch twins of tests/twins/: same parameter names, shapes and counts
(default configurations), and in float64 the same outputs, input gradients and parameter gradients
once our state_dict is loaded into the twin. Skipped without torch."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg

from .cases import SCALES, build, expected_parameters, lr_batch

torch = pytest.importorskip("torch")
twins = pytest.importorskip("tests.twins")

NAMES = sorted(SCALES)
GRID = [(n, s, c) for n in NAMES for s in SCALES[n] for c in (1, 3)]


@pytest.mark.parametrize("name,scale,channels", GRID)
def test_twin_has_the_same_parameters(name, scale, channels):
    model, spec = build(name, scale, channels)
    twin = twins.build_twin(spec)
    theirs = {k: tuple(v.shape) for k, v in twin.state_dict().items()}
    assert {k: v.shape for k, v in model.state_dict().items()} == theirs
    assert twins.num_parameters(twin) == expected_parameters(name, channels, scale)


def _compare(model, spec, x_np, params=True):
    """Forward, input gradient and parameter gradients of sum(y * w), ours vs the twin, float64."""
    model.double()
    twin = twins.twin_of(model, spec)
    x = sg.tensor(x_np, requires_grad=True)
    y = model(x)
    w = np.random.default_rng(3).standard_normal(y.shape)
    (y * sg.tensor(w)).sum().backward()
    tx = torch.from_numpy(x_np.copy()).requires_grad_(True)
    ty = twin(tx)
    (ty * torch.from_numpy(w)).sum().backward()

    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=0, atol=1e-8)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=0, atol=1e-8)
    if params:
        theirs = dict(twin.named_parameters())
        for k, p in model.named_parameters():
            scale = max(1.0, np.abs(theirs[k].grad.numpy()).max())  # sums over many pixels
            np.testing.assert_allclose(p.grad.data, theirs[k].grad.numpy(), rtol=0,
                                       atol=1e-8 * scale, err_msg=k)


@pytest.mark.parametrize("name,scale,channels", GRID)
def test_forward_and_gradients_match_the_twin(name, scale, channels):
    model, spec = build(name, scale, channels, small=True)
    x = np.random.default_rng(0).uniform(0, 1, (2, channels, 5, 4))
    _compare(model, spec, x)


@pytest.mark.parametrize("mode", ["bicubic", "bilinear", "nearest", "nearest-exact", "area"])
@pytest.mark.parametrize("scale", [2, 3])
def test_upsample_net_matches_the_twin_in_every_torch_mode(mode, scale):
    model, spec = build("UpsampleNet", scale, 3, mode=mode)
    x = np.random.default_rng(1).uniform(0, 1, (1, 3, 7, 1))  # one-pixel-wide: edge handling
    _compare(model, spec, x)


def test_edsr_default_size_matches_the_twin():
    model, spec = build("EDSR", 2, 3)
    _compare(model, spec, np.random.default_rng(2).uniform(0, 1, (1, 3, 4, 4)), params=False)


def test_float32_forward_is_close_to_the_twin():
    model, spec = build("UpsampleNet", 2, 3)
    twin = twins.twin_of(model, spec, dtype=torch.float32)
    x = lr_batch(3)
    with torch.no_grad():
        want = twin(torch.from_numpy(x.data)).numpy()
    np.testing.assert_allclose(model(x).data, want, rtol=0, atol=1e-5)
