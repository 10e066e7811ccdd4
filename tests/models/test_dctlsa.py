"""DCTLSA: the original's keys in order, parity with the twin (spandrel's own DCTLSA: output and
every gradient of an L1 loss, float64 and float32, train() with the batch's statistics and their
running update, eval() with perturbed running statistics); .pth round trips both ways; shapes (the
padding to 16 and the crop); errors; detection (round trips, traiNNer-redux's dctlsa); and the
done-when check: files built by spandrel 0.4.2's own DCTLSA class through srgrad-infer give
spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import detect
from framework.registry import MODELS

from . import basicsr_checks as checks
from .published_checks import check_pth_both_ways
from .spandrel_checks import check_spandrel_file

SMALL = {"type": "DCTLSA", "nf": 8, "num_head": 2}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


def perturb_statistics(model):
    """BatchNorm's running statistics start at 0 / 1: move them (and the affine terms) off."""
    rng = np.random.default_rng(2)
    for k, v in model.state_dict().items():
        if k.endswith(("running_mean", "running_var")) or "prenorm" in k and not k.endswith("tracked"):
            v[...] = rng.uniform(0.5, 1.5, v.shape) if k.endswith(("var", "weight")) \
                else rng.uniform(-0.2, 0.2, v.shape)


def test_state_dict_keys_are_the_originals():
    keys = checks.check_keys(spec(2))
    block = "B1.body.0.transformer_body.0.blocks.0."
    local = [f"{block}attn.local.{m}.{p}" for m in ("pointwise_prenorm_0",)
             for p in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")]
    assert keys[:2] == ["fea_conv.weight", "fea_conv.bias"]
    assert keys[2:13] == [f"{block}attn.qkv.weight", f"{block}attn.qkv.bias", f"{block}attn.proj.weight",
                          f"{block}attn.proj.bias", *local, f"{block}attn.local.pointwise_conv_0.weight",
                          f"{block}attn.local.depthwise_conv.weight"]
    assert keys[13:25] == [
        *[f"{block}attn.local.pointwise_prenorm_1.{p}" for p in
          ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")],
        f"{block}attn.local.pointwise_conv_1.weight", f"{block}mlp.fc1.weight", f"{block}mlp.fc1.bias",
        f"{block}mlp.fc2.weight", f"{block}mlp.fc2.bias",
        "B1.body.0.transformer_body.0.blocks.1.attn.qkv.weight",
        "B1.body.0.transformer_body.0.blocks.1.attn.qkv.bias"]
    assert "B1.body.0.transformer_body.0.patch_embed.norm.weight" in keys
    assert keys[-16:] == [*[f"{n}.0.{p}" for n in ("c", "c1", "c2", "c3", "c4", "c5")
                            for p in ("weight", "bias")],
                          "LR_conv.weight", "LR_conv.bias", "upsampler.0.weight", "upsampler.0.bias"]
    assert len(keys) == 2 + 6 * 2 * (2 + 2 * 21) + 12 + 4
    sd = checks.build(spec(3, out_nc=1)).state_dict()
    assert sd["c.0.weight"].shape == (8, 48, 1, 1) and sd["c3.0.weight"].shape == (8, 32, 1, 1)
    assert sd["upsampler.0.weight"].shape == (9, 8, 3, 3)


PARITY = [(2, {}), (3, {"in_nc": 1, "out_nc": 3, "nf": 6, "num_head": 3})]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,kw", PARITY)
def test_matches_the_twin(scale, kw, dtype):
    checks.check_parity(spec(scale, **kw), (2, kw.get("in_nc", 3), 16, 19), dtype)
    checks.check_parity(spec(scale, **kw), (1, kw.get("in_nc", 3), 17, 16), dtype, train=False,
                        prepare=perturb_statistics)


def test_training_updates_the_running_statistics_as_torch():
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    s = spec(2)
    model = checks.build(s).to(np.float64).train()
    twin = twins.twin_of(model, s).train()
    x = np.random.default_rng(0).uniform(0, 1, (2, 3, 16, 16))
    model(sg.tensor(x))
    twin(torch.from_numpy(x))
    theirs = twin.state_dict()
    for k, v in model.state_dict().items():
        if "running" in k:
            np.testing.assert_allclose(v, theirs[k].numpy(), rtol=1e-10, atol=1e-12, err_msg=k)
            assert not np.array_equal(v, np.zeros_like(v) if "mean" in k else np.ones_like(v)), k


def test_pth_round_trips(tmp_path):
    checks.check_pth_round_trip(spec(3), (1, 3, 5, 6), tmp_path)
    check_pth_both_ways(spec(2, out_nc=1), (1, 3, 16, 20), tmp_path)


@pytest.mark.parametrize("scale,hw,want", [(2, (5, 3), (10, 6)), (3, (17, 33), (51, 99)),
                                           (1, (1, 2), (1, 2))])
def test_output_shapes(scale, hw, want):
    y = checks.build(spec(scale, in_nc=1, out_nc=1))(sg.tensor(np.zeros((2, 1, *hw), np.float32)))
    assert y.shape == (2, 1, *want) and y.dtype == np.float32


@pytest.mark.parametrize("kw,match", [
    ({"num_modules": 4}, r"DCTLSA: num_modules must be 6 \(the forward concatenates"),
    ({"num_head": 3}, r"DCTLSA: nf 8 must be a multiple of num_head 3"),
    ({"scale": 0}, r"DCTLSA: scale must be a positive int"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build({**SMALL, **kw})


@pytest.mark.parametrize("kw", [{"scale": 4}, {"scale": 3, "in_nc": 1, "out_nc": 1, "nf": 6,
                                                "num_head": 3}, {"scale": 1, "out_nc": 4}])
def test_detect_round_trip(kw):
    s = spec(**kw)
    state = checks.build(s).state_dict()
    known = {"num_head": s["num_head"]}
    got = detect(state, **known)
    assert got["type"] == "DCTLSA"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("scale", "in_nc", "out_nc", "nf", "num_head"):
        if k in s:
            assert got[k] == s[k], k


def test_detects_traiNNer_redux_dctlsa():
    """traiNNer-redux's dctlsa: spandrel's defaults (nf 55, 5 heads, x4); num_head assumed 5."""
    twins = pytest.importorskip("tests.twins")
    shapes = {k: tuple(v.shape) for k, v in twins.build_twin({"type": "DCTLSA"}).state_dict().items()}
    got = MODELS.get("DCTLSA").detect(shapes, {})
    assert got.pop("num_head").value == 5
    assert got == {"in_nc": 3, "nf": 55, "num_modules": 6, "out_nc": 3, "scale": 4}


SPANDREL = [  # (keywords of spandrel's DCTLSA, input size, the key the file is saved under)
    ({"upscale": 4}, (20, 27), None),  # DCTLSA x4: nf 55, 5 heads
    ({"upscale": 2, "nf": 10, "num_head": 5}, (9, 17), "params"),
    ({"upscale": 3, "nf": 15, "num_head": 5}, (16, 33), "params_ema"),
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("DCTLSA")
    torch.manual_seed(0)
    network = module.DCTLSA(**kw)
    with torch.no_grad():  # norms and statistics start at 1 / 0: perturb all
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.02)
        for name, b in network.named_buffers():
            if "running" in name:
                b.copy_(torch.rand_like(b) * 0.4 + (0.8 if "var" in name else -0.2))
    check_spandrel_file(module, network, tmp_path, size, wrap)
