"""Linear (and LayerNorm, Softmax) layers beyond the torch-parity table of test_layers.py: default
initialisation bounds, seeding, input checks naming the layer, constructor errors, float32."""
import math

import numpy as np
import pytest

import framework as sg
from framework import nn
from framework.registry import LAYERS


def test_linear_default_init_bounds():
    lin = nn.Linear(64, 300)  # weight (300, 64): U(+-1/8), bias U(+-1/8)
    bound = 1 / math.sqrt(64)
    w, b = lin.weight.data, lin.bias.data
    assert w.shape == (300, 64) and b.shape == (300,) and w.dtype == b.dtype == np.float32
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert w.std() == pytest.approx(bound / math.sqrt(3), rel=0.05)
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.9 * bound
    assert nn.Linear(3, 2, bias=False).bias is None
    assert nn.Linear(3, 2, dtype=np.float64).weight.dtype == np.float64


def test_linear_seeded_and_reset_with_rng():
    sg.manual_seed(4)
    a = nn.Linear(5, 3)
    sg.manual_seed(4)
    b = nn.Linear(5, 3)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    np.testing.assert_array_equal(a.bias.data, b.bias.data)
    a.reset_parameters(rng=np.random.default_rng(1))
    b.reset_parameters(rng=np.random.default_rng(1))
    np.testing.assert_array_equal(a.weight.data, b.weight.data)


def test_layer_norm_default_init_and_keys():
    ln = nn.LayerNorm((2, 3))
    assert ln.normalized_shape == (2, 3) and ln.eps == 1e-5
    assert np.all(ln.weight.data == 1) and np.all(ln.bias.data == 0) and ln.weight.shape == (2, 3)
    assert list(nn.LayerNorm(4, elementwise_affine=False).state_dict()) == []
    assert list(nn.LayerNorm(4, bias=False).state_dict()) == ["weight"]


def test_transformer_mlp_float32_matches_torch(rng):
    """SwinIR's MLP path (LayerNorm, Linear, GELU, Linear) and a Softmax, float32 end to end, close
    to torch's float32 with the same weights (GELU's float32 included)."""
    torch = pytest.importorskip("torch")
    net = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8), nn.Softmax(-1))
    tnet = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.Linear(8, 16), torch.nn.GELU(),
                               torch.nn.Linear(16, 8), torch.nn.Softmax(-1))
    tnet.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in net.state_dict().items()})
    a = rng.standard_normal((2, 5, 8)).astype(np.float32)
    g = rng.standard_normal((2, 5, 8)).astype(np.float32)
    x = sg.tensor(a, requires_grad=True)
    y = net(x)
    y.backward(g)
    tx = torch.tensor(a, requires_grad=True)
    ty = tnet(tx)
    ty.backward(torch.tensor(g))
    assert y.dtype == x.grad.dtype == np.float32 and y.shape == (2, 5, 8)
    assert all(p.grad.dtype == np.float32 for p in net.parameters())
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    tgrads = dict(tnet.named_parameters())
    for name, p in net.named_parameters():
        np.testing.assert_allclose(p.grad.data, tgrads[name].grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def test_input_checks_name_the_layer():
    with pytest.raises(ValueError, match=r"^Linear\(4, 2\): expected input of shape \(\.\.\., 4\), "
                                         r"got \(3, 5\)$"):
        nn.Linear(4, 2)(sg.tensor(np.zeros((3, 5), np.float32)))
    with pytest.raises(ValueError, match=r"^LayerNorm\(\(3, 4\)\): expected input of shape \(\.\.\., 3, 4\), "
                                         r"got \(2, 4, 3\)$"):
        nn.LayerNorm((3, 4))(sg.tensor(np.zeros((2, 4, 3), np.float32)))
    with pytest.raises(ValueError, match=r"softmax: dim 3 is out of range for an input of shape \(2, 3\)"):
        nn.Softmax(3)(sg.tensor(np.zeros((2, 3), np.float32)))


def test_constructor_errors():
    with pytest.raises(ValueError, match="Linear: in_features must be a positive int, got 0"):
        nn.Linear(0, 3)
    with pytest.raises(TypeError, match="Linear: out_features must be a positive int, got 2.0"):
        nn.Linear(3, 2.0)
    with pytest.raises(TypeError, match="Linear: bias must be a bool, got 'yes'"):
        nn.Linear(3, 2, bias="yes")
    with pytest.raises(ValueError, match="LayerNorm: normalized_shape must be a list of ints >= 1"):
        nn.LayerNorm((4, 0))
    with pytest.raises(ValueError, match="LayerNorm: normalized_shape must hold at least one size"):
        nn.LayerNorm(())
    with pytest.raises(ValueError, match="LayerNorm: eps must be >= 0, got -1e-05"):
        nn.LayerNorm(4, eps=-1e-5)
    with pytest.raises(ValueError, match="Softmax: dim must be given"):
        nn.Softmax()
    with pytest.raises(TypeError, match="LogSoftmax: dim must be an int, got '1'"):
        nn.LogSoftmax("1")


def test_registered():
    for name in ("Linear", "LayerNorm", "Softmax", "LogSoftmax", "Dropout", "DropPath"):
        assert LAYERS.get(name) is getattr(nn, name)
    assert isinstance(LAYERS.build({"type": "Linear", "in_features": 3, "out_features": 2}), nn.Linear)
