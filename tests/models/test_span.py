"""SPAN: the original's keys in order (both published layouts), parameter counts, parity with the torch
twin in train() (the branches) and eval() (the fused eval_conv) for outputs and every gradient, the
re-parameterisation (train() and eval() agree, the border included), eval_conv untrained, an Adam step, .pth both ways, published files through the inference
path, ONNX export, detection (spandrel's files and more), errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.registry import MODELS
from framework.detect import detect
from models.span import Conv3XC

from . import basicsr_checks as checks
from . import pth_checks

SMALL = {"type": "SPAN", "feature_channels": 6, "num_blocks": 2}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


def conv3xc(prefix):
    return [f"{prefix}.{k}" for k in ("sk.weight", "sk.bias", "conv.0.weight", "conv.0.bias", "conv.1.weight",
                                      "conv.1.bias", "conv.2.weight", "conv.2.bias", "eval_conv.weight",
                                      "eval_conv.bias")]


def test_state_dict_keys_are_the_originals():
    want = conv3xc("conv_1")
    for b in (1, 2):
        for c in ("c1_r", "c2_r", "c3_r"):
            want += conv3xc(f"block_{b}.{c}")
    want += ["conv_cat.weight", "conv_cat.bias"] + conv3xc("conv_2") + ["upsampler.0.weight", "upsampler.0.bias"]
    assert checks.check_keys(spec()) == want
    assert checks.check_keys(spec(norm=False))[0] == "no_norm"  # a buffer of the root: first
    fused = checks.check_keys(spec(deploy=True))
    assert fused == [k for k in want if ".sk." not in k and ".conv." not in k]
    sd = checks.build(spec(3, num_in_ch=1, num_out_ch=1)).state_dict()
    assert sd["conv_1.conv.1.weight"].shape == (12, 2, 3, 3)  # 2 c_in -> 2 c_out, unpadded
    assert sd["upsampler.0.weight"].shape == (9, 6, 3, 3)


def _conv3xc_params(ci, co):
    return (ci * co + co) + (ci * 2 * ci + 2 * ci) + (2 * ci * 2 * co * 9 + 2 * co) + (2 * co * co + co) + (
        ci * co * 9 + co)


def test_published_size():
    """spandrel's default SPAN (48 features, 6 blocks, x4): conv_1 + 18 Conv3XC in the blocks +
    conv_cat + conv_2 + the upsampler (48 -> 3 x 4^2). Fused (deploy), the paper's 0.43 M."""
    conv3xc = _conv3xc_params(3, 48) + 19 * _conv3xc_params(48, 48)
    rest = (4 * 48 * 48 + 48) + (48 * 48 * 9 + 48)
    assert checks.build({"type": "SPAN"}).num_parameters() == conv3xc + rest == 2_236_728
    fused = (3 * 48 * 9 + 48) + 19 * (48 * 48 * 9 + 48) + rest
    assert checks.build({"type": "SPAN", "deploy": True}).num_parameters() == fused == 426_288
    twins = pytest.importorskip("tests.twins")
    assert twins.num_parameters(twins.build_twin({"type": "SPAN"})) == conv3xc + rest


PARITY = [spec(), spec(3, norm=False), spec(1, num_in_ch=1, num_out_ch=1), spec(4, num_out_ch=1, num_blocks=1),
          spec(2, deploy=True), spec(2, img_range=1.0, rgb_mean=[0.5, 0.2, 0.1], num_blocks=3)]


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("s", PARITY, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items() if k != "type"))
def test_matches_the_twin(s, dtype, train):
    """train(): the branches (eval_conv gets no gradient); eval(): eval_conv fused from them on the
    forward, both sides (no parameter gradient but deploy's)."""
    channels = s.get("num_in_ch", 3)
    checks.check_parity(s, (2, channels, 5, 7), dtype, train=train)


def test_reparameterisation_by_hand():
    """One Conv3XC with random weights and biases: eval()'s fused 3x3 equals train()'s branches
    everywhere, the border too (the zero padding comes before the first 1x1, so the padded ring
    holds its bias, as the fused bias assumes). Padding after it instead would differ on the
    border: the check has teeth. The fused centre tap includes the 1x1 skip."""
    import framework.functional as F
    rng = np.random.default_rng(0)
    x = sg.tensor(rng.standard_normal((1, 3, 6, 7)))
    conv = Conv3XC(3, 4).double()
    for p in conv.parameters():
        p.data[...] = rng.standard_normal(p.shape)
    with sg.no_grad():
        a, b = conv.eval()(x).data, conv.train()(x).data
        c0, c1, c2 = conv.conv
        wrong = (c2(c1(F.pad(c0(x), (1, 1, 1, 1)))) + conv.sk(x)).data
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(wrong[..., 1:-1, 1:-1], b[..., 1:-1, 1:-1], rtol=1e-12, atol=1e-12)
    assert np.abs(wrong - b)[..., 0, :].min() > 1e-6
    w, bias = conv.fused()
    np.testing.assert_array_equal(conv.eval_conv.weight.data, w)
    np.testing.assert_array_equal(conv.eval_conv.bias.data, bias)
    w1, w2, w3 = (m.weight.data for m in conv.conv)
    centre = np.einsum("om,mk,ki->oi", w3[:, :, 0, 0], w2[:, :, 1, 1], w1[:, :, 0, 0])
    np.testing.assert_allclose(w[:, :, 1, 1], centre + conv.sk.weight.data[:, :, 0, 0], rtol=1e-12)


def test_eval_conv_is_not_trained_and_follows_the_branches():
    from framework.optim import Adam
    model = checks.build(spec())
    before = {k: v.copy() for k, v in model.state_dict().items() if "eval_conv" in k}
    opt = Adam(model.parameters(), lr=1e-2)
    x = sg.tensor(np.random.default_rng(1).uniform(0, 1, (1, 3, 6, 6)), dtype=np.float32)
    model(x).sum().backward()
    assert all(p.grad is None for k, p in model.named_parameters() if "eval_conv" in k)
    opt.step()
    sd = model.state_dict()
    for k, v in before.items():
        np.testing.assert_array_equal(sd[k], v)  # untouched by the step
    with sg.no_grad():
        model.eval()(x)
    w, b = model.block_1.c2_r.fused()
    np.testing.assert_array_equal(sd["block_1.c2_r.eval_conv.weight"], w)  # refreshed by eval()
    assert not np.array_equal(w, before["block_1.c2_r.eval_conv.weight"])
    state = {k: (np.full_like(v, 7.0) if "eval_conv" in k else v) for k, v in sd.items()}
    model.load_state_dict(state)  # an eval_conv that disagrees with its branches: the branches win
    with sg.no_grad():
        model(x)
    np.testing.assert_array_equal(model.state_dict()["block_1.c2_r.eval_conv.weight"], w)
    fused = checks.build(spec(deploy=True))
    assert all(p.requires_grad for p in fused.parameters())  # deploy: eval_conv is the layer


@pytest.mark.parametrize("s", [spec(), spec(deploy=True)])
def test_adam_step_lowers_the_loss(s):
    checks.check_adam_step(s, (2, 3, 8, 8))


@pytest.mark.parametrize("s", [spec(4), spec(2, deploy=True, norm=False)])
def test_pth_both_ways(s, tmp_path):
    pth_checks.check_pth_both_ways(s, (1, 3, 5, 6), tmp_path)


@pytest.mark.parametrize("s", [
    {"type": "SPAN", "feature_channels": 8, "scale": 4},  # spandrel's layout (6 blocks, norm)
    {"type": "SPAN", "feature_channels": 8, "num_blocks": 3, "scale": 2, "norm": False},  # traiNNer-redux
    {"type": "SPAN", "feature_channels": 8, "scale": 4, "deploy": True},  # fused (NTIRE 2024 code)
])
def test_published_files_run_through_inference(s, tmp_path):
    pth_checks.check_published_file_infers(s, (1, 3, 6, 5), tmp_path)


def test_export_to_onnx(tmp_path):
    ops = pth_checks.check_export_cli(spec(2), (9, 11), tmp_path, other_shape=(2, 3, 6, 5))
    assert {"Conv", "Sigmoid", "DepthToSpace"} <= set(ops)


@pytest.mark.parametrize("s", [spec(), spec(3, norm=False, num_blocks=4), spec(1, num_in_ch=1, num_out_ch=1),
                               spec(2, deploy=True), spec(4, num_out_ch=1)])
def test_detect_round_trip(s):
    state = checks.build(s).state_dict()
    got = detect(state)
    want = {"num_in_ch": 3, "num_out_ch": s.get("num_in_ch", 3), "norm": True, "deploy": False, **s}
    if "num_out_ch" in s and "num_in_ch" not in s:  # 1 output channel from x4: 16 = 1 x 4^2, not 3 x ...
        want["num_out_ch"] = s["num_out_ch"]
    assert got == {k: want[k] for k in got}
    MODELS.build(got).load_state_dict(state, strict=True)


def test_detect_reads_spandrels_files():
    """spandrel 0.4.2's SPAN rule needs these keys; its load reads the same keywords from them."""
    twins = pytest.importorskip("tests.twins")
    sd = twins.build_twin({"type": "SPAN", "feature_channels": 48, "scale": 4}).state_dict()
    for key in ("conv_1.sk.weight", "block_1.c1_r.sk.weight", "block_1.c1_r.eval_conv.weight",
                "block_1.c3_r.eval_conv.weight", "conv_cat.weight", "conv_2.sk.weight",
                "conv_2.eval_conv.weight", "upsampler.0.weight"):
        assert key in sd
    assert detect(sd) == {"type": "SPAN", "num_in_ch": 3, "num_out_ch": 3, "feature_channels": 48,
                          "num_blocks": 6, "scale": 4, "norm": True, "deploy": False}


@pytest.mark.parametrize("kw,error,match", [
    ({"feature_channels": 0}, ValueError, r"SPAN: feature_channels must be a positive int"),
    ({"num_blocks": 0}, ValueError, r"SPAN: num_blocks must be a positive int"),
    ({"scale": 2.0}, TypeError, r"SPAN: scale must be a positive int"),
    ({"norm": "yes"}, TypeError, r"SPAN: norm must be a bool"),
    ({"deploy": 1}, TypeError, r"SPAN: deploy must be a bool"),
    ({"img_range": 0}, ValueError, r"SPAN: img_range must be > 0"),
    ({"rgb_mean": [0.5, 0.5]}, ValueError, r"SPAN: rgb_mean has 2 values for 3 channels"),
    ({"upscale": 4}, TypeError, r"upscale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "SPAN", **kw})
