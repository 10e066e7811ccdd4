"""Swift-SRGAN's generator: the original's keys in order (the unused PReLUs of the blocks built
with use_act=False included, no bias before a BatchNorm), parity with the torch twin (output and
every gradient of an L1 loss, float64 and float32, train and eval: BatchNorm's batch and running
statistics) and its running statistics after a training forward; the output range; an Adam step;
.pth round trips both ways; shapes; errors; detection (round trips, the published x2 / x4); and
the done-when check: files built by spandrel 0.4.2's own class through srgrad-infer give
spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import detect
from framework.registry import MODELS

from . import basicsr_checks as checks
from .published_checks import check_pth_both_ways
from .spandrel_checks import check_spandrel_file

SMALL = {"type": "SwiftSRGAN", "num_channels": 8, "num_blocks": 2}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


def test_state_dict_keys_are_the_originals():
    keys = checks.check_keys(spec(2, num_blocks=1))
    bn = ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    block = (["residual.0.block1.cnn.depthwise.weight", "residual.0.block1.cnn.pointwise.weight"]
             + [f"residual.0.block1.bn.{k}" for k in bn] + ["residual.0.block1.act.weight"])
    assert keys[:5] == ["initial.cnn.depthwise.weight", "initial.cnn.depthwise.bias",
                        "initial.cnn.pointwise.weight", "initial.cnn.pointwise.bias",
                        "initial.act.weight"]
    assert keys[5:13] == block
    assert "residual.0.block2.act.weight" in keys and "convblock.act.weight" in keys  # unused
    assert keys[-9:] == ["upsampler.0.conv.depthwise.weight", "upsampler.0.conv.depthwise.bias",
                          "upsampler.0.conv.pointwise.weight", "upsampler.0.conv.pointwise.bias",
                          "upsampler.0.act.weight", "final_conv.depthwise.weight",
                          "final_conv.depthwise.bias", "final_conv.pointwise.weight",
                          "final_conv.pointwise.bias"]


PARITY = [(2, {}), (4, {"in_channels": 1}), (1, {"num_blocks": 0}), (8, {"num_blocks": 1})]


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,kw", PARITY)
def test_matches_the_twin(scale, kw, dtype, train):
    """The unused PReLUs get no gradient in either (check_parity: None on both sides)."""
    checks.check_parity(spec(scale, **kw), (2, kw.get("in_channels", 3), 7, 9), dtype, train=train)


def test_running_statistics_follow_the_twins():
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    s = spec(2)
    model = checks.build(s).to(np.float64).train()
    twin = twins.twin_of(model, s).train()
    x = np.random.default_rng(0).uniform(0, 1, (3, 3, 6, 5))
    with sg.no_grad(), torch.no_grad():
        for _ in range(2):
            model(sg.tensor(x))
            twin(torch.from_numpy(x))
    ours, theirs = model.state_dict(), twin.state_dict()
    for k in ours:
        if "running" in k or "num_batches" in k:
            np.testing.assert_allclose(np.asarray(ours[k]), theirs[k].numpy(), rtol=1e-12, atol=0,
                                       err_msg=k)
    assert int(ours["residual.1.block2.bn.num_batches_tracked"]) == 2


def test_output_is_in_the_unit_range():
    model = checks.build(spec(2)).eval()
    model.final_conv.pointwise.bias.data[...] = 40.0  # tanh saturates: (1 + 1) / 2
    y = model(sg.tensor(np.random.default_rng(1).uniform(0, 1, (1, 3, 4, 5)), dtype=np.float32))
    np.testing.assert_array_equal(y.data, np.ones((1, 3, 8, 10), np.float32))


def test_adam_step_lowers_the_loss_and_leaves_the_unused_prelus():
    """check_adam_step's step, with the PReLUs the forward never uses given no gradient and left
    as they were (torch's Adam skips a parameter whose grad is None)."""
    import framework.functional as F
    from framework.optim import Adam
    model = checks.build(spec(2))
    x = sg.tensor(checks.inputs(spec(2), (2, 3, 8, 8), seed=1)[0], dtype=np.float32)
    target = sg.tensor(np.repeat(np.repeat(x.data, 2, 2), 2, 3) + 0.1, dtype=np.float32)
    unused = {k: p.data.copy() for k, p in model.named_parameters()
              if k.endswith(("block2.act.weight", "convblock.act.weight"))}
    assert len(unused) == 3
    opt = Adam(model.parameters(), lr=1e-3)
    loss = F.l1_loss(model(x), target)
    loss.backward()
    opt.step()
    params = dict(model.named_parameters())
    assert all((p.grad is None) == (k in unused) for k, p in params.items())
    for k, before in unused.items():
        np.testing.assert_array_equal(params[k].data, before)
    with sg.no_grad():
        assert F.l1_loss(model(x), target).item() < loss.item() * (1 - 2e-3)


def test_pth_round_trips(tmp_path):
    checks.check_pth_round_trip(spec(4), (1, 3, 5, 6), tmp_path)
    check_pth_both_ways(spec(2, in_channels=1), (1, 1, 6, 9), tmp_path)


@pytest.mark.parametrize("scale,hw,want", [(2, (5, 3), (10, 6)), (4, (1, 2), (4, 8)),
                                           (1, (3, 4), (3, 4))])
def test_output_shapes(scale, hw, want):
    y = checks.build(spec(scale))(sg.tensor(np.zeros((2, 3, *hw), np.float32)))
    assert y.shape == (2, 3, *want) and y.dtype == np.float32


@pytest.mark.parametrize("kw,error,match", [
    ({"scale": 3}, ValueError, r"SwiftSRGAN: scale x3 is not supported \(x1 or a power of two"),
    ({"num_channels": 0}, ValueError, r"SwiftSRGAN: num_channels must be a positive int"),
    ({"num_blocks": -1}, ValueError, r"SwiftSRGAN: num_blocks must be"),
    ({"upscale_factor": 4}, TypeError, r"upscale_factor"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "SwiftSRGAN", **kw})


@pytest.mark.parametrize("kw", [{"scale": 4, "in_channels": 1}, {"scale": 1, "num_blocks": 0},
                                {"scale": 8, "num_channels": 4, "num_blocks": 3}])
def test_detect_round_trip(kw):
    s = spec(**kw)
    state = checks.build(s).state_dict()
    got = detect(state)
    MODELS.build(got).load_state_dict(state, strict=True)
    assert got == {"type": "SwiftSRGAN", "in_channels": s.get("in_channels", 3),
                   "num_channels": s["num_channels"], "num_blocks": s["num_blocks"],
                   "scale": s["scale"]}


@pytest.mark.parametrize("scale", [2, 4])
def test_detects_the_published_files(scale):
    """The original's releases (swift_srgan_2x / 4x): 64 channels, 16 blocks."""
    twins = pytest.importorskip("tests.twins")
    shapes = {k: tuple(v.shape) for k, v in
              twins.build_twin({"type": "SwiftSRGAN", "scale": scale}).state_dict().items()}
    assert MODELS.get("SwiftSRGAN").detect(shapes, {}) == {
        "in_channels": 3, "num_channels": 64, "num_blocks": 16, "scale": scale}


SPANDREL = [  # (keywords of spandrel's Generator, input size, the key the file is saved under)
    ({"upscale_factor": 4}, (20, 27), "model"),  # the published x4: 64 channels, 16 blocks
    ({"upscale_factor": 2, "num_channels": 16, "num_blocks": 3}, (17, 9), None),
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("SwiftSRGAN")
    torch.manual_seed(0)
    network = module.SwiftSRGAN(**kw)
    network.train()
    with torch.no_grad():  # trained-looking running statistics and weights: a few batches
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        for _ in range(3):
            network(torch.rand(2, 3, 16, 16))
    check_spandrel_file(module, network, tmp_path, size, wrap)
