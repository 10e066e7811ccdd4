"""SCUNet: the original's keys (spandrel's detection keys), parity with the torch twin (the original's
network under spandrel's 40-pixel minimum and its own reflection to 64) of the output and every
gradient, float64 and float32, with shifted and unshifted windows; detection (spandrel's rule, a
stage of 0 blocks); .pth both ways; a published-layout file through srgrad's inference with no model
spec; files built by spandrel 0.4.2's own class through srgrad-infer give spandrel's image (skipped
without einops, which spandrel's SCUNet imports); the published parameter count; errors. dim 64 is
the smallest the original builds (32-channel heads), so the cases are few blocks on small images."""
from __future__ import annotations

import numpy as np
import pytest

from framework.card import card
from framework.detect import detect
from framework.registry import MODELS

from . import basicsr_checks as checks
from . import published_checks, spandrel_checks


def spec(**kw):
    return {"type": "SCUNet", "in_nc": 3, "config": [2, 0, 0, 1, 0, 0, 1], "dim": 64, "scale": 1, **kw}


def test_keys_are_the_originals():
    keys = checks.check_keys(spec())
    assert {"m_head.0.weight", "m_tail.0.weight", "m_down1.2.weight", "m_up3.0.weight",
            "m_down1.1.trans_block.msa.relative_position_params", "m_body.0.conv_block.2.weight",
            "m_up1.1.trans_block.mlp.2.bias"} <= set(keys)
    sd = checks.build(spec()).state_dict()
    assert sd["m_body.0.trans_block.msa.relative_position_params"].shape == (8, 15, 15)
    assert sd["m_down1.0.trans_block.msa.embedding_layer.weight"].shape == (96, 32)
    assert sd["m_body.0.conv1_1.weight"].shape == (512, 512, 1, 1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw,shape", [
    ({}, (1, 3, 23, 45)),  # padded to 40 (reflect + replicate), then to 64: every block
    ({"in_nc": 1, "config": [0, 2, 0, 0, 0, 1, 0], "input_resolution": 16}, (2, 1, 41, 64)),
])
def test_matches_the_twin(kw, shape, dtype):
    """The second case: level 1 (input_resolution 16 // 2 = 8) does not shift; its second
    block would."""
    checks.check_parity(spec(**kw), shape, dtype)


@pytest.mark.parametrize("kw", [{}, {"in_nc": 1, "config": [1, 1, 0, 2, 1, 0, 3]}])
def test_detect(kw):
    sd = checks.build(spec(**kw)).state_dict()
    want = {"input_resolution": 256, **spec(**kw)}
    assert detect(sd) == want
    MODELS.build(detect(sd)).load_state_dict(sd, strict=True)


def test_pth_both_ways(tmp_path):
    published_checks.check_pth_both_ways(spec(config=[1, 0, 0, 0, 0, 0, 1]), (1, 3, 9, 12), tmp_path)


def test_published_file_runs_without_a_model_spec(tmp_path):
    published_checks.check_published_file(spec(config=[0, 0, 0, 1, 0, 0, 0]), (1, 3, 41, 20),
                                          tmp_path, want={"input_resolution": 256, **spec(
                                              config=[0, 0, 0, 1, 0, 0, 0])})


def test_spandrels_own_files_give_spandrels_image(tmp_path):
    """issue 40's done-when for SCUNet's layout at few blocks."""
    pytest.importorskip("einops", reason="spandrel 0.4.2's SCUNet imports einops, not installed")
    import torch
    module = pytest.importorskip("tests.twins._spandrel").spandrel_architecture("SCUNet")
    torch.manual_seed(0)
    network = module.SCUNet(in_nc=3, config=[1, 0, 0, 1, 0, 0, 1], dim=64)
    hyper = spandrel_checks.check_spandrel_file(module, network, tmp_path, size=(19, 27))
    assert hyper["config"] == [1, 0, 0, 1, 0, 0, 1]


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(config=[1, 0, 0, 0, 0, 0, 0]), (1, 3, 8, 8))


def test_card_of_the_published_models():
    """scunet_color_* (dim 64, config [4] * 7): 17.95M parameters (the paper's 18M)."""
    def block(h):
        t = h
        swin = 4 * t + (3 * t * t + 3 * t) + t // 32 * 225 + (t * t + t) + (4 * t * t + 4 * t) + (4 * t * t + t)
        return 2 * (4 * h * h + 2 * h) + 2 * 9 * h * h + swin
    d = 64
    total = 2 * 27 * d + 4 * sum(block(h) for h in (32, 64, 128, 256, 128, 64, 32))
    total += 2 * sum(4 * (d << i) * (d << (i + 1)) for i in range(3))
    c = card({"type": "SCUNet"})
    assert c.parameters == total
    assert 17.9e6 < total < 18.0e6
    assert (c.role, c.pads_to, c.pad_minimum, c.channel_keys) == ("restoration", 64, 40, ("in_nc",))


@pytest.mark.parametrize("kw,match", [
    ({"dim": 32}, r"SCUNet: dim must be a multiple of 64"),
    ({"config": [4, 4]}, r"SCUNet: config must be a list of 7 ints >= 0"),
    ({"drop_path_rate": 1.0}, r"SCUNet: drop_path_rate must be"),
    ({"scale": 4}, r"SCUNet: scale must be 1"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build(spec(**kw))
