"""EDSR specifics: BasicSR's parameter names, mean shift on 1 channel, res_scale, and the custom
`block` layer resolved through LAYERS (the STYLE.md ChannelScale example, used from YAML)."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
import yaml

import framework as sg
from framework import nn
from framework.io.config import import_modules
from framework.registry import LAYERS, MODELS

from .cases import build, lr_batch

# The shipped example (configs/my_layers.py, README's "Custom layers"), imported as a user's
# config would: its folder on sys.path, the module by name.
CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"
import_modules(["my_layers"], str(CONFIGS))
SCALE_LAYER = "ChannelScale"
if "ModelsTestNotALayer" not in LAYERS:
    LAYERS.register("ModelsTestNotALayer")(lambda: 3)


def test_state_dict_keys_are_basicsr_names():
    model, _ = build("EDSR", 4, 3, num_block=2)
    convs = (["conv_first"] + [f"body.{i}.conv{j}" for i in range(2) for j in (1, 2)]
             + ["conv_after_body", "upsample.0", "upsample.2", "conv_last"])
    assert list(model.state_dict()) == [f"{c}.{p}" for c in convs for p in ("weight", "bias")]
    assert model.state_dict()["upsample.2.weight"].shape == (256, 64, 3, 3)


def test_one_channel_mean_defaults_to_the_average_and_can_be_overridden():
    model, _ = build("EDSR", 2, 1, small=True)
    np.testing.assert_allclose(model.mean_in.ravel(), [(0.4488 + 0.4371 + 0.4040) / 3], rtol=1e-7)
    model, _ = build("EDSR", 2, 1, small=True, rgb_mean=[0.5])
    assert model.mean_out.ravel().tolist() == [0.5]


def test_res_scale_multiplies_the_residual_branch():
    half, _ = build("EDSR", 2, 3, small=True, res_scale=0.5)
    one, _ = build("EDSR", 2, 3, small=True)
    state = {k: v.copy() for k, v in half.state_dict().items()}
    for i in range(2):  # conv2 is linear: halving its weight and bias halves the branch
        state[f"body.{i}.conv2.weight"] *= np.float32(0.5)
        state[f"body.{i}.conv2.bias"] *= np.float32(0.5)
    one.load_state_dict(state)
    x = lr_batch(3)
    np.testing.assert_allclose(one(x).data, half(x).data, rtol=1e-5, atol=1e-6)


def _custom(num_feat=16, **kw):
    return build("EDSR", 2, 3, small=True, block={"type": SCALE_LAYER, "channels": num_feat}, **kw)[0]


def test_custom_block_is_appended_to_every_residual_block():
    plain, _ = build("EDSR", 2, 3, small=True)
    custom = _custom()
    assert custom.num_parameters() == plain.num_parameters() + 2 * 16
    extra = [k for k in custom.state_dict() if ".extra." in k]
    assert extra == ["body.0.extra.weight", "body.1.extra.weight"]
    assert custom.body[0].extra is not custom.body[1].extra  # one fresh layer per block


def test_custom_block_scales_each_residual_branch():
    """ChannelScale(2) after conv2 == conv2 with doubled weight and bias."""
    plain, _ = build("EDSR", 2, 3, small=True)
    custom = _custom()
    missing = custom.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing == ["body.0.extra.weight", "body.1.extra.weight"]
    x = lr_batch(3)
    np.testing.assert_array_equal(custom(x).data, plain(x).data)  # scales start at one
    for i in range(2):
        custom.body[i].extra.weight.data[...] = 2
        plain.body[i].conv2.weight.data *= 2
        plain.body[i].conv2.bias.data *= 2
    np.testing.assert_allclose(custom(x).data, plain(x).data, rtol=1e-5, atol=1e-6)


def test_custom_block_from_yaml_trains():
    cfg = yaml.safe_load(f"model: {{type: EDSR, scale: 2, num_feat: 16, num_block: 2, "
                         f"block: {{type: {SCALE_LAYER}, channels: 16}}}}")
    model = MODELS.build(cfg["model"])
    x = lr_batch(3)
    loss = (model(x) - 0.5).abs().mean()
    loss.backward()
    w = model.body[1].extra.weight
    assert w.grad is not None and np.abs(w.grad.data).sum() > 0
    # One SGD step on every parameter: a step on the scales alone moves an L1 loss by ~1e-8,
    # below float32 resolution, which made this test flaky.
    for p in model.parameters():
        p.data -= np.float32(1e-2) * p.grad.data
    with sg.no_grad():
        assert (model(x) - 0.5).abs().mean().item() < loss.item() - 1e-5


@pytest.mark.parametrize("block,error,match", [
    ({"channels": 16}, ValueError, "EDSR: block must be a layer spec"),
    ("ChannelScale", ValueError, "EDSR: block must be a layer spec"),
    ({"type": "NoSuchLayer"}, KeyError, "unknown layer 'NoSuchLayer'"),
    ({"type": "ModelsTestNotALayer"}, TypeError, "EDSR: block 'ModelsTestNotALayer' built a int"),
])
def test_bad_block_spec(block, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "EDSR", "scale": 2, "num_feat": 16, "num_block": 1, "block": block})


# -- published layouts, loaded with no model named ---------------------------------------------------
@pytest.mark.parametrize("fmt", ["zip", "legacy"])
@pytest.mark.parametrize("kw,res_scale,note", [
    ({"scale": 2, "n_feats": 64, "n_resblocks": 2}, 1.0, False),  # edsr_baseline_x2
    ({"scale": 4, "n_feats": 256, "n_resblocks": 1, "res_scale": 0.1}, 0.1, False),  # edsr_x4
    ({"scale": 3, "n_feats": 16, "n_resblocks": 1, "rgb_mean": (0.5, 0.4, 0.3)}, 1.0, True)])
def test_edsr_pytorch_layout_loads_and_matches_its_twin(kw, res_scale, note, fmt, tmp_path):
    """EDSR-PyTorch's sub_mean, head.0, body.N.body.0/2, body.n, tail.0.*, tail.1, add_mean: the mean
    and range from the MeanShift convs, res_scale by the published models' rule (0.1 at 256
    features, 1 at 64; another width assumes 1 and says so)."""
    torch = pytest.importorskip("torch")
    from tests.twins.edsr_pytorch import EDSRPyTorch
    from .published import assert_close, run_published
    torch.manual_seed(0)
    twin = EDSRPyTorch(**kw)
    ours, ref, info, said = run_published(twin, tmp_path, fmt, (1, 3, 5, 4))
    assert info["layout"].startswith("EDSR-PyTorch's layout")
    assert info["model"]["res_scale"] == res_scale and info["model"]["img_range"] == 255.0
    assert info["model"]["rgb_mean"] == kw.get("rgb_mean", (0.4488, 0.4371, 0.404))
    assert any("assumed res_scale=1.0: the EDSR baseline's" in m and
               "--model-arg res_scale=VALUE changes it" in m for m in said) == note, said
    assert_close(ours, ref, 5e-5)


def test_basicsr_edsr_l_runs_with_its_res_scale(tmp_path):
    """BasicSR's EDSR_Lx4_f256b32 (res_scale 0.1 in its option file; the weights do not tell):
    detected with 0.1, so the output is the twin's (with 1 it is not)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from .published import assert_close, run_published
    torch.manual_seed(0)
    twin = twins.build_twin({"type": "EDSR", "scale": 2, "num_feat": 256, "num_block": 1,
                             "res_scale": 0.1})
    ours, ref, info, _ = run_published(twin, tmp_path, "zip", (1, 3, 4, 4))
    assert info["model"]["res_scale"] == 0.1
    assert_close(ours, ref, 5e-5)


def test_mdsr_is_refused_by_name(tmp_path):
    """EDSR-PyTorch's MDSR (pre_process.S.*, upsample.S.*: several scales' heads and tails) is not
    an EDSR: the refusal says so first, then each model's reason."""
    from framework.engine import load_model
    from framework.weights import CheckpointError
    from framework.weights import write_pth
    f = 8
    state = {"sub_mean.weight": np.eye(3, dtype=np.float32).reshape(3, 3, 1, 1),
             "sub_mean.bias": np.zeros(3, np.float32),
             "head.0.weight": np.zeros((f, 3, 3, 3), np.float32), "head.0.bias": np.zeros(f, np.float32)}
    for s in range(3):
        for b in range(2):
            for c in (0, 2):
                state[f"pre_process.{s}.{b}.body.{c}.weight"] = np.zeros((f, f, 5, 5), np.float32)
        state[f"upsample.{s}.0.weight"] = np.zeros((4 * f, f, 3, 3), np.float32)
    state["tail.0.weight"] = np.zeros((3, f, 3, 3), np.float32)
    path = tmp_path / "mdsr.pt"
    write_pth(path, state)
    with pytest.raises(CheckpointError) as err:
        load_model(path, say=lambda m: None)
    lines = str(err.value).splitlines()
    assert "carries no model spec and detect: no architecture srgrad has matches" in lines[0]
    assert lines[1].startswith("It looks like MDSR (EDSR-PyTorch's multi-scale model") \
        and lines[1].endswith("an architecture srgrad does not have."), lines
    assert lines[2] == "Why each of srgrad's models does not fit:"
