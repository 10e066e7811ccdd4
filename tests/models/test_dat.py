"""DAT: the original's keys in order (each spatial attention's rpe_biases and
relative_position_index, each shifted block's attn_mask_0 / attn_mask_1), its buffers value for
value, parity with the torch twin (output and every gradient of an L1 loss, float64 and float32)
for both upsamplers, rectangular windows both ways, padded and shifted inputs, eval mode with drop
path, the original's init, an Adam step, a .pth round trip, errors, detection (the split order
convention, refused on load when a file breaks it) and a published-layout .pth through the
inference path with no model given."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import detect, identify
from framework.registry import MODELS

from . import basicsr_checks as checks

# group 0: blocks 0 (spatial), 1 (channel), 2 (spatial, shifted); group 1: block 0 (shifted)
SMALL = {"type": "DAT", "img_size": 8, "embed_dim": 32, "split_size": [2, 4], "depth": [3, 1],
         "num_heads": [4, 2], "expansion_factor": 2.0, "drop_path_rate": 0.0}


def spec(upsampler="pixelshuffle", scale=2, **kw):
    return {**SMALL, "upsampler": upsampler, "scale": scale, **kw}


def test_state_dict_keys_are_the_originals():
    keys = checks.check_keys(spec())
    attn = "layers.0.blocks.0.attn"
    assert keys[:12] == [
        "conv_first.weight", "conv_first.bias", "before_RG.1.weight", "before_RG.1.bias",
        "layers.0.blocks.0.norm1.weight", "layers.0.blocks.0.norm1.bias", f"{attn}.qkv.weight",
        f"{attn}.qkv.bias", f"{attn}.proj.weight", f"{attn}.proj.bias", f"{attn}.attns.0.rpe_biases",
        f"{attn}.attns.0.relative_position_index"]
    for key in (f"{attn}.attns.0.pos.pos3.2.weight", f"{attn}.dwconv.1.running_mean",
                f"{attn}.channel_interaction.2.num_batches_tracked",
                f"{attn}.spatial_interaction.3.weight", "layers.0.blocks.1.attn.temperature",
                "layers.0.blocks.0.ffn.sg.conv.weight", "upsample.0.weight", "conv_last.weight"):
        assert key in keys, key
    masks = [k for k in keys if "attn_mask" in k]
    assert masks == [f"layers.{i}.blocks.{j}.attn.attn_mask_{m}" for i, j in ((0, 2), (1, 0))
                     for m in (0, 1)]


@pytest.mark.parametrize("split", [[2, 4], [4, 2], [2, 2]])
def test_buffers_equal_the_twins(split):
    twins = pytest.importorskip("tests.twins")
    s = spec(split_size=split)
    ours = checks.build(s).state_dict()
    theirs = twins.build_twin(s).state_dict()
    for k, v in ours.items():
        if k.endswith(("rpe_biases", "position_index", "attn_mask_0", "attn_mask_1")):
            assert v.dtype == theirs[k].numpy().dtype, k
            np.testing.assert_array_equal(v, theirs[k].numpy(), err_msg=k)


PARITY = [("pixelshuffle", 2, {}), ("pixelshuffle", 3, {"split_size": [4, 2], "resi_connection": "3conv"}),
          ("pixelshuffledirect", 3, {"in_chans": 1, "qkv_bias": False}),
          ("pixelshuffledirect", 4, {"depth": [2, 5], "num_heads": [2, 4], "expansion_factor": 1.5})]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("upsampler,scale,kw", PARITY)
def test_matches_the_twin(upsampler, scale, kw, dtype):
    """Train mode (drop path 0), 7x9: q, k, v padded to 8x12, the masks computed for that size
    (group 1 block 4 of the last case shifts too)."""
    s = spec(upsampler, scale, **kw)
    checks.check_parity(s, (2, s.get("in_chans", 3), 7, 9), dtype)


@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (2, 3, 3, 5), (2, 3, 16, 4)])
def test_matches_the_twin_at_other_sizes(shape):
    """At img_size (the stored masks), smaller than a window, and taller than img_size."""
    checks.check_parity(spec(), shape, np.float64)


def test_eval_mode_matches_the_twin_with_drop_path():
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    s = spec(drop_path_rate=0.5, drop_rate=0.3, attn_drop_rate=0.3)
    model = checks.build(s).to(np.float64)
    twin = twins.twin_of(model, s)
    x = np.random.default_rng(0).uniform(0, 1, (2, 3, 5, 7))
    model.eval(), twin.eval()  # (moved BatchNorm statistics: the published-layout test below)
    with sg.no_grad(), torch.no_grad():
        checks.assert_close(model(sg.tensor(x)).data, twin(torch.from_numpy(x)).numpy(), np.float64,
                            "output")


def test_attention_dropout_runs_the_unfused_path():
    """attn_drop_rate > 0 in training: dropout on both attentions' weights; the same seed gives the
    same output, another seed another, and p -> 0 gives the fused path's output."""
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (2, 3, 8, 8)), dtype=np.float64)
    outs = []
    for rate, seed in ((0.5, 3), (0.5, 3), (0.5, 4), (1e-12, 3), (0.0, 3)):
        model = checks.build(spec(attn_drop_rate=rate)).to(np.float64)
        sg.manual_seed(seed)
        with sg.no_grad():
            outs.append(model(x).data)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], outs[2])
    np.testing.assert_allclose(outs[3], outs[4], rtol=0, atol=1e-10)


def test_init_is_the_originals():
    """Linear weights ~ trunc_normal(std 0.02) with zero biases (the position-bias MLP's too), the
    temperatures ones, LayerNorm / BatchNorm ones and zeros."""
    model = checks.build(spec(embed_dim=64, num_heads=[4, 4]))
    for k, p in model.named_parameters():
        w = p.data.astype(np.float64)
        if k.endswith(("qkv.weight", "attn.proj.weight", "fc1.weight", "fc2.weight")):
            assert w.std() == pytest.approx(0.02, rel=0.15), k
        elif k.endswith(("qkv.bias", "proj.bias", "fc1.bias", "fc2.bias", "pos_proj.bias")):
            assert not w.any(), k
        elif k.endswith("temperature") or (("norm" in k or "dwconv.1" in k) and k.endswith("weight")):
            np.testing.assert_array_equal(w, 1.0, err_msg=k)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(), (2, 3, 8, 8))


def test_pth_round_trip(tmp_path):
    checks.check_pth_round_trip(spec("pixelshuffledirect", 3), (2, 3, 5, 6), tmp_path)


@pytest.mark.parametrize("embed_dim,heads", [(16, [2, 2]), (24, [4, 2])])
def test_below_32_the_position_bias_has_no_features_as_the_originals(embed_dim, heads, tmp_path):
    """The original builds DAT from embed_dim 16 (its spatial interaction's embed_dim // 16
    convolution needs a channel); below 32 its position-bias MLP has 0 features, so the bias is
    pos3's bias alone: output and every gradient match the twin, the zero-size keys included."""
    s = spec(embed_dim=embed_dim, num_heads=heads)
    checks.check_parity(s, (2, 3, 7, 9), np.float64)
    checks.check_pth_round_trip(s, (2, 3, 5, 6), tmp_path)


@pytest.mark.parametrize("kw,error,match", [
    ({"upsampler": "nearest+conv"}, ValueError, r"DAT: upsampler must be one of"),
    ({"embed_dim": 14}, ValueError, r"embed_dim must be even and at least 16"),
    ({"embed_dim": 31, "num_heads": [1, 1]}, ValueError, r"embed_dim must be even"),
    ({"split_size": [1, 4]}, ValueError, r"DAT: split_size"),
    ({"img_size": 6}, ValueError, r"img_size 6 must be a multiple of both split_size sides"),
    ({"num_heads": [3, 2]}, ValueError, r"num_heads 3 must divide embed_dim 32"),
    ({"expansion_factor": 1.0 / 32}, ValueError, r"the spatial gate needs an even number"),
    ({"upscale": 4}, TypeError, r"upscale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({**spec(), **kw})


def test_one_image_in_training_is_refused_as_the_original():
    model = checks.build(spec())
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        model(sg.tensor(np.zeros((1, 3, 8, 8), np.float32)))
    with sg.no_grad():
        assert model.eval()(sg.tensor(np.zeros((1, 3, 8, 8), np.float32))).shape == (1, 3, 16, 16)


@pytest.mark.parametrize("kw", [
    {},
    {"upsampler": "pixelshuffledirect", "scale": 3, "in_chans": 1, "qkv_bias": False,
     "resi_connection": "3conv", "expansion_factor": 1.5, "split_size": [4, 4], "img_size": 12},
    {"depth": [1, 2], "num_heads": [6, 4], "embed_dim": 48, "scale": 4, "split_size": [2, 6],
     "img_size": 12},
])
def test_detect_round_trip(kw):
    s = spec(**{"drop_path_rate": 0.1, **kw})
    state = checks.build(s).state_dict()
    match = identify(state)
    got = match.spec
    assert got["type"] == "DAT"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("embed_dim", "upsampler", "scale", "resi_connection", "qkv_bias", "in_chans",
              "expansion_factor", "img_size", "depth", "num_heads", "split_size"):
        want = s.get(k, {"resi_connection": "1conv", "qkv_bias": True, "in_chans": 3}.get(k))
        want = tuple(want) if isinstance(want, list) else want
        assert got[k] == want, k
    square = got["split_size"][0] == got["split_size"][1]
    assert any(n.startswith("split_size") for n in match.notes) != square


def test_a_file_with_the_other_split_order_is_refused_on_load():
    """(4, 2) and (2, 4) windows have the same shapes: detect assumes (2, 4), says so, and the
    load compares the buffers and names the file's order; given, (4, 2) loads."""
    s = spec(split_size=[4, 2])
    state = checks.build(s).state_dict()
    match = identify(state)
    assert match.spec["split_size"] == (2, 4)
    with pytest.raises(ValueError, match=r"attns.0.rpe_biases differs .* file's split_size is \(4, 2\)"):
        MODELS.build(match.spec).load_state_dict(state)
    MODELS.build(detect(state, split_size=[4, 2])).load_state_dict(state)


# the original's options: DAT (x2-x4), DAT-S, DAT-2, DAT-light (keywords; depths cut to 2 groups of
# 2, DAT-light's one group of 18 to 3: a shifted block, whose masks give img_size)
PUBLISHED = [
    ({"embed_dim": 180, "split_size": [8, 32], "num_heads": [6, 6], "expansion_factor": 4.0,
      "upsampler": "pixelshuffle", "scale": 4}, "DAT_x4"),
    ({"embed_dim": 180, "split_size": [8, 16], "num_heads": [6, 6], "expansion_factor": 2.0,
      "upsampler": "pixelshuffle", "scale": 2}, "DAT_S_x2"),
    ({"embed_dim": 180, "split_size": [8, 32], "num_heads": [6, 6], "expansion_factor": 2.0,
      "upsampler": "pixelshuffle", "scale": 3}, "DAT_2_x3"),
    ({"embed_dim": 60, "split_size": [8, 32], "depth": [3], "num_heads": [6], "expansion_factor": 2.0,
      "resi_connection": "3conv", "upsampler": "pixelshuffledirect", "scale": 4}, "DAT_light_x4"),
]


@pytest.mark.parametrize("published,name", PUBLISHED, ids=[p[1] for p in PUBLISHED])
def test_detects_the_published_layouts(published, name):
    twins = pytest.importorskip("tests.twins")
    s = {"type": "DAT", "img_size": 64, "depth": [2, 2], "resi_connection": "1conv", **published}
    got = detect(twins.build_twin(s).state_dict())
    want = {k: tuple(v) if isinstance(v, list) else v for k, v in s.items()}
    assert {k: got[k] for k in want} == want, name


def test_a_published_layout_pth_runs_through_the_inference_path(tmp_path):
    """DAT-light's blocks (60 features, 6 heads, split (8, 32), 3conv, x2 pixelshuffledirect) in
    one group of three, saved by the twin -> load_model with no spec: detected, the twin's output
    (eval mode, BatchNorm statistics moved off their init)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine import load_model
    s = {"type": "DAT", "img_size": 64, "embed_dim": 60, "split_size": [8, 32], "depth": [3],
         "num_heads": [6], "expansion_factor": 2.0, "resi_connection": "3conv",
         "upsampler": "pixelshuffledirect", "scale": 2}
    torch.manual_seed(0)
    twin = twins.build_twin(s)
    with torch.no_grad():  # move the BatchNorm statistics off their init
        twin(torch.rand(2, 3, 12, 10))
    twin.eval()
    torch.save({"params": twin.state_dict()}, str(tmp_path / "DAT_light_x2.pth"))
    said = []
    model, _ = load_model(str(tmp_path / "DAT_light_x2.pth"), say=said.append)
    assert type(model).__name__ == "DAT" and tuple(model.split_size) == (8, 32)
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 9, 12)).astype(np.float32)
    with sg.no_grad(), torch.no_grad():
        checks.assert_close(model(sg.tensor(x)).data, twin(torch.from_numpy(x)).numpy(), np.float32,
                            "output")
