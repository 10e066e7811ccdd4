"""The discriminators: BasicSR's / Real-ESRGAN's keys in order (equal to the twins'), published
parameter counts, parity with the torch twins (output, input gradient and every parameter gradient,
float64 1e-10; several training forwards of the spectrally normalised U-Net), eval mode, an Adam step,
a .pth round trip through load_weights, errors."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.optim import Adam
from framework.card import card

from . import basicsr_checks as checks
from .cases import conv

VGG = {"type": "VGGStyleDiscriminator", "num_in_ch": 3, "num_feat": 4}
UNET = {"type": "UNetDiscriminatorSN", "num_in_ch": 3, "num_feat": 4}


@contextlib.contextmanager
def one_torch_thread(torch):
    """Run the twin on one torch thread, set just before it runs. numba's OpenMP layer shares
    libgomp with torch and leaves its own thread count (2) there after each of our parallel kernels;
    torch's two threads then compete with numba's spinning ones, and a float64 VGG step took 0.8 s
    instead of 0.02 s on this two-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def test_both_are_registered_models_whose_card_says_discriminator():
    from framework.registry import MODELS
    assert {"VGGStyleDiscriminator", "UNetDiscriminatorSN"} <= set(MODELS.names())
    assert card(VGG).role == card(UNET).role == "discriminator"


@pytest.mark.parametrize("spec", [VGG, {**VGG, "input_size": 256}, UNET,
                                  {**UNET, "skip_connection": False, "num_in_ch": 1}])
def test_keys_equal_the_twins(spec):
    checks.check_keys(spec)


def test_keys_are_basicsrs():
    vgg = list(checks.build(VGG).state_dict())
    bn = ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert vgg[:8] == ["conv0_0.weight", "conv0_0.bias", "conv0_1.weight"] + [f"bn0_1.{k}" for k in bn]
    assert vgg[8:10] == ["conv1_0.weight", "bn1_0.weight"]
    assert vgg[-4:] == ["linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"]
    unet = list(checks.build(UNET).state_dict())
    sn = [f"conv{i}.weight_{s}" for i in range(1, 9) for s in ("orig", "u", "v")]
    assert unet == ["conv0.weight", "conv0.bias"] + sn + ["conv9.weight", "conv9.bias"]


def test_published_parameter_counts():
    """Real-ESRGAN's net_d (4.38 M) and ESRGAN's VGG-128 discriminator, layer by layer (F = 64)."""
    f = 64
    unet = (conv(3, f, 3) + 16 * (f * 2 * f + 2 * f * 4 * f + 4 * f * 8 * f)
            + 9 * (8 * f * 4 * f + 4 * f * 2 * f + 2 * f * f + 2 * f * f) + conv(f, 1, 3))
    assert checks.build({**UNET, "num_feat": 64}).num_parameters() == unet == 4_376_897
    feats = [f, 2 * f, 4 * f, 8 * f, 8 * f]
    vgg = conv(3, f, 3) + f * f * 16 + 2 * f
    for a, b in zip(feats, feats[1:]):
        vgg += a * b * 9 + b * b * 16 + 4 * b
    vgg += 8 * f * 16 * 100 + 100 + 101
    assert checks.build({**VGG, "num_feat": 64}).num_parameters() == vgg == 14_499_401


# float32: five batch norms in a row; the weight gradients of the first convolution differ from
# torch's by ~1.1e-5 of their largest value (summation order), so 5e-5 rather than checks' 1e-5
TOLERANCE = {np.float64: 1e-10, np.float32: 5e-5}


def assert_close(ours, theirs, dtype, what, floor=0.0):
    """checks.assert_close with this file's float32 tolerance."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype == dtype and ours.shape == theirs.shape, what
    bound = TOLERANCE[dtype] * max(np.abs(theirs).max(), floor, 1e-30)
    err = np.abs(ours - theirs).max()
    assert err <= bound, f"{what}: max |ours - torch| {err:.3g} > {bound:.3g}"


def compare(spec, x_np, steps=1, train=True):
    """`steps` forwards of ours and the twin (from the same state_dict) on x, x + 0.1, ...; the
    output of each, then one backward of sum_k sum(y_k w_k): input and EVERY parameter gradient."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    dtype = x_np.dtype.type
    model = checks.build(spec).to(dtype)
    twin = twins.twin_of(model, spec, dtype={np.float64: torch.float64, np.float32: torch.float32}[dtype])
    model.train(train), twin.train(train)
    rng = np.random.default_rng(9)
    x = sg.tensor(x_np, requires_grad=True)
    ys, ws, total = [], [], 0
    for k in range(steps):  # ours first, the twin after: see one_torch_thread
        ys.append(model(x + dtype(0.1 * k)))
        ws.append(rng.standard_normal(ys[k].shape).astype(dtype))
        total = total + (ys[k] * sg.tensor(ws[k])).sum()
    total.backward()
    tx = torch.from_numpy(x_np.copy()).requires_grad_(True)
    tys, ttotal = [], 0
    with one_torch_thread(torch):
        for k in range(steps):
            tys.append(twin(tx + 0.1 * k))
            ttotal = ttotal + (tys[k] * torch.from_numpy(ws[k])).sum()
        ttotal.backward()
    for k in range(steps):
        assert_close(ys[k].data, tys[k].detach().numpy(), dtype, f"output {k}")
    assert_close(x.grad.data, tx.grad.numpy(), dtype, "input gradient")
    theirs = dict(twin.named_parameters())
    assert list(dict(model.named_parameters())) == list(theirs)
    floor = max(np.abs(p.grad.numpy()).max() for p in theirs.values())
    for name, p in model.named_parameters():
        assert_close(p.grad.data, theirs[name].grad.numpy(), dtype, f"gradient of {name}", floor)
    tstate = twin.state_dict()
    for name, b in model.named_buffers():  # BN running stats and counts, spectral-norm u and v
        if b.dtype.kind == "f":
            assert_close(b.data, tstate[name].numpy(), dtype, f"buffer {name}")
        else:
            np.testing.assert_array_equal(b.data, tstate[name].numpy(), err_msg=name)
    return model, twin


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("input_size,channels", [(128, 3), (256, 1)])
def test_vgg_style_matches_the_twin(input_size, channels, dtype):
    spec = {**VGG, "input_size": input_size, "num_in_ch": channels, "num_feat": 2}
    x = np.random.default_rng(0).uniform(0, 1, (2, channels, input_size, input_size)).astype(dtype)
    compare(spec, x)


def test_vgg_style_eval_mode_matches_the_twin():
    """After two training forwards (running statistics moved): eval mode normalises with them."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).uniform(0, 1, (3, 3, 128, 128))
    model, twin = compare(VGG, x, steps=2)
    model.eval(), twin.eval()
    with sg.no_grad(), torch.no_grad():
        y, ty = model(sg.tensor(x[:1])), twin(torch.from_numpy(x[:1]))
    assert_close(y.data, ty.numpy(), np.float64, "eval output")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("skip,channels,shape", [(True, 3, (16, 24)), (False, 1, (8, 8)),
                                                 (False, 3, (13, 10))])
def test_unet_sn_matches_the_twin_over_training_forwards(skip, channels, shape, dtype):
    """Three training forwards (u, v of every spectrally normalised conv move each time) before one
    backward: outputs, the buffers, the input gradient (through three bilinear upsamplings) and every
    gradient of weight_orig."""
    spec = {**UNET, "num_in_ch": channels, "skip_connection": skip}
    x = np.random.default_rng(2).uniform(0, 1, (2, channels) + shape).astype(dtype)
    model, _ = compare(spec, x, steps=3)
    assert model(sg.tensor(x)).shape == (2, 1) + (shape if skip else tuple(s // 8 * 8 for s in shape))


def test_unet_sn_eval_mode_matches_the_twin():
    x = np.random.default_rng(3).uniform(0, 1, (1, 3, 8, 16))
    compare(UNET, x, train=False)


def test_adam_step_lowers_the_discriminator_loss():
    """One Adam step on the least-squares GAN loss: real images towards 1, blurred ones towards 0."""
    for spec, shape in ((UNET, (2, 3, 16, 16)), (VGG, (2, 3, 128, 128))):
        model = checks.build(spec)
        rng = np.random.default_rng(4)
        real = rng.uniform(0, 1, shape).astype(np.float32)
        fake = sg.tensor(np.full(shape, real.mean(), np.float32))
        real = sg.tensor(real)
        opt = Adam(model.parameters(), lr=1e-3)

        def loss():
            r, f = model(real), model(fake)
            return F.mse_loss(r, sg.tensor(np.ones(r.shape, np.float32))) + \
                F.mse_loss(f, sg.tensor(np.zeros(f.shape, np.float32)))

        before = loss()
        before.backward()
        assert all(p.grad is not None for p in model.parameters())
        opt.step()
        with sg.no_grad():
            after = loss().item()
        assert after < before.item() * 0.99, (spec["type"], before.item(), after)


@pytest.mark.parametrize("spec,shape", [(UNET, (1, 3, 16, 8)), ({**VGG, "num_feat": 2}, (1, 3, 128, 128))])
def test_pth_round_trip_through_load_weights(spec, shape, tmp_path):
    """torch.save({'params': state_dict}) as BasicSR saves net_d -> load_weights -> a model built
    with another seed gives the saved model's output."""
    torch = pytest.importorskip("torch")
    from framework.weights import load_weights
    model = checks.build(spec, seed=1)
    model(sg.tensor(np.random.default_rng(5).uniform(0, 1, shape), dtype=np.float32))  # move u, v, BN
    path = tmp_path / "net_d.pth"
    torch.save({"params": {k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()}},
               str(path))
    state, info = load_weights(path)
    assert list(state) == list(model.state_dict()) and info["key"] == "params"
    fresh = checks.build(spec, seed=2).eval()
    model.eval()
    x = sg.tensor(np.random.default_rng(6).uniform(0, 1, shape), dtype=np.float32)
    with sg.no_grad():
        assert not np.array_equal(fresh(x).data, model(x).data)
        fresh.load_state_dict(state, strict=True)
        np.testing.assert_array_equal(fresh(x).data, model(x).data)


@pytest.mark.parametrize("spec,error,match", [
    ({**VGG, "input_size": 64}, ValueError, "input_size must be one of 128, 256, got 64"),
    ({**VGG, "num_feat": 0}, ValueError, "VGGStyleDiscriminator: num_feat must be a positive int"),
    ({**UNET, "skip_connection": 1}, TypeError, "UNetDiscriminatorSN: skip_connection must be a bool"),
    ({**UNET, "num_in_ch": 2.0}, TypeError, "UNetDiscriminatorSN: num_in_ch must be a positive int"),
])
def test_constructor_errors(spec, error, match):
    with pytest.raises(error, match=match):
        checks.build(spec)


def test_input_errors():
    with pytest.raises(ValueError, match=r"input must be \(N, C, 128, 128\) \(input_size=128\), got "
                                         r"\(1, 3, 128, 96\)"):
        checks.build(VGG)(sg.tensor(np.zeros((1, 3, 128, 96), np.float32)))
    with pytest.raises(ValueError, match=r"multiples of 8 .* got \(1, 3, 16, 12\)"):
        checks.build(UNET)(sg.tensor(np.zeros((1, 3, 16, 12), np.float32)))
