"""SAFMN-BCIE: the original's keys (SAFMN's blocks under feats.i.layers.j), parity with the twin
(spandrel 0.4.2's own SAFMN_BCIE: output and every gradient of an L1 loss, float64 and float32) at
upscaling factors 2, 3 and 4 (at 4 the features are no multiple of 8: SAFM's overlapping pools and
its nearest upsampling to the size, as the original); .pth round trips both ways; shapes at x1
with the padding; detection; and the done-when check: files built by spandrel's SAFMN_BCIE (its
test's layouts) through srgrad-infer give spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import detect
from framework.registry import MODELS

from . import basicsr_checks as checks
from .published_checks import check_pth_both_ways
from .spandrel_checks import check_spandrel_file

SMALL = {"type": "SAFMNBCIE", "dim": 8, "n_blocks": 1, "num_layers": 1, "scale": 1}


def spec(**kw):
    return {**SMALL, **kw}


def test_state_dict_keys_are_the_originals():
    keys = checks.check_keys(spec(num_layers=2, upscaling_factor=3))
    assert keys[:2] == ["to_feat.1.weight", "to_feat.1.bias"]
    assert "feats.0.layers.1.safm.mfr.3.weight" in keys and keys[-4:] == [
        "to_img.0.weight", "to_img.0.bias", "to_img.2.weight", "to_img.2.bias"]
    sd = checks.build(spec(upscaling_factor=3, ffn_scale=1.5)).state_dict()
    assert sd["to_feat.1.weight"].shape == (8, 27, 3, 3) and sd["to_img.0.weight"].shape == (72, 8, 3, 3)
    assert sd["feats.0.layers.0.ccm.ccm.0.weight"].shape == (12, 8, 3, 3)


PARITY = [({}, (16, 32)), ({"upscaling_factor": 3, "num_layers": 2}, (48, 48)),
          ({"upscaling_factor": 4, "n_blocks": 2, "ffn_scale": 1.5}, (48, 64)),
          ({"upscaling_factor": 1, "num_layers": 0}, (16, 16))]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw,hw", PARITY)
def test_matches_the_twin(kw, hw, dtype):
    """Sizes srgrad does not pad (multiples of lcm(16, u), at least 8 u), which the original runs
    as they are. float32 at 48 pixels and up: the last bias's gradient sums 13824 to 18432 L1
    signs in another order than torch (measured 2.3e-5 of the largest gradient): bound 3e-5."""
    tol = 3e-5 if dtype == np.float32 and hw[0] >= 48 else None
    checks.check_parity(spec(**kw), (2, 3, *hw), dtype, tolerance=tol)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(), (2, 3, 16, 16))


def test_pth_round_trips(tmp_path):
    checks.check_pth_round_trip(spec(upscaling_factor=4), (1, 3, 33, 20), tmp_path)
    check_pth_both_ways(spec(n_blocks=2), (1, 3, 16, 48), tmp_path)


@pytest.mark.parametrize("kw,hw", [({}, (5, 3)), ({"upscaling_factor": 3}, (17, 50)),
                                   ({"upscaling_factor": 4}, (1, 40))])
def test_output_keeps_the_size(kw, hw):
    y = checks.build(spec(**kw))(sg.tensor(np.zeros((2, 3, *hw), np.float32)))
    assert y.shape == (2, 3, *hw) and y.dtype == np.float32


@pytest.mark.parametrize("kw,match", [
    ({"dim": 6}, r"SAFMNBCIE: dim must be a multiple of 4"),
    ({"scale": 2}, r"SAFMNBCIE: scale must be 1 \(a restoration network"),
    ({"upscaling_factor": 0}, r"SAFMNBCIE: upscaling_factor must be"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build(spec(**kw))


def test_rgb_only():
    with pytest.raises(ValueError, match=r"SAFMNBCIE: expected an RGB input \(N, 3, H, W\), got shape \(1, 1, 16, 16\)"):
        checks.build(spec())(sg.tensor(np.zeros((1, 1, 16, 16), np.float32)))


@pytest.mark.parametrize("kw", [{"upscaling_factor": 4, "num_layers": 3, "ffn_scale": 3.0},
                                {"dim": 12, "n_blocks": 3, "ffn_scale": 5.0 / 3}])
def test_detect_round_trip(kw):
    s = spec(**kw)
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "SAFMNBCIE"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("dim", "n_blocks", "num_layers", "upscaling_factor"):
        if k in s:
            assert got[k] == s[k], k
    assert int(got["ffn_scale"] * got["dim"]) == int(s["ffn_scale"] * s["dim"])


SPANDREL = [  # spandrel's own test layouts (narrower), the defaults' pattern (u 2, 6 x 6 at dim 8)
    ({"dim": 8, "n_blocks": 2, "num_layers": 2, "ffn_scale": 2.0, "upscaling_factor": 2}, (20, 27), None),
    ({"dim": 12, "n_blocks": 2, "num_layers": 1, "ffn_scale": 2.0, "upscaling_factor": 4}, (33, 30), "params"),
    ({"dim": 8, "n_blocks": 1, "num_layers": 4, "ffn_scale": 5.0, "upscaling_factor": 2}, (16, 9), None),
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("SAFMNBCIE")
    torch.manual_seed(0)
    network = module.SAFMNBCIE(**kw)
    with torch.no_grad():  # norms at 1 / 0: perturb everything
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    check_spandrel_file(module, network, tmp_path, size, wrap)
