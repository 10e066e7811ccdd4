"""Layers: torch parity (forward, input and parameter gradients, float64) with weights copied across,
torch's repr and default initialisation, input checks naming the layer and both shapes, BatchNorm2d
running statistics, loss modules, registries and a safetensors state_dict round trip with torch."""
import math

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework import nn
from framework.registry import LAYERS, LOSSES

# (class name, args, kwargs, input shape)
CASES = [
    ("Conv2d", (3, 4, 3), {}, (2, 3, 6, 5)),
    ("Conv2d", (3, 4, 3), {"stride": 2, "padding": 1}, (1, 3, 7, 6)),
    ("Conv2d", (4, 6, 3), {"padding": 2, "dilation": 2, "groups": 2, "bias": False}, (1, 4, 5, 5)),
    ("Conv2d", (3, 4, (3, 2)), {"padding": "same"}, (1, 3, 5, 4)),
    ("Conv2d", (3, 2, 1), {"padding": "valid"}, (1, 3, 1, 1)),
    ("Conv2d", (3, 4, (3, 2)), {"padding": (1, 1), "padding_mode": "reflect"}, (2, 3, 5, 4)),
    ("Conv2d", (3, 4, 3), {"padding": 1, "stride": 2, "padding_mode": "replicate"}, (1, 3, 5, 5)),
    ("Conv2d", (3, 4, 3), {"padding": (2, 1), "padding_mode": "circular"}, (1, 3, 4, 5)),
    ("Conv2d", (2, 2, 4), {"padding": "same", "padding_mode": "reflect"}, (1, 2, 5, 6)),
    ("ConvTranspose2d", (4, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (1, 4, 3, 4)),
    ("ConvTranspose2d", (4, 6, 3), {"groups": 2, "dilation": 2, "bias": False}, (2, 4, 2, 3)),
    ("ConvTranspose2d", (2, 3, 5), {"stride": 3, "padding": 2}, (1, 2, 1, 1)),
    ("PixelShuffle", (2,), {}, (1, 8, 3, 2)),
    ("PixelUnshuffle", (2,), {}, (1, 2, 4, 6)),
    ("ReLU", (), {}, (2, 3, 3, 3)),
    ("LeakyReLU", (0.2,), {}, (2, 3, 3, 3)),
    ("PReLU", (), {}, (2, 3, 3, 3)),
    ("PReLU", (3,), {"init": 0.1}, (2, 3, 3, 3)),
    ("Sigmoid", (), {}, (1, 2, 3, 3)),
    ("Tanh", (), {}, (1, 2, 3, 3)),
    ("GELU", (), {}, (1, 2, 3, 3)),
    ("GELU", (), {"approximate": "tanh"}, (1, 2, 3, 3)),
    ("SiLU", (), {}, (1, 2, 3, 3)),
    ("Mish", (), {}, (1, 2, 3, 3)),
    ("BatchNorm2d", (3,), {}, (2, 3, 4, 3)),
    ("BatchNorm2d", (3,), {"momentum": None, "affine": False}, (3, 3, 1, 2)),
    ("BatchNorm2d", (3,), {"track_running_stats": False, "eps": 1e-3}, (2, 3, 2, 2)),
    ("BatchNorm2d", (2,), {"bias": False}, (1, 2, 2, 1)),
    ("AvgPool2d", (2,), {}, (1, 2, 5, 4)),
    ("AvgPool2d", (3, 2, 1), {"ceil_mode": True, "count_include_pad": False}, (1, 2, 6, 5)),
    ("MaxPool2d", (2,), {}, (1, 2, 4, 5)),
    ("MaxPool2d", (3, 2, 1), {"dilation": 1, "ceil_mode": True}, (2, 2, 5, 6)),
    ("AdaptiveAvgPool2d", ((3, 2),), {}, (1, 2, 7, 5)),
    ("AdaptiveMaxPool2d", ((3, 2),), {}, (1, 2, 7, 5)),
    ("Identity", (), {}, (1, 2, 3, 3)),
    ("Linear", (5, 3), {}, (2, 4, 5)),
    ("Linear", (1, 2), {"bias": False}, (1,)),
    ("LayerNorm", (6,), {}, (2, 3, 6)),
    ("LayerNorm", ((3, 4),), {"eps": 1e-3, "elementwise_affine": False}, (2, 3, 4)),
    ("LayerNorm", (5,), {"bias": False}, (1, 5)),
    ("GroupNorm", (2, 6), {}, (2, 6, 3, 4)),
    ("GroupNorm", (3, 3), {"eps": 1e-3, "affine": False}, (1, 3, 2, 2)),
    ("GroupNorm", (1, 4), {"bias": False}, (2, 4, 1, 3)),
    ("Softmax", (-1,), {}, (2, 3, 4)),
    ("Softmax", (1,), {}, (2, 3, 1, 2)),
    ("LogSoftmax", (0,), {}, (3, 2)),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def _pair(torch, name, args, kwargs):
    """Our layer and torch's, both float64, torch holding a copy of our parameters and buffers."""
    ours = getattr(nn, name)(*args, **kwargs).double()
    theirs = getattr(torch.nn, name)(*args, **kwargs).double()
    theirs.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in ours.state_dict().items()},
                           strict=True)
    return ours, theirs


def _compare_step(torch, ours, theirs, x, rng):
    xt = torch.tensor(x, requires_grad=True)
    xs = sg.tensor(x, requires_grad=True)
    y, yt = ours(xs), theirs(xt)
    np.testing.assert_allclose(y.data, yt.detach().numpy(), rtol=1e-11, atol=1e-12)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    yt.backward(torch.tensor(g))
    if y.requires_grad or xs.grad is not None:
        np.testing.assert_allclose(xs.grad.data, xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    tparams = dict(theirs.named_parameters())
    assert sorted(tparams) == sorted(n for n, _ in ours.named_parameters())
    for n, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.data, tparams[n].grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=n)
    tstate = theirs.state_dict()
    for k, v in ours.state_dict().items():
        np.testing.assert_allclose(v, tstate[k].numpy(), rtol=1e-12, atol=1e-14, err_msg=k)


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # torch's own note
@pytest.mark.parametrize("name,args,kwargs,shape", CASES, ids=IDS)
def test_torch_parity(name, args, kwargs, shape, rng):
    torch = pytest.importorskip("torch")
    ours, theirs = _pair(torch, name, args, kwargs)
    x = rng.standard_normal(shape)
    _compare_step(torch, ours, theirs, x, rng)
    if name == "BatchNorm2d":  # eval mode after a training step uses the updated statistics
        ours.eval()
        theirs.eval()
        _compare_step(torch, ours, theirs, rng.standard_normal(shape), rng)


@pytest.mark.parametrize("name,args,kwargs,shape", CASES, ids=IDS)
def test_repr_matches_torch(name, args, kwargs, shape):
    torch = pytest.importorskip("torch")
    assert repr(getattr(nn, name)(*args, **kwargs)) == repr(getattr(torch.nn, name)(*args, **kwargs))


@pytest.mark.parametrize("name,args,kwargs,shape", CASES, ids=IDS)
def test_registered_and_state_dict_layout_matches_torch(name, args, kwargs, shape):
    torch = pytest.importorskip("torch")
    assert LAYERS.get(name) is getattr(nn, name)
    ours = getattr(nn, name)(*args, **kwargs)
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    assert [(k, v.shape) for k, v in ours.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert all(v.dtype in (np.float32, np.int64) for v in ours.state_dict().values())


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv_padding_modes_gradcheck(mode, rng):
    conv = nn.Conv2d(2, 2, 3, padding=(1, 2), padding_mode=mode).double()
    x = sg.tensor(rng.standard_normal((1, 2, 3, 4)), requires_grad=True)
    # the layer is F.pad (left, right, top, bottom) then an unpadded conv, as torch
    expected = F.conv2d(F.pad(x, (2, 2, 1, 1), mode=mode), conv.weight, conv.bias)
    np.testing.assert_array_equal(conv(x).data, expected.data)
    assert sg.gradcheck(lambda x, w, b: conv(x), (x, conv.weight, conv.bias))


def test_batchnorm_gradcheck_train(rng):
    bn = nn.BatchNorm2d(2).double()
    bn.weight.data[:] = rng.standard_normal(2)
    x = sg.tensor(rng.standard_normal((2, 2, 2, 3)), requires_grad=True)
    assert sg.gradcheck(lambda x, w, b: bn(x), (x, bn.weight, bn.bias))


@pytest.mark.parametrize("momentum", [0.1, 0.5, None])
def test_batchnorm_running_statistics_over_steps(momentum, rng):
    torch = pytest.importorskip("torch")
    ours, theirs = _pair(torch, "BatchNorm2d", (3,), {"momentum": momentum})
    for _ in range(4):
        x = rng.standard_normal((2, 3, 3, 2)) * 2 + 1
        ours(sg.tensor(x))
        theirs(torch.tensor(x))
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k], v.numpy(), rtol=1e-14, err_msg=k)
    assert int(ours.num_batches_tracked.data) == 4
    ours.eval()
    ours(sg.tensor(rng.standard_normal((2, 3, 3, 2))))
    assert int(ours.num_batches_tracked.data) == 4  # eval does not count


def _check_uniform(a, bound):
    assert np.abs(a).max() <= bound
    assert a.std() == pytest.approx(bound / math.sqrt(3), rel=0.1)


def test_default_init_distributions():
    conv = nn.Conv2d(64, 32, 3)  # fan_in = 64 * 9 = 576
    _check_uniform(conv.weight.data, 1 / 24)
    assert np.abs(conv.bias.data).max() <= 1 / 24
    conv_t = nn.ConvTranspose2d(32, 64, 3, groups=2)  # weight (32, 32, 3, 3): fan_in = 32 * 9 from dim 1
    assert conv_t.weight.shape == (32, 32, 3, 3)
    _check_uniform(conv_t.weight.data, 1 / math.sqrt(288))
    assert np.abs(conv_t.bias.data).max() <= 1 / math.sqrt(288)
    assert conv.weight.dtype == np.float32 and conv_t.bias.dtype == np.float32
    assert np.all(nn.PReLU(4).weight.data == 0.25) and nn.PReLU(4).weight.dtype == np.float32
    bn = nn.BatchNorm2d(3)
    assert np.all(bn.weight.data == 1) and np.all(bn.bias.data == 0) and np.all(bn.running_var.data == 1)


def test_conv_transpose_output_size(rng):
    torch = pytest.importorskip("torch")
    ours, theirs = _pair(torch, "ConvTranspose2d", (2, 3, 3), {"stride": 2, "padding": 1})
    x = rng.standard_normal((1, 2, 4, 5))
    for size in [(7, 9), (8, 10), (1, 2, 8, 9)]:
        y = ours(sg.tensor(x), output_size=size)
        np.testing.assert_allclose(y.data, theirs(torch.tensor(x), output_size=size).detach().numpy(),
                                   rtol=1e-12)
    with pytest.raises(ValueError, match=r"output size \(9, 9\) is not reachable .* \[7, 8\]"):
        ours(sg.tensor(x), output_size=(9, 9))


def test_input_checks_name_layer_and_shapes():
    x = sg.tensor(np.zeros((1, 4, 8, 8), np.float32))
    with pytest.raises(ValueError, match=r"^Conv2d\(3, 64, kernel_size=\(3, 3\)\): expected input of shape "
                                         r"\(N, 3, H, W\), got \(1, 4, 8, 8\)$"):
        nn.Conv2d(3, 64, 3)(x)
    with pytest.raises(ValueError, match=r"Conv2d\(4, 2, kernel_size=\(3, 3\)\): expected input of shape "
                                         r"\(N, 4, H, W\), got \(4, 8, 8\)"):
        nn.Conv2d(4, 2, 3)(sg.tensor(np.zeros((4, 8, 8), np.float32)))
    with pytest.raises(ValueError, match=r"ConvTranspose2d\(3, 2, kernel_size=\(3, 3\)\): expected .*"
                                         r"\(N, 3, H, W\), got \(1, 4, 8, 8\)"):
        nn.ConvTranspose2d(3, 2, 3)(x)
    with pytest.raises(ValueError, match=r"BatchNorm2d\(3\): expected input of shape \(N, 3, H, W\), "
                                         r"got \(1, 4, 8, 8\)"):
        nn.BatchNorm2d(3)(x)
    with pytest.raises(ValueError, match=r"PReLU\(num_parameters=3\): expected input of shape \(N, 3, ...\), "
                                         r"got \(1, 4, 8, 8\)"):
        nn.PReLU(3)(x)
    with pytest.raises(ValueError, match=r"MaxPool2d\(kernel_size=2, stride=2, padding=0\): expected input "
                                         r"of shape \(N, C, H, W\), got \(4, 8, 8\)"):
        nn.MaxPool2d(2)(sg.tensor(np.zeros((4, 8, 8), np.float32)))
    # the functional op's own checks, prefixed with the layer
    small = sg.tensor(np.zeros((1, 3, 3, 3), np.float32))
    with pytest.raises(ValueError, match=r"^Conv2d\(3, 4, kernel_size=\(5, 5\)\): conv2d: .*\(1, 3, 3, 3\)"):
        nn.Conv2d(3, 4, 5)(small)
    with pytest.raises(ValueError, match=r"^Conv2d\(3, 4, kernel_size=\(5, 5\)\): pad: reflect padding"):
        nn.Conv2d(3, 4, 5, padding=3, padding_mode="reflect")(small)
    with pytest.raises(ValueError, match=r"^ConvTranspose2d\(3, 4, kernel_size=\(3, 3\)\): conv_transpose2d: "
                                         r"output size .* below 1"):
        nn.ConvTranspose2d(3, 4, 3, padding=3)(small)
    with pytest.raises(ValueError, match=r"^PixelShuffle\(upscale_factor=2\): pixel_shuffle: .*3"):
        nn.PixelShuffle(2)(small)
    with pytest.raises(ValueError, match=r"^AvgPool2d\(kernel_size=5, stride=5, padding=0\): avg_pool2d: "):
        nn.AvgPool2d(5)(small)


def test_constructor_errors():
    with pytest.raises(ValueError, match="in_channels 3 must be divisible by groups 2"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels 3 must be divisible by groups 2"):
        nn.ConvTranspose2d(4, 3, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode must be one of .* got 'mirror'"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match=r"Conv2d: padding='same' is not supported for strided convolutions \(stride=\(2, 2\)\)"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding must be an int, a pair, 'same' or 'valid', got 'full'"):
        nn.Conv2d(3, 4, 3, padding="full")
    with pytest.raises(ValueError, match="only padding_mode 'zeros' is supported, got 'reflect'"):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match=r"kernel_size must have 2 entries \(H, W\), got \(3, 3, 3\)"):
        nn.Conv2d(3, 4, (3, 3, 3))
    with pytest.raises(ValueError, match="Conv2d: kernel_size must be >= 1, got 0"):
        nn.Conv2d(3, 4, 0)
    with pytest.raises(ValueError, match="in_channels must be a positive int, got 0"):
        nn.Conv2d(0, 4, 3)
    with pytest.raises(ValueError, match="approximate must be one of 'none', 'tanh', got 'fast'"):
        nn.GELU("fast")
    with pytest.raises(ValueError, match="return_indices=True is not supported"):
        nn.MaxPool2d(2, return_indices=True)


def test_float32_forward_backward_stays_float32(rng):
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), nn.BatchNorm2d(4),
                        nn.PReLU(4), nn.ConvTranspose2d(4, 2, 2, stride=2), nn.GELU())
    x = sg.tensor(rng.standard_normal((1, 3, 4, 4)).astype(np.float32))
    y = net(x)
    y.sum().backward()
    assert y.dtype == np.float32 and y.shape == (1, 2, 8, 8)
    assert all(p.grad.dtype == np.float32 for p in net.parameters())


# -- loss modules ------------------------------------------------------------------------------

@pytest.mark.parametrize("name,torch_name", [("L1Loss", "L1Loss"), ("MSELoss", "MSELoss")])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_modules_match_torch(name, torch_name, reduction, rng):
    torch = pytest.importorskip("torch")
    a, b = rng.standard_normal((2, 3, 4, 4)), rng.standard_normal((2, 3, 4, 4))
    x = sg.tensor(a, requires_grad=True)
    loss = LOSSES.get(name)(reduction=reduction, loss_weight=0.5)(x, sg.tensor(b))
    tx = torch.tensor(a, requires_grad=True)
    tloss = 0.5 * getattr(torch.nn, torch_name)(reduction=reduction)(tx, torch.tensor(b))
    g = rng.standard_normal(loss.shape)
    loss.backward(g)
    tloss.backward(torch.tensor(g))
    np.testing.assert_allclose(loss.data, tloss.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-13)


def test_charbonnier_module():
    x, t = sg.tensor(np.array([0.0, 3.0])), sg.tensor(np.array([0.0, -1.0]))
    loss = nn.CharbonnierLoss(loss_weight=2.0, eps=1.0)
    assert loss(x, t).item() == pytest.approx(2.0 * (1.0 + math.sqrt(17.0)) / 2)
    assert nn.CharbonnierLoss().eps == 1e-3 and LOSSES.get("CharbonnierLoss") is nn.CharbonnierLoss
    assert repr(loss) == "CharbonnierLoss(reduction='mean', loss_weight=2.0, eps=1.0)"
    assert loss(sg.tensor(np.float32([1.0])), sg.tensor(np.float32([0.0]))).dtype == np.float32


def test_loss_module_errors():
    with pytest.raises(ValueError, match="L1Loss: reduction must be one of .* got 'batchmean'"):
        nn.L1Loss(reduction="batchmean")
    with pytest.raises(ValueError, match="CharbonnierLoss: eps must be > 0, got -1"):
        nn.CharbonnierLoss(eps=-1)
    with pytest.raises(ValueError, match=r"input shape \(1, 3\) and target shape \(3,\) differ"):
        nn.MSELoss()(sg.tensor(np.ones((1, 3))), sg.tensor(np.ones(3)))


# -- safetensors round trip with torch ---------------------------------------------------------

def _our_net():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.PReLU(8), nn.BatchNorm2d(8),
                         nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1),
                         nn.Conv2d(4, 3, 3, padding=1, padding_mode="reflect"))


def _torch_net(torch):
    t = torch.nn
    return t.Sequential(t.Conv2d(3, 8, 3, padding=1), t.PReLU(8), t.BatchNorm2d(8),
                        t.ConvTranspose2d(8, 4, 4, stride=2, padding=1),
                        t.Conv2d(4, 3, 3, padding=1, padding_mode="reflect")).double()


def _train_a_little(net, x):
    """Two training-mode calls, so the BatchNorm statistics are not their defaults."""
    net.train()
    for _ in range(2):
        net(x)
    return net.eval()


def test_safetensors_round_trip_with_torch(tmp_path, rng):
    torch = pytest.importorskip("torch")
    from safetensors.numpy import load_file as np_load, save_file as np_save
    from safetensors.torch import load_file as torch_load, save_file as torch_save
    x = rng.standard_normal((2, 3, 5, 6))

    ours = _train_a_little(_our_net().double(), sg.tensor(x))
    np_save(dict(ours.state_dict()), str(tmp_path / "ours.safetensors"))
    theirs = _torch_net(torch)
    theirs.load_state_dict(torch_load(str(tmp_path / "ours.safetensors")), strict=True)
    theirs.eval()
    with torch.no_grad():
        expected = theirs(torch.tensor(x)).numpy()
    with sg.no_grad():
        np.testing.assert_allclose(ours(sg.tensor(x)).data, expected, rtol=1e-10, atol=1e-10)

    # and back: a torch-trained state into a fresh srgrad network
    theirs2 = _torch_net(torch).train()
    with torch.no_grad():
        for _ in range(2):
            theirs2(torch.tensor(x))
    theirs2.eval()
    torch_save(theirs2.state_dict(), str(tmp_path / "theirs.safetensors"))
    ours2 = _our_net().double().eval()
    result = ours2.load_state_dict(np_load(str(tmp_path / "theirs.safetensors")), strict=True)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert int(ours2.state_dict()["2.num_batches_tracked"]) == 2
    with torch.no_grad():
        expected = theirs2(torch.tensor(x)).numpy()
    with sg.no_grad():
        np.testing.assert_allclose(ours2(sg.tensor(x)).data, expected, rtol=1e-10, atol=1e-10)


def test_layer_norm2d_layer(rng):
    """Keys weight, bias (ones, zeros), eps 1e-6; the channels-first norm of F.layer_norm2d; the
    input checked against num_channels."""
    layer = LAYERS.build({"type": "LayerNorm2d", "num_channels": 3})
    assert list(layer.state_dict()) == ["weight", "bias"] and layer.eps == 1e-6
    np.testing.assert_array_equal(layer.weight.data, 1) and np.testing.assert_array_equal(layer.bias.data, 0)
    x = sg.tensor(rng.standard_normal((2, 3, 4, 5)), dtype=np.float32)
    mu = x.data.mean(1, keepdims=True)
    want = (x.data - mu) / np.sqrt(((x.data - mu) ** 2).mean(1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(layer(x).data, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"LayerNorm2d\(3\)"):
        layer(sg.tensor(np.zeros((1, 4, 2, 2), np.float32)))
