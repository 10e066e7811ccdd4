"""SAFMN: the original's keys (spandrel's detection keys), the paper's parameter counts, SAFM worked by
hand, parity with the torch twin (spandrel's network under its multiple-of-8 size requirement),
output and every gradient, float64 and float32; detection (spandrel's rule, ffn_scale read back);
.pth both ways; a published-layout file through srgrad's inference with no model spec; errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.registry import MODELS
from framework.detect import detect

from . import basicsr_checks as checks
from . import published_checks

SPANDREL_KEYS = ["to_feat.weight", "feats.0.norm1.weight", "feats.0.norm2.weight",
                 "feats.0.safm.mfr.0.weight", "feats.0.safm.mfr.3.weight", "feats.0.safm.aggr.weight",
                 "feats.0.ccm.ccm.0.weight", "feats.0.ccm.ccm.2.weight", "to_img.0.weight"]


def spec(**kw):
    return {"type": "SAFMN", "dim": 8, "n_blocks": 2, "scale": 2, **kw}


def test_keys_are_the_originals():
    keys = checks.check_keys(spec(n_blocks=1))
    assert set(SPANDREL_KEYS) <= set(keys)
    sd = checks.build(spec(dim=12, ffn_scale=1.5, scale=3)).state_dict()
    assert sd["feats.0.safm.mfr.2.weight"].shape == (3, 1, 3, 3)  # depthwise on dim / 4 channels
    assert sd["feats.0.ccm.ccm.0.weight"].shape == (18, 12, 3, 3)  # int(12 * 1.5)
    assert sd["to_img.0.weight"].shape == (27, 12, 3, 3)  # 3 * 3^2


def test_published_parameter_counts():
    """SAFMN (dim 36, 8 blocks, ffn_scale 2): 228K / 233K / 240K parameters at x2 / x3 / x4, the
    paper's Table; counted layer by layer."""
    def count(s, dim=36, hidden=72, blocks=8):
        block = 2 * 2 * dim + 4 * (dim // 4 * 9 + dim // 4) + dim * dim + dim \
            + dim * hidden * 9 + hidden + hidden * dim + dim
        return 3 * dim * 9 + dim + blocks * block + dim * 3 * s * s * 9 + 3 * s * s
    for s, want in ((2, 227_820), (3, 232_695), (4, 239_520)):
        assert checks.build({"type": "SAFMN", "dim": 36, "scale": s}).num_parameters() == count(s) == want


def test_safm_by_hand():
    """mfr convs the identity (centre tap 1), aggr the identity: part i is max-pooled over 2^i x 2^i
    blocks and repeated back; the output is GELU(that) * x."""
    model = checks.build(spec()).to(np.float64)
    safm = model.feats[0].safm
    for conv in safm.mfr:
        conv.weight.data[...] = 0
        conv.weight.data[:, 0, 1, 1] = 1
        conv.bias.data[...] = 0
    safm.aggr.weight.data[...] = np.eye(8)[:, :, None, None]
    safm.aggr.bias.data[...] = 0
    x = np.random.default_rng(0).standard_normal((1, 8, 8, 16))
    parts = []
    for i in range(4):
        p, k = x[:, 2 * i:2 * i + 2], 2 ** i
        pooled = p.reshape(1, 2, 8 // k, k, 16 // k, k).max(axis=(3, 5))
        parts.append(np.repeat(np.repeat(pooled, k, 2), k, 3))
    m = np.concatenate(parts, 1)
    gelu = F.gelu(sg.tensor(m)).data
    with sg.no_grad():
        np.testing.assert_allclose(safm(sg.tensor(x)).data, gelu * x, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw,shape", [
    ({}, (2, 3, 16, 8)),  # multiples of 8: the original as it is
    ({"dim": 12, "ffn_scale": 1.5, "scale": 3, "n_blocks": 1}, (1, 3, 13, 9)),  # padded to 16 x 16
    ({"scale": 1}, (1, 3, 5, 3)),  # smaller than 8: reflected 4 / 2, replicated the rest
])
def test_matches_the_twin(kw, shape, dtype):
    checks.check_parity(spec(**kw), shape, dtype)


@pytest.mark.parametrize("kw", [{}, {"dim": 12, "n_blocks": 3, "ffn_scale": 1.5, "scale": 3},
                                {"dim": 4, "n_blocks": 1, "ffn_scale": 2.25, "scale": 1},
                                {"dim": 28, "n_blocks": 1, "ffn_scale": 61.5 / 28, "scale": 4}])
def test_detect(kw):
    """spandrel's keywords; ffn_scale = CCM's width / dim, or, where that lands a hair under the
    width in float (28 * (61 / 28) = 60.99...), (width + 1/2) / dim."""
    sd = checks.build(spec(**kw)).state_dict()
    got = detect(sd)
    want = {"type": "SAFMN", "ffn_scale": 2.0, **spec(**kw)}
    assert got == want
    MODELS.build(got).load_state_dict(sd, strict=True)


def test_pth_both_ways(tmp_path):
    published_checks.check_pth_both_ways(spec(scale=3), (1, 3, 9, 6), tmp_path)


def test_published_file_runs_without_a_model_spec(tmp_path):
    """SAFMN_DF2K_x4's layout (dim 36) with one block."""
    published_checks.check_published_file({"type": "SAFMN", "dim": 36, "n_blocks": 1, "ffn_scale": 2.0,
                                           "scale": 4}, (1, 3, 10, 7), tmp_path)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(), (2, 3, 8, 8))


@pytest.mark.parametrize("kw,error,match", [
    ({"dim": 6}, ValueError, r"SAFMN: dim must be a multiple of 4 \(SAFM splits the features in 4\)"),
    ({"dim": 0}, ValueError, r"SAFMN: dim must be a positive int"),
    ({"ffn_scale": 0.05}, ValueError, r"SAFMN: ffn_scale 0.05 leaves CCM no hidden channel"),
    ({"ffn_scale": 0}, ValueError, r"SAFMN: ffn_scale must be > 0"),
    ({"scale": 0}, ValueError, r"SAFMN: scale must be a positive int"),
    ({"upscaling_factor": 2}, TypeError, r"upscaling_factor"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build(spec(**kw))
