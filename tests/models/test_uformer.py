"""Uformer: the original's keys (spandrel's detection keys), parity with the torch twin (spandrel's
own network in its call API: the square padding to a multiple of 128 and the crop back) of the
output and every gradient, float64 and float32, for each token projection, feed-forward and
modulator; the window shrink of a small img_size; detection of the published layouts; .pth both
ways; files built by spandrel 0.4.2's own class in the published layouts (Uformer_T / _S / _B,
Uformer_B_fastleff) through srgrad-infer give spandrel's image; the card; errors."""
from __future__ import annotations

import numpy as np
import pytest

from framework.card import card
from framework.detect import detect, identify
from framework.registry import MODELS

from . import basicsr_checks as checks
from . import published_checks, spandrel_checks

SPANDREL_KEYS = [  # spandrel 0.4.2's KeyCondition for Uformer
    "input_proj.proj.0.weight", "output_proj.proj.0.weight", "encoderlayer_0.blocks.0.norm1.weight",
    "encoderlayer_2.blocks.0.norm1.weight", "conv.blocks.0.norm1.weight",
    "decoderlayer_0.blocks.0.norm1.weight", "decoderlayer_2.blocks.0.norm1.weight"]
T_HEADS = [1, 2, 4, 8, 16, 16, 8, 4, 2]  # every published model's heads
B_DEPTHS = [1, 2, 8, 8, 2, 8, 8, 2, 1]  # Uformer_B's


def spec(**kw):
    """Tiny: 4 features, windows of 2 (a 128 square holds 64 windows at the first level)."""
    return {"type": "Uformer", "embed_dim": 4, "depths": [1, 2, 1, 1, 2, 1, 1, 2, 1],
            "num_heads": [1, 2, 1, 2, 4, 2, 2, 1, 2], "win_size": 2, "drop_path_rate": 0.0,
            "scale": 1, **kw}


def test_keys_are_the_originals():
    keys = checks.check_keys(spec(modulator=True))
    assert set(SPANDREL_KEYS) <= set(keys)
    sd = checks.build(spec(modulator=True)).state_dict()
    assert sd["encoderlayer_0.blocks.0.attn.relative_position_bias_table"].shape == (9, 1)
    assert sd["decoderlayer_0.blocks.0.modulator.weight"].shape == (4, 64)
    assert sd["dowsample_1.conv.0.weight"].shape == (16, 8, 4, 4)
    assert sd["upsample_3.deconv.0.weight"].shape == (16, 4, 2, 2)
    assert sd["encoderlayer_1.blocks.0.mlp.dwconv.0.weight"].shape == (32, 1, 3, 3)
    assert "encoderlayer_0.blocks.0.modulator.weight" not in sd  # the decoder's only


PARITY = [  # keywords; the inputs (20 x 27) pad to one 128 square
    {"modulator": True},
    {"token_projection": "conv", "token_mlp": "fastleff", "cross_modulator": True, "qkv_bias": True},
    {"token_mlp": "mlp", "qkv_bias": False, "shift_flag": False, "dd_in": 1, "in_chans": 1},
    # img_size 32 shrinks the bottleneck's window to 2 and the deepest decoder's to 4 (no shift)
    {"win_size": 4, "img_size": 32, "depths": [2] * 9, "num_heads": [1] * 9},
]


@pytest.mark.parametrize("kw,dtype", [(kw, np.float64) for kw in PARITY]
                         + [(kw, np.float32) for kw in PARITY[:2]])
def test_matches_the_twin(kw, dtype):
    c = kw.get("dd_in", 3)
    checks.check_parity(spec(**kw), (1, c, 20, 27), dtype)


@pytest.mark.parametrize("kw", [{"modulator": True},
                                {"embed_dim": 2, "num_heads": [1] * 9, "depths": B_DEPTHS,
                                 "modulator": True, "token_mlp": "fastleff", "win_size": 8},
                                {"token_projection": "conv", "cross_modulator": True},
                                {"token_mlp": "mlp", "qkv_bias": False, "mlp_ratio": 2.0}])
def test_detect(kw):
    """spandrel's keywords (shift_flag Assumed True, said in the notes)."""
    sd = checks.build(spec(**kw)).state_dict()
    match = identify(sd)
    want = dict(spec(**kw), drop_path_rate=0.1)
    for k, v in match.spec.items():
        if k in want:
            assert v == want[k], k
    assert match.spec["shift_flag"] is True and any("shift" in n for n in match.notes)
    assert detect(sd)["token_mlp"] == ("mlp" if kw.get("token_mlp") == "mlp" else kw.get("token_mlp", "leff"))
    MODELS.build(detect(sd)).load_state_dict(sd, strict=True)


def test_pth_both_ways(tmp_path):
    published_checks.check_pth_both_ways(spec(modulator=True), (1, 3, 9, 12), tmp_path)


@pytest.mark.parametrize("kw,size", [
    ({"embed_dim": 4, "depths": [2] * 9}, (20, 27)),                      # Uformer_T / _S
    ({"embed_dim": 2, "depths": B_DEPTHS}, (27, 20)),                     # Uformer_B
    ({"embed_dim": 2, "depths": B_DEPTHS, "token_mlp": "fastleff"}, (9, 13)),  # Uformer_B_fastleff
])
def test_spandrels_own_files_give_spandrels_image(kw, size, tmp_path):
    """issue 40's done-when: the published layouts (win_size 8, linear projection, modulator, the
    published heads) at a small embed_dim, built by spandrel's own class."""
    import torch
    pytest.importorskip("einops")
    module = pytest.importorskip("tests.twins._spandrel").spandrel_architecture("Uformer")
    torch.manual_seed(0)
    network = module.Uformer(win_size=8, num_heads=T_HEADS if kw["embed_dim"] == 4
                                             else [1, 2, 4, 8, 8, 8, 8, 4, 2], token_projection="linear",
                                             modulator=True, **{"token_mlp": "leff", **kw})
    # the repository's checkpoints hold {"epoch", "state_dict", "optimizer"}: one case wrapped so
    wrap = "state_dict" if kw["depths"] == B_DEPTHS and kw.get("token_mlp") is None else None
    hyper = spandrel_checks.check_spandrel_file(module, network, tmp_path, size=size, wrap=wrap)
    assert hyper["depths"] == kw["depths"] and hyper["modulator"] is True


def test_card_of_the_published_models():
    """Uformer_B: 50.9M parameters as its paper's table (50.88M); the twin's count at the tiny
    width; the size rule."""
    b = card({"type": "Uformer", "embed_dim": 32, "depths": B_DEPTHS, "modulator": True})
    assert round(b.parameters / 1e6, 1) == 50.9
    assert (b.role, b.scale, b.pads_to, b.fixed_onnx is not None) == ("restoration", 1, 128, True)
    assert card(spec(win_size=16)).pads_to == 256 and card(spec(win_size=4, img_size=32)).pads_to == 128
    # the forward pads to a square of the longer side: a 20 x 200 image runs at 256 x 256, and
    # the memory budget (autotile) counts that (it counted 128 x 256)
    c = card(spec())
    assert c.padded(20, 200) == (256, 256) and c.largest_activation(20, 200) == c.activation * 256 ** 2
    twins = pytest.importorskip("tests.twins")
    for kw in PARITY:
        twin = twins.build_twin(spec(**kw))
        assert card(spec(**kw)).parameters == sum(p.numel() for _, p in twin.named_parameters())


@pytest.mark.parametrize("kw,match", [
    ({"scale": 2}, r"Uformer: scale must be 1"),
    ({"depths": [1] * 8}, r"Uformer: depths must be"),
    ({"num_heads": [3] * 9}, r"Uformer: layer encoderlayer_0 has 4 features, not a multiple of num_heads\[0\] = 3"),
    ({"token_mlp": "glu"}, r"Uformer: token_mlp must be one of"),
    ({"in_chans": 1}, r"Uformer: with dd_in 3 the output adds the input, so in_chans must be 3"),
    ({"depths": [1, 1, 1, 1, 1, 2, 2, 1, 1]}, r"Uformer: the decoder's depths"),
    ({"img_size": 8}, r"Uformer: img_size must be"),
    ({"img_size": 16, "win_size": 4, "modulator": True}, r"Uformer: decoderlayer_0's window shrinks to 2"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build(spec(**kw))
