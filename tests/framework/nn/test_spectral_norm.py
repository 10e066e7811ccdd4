"""spectral_norm: torch's keys and their order, u/v drawn from framework.random, parity with
torch.nn.utils.spectral_norm over several training forwards (the buffers evolve the same), eval mode,
the gradient of weight_orig (also after two forwards before one backward, GAN style), gradcheck,
remove_spectral_norm, errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework import nn
from framework.random import fork_rng

TOL = {np.float64: 1e-12, np.float32: 2e-6}

# (constructor, torch constructor, input shape): dim 0 for all but ConvTranspose2d (dim 1)
LAYERS = {
    "conv": (lambda: nn.Conv2d(3, 5, 3, padding=1), lambda t: t.nn.Conv2d(3, 5, 3, padding=1), (2, 3, 5, 4)),
    "conv_nobias": (lambda: nn.Conv2d(2, 4, 4, stride=2, padding=1, bias=False),
                    lambda t: t.nn.Conv2d(2, 4, 4, 2, 1, bias=False), (1, 2, 6, 6)),
    "linear": (lambda: nn.Linear(7, 3), lambda t: t.nn.Linear(7, 3), (4, 7)),
    "convT": (lambda: nn.ConvTranspose2d(4, 3, 3, stride=2), lambda t: t.nn.ConvTranspose2d(4, 3, 3, 2),
              (1, 4, 3, 2)),
    "one_output": (lambda: nn.Conv2d(3, 1, 1), lambda t: t.nn.Conv2d(3, 1, 1), (1, 3, 2, 3)),
}


def pair(kind, dtype=np.float64, **kw):
    """Our layer under spectral_norm and torch's, with the same weights and the same u, v."""
    torch = pytest.importorskip("torch")
    ours_fn, theirs_fn, shape = LAYERS[kind]
    with fork_rng(7):
        ours = nn.utils.spectral_norm(ours_fn(), **kw).to(dtype)
    theirs = torch.nn.utils.spectral_norm(theirs_fn(torch), **kw).to(
        torch.float64 if dtype == np.float64 else torch.float32)
    theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in ours.state_dict().items()})
    return ours, theirs, shape


def close(ours, theirs, dtype, what):
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    assert ours.dtype == theirs.dtype == dtype, what
    scale = max(np.abs(theirs).max(), 1e-30)
    err = np.abs(ours - theirs).max()
    assert err <= TOL[dtype] * scale, f"{what}: {err:.3g} > {TOL[dtype] * scale:.3g}"


@pytest.mark.parametrize("kind,keys", [
    ("conv", ["bias", "weight_orig", "weight_u", "weight_v"]),
    ("conv_nobias", ["weight_orig", "weight_u", "weight_v"]),
    ("convT", ["bias", "weight_orig", "weight_u", "weight_v"]),
])
def test_keys_order_and_shapes_are_torchs(kind, keys):
    torch = pytest.importorskip("torch")
    ours = nn.utils.spectral_norm(LAYERS[kind][0]())
    theirs = torch.nn.utils.spectral_norm(LAYERS[kind][1](torch))
    assert list(ours.state_dict()) == keys
    assert [(k, v.shape) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == ["weight_u", "weight_v"]
    assert not isinstance(ours.weight, nn.Parameter)


def test_u_and_v_come_from_framework_random():
    with fork_rng(3):
        m = nn.utils.spectral_norm(nn.Conv2d(2, 4, 3, dtype=np.float64))
    with fork_rng(3):
        nn.Conv2d(2, 4, 3, dtype=np.float64)  # the layer's init draws first
        gen = sg.random.default_generator()
        u, v = gen.standard_normal(4), gen.standard_normal(18)
    np.testing.assert_allclose(m.weight_u.data, u / np.linalg.norm(u), rtol=1e-15)
    np.testing.assert_allclose(m.weight_v.data, v / np.linalg.norm(v), rtol=1e-15)
    assert m.weight_u.dtype == m.weight_v.dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_training_forwards_match_torch(kind, dtype):
    """Three training forwards: each output and the u, v buffers after it equal torch's; then one
    backward of the sum of all three gives torch's gradient of weight_orig (each graph kept its own
    u, v although the buffers moved on)."""
    torch = pytest.importorskip("torch")
    ours, theirs, shape = pair(kind, dtype)
    rng = np.random.default_rng(0)
    total, ttotal = None, None
    for step in range(3):
        x = rng.standard_normal(shape).astype(dtype)
        y, ty = ours(sg.tensor(x)), theirs(torch.from_numpy(x))
        close(y.data, ty, dtype, f"output {step}")
        close(ours.weight_u.data, theirs.weight_u, dtype, f"u {step}")
        close(ours.weight_v.data, theirs.weight_v, dtype, f"v {step}")
        g = rng.standard_normal(y.shape).astype(dtype)
        term, tterm = (y * sg.tensor(g)).sum(), (ty * torch.from_numpy(g)).sum()
        total = term if total is None else total + term
        ttotal = tterm if ttotal is None else ttotal + tterm
    total.backward()
    ttotal.backward()
    close(ours.weight_orig.grad.data, theirs.weight_orig.grad, dtype, "weight_orig gradient")
    if ours.bias is not None:
        close(ours.bias.grad.data, theirs.bias.grad, dtype, "bias gradient")


@pytest.mark.parametrize("n_power_iterations,dim", [(3, 0), (1, 1), (2, 2)])
def test_iterations_and_dim_match_torch(n_power_iterations, dim):
    torch = pytest.importorskip("torch")
    ours, theirs, shape = pair("conv", n_power_iterations=n_power_iterations, dim=dim)
    assert ours.weight_u.shape == (ours.weight_orig.shape[dim],)
    x = np.random.default_rng(1).standard_normal(shape)
    for _ in range(2):
        close(ours(sg.tensor(x)).data, theirs(torch.from_numpy(x)), np.float64, "output")
    close(ours.weight_v.data, theirs.weight_v, np.float64, "v")


def test_sigma_converges_to_the_largest_singular_value():
    m = nn.utils.spectral_norm(nn.Linear(6, 4, dtype=np.float64), n_power_iterations=50)
    m(sg.tensor(np.zeros((1, 6))))
    w = m.weight_orig.data
    sigma = np.linalg.svd(w, compute_uv=False)[0]
    np.testing.assert_allclose(m.weight.data, w / sigma, rtol=1e-10)
    assert abs(np.linalg.svd(m.weight.data, compute_uv=False)[0] - 1) < 1e-10


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_eval_mode_uses_the_buffers_without_iterating(dtype):
    torch = pytest.importorskip("torch")
    ours, theirs, shape = pair("conv", dtype)
    x = np.random.default_rng(2).standard_normal(shape).astype(dtype)
    ours(sg.tensor(x)), theirs(torch.from_numpy(x))  # one training step moves u, v
    ours.eval(), theirs.eval()
    u, v = ours.weight_u.data.copy(), ours.weight_v.data.copy()
    for _ in range(2):
        y = ours(sg.tensor(x, requires_grad=True))
        close(y.data, theirs(torch.from_numpy(x)), dtype, "eval output")
    np.testing.assert_array_equal(ours.weight_u.data, u)
    np.testing.assert_array_equal(ours.weight_v.data, v)
    wm = ours.weight_orig.data.reshape(5, -1)
    np.testing.assert_allclose(ours.weight.data, ours.weight_orig.data / (u @ wm @ v), rtol=1e-6)


def test_under_no_grad_training_still_iterates():
    m = nn.utils.spectral_norm(nn.Linear(3, 2, dtype=np.float64))
    u = m.weight_u.data.copy()
    with sg.no_grad():
        y = m(sg.tensor(np.ones((1, 3))))
    assert not y.requires_grad and not np.array_equal(m.weight_u.data, u)


@pytest.mark.parametrize("kind", ["conv", "convT", "linear"])
def test_gradcheck_of_weight_orig_and_input(kind):
    layer = nn.utils.spectral_norm(LAYERS[kind][0]()).double().eval()
    shape = LAYERS[kind][2]
    x = sg.tensor(np.random.default_rng(3).standard_normal(shape), requires_grad=True)
    # gradcheck perturbs weight_orig in place, which the hook reads on every call; eval mode, as a
    # training forward would move u, v between the perturbed calls
    assert sg.gradcheck(lambda w, xx: layer(xx), (layer.weight_orig, x))


def test_remove_spectral_norm_restores_a_plain_parameter():
    torch = pytest.importorskip("torch")
    ours, theirs, shape = pair("conv")
    x = np.random.default_rng(4).standard_normal(shape)
    ours(sg.tensor(x)), theirs(torch.from_numpy(x))
    nn.utils.remove_spectral_norm(ours)
    torch.nn.utils.remove_spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight"]
    assert isinstance(ours.weight, nn.Parameter) and not ours._forward_pre_hooks
    close(ours.weight.data, theirs.weight, np.float64, "weight")
    close(ours(sg.tensor(x)).data, theirs(torch.from_numpy(x)), np.float64, "output")
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in Conv2d"):
        nn.utils.remove_spectral_norm(ours)


def test_state_dict_round_trip_and_dtype_conversion():
    a = nn.utils.spectral_norm(nn.Conv2d(2, 3, 3))
    a(sg.tensor(np.ones((1, 2, 4, 4), np.float32)))
    b = nn.utils.spectral_norm(nn.Conv2d(2, 3, 3)).eval()
    b.load_state_dict(a.state_dict())
    a.eval()
    x = sg.tensor(np.random.default_rng(5).standard_normal((1, 2, 4, 4)), dtype=np.float32)
    np.testing.assert_array_equal(a(x).data, b(x).data)
    b.double()
    assert b.weight_u.dtype == np.float64 and b(x.double()).dtype == np.float64


def test_errors():
    conv = nn.utils.spectral_norm(nn.Conv2d(2, 3, 3))
    with pytest.raises(RuntimeError, match="two spectral_norm hooks on the same parameter weight"):
        nn.utils.spectral_norm(conv)
    with pytest.raises(ValueError, match="'bias' is None"):
        nn.utils.spectral_norm(nn.Conv2d(2, 3, 3, bias=False), name="bias")
    with pytest.raises(ValueError, match="'wieght' is not a parameter of the module"):
        nn.utils.spectral_norm(nn.Conv2d(2, 3, 3), name="wieght")
    with pytest.raises(ValueError, match="n_power_iterations must be a positive int, got 0"):
        nn.utils.spectral_norm(nn.Conv2d(2, 3, 3), n_power_iterations=0)
    with pytest.raises(ValueError, match="eps must be > 0"):
        nn.utils.spectral_norm(nn.Conv2d(2, 3, 3), eps=0)
    with pytest.raises(ValueError, match=r"dim must be in \[-4, 3\]"):
        nn.utils.spectral_norm(nn.Conv2d(2, 3, 3), dim=4)
    with pytest.raises(TypeError, match="expected a Module"):
        nn.utils.spectral_norm(np.ones(3))
    fresh = nn.Conv2d(2, 3, 3)
    with pytest.raises(ValueError):
        nn.utils.spectral_norm(fresh, n_power_iterations=-1)
    assert "weight" in fresh._parameters and not fresh._forward_pre_hooks  # untouched by the failure
