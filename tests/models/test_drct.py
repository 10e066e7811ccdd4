"""DRCT: the original's keys in order (every Swin block's index and, shifted, mask buffers), the
RDG's head rule, parity with the torch twin (output and every gradient of an L1 loss, float64 and
float32) over scales, residual connections, qkv bias, ape, channels, growth and padded sizes; eval
mode with drop path; the stochastic depth per group; an Adam step; .pth round trips both ways;
shapes; errors; detection (round trips, DRCT and DRCT-L's published layouts); and the done-when
check: files built by spandrel 0.4.2's own DRCT class through srgrad-infer give spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import detect, identify
from framework.registry import MODELS
from models.drct import block_heads

from . import basicsr_checks as checks
from .published_checks import check_pth_both_ways
from .spandrel_checks import check_spandrel_file

SMALL = {"type": "DRCT", "img_size": 8, "embed_dim": 12, "depths": [1], "num_heads": [2],
         "window_size": 4, "mlp_ratio": 2, "gc": 4, "drop_path_rate": 0.0}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


def test_state_dict_keys_are_the_originals():
    """torch's order: the model's parameters, then its children in construction order; in a
    group swin1, adjust1, ..., swin5, adjust5; each shifted block (swin2, swin4) holds its
    attn_mask buffer before its children."""
    keys = checks.check_keys(spec(2, ape=True))
    group = [k[len("layers.0."):] for k in keys if k.startswith("layers.0.")]
    heads = [g.split(".")[0] for g in group]
    assert list(dict.fromkeys(heads)) == ["swin1", "adjust1", "swin2", "adjust2", "swin3", "adjust3",
                                          "swin4", "adjust4", "swin5", "adjust5"]
    assert [g for g in group if g.endswith("attn_mask")] == ["swin2.attn_mask", "swin4.attn_mask"]
    assert keys[:3] == ["absolute_pos_embed", "conv_first.weight", "conv_first.bias"]
    assert keys[-8:] == ["conv_after_body.weight", "conv_after_body.bias",
                         "conv_before_upsample.0.weight", "conv_before_upsample.0.bias",
                         "upsample.0.weight", "upsample.0.bias", "conv_last.weight", "conv_last.bias"]
    sd = checks.build(spec(2)).state_dict()
    assert sd["layers.0.swin3.norm1.weight"].shape == (20,)  # 12 + 2 gc
    assert sd["layers.0.adjust5.weight"].shape == (12, 28, 1, 1)  # back to embed_dim
    assert sd["layers.0.swin4.mlp.fc1.weight"].shape == (24, 24)  # swin4, swin5: MLP ratio 1
    assert sd["layers.0.swin3.mlp.fc1.weight"].shape == (40, 20)
    assert sd["layers.0.swin2.attn_mask"].shape == (4, 16, 16)


def test_heads_follow_the_originals_rule():
    """num_heads - ((dim + k gc) % num_heads): DRCT's 180 + 32 k on 6 heads."""
    assert [block_heads(180, 6, k, 32) for k in range(5)] == [6, 4, 2, 6, 4]
    sd = checks.build(spec(2, embed_dim=12, num_heads=[4], gc=6)).state_dict()
    assert [sd[f"layers.0.swin{k}.attn.relative_position_bias_table"].shape[1]
            for k in range(1, 6)] == [4, 2, 4, 2, 4]


PARITY = [(2, {}), (3, {"resi_connection": "identity"}),
          (4, {"depths": [1, 2], "num_heads": [2, 4], "gc": 6})]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,kw", PARITY)
def test_matches_the_twin(scale, kw, dtype):
    """Train mode (drop path 0), 7x9: padded to 8x12, the mask computed for that size."""
    checks.check_parity(spec(scale, **kw), (2, 3, 7, 9), dtype)


@pytest.mark.parametrize("kw,shape", [
    ({"ape": True, "patch_norm": False, "qkv_bias": False, "qk_scale": 0.7}, (1, 3, 6, 8)),
    ({"in_chans": 1, "img_range": 255.0, "mlp_ratio": 1.5}, (1, 1, 5, 13)),
    ({"img_size": 4}, (1, 3, 3, 6)),  # token grid = window: no block shifts
    ({"window_size": 8, "img_size": 16, "num_heads": [3], "gc": 3, "embed_dim": 9}, (1, 3, 9, 17)),
])
def test_matches_the_twin_in_more_settings(kw, shape):
    checks.check_parity(spec(2, **kw), shape, np.float64)


def test_eval_mode_matches_the_twin_with_drop_path():
    checks.check_eval_output(spec(2, drop_path_rate=0.5, drop_rate=0.3, attn_drop_rate=0.3,
                                  depths=[2, 3], num_heads=[2, 2]), (1, 3, 5, 7))


def test_stochastic_depth_is_the_groups_first_rate():
    """Every block of group i drops paths at linspace(0, rate, sum(depths))[sum(depths[:i])]."""
    model = checks.build(spec(2, depths=[2, 3], num_heads=[2, 2], drop_path_rate=0.4))
    rates = np.linspace(0, 0.4, 5)
    for k in range(1, 6):
        assert type(getattr(model.layers[0], f"swin{k}").drop_path).__name__ == "Identity"  # rate 0
        assert getattr(model.layers[1], f"swin{k}").drop_path.drop_prob == pytest.approx(rates[2])


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_round_trips(tmp_path):
    checks.check_pth_round_trip(spec(3, resi_connection="identity"), (1, 3, 5, 6), tmp_path)
    check_pth_both_ways(spec(2, depths=[1, 1], num_heads=[2, 4]), (1, 3, 6, 9), tmp_path)


@pytest.mark.parametrize("scale,hw,want", [(2, (5, 3), (10, 6)), (3, (5, 3), (15, 9)),
                                           (8, (1, 2), (8, 16))])
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
    ({"scale": 5}, ValueError, r"DRCT: scale x5 is not supported"),
    ({"scale": 1}, ValueError, r"DRCT: scale x1 is not supported"),
    ({"upsampler": ""}, ValueError, r"DRCT: upsampler must be one of .*pixelshuffle"),
    ({"resi_connection": "3conv"}, ValueError, r"DRCT: resi_connection must be one of"),
    ({"num_heads": [6, 6]}, ValueError, r"DRCT: num_heads must be a list of 6 ints"),
    ({"depths": [6, 0, 6, 6, 6, 6]}, ValueError, r"DRCT: depths"),
    ({"embed_dim": 13, "num_heads": [5] * 6}, ValueError,
     r"DRCT: num_heads 5 gives swin1 \(13 features\) 2 heads, which do not divide 13"),
    ({"mlp_ratio": 0.001}, ValueError, r"DRCT: mlp_ratio 0.001 leaves the MLP no hidden feature"),
    ({"drop_path_rate": 1.0}, ValueError, r"DRCT: drop_path_rate must be in \[0.0, 1.0\)"),
    ({"gc": 0}, ValueError, r"DRCT: gc must be"),
    ({"upscale": 4}, TypeError, r"upscale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "DRCT", "embed_dim": 12, "gc": 4, "img_size": 16, "window_size": 8,
                      **kw})


@pytest.mark.parametrize("kw", [
    {"scale": 4, "resi_connection": "identity", "depths": [1, 2], "num_heads": [2, 4]},
    {"scale": 3, "in_chans": 1, "qkv_bias": False, "patch_norm": False, "ape": True,
     "mlp_ratio": 1.5},
    {"img_size": 4, "gc": 6, "num_heads": [3], "embed_dim": 6, "mlp_ratio": 7 / 3},
    {"window_size": 2, "img_size": 10},
])
def test_detect_round_trip(kw):
    s = spec(**{"drop_path_rate": 0.1, **kw})
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "DRCT"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("embed_dim", "scale", "resi_connection", "ape", "patch_norm", "qkv_bias", "in_chans",
              "mlp_ratio", "window_size", "gc", "img_size"):
        if k in s:
            assert got[k] == s[k], k
    assert list(got["num_heads"]) == s["num_heads"] and len(got["depths"]) == len(s["depths"])


def test_detect_says_why_an_x1_file_is_refused():
    """The original's upsampler '' builds no conv_last and its forward returns the input. DRCT's
    own rule answers: framework/signatures.py's "It looks like DRCT" hint gives way to it."""
    state = checks.build(spec(2)).state_dict()
    state = {k: v for k, v in state.items() if not k.startswith(("conv_before_upsample", "upsample",
                                                                   "conv_last"))}
    with pytest.raises(ValueError, match=r"DRCT: no conv_last: the original's x1 upsampler ''") as err:
        identify(state)
    assert "looks like DRCT" not in str(err.value)


# The original's options files (options/test/*.yml): 180 features, 6 heads, window 16, MLP x2,
# gc 32, img_size 64; DRCT 6 groups, DRCT-L (and Real-DRCT-GAN) 12.
PUBLISHED = {"DRCT": 6, "DRCT-L": 12}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_detects_the_published_layouts(name):
    """Every keyword the options files set, from the shapes of the twin's group repeated."""
    twins = pytest.importorskip("tests.twins")
    n = PUBLISHED[name]
    one = twins.build_twin({"type": "DRCT", "scale": 4, "depths": [6], "num_heads": [6]}).state_dict()
    shapes = {}
    for k, v in one.items():
        for i in range(n) if k.startswith("layers.0.") else [None]:
            shapes[k if i is None else f"layers.{i}." + k[len("layers.0."):]] = tuple(v.shape)
    got = MODELS.get("DRCT").detect(shapes, {})
    assert got == {"img_size": 64, "in_chans": 3, "embed_dim": 180, "depths": (6,) * n,
                   "num_heads": (6,) * n, "window_size": 16, "mlp_ratio": 2.0, "qkv_bias": True,
                   "ape": False, "patch_norm": True, "scale": 4, "resi_connection": "1conv", "gc": 32}


SPANDREL = [  # (keywords of spandrel's DRCT, input size, the key the file is saved under)
    # DRCT / DRCT-L / Real-DRCT-GAN's group at the published width, x4: groups differ only in number
    ({"embed_dim": 180, "depths": (6,), "num_heads": (6,), "upscale": 4}, (20, 27), None),
    # x2, two groups with their own heads, no conv_after_body, a BasicSR params_ema file
    ({"embed_dim": 24, "depths": (6, 6), "num_heads": (6, 4), "gc": 8, "upscale": 2,
      "resi_connection": "identity"}, (17, 9), "params_ema"),
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("DRCT")
    torch.manual_seed(0)
    network = module.DRCT(img_size=64, window_size=16, mlp_ratio=2.0, upsampler="pixelshuffle",
                          **kw)
    with torch.no_grad():  # the original's init leaves LayerNorms at 1 / 0: perturb every value
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    check_spandrel_file(module, network, tmp_path, size, wrap)
