"""KBNet (KBNet_s): the original's keys (spandrel's detection keys), KBA (kernel basis attention)
against a per-pixel loop, parity with the torch twin (spandrel's network: its KBAFunction's and
LayerNorm2d's hand-written backward, the zero padding to 2^levels) of the output and every gradient,
float64 and float32; detection of the published layout and more (KBNet_l refused by name); .pth
both ways; files built by spandrel 0.4.2's own class through srgrad-infer give spandrel's image;
the card; errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.card import card
from framework.detect import detect
from framework.registry import MODELS
from models.kbnet import kba

from . import basicsr_checks as checks
from . import published_checks, spandrel_checks

SPANDREL_KEYS = ["intro.weight", "encoders.0.0.attgamma", "middle_blks.0.w", "decoders.0.0.attgamma",
                 "ending.weight"]  # spandrel 0.4.2's KeyCondition for KBNet_s
SIDD = {"enc_blk_nums": [2, 2, 4, 8], "middle_blk_num": 12, "dec_blk_nums": [2, 2, 2, 2]}
GATES = (".beta", ".gamma", ".ga1", ".attgamma")  # 0.01 at init: randomised so every branch acts


def spec(**kw):
    return {"type": "KBNet", "width": 4, "middle_blk_num": 1, "enc_blk_nums": [1, 1],
            "dec_blk_nums": [1, 1], "scale": 1, **kw}


def randomised(model, seed=0):
    rng = np.random.default_rng(seed)
    for name, p in model.named_parameters():
        if name.endswith(GATES):
            p.data[...] = rng.uniform(-1, 1, p.shape)
    return model


def test_keys_are_the_originals():
    keys = checks.check_keys(spec())
    assert set(SPANDREL_KEYS) <= set(keys)
    sd = checks.build(spec(width=8)).state_dict()
    assert sd["encoders.0.0.w"].shape == (1, 32, 8 * 4 * 9)  # g = 2 groups of 4 channels
    assert sd["encoders.1.0.conv11.1.weight"].shape == (16, 4, 5, 5)  # 5x5, c // 4 groups
    assert sd["encoders.1.0.conv2.2.weight"].shape == (32, 8, 1, 1)
    assert sd["middle_blks.0.attgamma"].shape == (1, 32, 1, 1)


def test_kba_is_the_per_pixel_fused_kernel():
    """out[:, p] = (sum_s att[s, p] w[s]) applied to x's zero-padded 3x3 neighbourhood of p, per
    group of c / g channels, + sum_s att[s, p] b[s]: a loop over pixels, float64."""
    rng = np.random.default_rng(0)
    n, c, h, w, s, g = 2, 4, 5, 3, 3, 2
    cg = c // g
    x, att = rng.standard_normal((n, c, h, w)), rng.standard_normal((n, s, h, w))
    wt, b = rng.standard_normal((1, s, c * cg * 9)), rng.standard_normal((1, s, c))
    pad = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros_like(x)
    for i in range(n):
        for y in range(h):
            for z in range(w):
                kern = np.tensordot(att[i, :, y, z], wt[0], 1).reshape(g, cg, cg, 3, 3)
                patch = pad[i, :, y:y + 3, z:z + 3].reshape(g, cg, 3, 3)
                out = np.einsum("goikl,gikl->go", kern, patch).reshape(c)
                want[i, :, y, z] = out + att[i, :, y, z] @ b[0]
    with sg.no_grad():
        got = kba(*(sg.tensor(a) for a in (x, att, wt, b)), groups=g).data
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


PARITY = [  # (keywords, shape): sizes that are no multiple of 2^levels take the zero padding
    ({}, (2, 3, 8, 12)),
    ({"img_channel": 1, "width": 8, "middle_blk_num": 2, "enc_blk_nums": [1, 0], "dec_blk_nums": [0, 1],
      "lightweight": True, "ffn_scale": 1.5}, (1, 1, 7, 6)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw,shape", PARITY)
def test_matches_the_twin(kw, shape, dtype, monkeypatch):
    build = checks.build
    monkeypatch.setattr(checks, "build", lambda s, seed=0: randomised(build(s, seed), seed))
    checks.check_parity(spec(**kw), shape, dtype)


@pytest.mark.parametrize("kw", [{}, dict(SIDD), {"lightweight": True, "ffn_scale": 1.5, "img_channel": 1},
                                {"enc_blk_nums": [0, 2], "dec_blk_nums": [3, 0], "middle_blk_num": 0}])
def test_detect(kw):
    sd = checks.build(spec(**kw)).state_dict()
    want = {"img_channel": 3, "lightweight": False, "ffn_scale": 2.0, **spec(**kw)}
    assert detect(sd) == want
    MODELS.build(detect(sd)).load_state_dict(sd, strict=True)


def test_kbnet_l_is_refused_by_name():
    sd = {"patch_embed.proj.weight": np.zeros((48, 3, 3, 3)), "output.weight": np.zeros((3, 48, 3, 3)),
          "encoder_level1.0.attn.ga1": np.zeros((1, 72, 1, 1)), "intro.weight": np.zeros((4, 3, 3, 3))}
    with pytest.raises(ValueError, match="KBNet_l"):
        detect(sd)


def test_pth_both_ways(tmp_path):
    published_checks.check_pth_both_ways(spec(), (1, 3, 7, 10), tmp_path)


@pytest.mark.parametrize("kw,size", [(dict(SIDD, width=4), (19, 22)),
                                     ({"width": 8, "enc_blk_nums": [1, 2], "dec_blk_nums": [1, 1],
                                       "middle_blk_num": 2, "lightweight": True}, (16, 13))])
def test_spandrels_own_files_give_spandrels_image(kw, size, tmp_path):
    """issue 40's done-when: KBNet_s's SIDD layout (width 4; published 64) and a lightweight one,
    built by spandrel's own class, the gates made larger than their 0.01 init."""
    import torch
    module = pytest.importorskip("tests.twins._spandrel").spandrel_architecture("KBNet")
    torch.manual_seed(0)
    network = module.KBNet_s(img_channel=3, **kw)
    with torch.no_grad():
        for name, p in network.named_parameters():
            if name.endswith(GATES):
                p.uniform_(-0.5, 0.5)
    hyper = spandrel_checks.check_spandrel_file(module, network, tmp_path, size=size)
    assert hyper["width"] == kw["width"] and hyper["enc_blk_nums"] == kw["enc_blk_nums"]


def test_card_of_the_published_model():
    """KBNet_s SIDD (width 64): the twin's parameter count (its own class at full size)."""
    c = card({"type": "KBNet"})
    assert (c.role, c.scale, c.pads_to, c.channel_keys) == ("restoration", 1, 16, ("img_channel",))
    twins = pytest.importorskip("tests.twins")
    theirs = sum(p.numel() for _, p in twins.build_twin({"type": "KBNet"}).named_parameters())
    assert c.parameters == theirs
    for kw, _ in PARITY:
        assert card(spec(**kw)).parameters == \
            sum(p.numel() for _, p in twins.build_twin(spec(**kw)).named_parameters())


@pytest.mark.parametrize("kw,match", [
    ({"enc_blk_nums": [1], "dec_blk_nums": [1, 1]}, r"KBNet: enc_blk_nums \[1\] and dec_blk_nums \[1, 1\]"),
    ({"scale": 2}, r"KBNet: scale must be 1"),
    ({"width": 5}, r"KBNet: level 0 \(width 5 x 1\) has 5 channels"),
    ({"width": 2}, r"KBNet: level 0 \(width 2 x 1\) has 2 channels"),
    ({"width": 48, "enc_blk_nums": [], "dec_blk_nums": []}, r"KBNet: level 0 \(width 48 x 1\) has 48"),
    ({"lightweight": 1}, r"KBNet: lightweight must be a bool"),
])
def test_argument_errors(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        MODELS.build(spec(**kw))
