"""DITN: the original's keys in order, parity with the twin (spandrel's own DITN_Real: output and
every gradient of an L1 loss, float64 and float32) with SDA's zero-init scale moved off zero, bias,
patch sizes, several groups; .pth round trips both ways; shapes (the padding to 8 and the crop);
errors; detection (round trips, traiNNer-redux's ditn_real); and the done-when check: files built by
spandrel 0.4.2's own DITN class through srgrad-infer give spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import detect
from framework.registry import MODELS

from . import basicsr_checks as checks
from .published_checks import check_pth_both_ways
from .spandrel_checks import check_spandrel_file

SMALL = {"type": "DITN", "dim": 8, "ITL_blocks": 1, "SAL_blocks": 1}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


def unzero(model):
    """SDA's scale starts at zero (the original's), which zeroes every gradient behind it."""
    rng = np.random.default_rng(1)
    for k, p in model.named_parameters():
        if k.endswith("SDA.scale"):
            p.data[...] = rng.uniform(0.5, 1.5, p.shape)


def test_state_dict_keys_are_the_originals():
    keys = checks.check_keys(spec(2))
    block = ["ffn.project_in.weight", "ffn.dwconv.weight", "ffn.project_out.weight"]
    assert keys == [
        "sft.weight", "sft.bias", "UFONE.0.ITLs.0.attn.temperature", "UFONE.0.ITLs.0.attn.qkv.weight",
        "UFONE.0.ITLs.0.attn.qkv.bias", "UFONE.0.ITLs.0.attn.project_out.weight",
        "UFONE.0.ITLs.0.conv1.weight", "UFONE.0.ITLs.0.conv1.bias", "UFONE.0.ITLs.0.conv2.weight",
        "UFONE.0.ITLs.0.conv2.bias", *[f"UFONE.0.ITLs.0.{k}" for k in block],
        "UFONE.0.SALs.0.SDA.scale", "UFONE.0.SALs.0.SDA.DConvs.0.weight",
        "UFONE.0.SALs.0.SDA.DConvs.0.bias", "UFONE.0.SALs.0.SDA.DConvs.1.weight",
        "UFONE.0.SALs.0.SDA.DConvs.1.bias", "UFONE.0.SALs.0.SDA.DConvs.2.weight",
        "UFONE.0.SALs.0.SDA.DConvs.2.bias", "UFONE.0.SALs.0.SDA.proj_first.0.weight",
        "UFONE.0.SALs.0.SDA.proj_first.0.bias", "UFONE.0.SALs.0.SDA.proj_last.0.weight",
        "UFONE.0.SALs.0.SDA.proj_last.0.bias", *[f"UFONE.0.SALs.0.{k}" for k in block],
        "UFONE.0.SALs.0.conv1.weight", "UFONE.0.SALs.0.conv1.bias", "UFONE.0.SALs.0.conv2.weight",
        "UFONE.0.SALs.0.conv2.bias", "conv_after_body.weight", "conv_after_body.bias",
        "upsample.0.weight", "upsample.0.bias"]
    sd = checks.build(spec(3, ffn_expansion_factor=1.5, bias=True)).state_dict()
    assert sd["UFONE.0.ITLs.0.ffn.project_in.weight"].shape == (24, 8, 1, 1)  # 2 int(8 1.5)
    assert sd["UFONE.0.SALs.0.SDA.DConvs.1.weight"].shape == (8, 1, 7, 7)
    assert sd["UFONE.0.ITLs.0.attn.project_out.bias"].shape == (8,)
    assert sd["upsample.0.weight"].shape == (27, 8, 3, 3)


PARITY = [(2, {}), (3, {"bias": True, "ffn_expansion_factor": 1.5, "patch_size": 4}),
          (4, {"UFONE_blocks": 2, "ITL_blocks": 2, "SAL_blocks": 0}),
          (1, {"ITL_blocks": 1, "SAL_blocks": 2, "patch_size": 2})]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,kw", PARITY)
def test_matches_the_twin(scale, kw, dtype):
    checks.check_parity(spec(scale, **kw), (2, 3, 7, 9), dtype, prepare=unzero)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_round_trips(tmp_path):
    checks.check_pth_round_trip(spec(3), (1, 3, 5, 6), tmp_path)
    check_pth_both_ways(spec(2, bias=True), (1, 3, 8, 16), tmp_path)


@pytest.mark.parametrize("scale,hw,want", [(2, (5, 3), (10, 6)), (3, (9, 17), (27, 51)),
                                           (1, (1, 2), (1, 2))])
def test_output_shapes_and_three_channels(scale, hw, want):
    y = checks.build(spec(scale, inp_channels=1))(sg.tensor(np.zeros((2, 1, *hw), np.float32)))
    assert y.shape == (2, 3, *want) and y.dtype == np.float32


def test_patches_see_only_their_own_pixels():
    """The ITL blocks attend within a patch: with no SAL block, changing one pixel of the input
    changes the output only within its patch (3x3 convs reach one pixel over, sft and
    conv_after_body: 2 pixels at most, the upsampler one more)."""
    model = checks.build(spec(1, SAL_blocks=0, dim=4, patch_size=8))
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 32, 32)).astype(np.float32)
    x2 = x.copy()
    x2[0, :, 4, 4] += 0.5  # inside the top-left patch, 3 from every edge
    with sg.no_grad():
        d = np.abs(model(sg.tensor(x2)).data - model(sg.tensor(x)).data).max(axis=(0, 1))
    assert d[4, 4] > 0
    assert d[12:, :].max() == 0 and d[:, 12:].max() == 0  # the patch (0..7) plus 3 px of convs


@pytest.mark.parametrize("kw,error,match", [
    ({"ffn_expansion_factor": 0.1}, ValueError, r"DITN: ffn_expansion_factor 0.1 leaves the FFN"),
    ({"LayerNorm_type": "Plain"}, ValueError, r"DITN: LayerNorm_type must be one of"),
    ({"patch_size": 0}, ValueError, r"DITN: patch_size must be a positive int"),
    ({"scale": 0}, ValueError, r"DITN: scale must be a positive int"),
    ({"upscale": 4}, TypeError, r"upscale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "DITN", "dim": 8, **kw})


@pytest.mark.parametrize("kw", [
    {"scale": 4, "bias": True, "ffn_expansion_factor": 1.5},
    {"scale": 3, "inp_channels": 1, "UFONE_blocks": 2, "ITL_blocks": 2, "SAL_blocks": 3},
    {"scale": 1, "dim": 6, "ffn_expansion_factor": 7 / 3},
])
def test_detect_round_trip(kw):
    s = spec(**kw)
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "DITN"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("scale", "inp_channels", "dim", "UFONE_blocks", "ITL_blocks", "SAL_blocks", "bias"):
        if k in s:
            assert got[k] == s[k], k
    assert int(got["ffn_expansion_factor"] * got["dim"]) == int(s.get("ffn_expansion_factor", 2) * s["dim"])
    assert got["patch_size"] == 8


def test_detects_traiNNer_redux_ditn_real():
    """traiNNer-redux's ditn_real: spandrel's defaults (dim 60, 4 + 4 blocks, one group, x4)."""
    twins = pytest.importorskip("tests.twins")
    shapes = {k: tuple(v.shape) for k, v in twins.build_twin({"type": "DITN"}).state_dict().items()}
    got = MODELS.get("DITN").detect(shapes, {})
    assert got.pop("patch_size").value == 8
    assert got == {"inp_channels": 3, "dim": 60, "ITL_blocks": 4, "SAL_blocks": 4, "UFONE_blocks": 1,
                   "ffn_expansion_factor": 2.0, "bias": False, "scale": 4}


SPANDREL = [  # (keywords of spandrel's DITN_Real, input size, the key the file is saved under)
    ({"upscale": 4}, (20, 27), None),  # DITN_Real x4: dim 60, 4 ITL + 4 SAL, one group
    ({"upscale": 2, "dim": 12, "ITL_blocks": 1, "SAL_blocks": 2, "UFONE_blocks": 2, "bias": True},
     (17, 9), "params"),
    ({"upscale": 3, "dim": 8, "ITL_blocks": 2, "SAL_blocks": 1,
      "ffn_expansion_factor": 1.5}, (8, 13), "params_ema"),
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("DITN")
    torch.manual_seed(0)
    network = module.DITN(**kw)
    with torch.no_grad():  # SDA's scale and the temperature start at 0 and 1: perturb all
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    check_spandrel_file(module, network, tmp_path, size, wrap)
