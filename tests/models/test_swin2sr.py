"""Swin2SR: the original's keys in order (each attention's relative_coords_table and
relative_position_index, each shifted block's attn_mask), its buffers value for value, parity with
the torch twin (output and every gradient of an L1 loss, float64 and float32) for every upsampler
and in more settings (no qkv bias, ape, 3conv, one channel, img_range 255, a pretrained window),
eval mode with drop path, the original's init, an Adam step, a .pth round trip, errors, detection
(the img_range convention, the published layouts) and a published-layout .pth through the
inference path with no model given."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.registry import MODELS
from framework.detect import detect

from . import basicsr_checks as checks

SMALL = {"type": "Swin2SR", "img_size": 8, "embed_dim": 12, "depths": [2], "num_heads": [2],
         "window_size": 4, "mlp_ratio": 2, "drop_path_rate": 0.0}


def spec(upsampler="pixelshuffle", scale=2, **kw):
    return {**SMALL, "upsampler": upsampler, "scale": scale, **kw}


def test_state_dict_keys_are_the_originals():
    s = spec("pixelshuffle_aux", 2, depths=[2])
    blk = "layers.0.residual_group.blocks"

    def block(i):
        mask = [f"{blk}.{i}.attn_mask"] if i % 2 else []
        return mask + [f"{blk}.{i}.{k}" for k in (
            "norm1.weight", "norm1.bias", "attn.logit_scale", "attn.q_bias", "attn.v_bias",
            "attn.relative_coords_table", "attn.relative_position_index", "attn.cpb_mlp.0.weight",
            "attn.cpb_mlp.0.bias", "attn.cpb_mlp.2.weight", "attn.qkv.weight", "attn.proj.weight",
            "attn.proj.bias", "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias",
            "mlp.fc2.weight", "mlp.fc2.bias")]
    want = (["conv_first.weight", "conv_first.bias", "patch_embed.proj.weight",
             "patch_embed.proj.bias", "patch_embed.norm.weight", "patch_embed.norm.bias"]
            + block(0) + block(1)
            + ["layers.0.conv.weight", "layers.0.conv.bias", "layers.0.patch_embed.proj.weight",
               "layers.0.patch_embed.proj.bias", "norm.weight", "norm.bias", "conv_after_body.weight",
               "conv_after_body.bias", "conv_bicubic.weight", "conv_bicubic.bias",
               "conv_before_upsample.0.weight", "conv_before_upsample.0.bias", "conv_aux.weight",
               "conv_aux.bias", "conv_after_aux.0.weight", "conv_after_aux.0.bias", "upsample.0.weight",
               "upsample.0.bias", "conv_last.weight", "conv_last.bias"])
    assert checks.check_keys(s) == want
    sd = checks.build(s).state_dict()
    assert sd[f"{blk}.0.attn.relative_coords_table"].shape == (1, 7, 7, 2)
    assert sd[f"{blk}.0.attn.logit_scale"].shape == (2, 1, 1)
    assert sd[f"{blk}.1.attn_mask"].shape == (4, 16, 16)


@pytest.mark.parametrize("kw", [{}, {"window_size": 8, "img_size": 16, "pretrained_window_size": 6}])
def test_buffers_equal_the_twins(kw):
    """The log-spaced coordinates table bit for bit (float32, the same operations), the index and
    the mask."""
    twins = pytest.importorskip("tests.twins")
    ours = checks.build(spec(**kw)).state_dict()
    theirs = twins.build_twin(spec(**kw)).state_dict()
    for k, v in ours.items():
        if not k.endswith(("coords_table", "position_index", "attn_mask")):
            continue
        assert v.dtype == theirs[k].numpy().dtype, k
        np.testing.assert_array_equal(v, theirs[k].numpy(), err_msg=k)


PARITY = [("pixelshuffle", 2, "1conv"), ("pixelshuffle_aux", 4, "1conv"), ("pixelshuffle_aux", 3, "3conv"),
          ("pixelshuffledirect", 3, "3conv"), ("nearest+conv", 4, "1conv"), ("", 1, "1conv")]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("upsampler,scale,resi", PARITY)
def test_matches_the_twin(upsampler, scale, resi, dtype):
    """Train mode (drop path 0), 7x9: padded to 8x12, so the mask is computed for that size.
    float32 loose (1e-4): the x4 nearest+conv's 64-channel convs at 28x36 sum long float32 chains
    (srgrad's direct conv route) that differ from torch's BLAS by ~3e-5 of the largest gradient."""
    tolerance = 1e-4 if dtype == np.float32 else None
    checks.check_parity(spec(upsampler, scale, resi_connection=resi), (2, 3, 7, 9), dtype,
                        tolerance=tolerance)


@pytest.mark.parametrize("kw,shape", [
    ({}, (1, 3, 8, 8)),
    ({"ape": True, "patch_norm": False, "qkv_bias": False}, (2, 3, 6, 8)),
    ({"in_chans": 1, "depths": [2, 1], "num_heads": [4, 2], "img_range": 255.0}, (1, 1, 5, 13)),
    ({"window_size": 8, "img_size": 16, "pretrained_window_size": 12, "mlp_ratio": 1.5}, (1, 3, 9, 4)),
    ({"img_size": 4, "window_size": 8}, (1, 3, 3, 6)),  # blocks' window shrunk to 4, input pads to 8
])
def test_matches_the_twin_in_more_settings(kw, shape):
    checks.check_parity(spec("pixelshuffledirect", 2, **kw), shape, np.float64)


def test_eval_mode_matches_the_twin_with_drop_path():
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    s = spec("pixelshuffle", 2, drop_path_rate=0.5, drop_rate=0.3, attn_drop_rate=0.3, depths=[3])
    model = checks.build(s).to(np.float64).eval()
    twin = twins.twin_of(model, s).eval()
    x = np.random.default_rng(0).uniform(0, 1, (2, 3, 5, 7))
    with sg.no_grad(), torch.no_grad():
        checks.assert_close(model(sg.tensor(x)).data, twin(torch.from_numpy(x)).numpy(), np.float64,
                            "output")


def test_attention_dropout_runs_the_unfused_path():
    """attn_drop_rate > 0 in training: dropout between the softmax and v (attention_softmax); the
    same seed gives the same output, another seed another."""
    model = checks.build(spec(attn_drop_rate=0.5))
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, 3, 8, 8)), dtype=np.float32)
    outs = []
    for seed in (3, 3, 4):
        sg.manual_seed(seed)
        with sg.no_grad():
            outs.append(model(x).data)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], outs[2])


def test_init_is_the_originals():
    model = checks.build(spec(embed_dim=48, num_heads=[6], window_size=8, img_size=16))
    for k, p in model.named_parameters():
        w = p.data.astype(np.float64)
        if w.ndim == 2 and k.endswith(("qkv.weight", "proj.weight", "fc1.weight", "fc2.weight",
                                       "cpb_mlp.0.weight", "cpb_mlp.2.weight")):
            assert w.std() == pytest.approx(0.02, rel=0.15), k
        elif k.endswith("logit_scale"):
            np.testing.assert_allclose(w, np.log(10), rtol=1e-6)
        elif k.endswith(("_bias", "fc1.bias", "fc2.bias", "proj.bias", "cpb_mlp.0.bias")) and "patch_embed" not in k:
            assert not w.any(), k


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec("pixelshuffle", 2), (2, 3, 8, 8))


def test_pth_round_trip(tmp_path):
    checks.check_pth_round_trip(spec("nearest+conv", 4), (1, 3, 5, 6), tmp_path)


@pytest.mark.parametrize("kw,error,match", [
    ({"upsampler": "pixelshuffle_hf"}, ValueError, r"Swin2SR: upsampler must be one of"),
    ({"upsampler": "nearest+conv", "scale": 2}, ValueError, r"'nearest\+conv' makes x4 only"),
    ({"upsampler": "pixelshuffle_aux", "in_chans": 1}, ValueError, r"'pixelshuffle_aux' needs in_chans 3"),
    ({"patch_size": 2}, ValueError, r"Swin2SR: patch_size must be 1"),
    ({"embed_dim": 10}, ValueError, r"Swin2SR: num_heads must divide embed_dim 10, got 6"),
    ({"pretrained_window_size": 1}, ValueError, r"pretrained_window_size 1 divides the coordinates by 0"),
    ({"upscale": 4}, TypeError, r"upscale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "Swin2SR", "embed_dim": 12, "upsampler": "pixelshuffle", **kw})


@pytest.mark.parametrize("kw", [
    {"upsampler": "pixelshuffle_aux", "scale": 4, "resi_connection": "3conv", "depths": [1, 2],
     "num_heads": [1, 4]},
    {"upsampler": "pixelshuffledirect", "scale": 3, "in_chans": 1, "qkv_bias": False, "ape": True,
     "patch_norm": False, "mlp_ratio": 1.5},
    {"upsampler": "", "scale": 1, "img_size": 14, "window_size": 7, "img_range": 255.0},
    {"upsampler": "nearest+conv", "scale": 4, "img_size": 12},
    {"img_size": 8, "window_size": 8, "depths": [2, 2], "num_heads": [2, 2]},  # no block shifts
])
def test_detect_round_trip(kw):
    s = spec(**{"drop_path_rate": 0.1, **kw})
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "Swin2SR"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("embed_dim", "upsampler", "scale", "resi_connection", "ape", "patch_norm", "qkv_bias",
              "in_chans", "mlp_ratio", "img_size", "window_size"):
        if k in s:
            assert got[k] == s[k], k
    assert got["img_range"] == s.get("img_range", 1.0)  # window 7: the JPEG files' 255
    assert detect(state, img_range=3.0)["img_range"] == 3.0  # a given one wins


def test_the_jpeg_convention_is_said():
    """window 7: img_range 255 by the original's convention, and identify() says so (srgrad-infer
    prints it); window 8: 1, quietly."""
    from framework.detect import identify
    jpeg = checks.build(spec("", 1, img_size=14, window_size=7, img_range=255.0)).state_dict()
    assert [n for n in identify(jpeg).notes if n.startswith("img_range=255")]
    assert not identify(checks.build(spec()).state_dict()).notes


# main_test_swin2sr.py's models: (keywords, the published file)
PUBLISHED = [
    ({"upsampler": "pixelshuffle", "scale": 2, "img_size": 64, "window_size": 8, "embed_dim": 180,
      "depths": [6] * 6, "num_heads": [6] * 6}, "Swin2SR_ClassicalSR_X2_64"),
    ({"upsampler": "pixelshuffledirect", "scale": 4, "img_size": 64, "window_size": 8,
      "embed_dim": 60, "depths": [6] * 4, "num_heads": [6] * 4}, "Swin2SR_Lightweight_X4_64"),
    ({"upsampler": "nearest+conv", "scale": 4, "img_size": 64, "window_size": 8, "embed_dim": 180,
      "depths": [6] * 6, "num_heads": [6] * 6}, "Swin2SR_RealworldSR_X4_64_BSRGAN_PSNR"),
    ({"upsampler": "pixelshuffle_aux", "scale": 4, "img_size": 48, "window_size": 8,
      "embed_dim": 180, "depths": [6] * 6, "num_heads": [6] * 6}, "Swin2SR_CompressedSR_X4_48"),
    ({"upsampler": "", "scale": 1, "img_size": 126, "window_size": 7, "img_range": 255.0,
      "embed_dim": 180, "depths": [6] * 6, "num_heads": [6] * 6}, "Swin2SR_Jpeg_dynamic"),
]


def _published_state(twins, published):
    """The twin's state_dict at the published width: one group of two blocks, its keys repeated for
    every block of two groups of six (the published six or four groups only add more of the same
    keys, and detect's confirming build of a full-size model takes seconds)."""
    one = twins.build_twin({**published, "depths": [2], "num_heads": [6]}).state_dict()
    state = {}
    for k, v in one.items():
        if not k.startswith("layers.0."):
            state[k] = v
            continue
        for i, depth in enumerate(published["depths"][:2]):
            key = f"layers.{i}." + k[len("layers.0."):]
            if ".blocks." not in key:
                state[key] = v
                continue
            j0 = int(key.split(".blocks.")[1].split(".")[0])  # 0 unshifted, 1 shifted
            for j in range(j0, depth, 2):
                state[key.replace(f".blocks.{j0}.", f".blocks.{j}.")] = v
    return state


@pytest.mark.parametrize("published,name", PUBLISHED, ids=[p[1] for p in PUBLISHED])
def test_detects_the_published_layouts(published, name):
    twins = pytest.importorskip("tests.twins")
    s = {"type": "Swin2SR", "mlp_ratio": 2, "resi_connection": "1conv", **published,
         "depths": [6, 6], "num_heads": [6, 6]}
    got = detect(_published_state(twins, s))
    want = {k: tuple(v) if isinstance(v, list) else v for k, v in s.items()}
    assert {k: got[k] for k in want} == want, name
    assert got["img_range"] == published.get("img_range", 1.0)


def test_a_published_jpeg_layout_pth_runs_through_the_inference_path(tmp_path):
    """Swin2SR_Jpeg_dynamic's blocks (180 features, window 7, x1) in one group of two, saved by the
    twin with img_range 255 -> load_model with no spec: detected with img_range 255 (the
    convention), the twin's output."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine import load_model
    s = {"type": "Swin2SR", "upsampler": "", "scale": 1, "img_size": 126, "window_size": 7,
         "img_range": 255.0, "embed_dim": 180, "depths": [2], "num_heads": [6], "mlp_ratio": 2}
    torch.manual_seed(0)
    twin = twins.build_twin(s).eval()
    torch.save({"params": twin.state_dict()}, str(tmp_path / "Swin2SR_Jpeg_dynamic.pth"))
    model, _ = load_model(str(tmp_path / "Swin2SR_Jpeg_dynamic.pth"), say=lambda msg: None)
    assert type(model).__name__ == "Swin2SR" and model.img_range == 255.0
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 9, 12)).astype(np.float32)
    with sg.no_grad(), torch.no_grad():
        checks.assert_close(model(sg.tensor(x)).data, twin(torch.from_numpy(x)).numpy(), np.float32,
                            "output")
