"""SwinIR: BasicSR's keys in order (buffers included), parity with the torch twin (output and every
gradient of an L1 loss) for every upsampler and residual connection, padded sizes, train and eval
modes; drop path; BasicSR's init; a .pth round trip through load_weights; an Adam step; shapes;
errors; detection. Its window ops: tests/framework/functional/test_attention.py."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.registry import MODELS
from framework.detect import detect

from . import basicsr_checks as checks

SMALL = {"type": "SwinIR", "img_size": 8, "embed_dim": 8, "depths": [2], "num_heads": [2],
         "window_size": 4, "mlp_ratio": 2, "drop_path_rate": 0.0}


def spec(upsampler="pixelshuffle", scale=2, **kw):
    return {**SMALL, "upsampler": upsampler, "scale": scale, **kw}


def test_state_dict_keys_are_basicsrs():
    """torch's order: a module's own parameters, then its buffers, then its children: the bias table
    before the index, a shifted block's attn_mask before its norm1; no key for unshifted masks."""
    s = spec("pixelshuffledirect", 2, ape=True)
    blk = "layers.0.residual_group.blocks"

    def block(i):
        mask = [f"{blk}.{i}.attn_mask"] if i % 2 else []
        return mask + [f"{blk}.{i}.{k}" for k in (
            "norm1.weight", "norm1.bias", "attn.relative_position_bias_table",
            "attn.relative_position_index", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
            "attn.proj.bias", "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias",
            "mlp.fc2.weight", "mlp.fc2.bias")]
    want = (["absolute_pos_embed", "conv_first.weight", "conv_first.bias", "patch_embed.norm.weight",
             "patch_embed.norm.bias"] + block(0) + block(1)
            + ["layers.0.conv.weight", "layers.0.conv.bias", "norm.weight", "norm.bias",
               "conv_after_body.weight", "conv_after_body.bias", "upsample.0.weight", "upsample.0.bias"])
    assert checks.check_keys(s) == want
    sd = checks.build(s).state_dict()
    assert sd["absolute_pos_embed"].shape == (1, 64, 8)
    assert sd[f"{blk}.0.attn.relative_position_bias_table"].shape == (49, 2)  # (2 * 4 - 1)^2 offsets
    assert sd[f"{blk}.0.attn.relative_position_index"].dtype == np.int64
    assert sd[f"{blk}.1.attn_mask"].shape == (4, 16, 16) and sd[f"{blk}.1.attn_mask"].dtype == np.float32
    assert sd["upsample.0.weight"].shape == (12, 8, 3, 3)  # 3 channels x 2^2


@pytest.mark.parametrize("kw", [
    {"upsampler": "pixelshuffle", "scale": 3, "resi_connection": "3conv", "depths": [1, 2],
     "num_heads": [1, 4]},
    {"upsampler": "nearest+conv", "scale": 4, "patch_norm": False, "qkv_bias": False, "in_chans": 1},
    {"upsampler": "", "scale": 1, "img_size": [8, 12], "depths": [3, 0], "num_heads": [2, 2]},
    {"img_size": 4, "window_size": 8},  # the window shrinks to the 4x4 grid: no shift, no mask
])
def test_keys_and_shapes_equal_the_twins(kw):
    checks.check_keys(spec(**kw))


def test_mask_at_another_size_leaves_the_buffer_alone():
    model = checks.build(spec())
    blk = model.layers[0].residual_group.blocks[1]
    stored = blk.attn_mask.data.copy()
    with sg.no_grad():
        model(sg.tensor(np.zeros((1, 3, 12, 16), np.float32)))
    np.testing.assert_array_equal(blk.attn_mask.data, stored)
    assert blk.mask(8, 8, np.float32) is blk.attn_mask.data
    assert blk.mask(12, 16, np.float64).shape == (12, 16, 16)
    assert blk.mask(12, 16, np.float64).dtype == np.float64
    assert model.layers[0].residual_group.blocks[0].mask(8, 8, np.float32) is None  # unshifted


PARITY = [("pixelshuffle", 2, "1conv"), ("pixelshuffle", 3, "3conv"), ("pixelshuffledirect", 3, "3conv"),
          ("nearest+conv", 4, "1conv"), ("nearest+conv", 2, "3conv"), ("nearest+conv", 8, "1conv"),
          ("", 1, "3conv"), ("", 1, "1conv")]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("upsampler,scale,resi", PARITY)
def test_matches_the_twin(upsampler, scale, resi, dtype):
    """Train mode (drop path 0), 7x9: padded to 8x12, so the mask is computed for that size."""
    checks.check_parity(spec(upsampler, scale, resi_connection=resi), (2, 3, 7, 9), dtype)


@pytest.mark.parametrize("kw,shape", [
    ({}, (1, 3, 8, 8)),  # img_size: the stored mask
    ({"ape": True, "patch_norm": False, "qkv_bias": False, "qk_scale": 0.7}, (2, 3, 6, 8)),
    ({"in_chans": 1, "depths": [2, 1], "num_heads": [4, 2], "img_range": 255.0}, (1, 1, 5, 13)),
    ({"img_size": 4, "window_size": 8}, (1, 3, 3, 6)),  # window shrunk to 4
    ({"img_size": 10, "window_size": 4}, (1, 3, 10, 10)),  # grid 10 padded to 12: the mask's size
    ({"window_size": 3, "img_size": 9, "depths": [4], "mlp_ratio": 1.5}, (1, 3, 4, 2)),
])
def test_matches_the_twin_in_more_settings(kw, shape):
    checks.check_parity(spec("pixelshuffledirect", 2, **kw), shape, np.float64)


def test_eval_mode_matches_the_twin_with_drop_path():
    """drop_path_rate 0.5: eval() makes drop path (and dropout) the identity, in both."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    s = spec("pixelshuffle", 2, drop_path_rate=0.5, drop_rate=0.3, attn_drop_rate=0.3, depths=[3])
    model = checks.build(s).to(np.float64).eval()
    twin = twins.twin_of(model, s).eval()
    x = np.random.default_rng(0).uniform(0, 1, (2, 3, 5, 7))
    with sg.no_grad(), torch.no_grad():
        checks.assert_close(model(sg.tensor(x)).data, twin(torch.from_numpy(x)).numpy(), np.float64,
                            "output")


def test_drop_path_rates_rise_linearly_and_follow_the_generator():
    model = checks.build(spec(drop_path_rate=0.3, depths=[2, 2], num_heads=[2, 2]))
    blocks = [b for layer in model.layers for b in layer.residual_group.blocks]
    assert type(blocks[0].drop_path).__name__ == "Identity"  # rate 0
    np.testing.assert_allclose([b.drop_path.drop_prob for b in blocks[1:]], [0.1, 0.2, 0.3])
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (4, 3, 8, 8)), dtype=np.float32)
    outs = []
    for seed in (5, 5, 6):
        sg.manual_seed(seed)
        with sg.no_grad():
            outs.append(model(x).data)
    np.testing.assert_array_equal(outs[0], outs[1])  # the same masks from the same seed
    assert not np.array_equal(outs[0], outs[2])
    with sg.no_grad():
        model.eval()
        np.testing.assert_array_equal(model(x).data, model(x).data)


def test_init_is_basicsrs():
    """Linear weights: trunc_normal(std 0.02) (|w| << 2: a plain 0.02 normal), zero biases; the
    bias tables likewise; LayerNorm ones / zeros; convolutions torch's uniform default."""
    model = checks.build(spec(embed_dim=48, num_heads=[6], window_size=8, img_size=16))
    params = dict(model.named_parameters())
    for k, p in params.items():
        w = p.data.astype(np.float64)
        if k.endswith(("qkv.weight", "proj.weight", "fc1.weight", "fc2.weight")):
            assert w.std() == pytest.approx(0.02, rel=0.1), k
            assert np.abs(w).max() > 2.5 * 0.02, k  # normal tails, not a uniform's sqrt(3) std
        elif k.endswith("relative_position_bias_table"):
            assert w.std() == pytest.approx(0.02, rel=0.1), k
        elif k.endswith(("qkv.bias", "proj.bias", "fc1.bias", "fc2.bias")) or "norm" in k:
            assert np.all(w == (1 if "norm" in k and k.endswith("weight") else 0)), k
    conv = params["conv_first.weight"].data
    assert np.abs(conv).max() <= 1 / np.sqrt(27) and conv.std() == pytest.approx(1 / np.sqrt(81), rel=0.2)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec("pixelshuffle", 2), (2, 3, 8, 8))


def test_pth_round_trip_through_load_weights(tmp_path):
    """torch.save({'params': sd}) as BasicSR writes it (int64 index, float32 masks included) ->
    framework.weights.load_weights -> strict load -> the same output; detect on it too."""
    torch = pytest.importorskip("torch")
    from framework.weights import load_weights
    s = spec("pixelshuffle", 3, resi_connection="3conv")
    model = checks.build(s, seed=1).eval()
    path = tmp_path / "net_g.pth"
    torch.save({"params": {k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()}},
               str(path))
    state, info = load_weights(str(path))
    assert info["key"] == "params"
    assert state["layers.0.residual_group.blocks.0.attn.relative_position_index"].dtype == np.int64
    fresh = MODELS.build(detect(state, types=["SwinIR"])).eval()
    fresh.load_state_dict(state, strict=True)
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, 3, 5, 6)), dtype=np.float32)
    with sg.no_grad():
        np.testing.assert_array_equal(fresh(x).data, model(x).data)


@pytest.mark.parametrize("upsampler,scale,hw,want", [
    ("pixelshuffle", 2, (5, 3), (10, 6)), ("pixelshuffle", 3, (5, 3), (15, 9)),
    ("pixelshuffle", 4, (8, 8), (32, 32)), ("pixelshuffle", 8, (1, 2), (8, 16)),
    ("pixelshuffledirect", 5, (4, 9), (20, 45)), ("nearest+conv", 4, (3, 1), (12, 4)),
    ("", 1, (9, 4), (9, 4))])
def test_output_shapes(upsampler, scale, hw, want):
    y = checks.build(spec(upsampler, scale))(sg.tensor(np.zeros((2, 3, *hw), np.float32)))
    assert y.shape == (2, 3, *want) and y.dtype == np.float32


def test_silent_body_and_last_conv_returns_the_mean_or_the_input():
    """upsampler '': out = x + conv_last(...): a zero conv_last returns the input exactly (after
    the pad / mean shift / crop round trip); pixelshuffledirect with a zero conv: the mean."""
    x = np.random.default_rng(2).uniform(0, 1, (1, 3, 5, 7)).astype(np.float32)
    model = checks.build(spec("", 1))
    model.conv_last.weight.data[...] = 0
    model.conv_last.bias.data[...] = 0
    np.testing.assert_allclose(model(sg.tensor(x)).data, x, rtol=0, atol=1e-7)
    model = checks.build(spec("pixelshuffledirect", 2))
    model.upsample[0].weight.data[...] = 0
    model.upsample[0].bias.data[...] = 0
    mean = np.float32([0.4488, 0.4371, 0.4040])[None, :, None, None]
    np.testing.assert_array_equal(model(sg.tensor(x)).data, np.broadcast_to(mean, (1, 3, 10, 14)))


@pytest.mark.parametrize("kw,error,match", [
    ({"upsampler": "pixelshuffle", "scale": 5}, ValueError, r"SwinIR: scale x5 is not supported"),
    ({"upsampler": "nearest+conv", "scale": 3}, ValueError,
     r"SwinIR: upsampler 'nearest\+conv' upsamples x2, x4 or x8 .*scale must be 2, 4 or 8, got 3"),
    ({"upsampler": "", "scale": 2}, ValueError,
     r"SwinIR: upsampler '' does not upsample .*scale must be 1, got 2 \(BasicSR ignores"),
    ({"upsampler": "pixelshufle"}, ValueError, r"SwinIR: upsampler must be one of .*pixelshuffle"),
    ({"resi_connection": "2conv"}, ValueError, r"SwinIR: resi_connection must be one of"),
    ({"num_heads": [6, 6]}, ValueError, r"SwinIR: num_heads must be a list of 4 ints"),
    ({"embed_dim": 10}, ValueError, r"SwinIR: num_heads must divide embed_dim 10, got 6"),
    ({"window_size": 0}, ValueError, r"SwinIR: window_size must be a positive int"),
    ({"img_size": [8, 0]}, ValueError, r"SwinIR: img_size must be >= 1"),
    ({"img_size": 4, "patch_size": 8}, ValueError, r"SwinIR: img_size \(4, 4\) is smaller than patch_size"),
    ({"mlp_ratio": 0}, ValueError, r"SwinIR: mlp_ratio must be > 0"),
    ({"mlp_ratio": 0.001}, ValueError, r"SwinIR: mlp_ratio 0.001 leaves the MLP no hidden feature"),
    ({"drop_path_rate": 1.0}, ValueError, r"SwinIR: drop_path_rate must be in \[0.0, 1.0\)"),
    ({"qk_scale": -1}, ValueError, r"SwinIR: qk_scale must be > 0"),
    ({"ape": "yes"}, ValueError, r"SwinIR: ape must be"),
    ({"embed_dim": 2, "num_heads": [1] * 4, "resi_connection": "3conv"}, ValueError,
     r"SwinIR: resi_connection '3conv' needs embed_dim >= 4"),
    ({"upscale": 4}, TypeError, r"upscale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "SwinIR", "embed_dim": 12, "upsampler": "pixelshuffle", **kw})


def test_ape_needs_img_size():
    model = checks.build(spec(ape=True))
    with pytest.raises(ValueError, match=r"SwinIR: with ape=True the \(padded\) input must be img_size"):
        model(sg.tensor(np.zeros((1, 3, 9, 8), np.float32)))


@pytest.mark.parametrize("kw", [
    {"upsampler": "pixelshuffle", "scale": 4, "img_size": 16, "window_size": 8, "resi_connection": "3conv"},
    {"upsampler": "pixelshuffledirect", "scale": 3, "in_chans": 1, "depths": [2, 2, 1],
     "num_heads": [1, 2, 4], "mlp_ratio": 1.5, "ape": True, "patch_norm": False, "qkv_bias": False},
    {"upsampler": "nearest+conv", "scale": 4, "img_size": 12, "window_size": 4, "depths": [1, 3],
     "num_heads": [2, 2]},
    {"upsampler": "", "scale": 1, "depths": [1], "num_heads": [4], "window_size": 6},  # no mask
    {"img_size": 4, "window_size": 8},  # window shrunk: odd blocks, no mask
    {"embed_dim": 3, "num_heads": [1], "mlp_ratio": 7 / 3},  # hidden 7: 7 / 3 * 3 < 7 in floats
])
def test_detect_round_trip(kw):
    s = spec(**{"drop_path_rate": 0.1, **kw})
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "SwinIR"
    rebuilt = MODELS.build(got)
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {k: v.shape for k, v in state.items()}
    rebuilt.load_state_dict(state, strict=True)
    for k in ("embed_dim", "upsampler", "scale", "resi_connection", "ape", "patch_norm", "qkv_bias",
              "in_chans", "mlp_ratio"):
        if k in s:
            assert got[k] == s[k], k
    assert got["window_size"] == min(s["window_size"], s["img_size"])  # the blocks' (shrunk) window
    assert list(got["depths"]) == s["depths"] and list(got["num_heads"]) == s["num_heads"]


def test_detect_reads_img_size_and_window_from_the_buffers():
    s = spec("pixelshuffle", 2, img_size=24, window_size=6, depths=[2], num_heads=[2])
    got = detect(checks.build(s).state_dict())
    assert (got["img_size"], got["window_size"], got["mlp_ratio"]) == (24, 6, 2.0)
    assert detect(checks.build(spec("", 1, depths=[1])).state_dict())["img_size"] == 64  # no mask: default


def test_attention_dropout_keeps_the_unfused_path(monkeypatch):
    """attn_drop_rate > 0 in training: dropout sits between the softmax and the product with v, so
    the block runs the unfused ops; in eval() the fused one."""
    from framework.functional.attention import AttentionSoftmaxFunction, WindowAttentionFunction
    from models.swinir import WindowAttention
    seen = []
    for cls in (AttentionSoftmaxFunction, WindowAttentionFunction):
        monkeypatch.setattr(cls, "forward", staticmethod(
            lambda ctx, *a, _f=cls.forward, _n=cls.__name__, **k: (seen.append(_n), _f(ctx, *a, **k))[1]))
    attn = WindowAttention(8, (2, 2), 2, attn_drop=0.5)
    x = sg.tensor(np.random.default_rng(0).standard_normal((3, 4, 8)).astype(np.float32))
    attn.train()
    attn(x)
    attn.eval()
    attn(x)
    assert seen == ["AttentionSoftmaxFunction", "WindowAttentionFunction"]


# -- published files, loaded with no model named ---------------------------------------------------
PUBLISHED = dict(embed_dim=12, depths=[2], num_heads=[2], mlp_ratio=2.0, img_size=16, drop_path_rate=0.0)


@pytest.mark.parametrize("scale", [2, 8])
def test_real_world_x2_and_x8_load_and_match_the_twin(scale, tmp_path):
    """003_realSR_BSRGAN_DFO_s64w8_SwinIR-M_x2_GAN.pth (nearest+conv, one conv_up) and spandrel's x8
    (three): the scale from the conv_up count (x4 only before)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from .published import assert_close, run_published
    torch.manual_seed(0)
    twin = twins.build_twin({"type": "SwinIR", "upsampler": "nearest+conv", "scale": scale,
                             "window_size": 8, **PUBLISHED})
    ours, ref, info, said = run_published(twin, tmp_path, "zip", (1, 3, 5, 6))
    assert (info["model"]["upsampler"], info["model"]["scale"]) == ("nearest+conv", scale)
    assert info["model"]["img_range"] == 1.0 and not any("assumed" in m for m in said), said
    assert_close(ours, ref)


def test_jpeg_artifact_reduction_runs_with_img_range_255_and_says_so(tmp_path):
    """The official 006_colorCAR layout (window 7, no upsampler): its test code (and spandrel) run
    it with img_range 255; srgrad ran it with 1 (a wrong image, exit 0). Now 255, said on stderr
    with the flag that changes it."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from .published import assert_close, run_published
    torch.manual_seed(0)
    twin = twins.build_twin({"type": "SwinIR", "upsampler": "", "scale": 1, "window_size": 7,
                             "img_range": 255.0, **{**PUBLISHED, "img_size": 14}})
    ours, ref, info, said = run_published(twin, tmp_path, "zip", (1, 3, 9, 8))
    assert info["model"]["img_range"] == 255.0 and info["model"]["window_size"] == 7
    assert any(m.startswith("assumed img_range=255.0: SwinIR's official JPEG artifact-reduction")
               and m.endswith("(--model-arg img_range=VALUE changes it)") for m in said), said
    assert_close(ours, ref, 5e-5)
    ours1, _, info1, said1 = run_published(twin, tmp_path, "zip", (1, 3, 9, 8),
                                           known={"img_range": 1.0})
    assert info1["model"]["img_range"] == 1.0 and not any("assumed" in m for m in said1)
    assert np.abs(ours1 - ref).max() > 1e-3  # the other range is another image
