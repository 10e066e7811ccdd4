"""CRAFT: the original's keys in order (the model's window buffers first), parity with the torch
twin (output and every gradient of an L1 loss, float64 and float32) through both paddings (to 16 as
spandrel's call API, then the original's mirror by a window), shifted unmasked windows both ways,
an Adam step, a .pth round trip, the original's init, errors, detection (round trips, the split
order convention refused on load when a file breaks it, the published layout) and the done-when
check: files built by spandrel 0.4.2's own CRAFT class through srgrad-infer give spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

from framework.card import card
from framework.detect import detect, identify
from framework.registry import MODELS

from . import basicsr_checks as checks
from .spandrel_checks import check_spandrel_file

# window 8 with (2, 4) windows: a 13x18 input pads to 16x32 (spandrel's), then 24x40 (the mirror)
SMALL = {"type": "CRAFT", "embed_dim": 16, "depths": [1, 2], "num_heads": [4, 2], "split_size_0": 2,
         "split_size_1": 4, "window_size": 8, "scale": 2}


def spec(**kw):
    return {**SMALL, **kw}


def test_state_dict_keys_are_the_originals():
    keys = checks.check_keys(spec())
    assert keys[:6] == ["relative_position_index_h", "relative_position_index_v", "biases_v",
                        "biases_h", "conv_first.weight", "conv_first.bias"]
    for key in ("layers.1.residual_group.srwa_blocks.3.attns.1.pos.pos3.2.weight",
                "layers.0.residual_group.hfer_blocks.0.last_fc.weight",
                "layers.0.residual_group.hf_blocks.0.norm1.body.bias",
                "layers.0.residual_group.hf_blocks.0.attn.kv_dwconv.weight",
                "layers.0.residual_group.hf_blocks.0.ffn.project_out.weight", "norm.body.weight",
                "conv_after_body.weight", "upsample.0.weight"):
        assert key in keys, key


PARITY = [({}, (2, 3, 13, 18)),
          ({"split_size_0": 4, "split_size_1": 2, "resi_connection": "identity", "scale": 3,
            "qkv_bias": False, "mlp_ratio": 1.5}, (1, 3, 16, 9)),
          ({"in_chans": 1, "depths": [2], "num_heads": [8], "embed_dim": 32, "scale": 4,
            "split_size_1": 8}, (1, 1, 17, 16))]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw,shape", PARITY)
def test_matches_the_twin(kw, shape, dtype):
    checks.check_parity(spec(**kw), shape, dtype)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(embed_dim=32), (2, 3, 16, 16))  # 32: a position-bias feature


def test_pth_round_trip(tmp_path):
    checks.check_pth_round_trip(spec(), (1, 3, 14, 20), tmp_path)


def test_init_is_the_originals():
    """Linear weights ~ trunc_normal(std 0.02), zero biases; temperatures and norms ones."""
    model = checks.build(spec(embed_dim=64, num_heads=[4, 4]))
    for k, p in model.named_parameters():
        w = p.data.astype(np.float64)
        if k.endswith(("qkv.weight", "fc1.weight", "fc2.weight")):
            assert w.std() == pytest.approx(0.02, rel=0.15), k
        elif k.endswith(("qkv.bias", "proj.bias", "fc1.bias", "pos_proj.bias")):
            assert not w.any(), k
        elif k.endswith("temperature") or ("norm" in k and k.endswith("weight")):
            np.testing.assert_array_equal(w, 1.0, err_msg=k)


@pytest.mark.parametrize("kw,match", [
    ({"embed_dim": 15, "num_heads": [1, 1]}, r"CRAFT: embed_dim must be even"),
    ({"split_size_0": 1}, r"CRAFT: split_size_0"),
    ({"window_size": 6}, r"window_size 6 must be a multiple of both split sides \(2, 4\)"),
    ({"num_heads": [3, 2]}, r"num_heads 3 must be at least 2, divide embed_dim 16"),
    ({"resi_connection": "3conv"}, r"CRAFT: resi_connection must be one of"),
    ({"upscale": 2}, r"upscale"),
])
def test_argument_errors(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        MODELS.build({**spec(), **kw})


@pytest.mark.parametrize("kw", [
    {"window_size": 16},
    {"in_chans": 1, "qkv_bias": False, "resi_connection": "identity", "mlp_ratio": 1.5,
     "split_size_0": 4, "split_size_1": 4, "window_size": 16, "scale": 3},
])
def test_detect_round_trip(kw):
    s = spec(**kw)
    state = checks.build(s).state_dict()
    match = identify(state)
    got = match.spec
    assert got["type"] == "CRAFT"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k, default in (("embed_dim", None), ("scale", None), ("resi_connection", "1conv"),
                       ("qkv_bias", True), ("in_chans", 3), ("mlp_ratio", 2.0), ("depths", None),
                       ("num_heads", None), ("split_size_0", None), ("split_size_1", None),
                       ("window_size", None)):
        want = s.get(k, default)
        assert got[k] == (tuple(want) if isinstance(want, list) else want), k
    square = s["split_size_0"] == s["split_size_1"]
    assert any(n.startswith("split_size") for n in match.notes) != square


def test_a_file_with_the_other_split_order_is_refused_on_load():
    state = checks.build(spec(split_size_0=4, split_size_1=2)).state_dict()
    got = detect(state)
    assert (got["split_size_0"], got["split_size_1"]) == (2, 4)
    with pytest.raises(ValueError, match=r"CRAFT.load_state_dict: .*file's split_size is \(4, 2\)"):
        MODELS.build(got).load_state_dict(state)
    MODELS.build(detect(state, split_size_0=4, split_size_1=2)).load_state_dict(state)


def test_card_of_the_published_size():
    """CRAFT x4: 753K parameters (the paper's 753K)."""
    c = card({"type": "CRAFT", "scale": 4})
    assert round(c.parameters / 1e3) == 753 and c.pads_to == 16


SPANDREL = [  # (keywords of spandrel's CRAFT, input size, the key the file is saved under)
    # the published CRAFT's groups (48 features, 6 heads, split (4, 16)), x4, cut to 2 groups
    ({"embed_dim": 48, "depths": [2, 2], "num_heads": [6, 6], "upscale": 4}, (20, 27), None),
    # x2, no conv_after_body, no qkv bias, square windows, one group, a params_ema file
    ({"embed_dim": 24, "depths": [1], "num_heads": [4], "upscale": 2, "split_size_0": 8,
      "split_size_1": 8, "qkv_bias": False, "resi_connection": "identity"}, (12, 33), "params_ema"),
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("CRAFT")
    torch.manual_seed(0)
    kw = {"split_size_0": 4, "split_size_1": 16, **kw}
    network = module.CRAFT(window_size=16, mlp_ratio=2.0, **kw)
    with torch.no_grad():  # the original's init leaves norms at 1 / 0: perturb every value
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    check_spandrel_file(module, network, tmp_path, size, wrap)


def test_a_window_larger_than_the_mirror_allows_is_refused():
    """The original's mirror takes at most the image's own rows: window 48 on 16 px needs 32."""
    import framework as sg
    model = checks.build(spec(window_size=48, split_size_0=4, split_size_1=4))
    with pytest.raises(ValueError, match=r"CRAFT: the input \(after padding to 16\) has 16 px along "
                                         r"axis 2, fewer than the 32 its window_size 48 mirrors in"):
        with sg.no_grad():
            model(sg.tensor(np.zeros((1, 3, 16, 16), np.float32)))
