"""KernelGAN's networks: the generator's one-kernel forward equals the official layer-by-layer
forward (torch twin) in values and every gradient, its kernel is calc_curr_k's and reproduces the
generator as a strided correlation; the discriminator matches its twin (spectral norm, batch norm,
sigmoid); keys, counts, init and refusals."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.registry import MODELS

from . import basicsr_checks as checks
from .test_discriminators import compare, one_torch_thread

G = {"type": "KernelGANGenerator"}
D = {"type": "KernelGANDiscriminator"}


def test_keys_and_counts():
    checks.check_keys({**G, "G_chan": 8})
    checks.check_keys({**D, "D_chan": 8})
    g = checks.build(G)
    assert list(g.state_dict()) == ["first_layer.weight"] + [
        f"feature_block.{i}.weight" for i in range(4)] + ["final_layer.weight"]
    assert g.num_parameters() == 64 * 49 + 64 * 64 * (25 + 9 + 1 + 1) + 64  # no biases
    d = checks.build(D)
    assert d.num_parameters() == (3 * 64 * 49 + 64) + 5 * (64 * 64 + 64 + 2 * 64) + (64 + 1)
    assert "feature_block.1.running_mean" in d.state_dict()
    assert "final_layer.0.weight_orig" in d.state_dict()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_generator_matches_the_layer_by_layer_twin(dtype):
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    spec = {**G, "G_chan": 8}
    model = checks.build(spec).to(dtype)
    twin = twins.twin_of(model, spec, dtype={np.float64: torch.float64,
                                             np.float32: torch.float32}[dtype])
    rng = np.random.default_rng(0)
    x_np = rng.uniform(-1, 1, (1, 3, 30, 28)).astype(dtype)  # KernelGAN runs batches of 1
    x = sg.tensor(x_np, requires_grad=True)
    y = model(x)
    w = rng.standard_normal(y.shape).astype(dtype)
    (y * sg.tensor(w)).sum().backward()
    tx = torch.from_numpy(x_np.copy()).requires_grad_(True)
    with one_torch_thread(torch):
        ty = twin(tx)
        (ty * torch.from_numpy(w)).sum().backward()
    tol = {np.float64: 1e-12, np.float32: 1e-5}[dtype]
    assert y.shape == tuple(ty.shape) == (1, 3, 9, 8)
    ref = ty.detach().numpy()
    assert np.abs(y.data - ref).max() <= tol * np.abs(ref).max()
    assert np.abs(x.grad.data - tx.grad.numpy()).max() <= tol * np.abs(tx.grad.numpy()).max()
    for name, p in twin.named_parameters():
        ours = dict(model.named_parameters())[name].grad.data
        assert np.abs(ours - p.grad.numpy()).max() <= tol * np.abs(p.grad.numpy()).max(), name


def test_kernel_is_calc_curr_k_and_the_generator_is_one_correlation():
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    model = checks.build({**G, "G_chan": 8}).to(np.float64)
    twin = twins.twin_of(model, {**G, "G_chan": 8})
    k = model.kernel().data
    assert k.shape == (13, 13)
    # KernelGAN's calc_curr_k: a delta through the weights (padding k - 1 first), flipped
    delta = torch.ones(1, 1, 1, 1, dtype=torch.float64)
    cur = None
    for i, w in enumerate(twin.parameters()):
        cur = torch.nn.functional.conv2d(delta, w, padding=12) if i == 0 else \
            torch.nn.functional.conv2d(cur, w)
    np.testing.assert_allclose(k, cur.squeeze().flip([0, 1]).detach().numpy(), rtol=0,
                               atol=1e-14 * np.abs(k).max())
    x = np.random.default_rng(1).uniform(0, 1, (1, 1, 27, 27))
    got = model(sg.tensor(x)).data[0, 0]
    want = np.array([[np.sum(k * x[0, 0, 2 * i:2 * i + 13, 2 * j:2 * j + 13]) for j in range(8)]
                     for i in range(8)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_discriminator_matches_the_twin(dtype):
    x = np.random.default_rng(2).uniform(-1, 1, (1, 3, 26, 26)).astype(dtype)
    model, _ = compare({**D, "D_chan": 8}, x, steps=2)
    y = model(sg.tensor(x)).data
    assert y.shape == (1, 1, 20, 20) and 0 < y.min() and y.max() < 1


def test_init_as_kernelgan():
    g = MODELS.build(G)
    w = g.feature_block[0].weight.data  # xavier normal, gain 0.1: std 0.1 sqrt(2 / (fan_in + out))
    want = 0.1 * np.sqrt(2 / (64 * 25 + 64 * 25))
    assert abs(w.std() / want - 1) < 0.05
    d = MODELS.build(D)
    assert np.all(d.first_layer.bias.data == 0)
    bn = d.feature_block[1].weight.data
    assert abs(bn.mean() - 1) < 0.01 and 0.01 < bn.std() < 0.03


@pytest.mark.parametrize("kwargs,match", [
    (dict(G_structure=[7]), "at least two"), (dict(scale_factor=0.4), "1/s"),
    (dict(G_chan=0), "G_chan")])
def test_refusals(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build({**G, **kwargs})
