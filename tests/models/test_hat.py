"""HAT: the original's keys in order (its two index buffers on the model, no mask buffer), parity
with the torch twin (output and every gradient of an L1 loss, float64 and float32) over scales,
residual connections, overlap ratios (an odd overlap too), qkv bias, ape, channels and padded sizes;
eval mode with drop path; the original's init; an Adam step; shapes; errors; detection of the
published layouts (HAT-S, HAT = Real-HAT-GAN; HAT-L is HAT with more groups), and a published-layout .pth through the
inference path with no model given. The overlapping windows: tests/framework/functional/test_windows.py."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.registry import MODELS
from framework.detect import detect

from . import basicsr_checks as checks

SMALL = {"type": "HAT", "img_size": 8, "embed_dim": 12, "depths": [2], "num_heads": [2],
         "window_size": 4, "mlp_ratio": 2, "compress_ratio": 3, "squeeze_factor": 4,
         "drop_path_rate": 0.0}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


def test_state_dict_keys_are_the_originals():
    """torch's order: the model's own parameters (absolute_pos_embed), its buffers (the two
    indices), then its children; in a block the CAB after the attention, in the OCAB its bias table
    first (its own parameter)."""
    s = spec(2, ape=True, depths=[1])
    grp = "layers.0.residual_group"
    block = [f"{grp}.blocks.0.{k}" for k in (
        "norm1.weight", "norm1.bias", "attn.relative_position_bias_table", "attn.qkv.weight",
        "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias", "conv_block.cab.0.weight",
        "conv_block.cab.0.bias", "conv_block.cab.2.weight", "conv_block.cab.2.bias",
        "conv_block.cab.3.attention.1.weight", "conv_block.cab.3.attention.1.bias",
        "conv_block.cab.3.attention.3.weight", "conv_block.cab.3.attention.3.bias", "norm2.weight",
        "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias")]
    ocab = [f"{grp}.overlap_attn.{k}" for k in (
        "relative_position_bias_table", "norm1.weight", "norm1.bias", "qkv.weight", "qkv.bias",
        "proj.weight", "proj.bias", "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias",
        "mlp.fc2.weight", "mlp.fc2.bias")]
    want = (["absolute_pos_embed", "relative_position_index_SA", "relative_position_index_OCA",
             "conv_first.weight", "conv_first.bias", "patch_embed.norm.weight", "patch_embed.norm.bias"]
            + block + ocab + ["layers.0.conv.weight", "layers.0.conv.bias", "norm.weight", "norm.bias",
                              "conv_after_body.weight", "conv_after_body.bias",
                              "conv_before_upsample.0.weight", "conv_before_upsample.0.bias",
                              "upsample.0.weight", "upsample.0.bias", "conv_last.weight", "conv_last.bias"])
    assert checks.check_keys(s) == want
    sd = checks.build(s).state_dict()
    assert sd["relative_position_index_SA"].shape == (16, 16)
    assert sd["relative_position_index_OCA"].shape == (16, 36)  # 4^2 queries, 6^2 keys
    assert sd["relative_position_index_OCA"].dtype == np.int64
    assert sd[f"{grp}.overlap_attn.relative_position_bias_table"].shape == (81, 2)  # (4 + 6 - 1)^2
    assert sd[f"{grp}.blocks.0.conv_block.cab.0.weight"].shape == (4, 12, 3, 3)  # 12 // 3
    assert sd[f"{grp}.blocks.0.conv_block.cab.3.attention.1.weight"].shape == (3, 12, 1, 1)  # 12 // 4


def test_index_buffers_equal_the_twins():
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    for kw in ({}, {"window_size": 8, "img_size": 16, "overlap_ratio": 0.25}):
        ours = checks.build(spec(**kw)).state_dict()
        theirs = twins.build_twin(spec(**kw)).state_dict()
        for k in ("relative_position_index_SA", "relative_position_index_OCA"):
            np.testing.assert_array_equal(ours[k], theirs[k].numpy())
            assert theirs[k].dtype == torch.int64


@pytest.mark.parametrize("kw", [
    {"resi_connection": "identity", "depths": [1, 2], "num_heads": [1, 4]},
    {"overlap_ratio": 0.25, "qkv_bias": False, "patch_norm": False, "in_chans": 1, "scale": 4},
    {"scale": 1, "num_feat": 16, "compress_ratio": 5, "squeeze_factor": 7.5},
])
def test_keys_and_shapes_equal_the_twins(kw):
    checks.check_keys(spec(**kw))


PARITY = [(2, {}), (3, {"resi_connection": "identity"}), (4, {"depths": [1, 2], "num_heads": [3, 2]}),
          (1, {"overlap_ratio": 1.0, "num_feat": 8})]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,kw", PARITY)
def test_matches_the_twin(scale, kw, dtype):
    """Train mode (drop path 0), 7x9: padded to 8x12, the mask computed for that size."""
    checks.check_parity(spec(scale, **kw), (2, 3, 7, 9), dtype)


@pytest.mark.parametrize("kw,shape", [
    ({}, (1, 3, 8, 8)),
    ({"ape": True, "patch_norm": False, "qkv_bias": False, "qk_scale": 0.7}, (2, 3, 6, 8)),
    ({"in_chans": 1, "depths": [2, 1], "num_heads": [4, 2], "img_range": 255.0,
      "conv_scale": 0.5}, (1, 1, 5, 13)),
    ({"img_size": 4}, (1, 3, 3, 6)),  # token grid = window: no block shifts
    ({"window_size": 8, "img_size": 16, "overlap_ratio": 0.25, "mlp_ratio": 1.5}, (1, 3, 9, 17)),
    ({"window_size": 6, "img_size": 12, "overlap_ratio": 0.34, "compress_ratio": 2.5,
      "squeeze_factor": 5}, (1, 3, 12, 7)),
])
def test_matches_the_twin_in_more_settings(kw, shape):
    checks.check_parity(spec(2, **kw), shape, np.float64)


def test_odd_overlap_departs_from_the_original_by_the_bottom_right_row():
    """window 4, ratio 0.25: a 5x5 neighbourhood, o - w odd. The original's Unfold (pad 0) covers
    one window too few and fails; ours runs, each neighbourhood reaching one row / column past
    the window's bottom right."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    s = spec(2, overlap_ratio=0.25)
    model = checks.build(s).eval()
    with sg.no_grad():
        y = model(sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, 3, 8, 8)), dtype=np.float32))
    assert y.shape == (1, 3, 16, 16) and np.isfinite(y.data).all()
    with pytest.raises(RuntimeError), torch.no_grad():
        twins.twin_of(model, s, dtype=torch.float32)(torch.rand(1, 3, 8, 8))


def test_eval_mode_matches_the_twin_with_drop_path():
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    s = spec(2, drop_path_rate=0.5, drop_rate=0.3, attn_drop_rate=0.3, depths=[3])
    model = checks.build(s).to(np.float64).eval()
    twin = twins.twin_of(model, s).eval()
    x = np.random.default_rng(0).uniform(0, 1, (2, 3, 5, 7))
    with sg.no_grad(), torch.no_grad():
        checks.assert_close(model(sg.tensor(x)).data, twin(torch.from_numpy(x)).numpy(), np.float64,
                            "output")


def test_init_is_the_originals():
    """Linear weights trunc_normal(std 0.02), zero biases; bias tables trunc_normal(0.02);
    LayerNorm ones / zeros."""
    model = checks.build(spec(embed_dim=48, num_heads=[6], window_size=8, img_size=16))
    for k, p in model.named_parameters():
        w = p.data.astype(np.float64)
        if k.endswith(("qkv.weight", "proj.weight", "fc1.weight", "fc2.weight",
                       "relative_position_bias_table")):
            assert w.std() == pytest.approx(0.02, rel=0.15), k
        elif k.endswith(("qkv.bias", "proj.bias", "fc1.bias", "fc2.bias")) or "norm" in k:
            assert np.all(w == (1 if "norm" in k and k.endswith("weight") else 0)), k


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_round_trip(tmp_path):
    checks.check_pth_round_trip(spec(3, resi_connection="identity"), (1, 3, 5, 6), tmp_path)


@pytest.mark.parametrize("scale,hw,want", [(2, (5, 3), (10, 6)), (3, (5, 3), (15, 9)),
                                           (8, (1, 2), (8, 16)), (1, (9, 4), (9, 4))])
def test_output_shapes(scale, hw, want):
    y = checks.build(spec(scale))(sg.tensor(np.zeros((2, 3, *hw), np.float32)))
    assert y.shape == (2, 3, *want) and y.dtype == np.float32


def test_silent_last_conv_returns_the_mean():
    model = checks.build(spec(2))
    model.conv_last.weight.data[...] = 0
    model.conv_last.bias.data[...] = 0
    x = np.random.default_rng(2).uniform(0, 1, (1, 3, 5, 7)).astype(np.float32)
    mean = np.float32([0.4488, 0.4371, 0.4040])[None, :, None, None]
    np.testing.assert_array_equal(model(sg.tensor(x)).data, np.broadcast_to(mean, (1, 3, 10, 14)))


@pytest.mark.parametrize("kw,error,match", [
    ({"scale": 5}, ValueError, r"HAT: scale x5 is not supported"),
    ({"upsampler": "pixelshuffledirect"}, ValueError, r"HAT: upsampler must be one of .*pixelshuffle"),
    ({"resi_connection": "3conv"}, ValueError, r"HAT: resi_connection must be one of"),
    ({"num_heads": [6, 6]}, ValueError, r"HAT: num_heads must be a list of 4 ints"),
    ({"embed_dim": 62}, ValueError, r"HAT: num_heads must divide embed_dim 62, got 6"),
    ({"img_size": 4, "window_size": 8}, ValueError,
     r"HAT: img_size \(4, 4\) \(a \(4, 4\) token grid\) is smaller than window_size 8"),
    ({"compress_ratio": 0}, ValueError, r"HAT: compress_ratio must be > 0"),
    ({"squeeze_factor": 61}, ValueError, r"HAT: squeeze_factor 61(.0)? leaves no feature"),
    ({"overlap_ratio": -0.5}, ValueError, r"HAT: overlap_ratio must be >= 0"),
    ({"mlp_ratio": 0.001}, ValueError, r"HAT: mlp_ratio 0.001 leaves the MLP no hidden feature"),
    ({"drop_path_rate": 1.0}, ValueError, r"HAT: drop_path_rate must be in \[0.0, 1.0\)"),
    ({"upscale": 4}, TypeError, r"upscale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "HAT", "embed_dim": 60, "img_size": 16, **kw})


@pytest.mark.parametrize("kw", [
    {"scale": 4, "resi_connection": "identity", "depths": [1, 2], "num_heads": [1, 4]},
    {"scale": 3, "in_chans": 1, "overlap_ratio": 0.25, "qkv_bias": False, "patch_norm": False,
     "ape": True, "mlp_ratio": 1.5},
    {"scale": 1, "num_feat": 16, "compress_ratio": 5, "squeeze_factor": 2.5, "window_size": 2},
    {"embed_dim": 3, "num_heads": [1], "mlp_ratio": 7 / 3, "compress_ratio": 1, "squeeze_factor": 1},
])
def test_detect_round_trip(kw):
    s = spec(**{"drop_path_rate": 0.1, **kw})
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "HAT"
    rebuilt = MODELS.build(got)
    rebuilt.load_state_dict(state, strict=True)
    for k in ("embed_dim", "scale", "resi_connection", "ape", "patch_norm", "qkv_bias", "in_chans",
              "mlp_ratio", "window_size", "num_feat", "overlap_ratio"):
        if k in s:
            assert got[k] == s[k], k
    assert list(got["depths"]) == s["depths"] and list(got["num_heads"]) == s["num_heads"]
    e = s["embed_dim"]
    assert e // got["compress_ratio"] == e // s["compress_ratio"]
    assert e // got["squeeze_factor"] == e // s["squeeze_factor"]


# The original's options files (options/test/*.yml), upscale 4. HAT-L is HAT with 12 groups, and
# Real_HAT_GAN_SRx4 is HAT: one build each of the two widths keeps this test fast (a full-size
# build initialises ~20M weights).
PUBLISHED = {
    "HAT-S": {"embed_dim": 144, "depths": [6] * 6, "num_heads": [6] * 6, "compress_ratio": 24,
              "squeeze_factor": 24},
    "HAT": {"embed_dim": 180, "depths": [6] * 6, "num_heads": [6] * 6, "compress_ratio": 3,
            "squeeze_factor": 30},
}


def _published_state(twins, published):
    """The twin's state_dict at the published size: one group of one block, its keys repeated for
    every block and group (a full build takes seconds)."""
    one = twins.build_twin({**published, "depths": [1], "num_heads": [6]}).state_dict()
    state = {}
    for k, v in one.items():
        if not k.startswith("layers.0."):
            state[k] = v
            continue
        for i, depth in enumerate(published["depths"]):
            key = f"layers.{i}." + k[len("layers.0."):]
            blocks = range(depth) if ".blocks.0." in key else [None]
            for j in blocks:
                state[key if j is None else key.replace(".blocks.0.", f".blocks.{j}.")] = v
    return state


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_detects_the_published_layouts(name):
    """detect gives back every keyword the options file sets, from the twin's shapes."""
    twins = pytest.importorskip("tests.twins")
    published = {"type": "HAT", "scale": 4, "img_size": 64, "window_size": 16, "overlap_ratio": 0.5,
                 "mlp_ratio": 2, **PUBLISHED[name]}
    state = _published_state(twins, published)
    got = detect(state)
    assert {k: got[k] for k in published if k != "type"} == {
        k: tuple(v) if isinstance(v, list) else v for k, v in published.items() if k != "type"}
    assert (got["qkv_bias"], got["patch_norm"], got["ape"], got["resi_connection"],
            got["num_feat"]) == (True, True, False, "1conv", 64)


def test_a_published_layout_pth_runs_through_the_inference_path(tmp_path):
    """HAT-S's blocks (144 features, window 16, overlap 24, CAB 6 / 6 wide, MLP x2) in one group of
    two: the twin's torch.save({'params_ema': ...}) -> load_model with no spec (detected) -> the
    twin's output."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine import load_model
    s = {"type": "HAT", "scale": 2, "img_size": 64, "window_size": 16, "overlap_ratio": 0.5,
         "mlp_ratio": 2, **PUBLISHED["HAT-S"], "depths": [2], "num_heads": [6]}
    torch.manual_seed(0)
    twin = twins.build_twin(s).eval()
    path = tmp_path / "HAT-S_SRx2.pth"
    torch.save({"params_ema": twin.state_dict()}, str(path))
    model, info = load_model(str(path), say=lambda msg: None)
    assert type(model).__name__ == "HAT" and info.get("key", "params_ema") == "params_ema"
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 12, 20)).astype(np.float32)
    with sg.no_grad(), torch.no_grad():
        checks.assert_close(model(sg.tensor(x)).data, twin(torch.from_numpy(x)).numpy(), np.float32,
                            "output")
