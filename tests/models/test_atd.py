"""ATD and ATD-light: the original's keys in order (with no_norm, ape, the last block's missing
norm3 / sigma); parity with the torch twin (spandrel 0.4.2's own class: output and every gradient of
an L1 loss, float64 and float32) over the four upsamplers, scales, categories that split and pad
their groups, residual connections, qkv bias, ape, norm, channels and padded sizes; an Adam step;
.pth round trips both ways; shapes; errors; detection (round trips, ATD and ATD-light's published
layouts, the category_size rule said as an assumption); and the done-when check: files built by
spandrel 0.4.2's own ATD class through srgrad-infer give spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import Assumed, detect, identify
from framework.registry import MODELS

from . import basicsr_checks as checks
from .published_checks import check_pth_both_ways
from .spandrel_checks import check_spandrel_file

SMALL = {"type": "ATD", "embed_dim": 8, "depths": [2], "num_heads": [2], "window_size": 4,
         "category_size": 16, "num_tokens": 5, "reducted_dim": 3, "convffn_kernel_size": 3,
         "mlp_ratio": 2}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


def test_state_dict_keys_are_the_originals():
    """torch's order: a module's own parameters and buffers before its children (the model's
    no_norm and index, a block's sigma, TDCA's scale, a group's dictionary); the last block of a
    group has no norm3 / sigma."""
    keys = checks.check_keys(spec(2, norm=False, ape=True, img_size=8))
    assert keys[:4] == ["absolute_pos_embed", "no_norm", "relative_position_index_SA",
                        "conv_first.weight"]
    group = [k[len("layers.0.residual_group."):] for k in keys if k.startswith("layers.0.")]
    assert group[:3] == ["td", "layers.0.sigma", "layers.0.norm1.weight"]
    assert "layers.1.sigma" not in group and "layers.1.norm3.weight" not in group
    assert group.index("layers.0.attn_atd.scale") < group.index("layers.0.attn_atd.wq.weight")
    sd = checks.build(spec(2)).state_dict()
    assert sd["layers.0.residual_group.td"].shape == (5, 8)
    assert sd["layers.0.residual_group.layers.0.attn_atd.wq.weight"].shape == (3, 8)
    assert sd["layers.0.residual_group.layers.0.attn_aca.logit_scale"].shape == (1, 1)
    assert sd["layers.0.residual_group.layers.0.convffn.dwconv.depthwise_conv.0.weight"].shape == \
        (16, 1, 3, 3)


PARITY = [  # (scale, keywords, input): 7x9 pads to 8x12 (48 tokens, 3 groups of 16)
    (2, {}, (2, 3, 7, 9)),
    (3, {"upsampler": "pixelshuffledirect", "category_size": 7, "resi_connection": "3conv",
         "depths": [3, 2], "num_heads": [2, 4]}, (1, 3, 5, 13)),  # 8x16: 128 = 18 x 7 + 2
    (4, {"upsampler": "nearest+conv", "qkv_bias": False, "ape": True, "img_size": 8,
         "patch_norm": False, "category_size": 300}, (1, 3, 8, 7)),  # one group of every token
    (1, {"upsampler": "", "in_chans": 1, "img_range": 255.0, "norm": False}, (1, 1, 8, 8)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,kw,shape", PARITY)
def test_matches_the_twin(scale, kw, shape, dtype):
    checks.check_parity(spec(scale, **kw), shape, dtype)


def test_matches_the_twin_with_window_8_and_mirrored_padding():
    """An 8-pixel window on 3x5: spandrel's minimum 8 (reflect, replicate), then the window."""
    checks.check_parity(spec(2, window_size=8, category_size=20, mlp_ratio=1.5), (1, 3, 3, 5),
                        np.float64)


def test_the_stable_category_order_is_the_twin_with_a_stable_sort():
    """category_order 'stable' (the ONNX graph's order) is the original with torch.sort(stable=
    True); it differs from the default (torch's CPU order) where a category spans two groups,
    which is why the default matches spandrel on a CPU and this one does not."""
    shape = (1, 3, 12, 12)  # 144 tokens in 9 groups of 16
    x = checks.inputs(spec(2), shape)[0]
    default = checks.build(spec(2)).to(np.float64).eval()
    stable = checks.build(spec(2, category_order="stable")).to(np.float64).eval()
    stable.load_state_dict(default.state_dict())
    with sg.no_grad():
        a, b = default(sg.tensor(x)).data, stable(sg.tensor(x)).data
    assert np.abs(a - b).max() > 1e-6
    checks.check_parity(spec(2, category_order="stable"), shape, np.float64)
    with pytest.raises(ValueError, match="ATD: category_order must be one of"):
        MODELS.build({**SMALL, "category_order": "cuda"})


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_round_trips(tmp_path):
    checks.check_pth_round_trip(spec(3), (1, 3, 5, 6), tmp_path)
    check_pth_both_ways(spec(2, upsampler="pixelshuffledirect", norm=False), (1, 3, 6, 9), tmp_path)


@pytest.mark.parametrize("scale,upsampler,hw,want", [
    (2, "pixelshuffle", (5, 3), (10, 6)), (3, "pixelshuffle", (1, 2), (3, 6)),
    (4, "pixelshuffledirect", (9, 4), (36, 16)), (1, "", (2, 3), (2, 3))])
def test_output_shapes(scale, upsampler, hw, want):
    y = checks.build(spec(scale, upsampler=upsampler))(sg.tensor(np.zeros((2, 3, *hw), np.float32)))
    assert y.shape == (2, 3, *want) and y.dtype == np.float32


@pytest.mark.parametrize("kw,error,match", [
    ({"scale": 5}, ValueError, r"ATD: scale x5 is not supported"),
    ({"upsampler": "nearest+conv", "scale": 2}, ValueError, r"ATD: upsampler 'nearest\+conv' "
                                                            r"upsamples x4 only"),
    ({"upsampler": "", "scale": 2}, ValueError, r"ATD: upsampler '' does not upsample"),
    ({"upsampler": "bilinear"}, ValueError, r"ATD: upsampler must be one of"),
    ({"resi_connection": "identity"}, ValueError, r"ATD: resi_connection must be one of"),
    ({"num_heads": [3]}, ValueError, r"ATD: num_heads must divide embed_dim 8, got 3"),
    ({"convffn_kernel_size": 4}, ValueError, r"ATD: convffn_kernel_size must be odd"),
    ({"category_size": 0}, ValueError, r"ATD: category_size"),
    ({"window_size": 1}, ValueError, r"ATD: window_size"),
    ({"mlp_ratio": 0.01}, ValueError, r"ATD: mlp_ratio 0.01 leaves the ConvFFN no hidden"),
    ({"upscale": 4}, TypeError, r"upscale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({**SMALL, **kw})


@pytest.mark.parametrize("kw", [
    {"scale": 4, "resi_connection": "3conv", "depths": [1, 2], "num_heads": [2, 4]},
    {"scale": 3, "in_chans": 1, "qkv_bias": False, "patch_norm": False, "ape": True, "img_size": 8,
     "mlp_ratio": 1.5, "norm": False},
    {"scale": 2, "upsampler": "pixelshuffledirect", "embed_dim": 6, "num_heads": [3],
     "mlp_ratio": 7 / 3},
    {"scale": 4, "upsampler": "nearest+conv"}, {"scale": 1, "upsampler": ""},
])
def test_detect_round_trip(kw):
    s = spec(**{**kw, "category_size": 256})
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "ATD"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k, v in s.items():
        assert (tuple(got[k]) if isinstance(v, list) else got[k]) == (tuple(v) if isinstance(
            v, list) else v), k


def test_category_size_is_said_as_spandrels_rule():
    """It changes no weight: 128 for ATD-light's layout (pixelshuffledirect, 48 features), else
    256, noted as an assumption; a given value is kept."""
    light = checks.build(spec(2, upsampler="pixelshuffledirect", embed_dim=48)).state_dict()
    rule = MODELS.get("ATD").detect({k: v.shape for k, v in light.items()}, {})["category_size"]
    assert isinstance(rule, Assumed) and rule.value == 128 and "spandrel" in rule.why
    match = identify(light)
    assert match.spec["category_size"] == 128 and any("category_size" in n for n in match.notes)
    assert detect(checks.build(spec(2)).state_dict())["category_size"] == 256
    assert detect(light, category_size=64)["category_size"] == 64


# traiNNer-redux's presets (traiNNer/archs/atd_arch.py) = the original's options files
PUBLISHED = {
    "ATD": ({"embed_dim": 210, "depths": [6] * 6, "num_heads": [6] * 6, "num_tokens": 128,
             "reducted_dim": 20, "convffn_kernel_size": 5, "mlp_ratio": 2.0,
             "upsampler": "pixelshuffle"}, 256),
    "ATD-light": ({"embed_dim": 48, "depths": [6] * 4, "num_heads": [4] * 4, "num_tokens": 64,
                   "reducted_dim": 8, "convffn_kernel_size": 7, "mlp_ratio": 1.0,
                   "upsampler": "pixelshuffledirect"}, 128),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
@pytest.mark.parametrize("scale", [2, 3, 4])
def test_detects_the_published_layouts(name, scale):
    """Every keyword of the presets, from the shapes of spandrel's class (one group, repeated)."""
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    kw, category = PUBLISHED[name]
    groups = len(kw["depths"])
    one = {**kw, "depths": [6], "num_heads": kw["num_heads"][:1]}
    with torch.device("meta"):
        net = spandrel_architecture("ATD").ATD(window_size=16, category_size=category,
                                               upscale=scale, **one)
    shapes = {}
    for k, v in net.state_dict().items():
        for i in range(groups) if k.startswith("layers.0.") else [None]:
            shapes[k if i is None else f"layers.{i}." + k[len("layers.0."):]] = tuple(v.shape)
    got = MODELS.get("ATD").detect(shapes, {})
    assert got.pop("category_size").value == category
    assert got == {"img_size": 64, "in_chans": 3, "window_size": 16, "qkv_bias": True,
                   "ape": False, "patch_norm": True, "scale": scale, "resi_connection": "1conv",
                   "norm": True, **{k: tuple(v) if isinstance(v, list) else v
                                    for k, v in kw.items()}}


SPANDREL = [  # (keywords of spandrel's ATD, input size, the key the file is saved under)
    # ATD's published block (210 features, 128 tokens, ...), one group, x2 / x3 / x4; 20x11
    # pads to 32x16: 512 tokens in 2 category groups of 256
    *[({**PUBLISHED["ATD"][0], "depths": (6,), "num_heads": (6,), "upscale": s}, (20, 11), w)
      for s, w in ((2, None), (3, "params_ema"), (4, None))],
    # ATD-light as published (4 groups), x2 / x3 / x4; 13x9 pads to 16x16: 2 groups of 128
    *[({**PUBLISHED["ATD-light"][0], "upscale": s}, (13, 9), w)
      for s, w in ((2, "params"), (3, None), (4, None))],
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("ATD")
    torch.manual_seed(0)
    category = 128 if kw["embed_dim"] == 48 else 256
    network = module.ATD(img_size=64, window_size=16, category_size=category, **kw)
    with torch.no_grad():  # the original's init leaves LayerNorms at 1 / 0: perturb every value
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    got = check_spandrel_file(module, network, tmp_path, size, wrap)
    assert got["category_size"] == category and got["upscale"] == kw["upscale"]
