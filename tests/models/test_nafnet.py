"""NAFNet: the original's keys (spandrel's detection keys), a block at its zero init is the identity,
SimpleGate and SCA worked by hand, parity with the torch twin (spandrel's network: its zero padding
to 2^levels and the crop back) of the output and every gradient, float64 and float32; detection of
the published layouts (SIDD, GoPro / REDS) and more; .pth both ways; a published-layout file through
srgrad's inference with no model spec; files built by spandrel 0.4.2's own class through
srgrad-infer give spandrel's image; errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.card import card
from framework.detect import detect
from framework.registry import MODELS

from . import basicsr_checks as checks
from . import published_checks, spandrel_checks

SPANDREL_KEYS = [  # spandrel 0.4.2's KeyCondition for NAFNet
    "intro.weight", "ending.weight", "ups.0.0.weight", "downs.0.weight", "middle_blks.0.beta",
    "middle_blks.0.gamma", "middle_blks.0.conv1.weight", "middle_blks.0.conv2.weight",
    "middle_blks.0.conv3.weight", "middle_blks.0.sca.1.weight", "middle_blks.0.conv4.weight",
    "middle_blks.0.conv5.weight", "middle_blks.0.norm1.weight", "middle_blks.0.norm2.weight",
    "encoders.0.0.beta", "encoders.0.0.gamma", "decoders.0.0.beta", "decoders.0.0.gamma"]
# The published layouts at width 4 (published: 32 / 64), the long stacks cut short.
SIDD = {"enc_blk_nums": [2, 2, 4, 8], "middle_blk_num": 12, "dec_blk_nums": [2, 2, 2, 2]}
GOPRO = {"enc_blk_nums": [1, 1, 1, 28], "middle_blk_num": 1, "dec_blk_nums": [1, 1, 1, 1]}


def spec(**kw):
    return {"type": "NAFNet", "width": 4, "middle_blk_num": 1, "enc_blk_nums": [1, 1],
            "dec_blk_nums": [1, 1], "scale": 1, **kw}


def randomised(model, seed=0):
    """beta and gamma start at zero (every block the identity): random values make the blocks act."""
    rng = np.random.default_rng(seed)
    for name, p in model.named_parameters():
        if name.endswith((".beta", ".gamma")):
            p.data[...] = rng.uniform(-1, 1, p.shape)
    return model


def test_keys_are_the_originals():
    keys = checks.check_keys(spec())
    assert set(SPANDREL_KEYS) <= set(keys)
    sd = checks.build(spec(img_channel=1, width=6)).state_dict()
    assert sd["intro.weight"].shape == (6, 1, 3, 3)
    assert sd["encoders.1.0.conv2.weight"].shape == (24, 1, 3, 3)  # depthwise on 2 x 12
    assert sd["encoders.1.0.sca.1.weight"].shape == (12, 12, 1, 1)
    assert sd["downs.1.weight"].shape == (24, 12, 2, 2)
    assert sd["ups.0.0.weight"].shape == (48, 24, 1, 1) and "ups.0.0.bias" not in sd
    assert sd["middle_blks.0.beta"].shape == (1, 24, 1, 1)


def test_a_block_at_init_is_the_identity_and_its_branches_by_hand():
    """beta = gamma = 0 (the original's init): the block returns its input. With beta = 1 and
    every conv the identity on its channels (conv1, conv4 copying c channels twice), LayerNorm
    weight 1 bias 0: x + SCA(n^2) + (n'^2), n = the normalised x, SCA(t) = t * mean over pixels
    of t (its conv the identity)."""
    model = checks.build(spec(enc_blk_nums=[], dec_blk_nums=[])).to(np.float64)
    block = model.middle_blks[0]
    x = np.random.default_rng(0).standard_normal((2, 4, 5, 3))
    with sg.no_grad():
        np.testing.assert_array_equal(block(sg.tensor(x)).data, x)
    eye = np.eye(4)[:, :, None, None]
    for conv in (block.conv1, block.conv4):
        conv.weight.data[...] = np.concatenate([eye, eye])
    for conv in (block.conv3, block.conv5, block.sca[1]):
        conv.weight.data[...] = eye
    block.conv2.weight.data[...] = 0
    block.conv2.weight.data[:, 0, 1, 1] = 1
    for conv in (block.conv1, block.conv2, block.conv3, block.conv4, block.conv5, block.sca[1]):
        conv.bias.data[...] = 0
    block.beta.data[...] = 1
    block.gamma.data[...] = 1

    def ln(t):
        u = t.mean(1, keepdims=True)
        return (t - u) / np.sqrt(((t - u) ** 2).mean(1, keepdims=True) + 1e-6)
    g = ln(x) ** 2
    y = x + g * g.mean(axis=(2, 3), keepdims=True)
    want = y + ln(y) ** 2
    with sg.no_grad():
        np.testing.assert_allclose(block(sg.tensor(x)).data, want, rtol=1e-12, atol=1e-12)


PARITY = [  # (keywords, shape): sizes that are no multiple of 2^levels take the zero padding
    ({}, (2, 3, 8, 12)),
    ({"img_channel": 1, "width": 6, "middle_blk_num": 2, "enc_blk_nums": [2, 0, 1],
      "dec_blk_nums": [1, 2, 0]}, (1, 1, 13, 7)),
    ({"enc_blk_nums": [], "dec_blk_nums": []}, (1, 3, 5, 3)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw,shape", PARITY)
def test_matches_the_twin(kw, shape, dtype, monkeypatch):
    """Every parameter gets a gradient: beta and gamma randomised (at zero the branches behind
    them get zero gradients, which would hide a wrong one)."""
    build = checks.build
    monkeypatch.setattr(checks, "build", lambda s, seed=0: randomised(build(s, seed), seed))
    checks.check_parity(spec(**kw), shape, dtype)


@pytest.mark.parametrize("kw", [{}, dict(SIDD), dict(GOPRO, width=2, img_channel=1),
                                {"enc_blk_nums": [], "dec_blk_nums": [], "middle_blk_num": 3},
                                {"enc_blk_nums": [0, 2], "dec_blk_nums": [3, 0], "middle_blk_num": 0}])
def test_detect(kw):
    """spandrel's keywords; a level of 0 blocks (no keys in encoders / decoders) is counted from
    downs and ups."""
    sd = checks.build(spec(**kw)).state_dict()
    want = {"img_channel": 3, **spec(**kw)}
    assert detect(sd) == want
    MODELS.build(detect(sd)).load_state_dict(sd, strict=True)


def test_pth_both_ways(tmp_path):
    published_checks.check_pth_both_ways(spec(), (1, 3, 7, 10), tmp_path)


def test_published_file_runs_without_a_model_spec(tmp_path):
    """NAFNet-SIDD-width32's layout at width 4."""
    published_checks.check_published_file(spec(**SIDD), (1, 3, 18, 9), tmp_path)


@pytest.mark.parametrize("kw,size", [(dict(SIDD, width=4), (19, 22)),
                                     (dict(GOPRO, width=2, middle_blk_num=2), (16, 13))])
def test_spandrels_own_files_give_spandrels_image(kw, size, tmp_path):
    """issue 40's done-when: NAFNet-SIDD's and -GoPro's layouts built by spandrel's own class
    (beta and gamma made non-zero: at their zero init the network is a conv pair)."""
    import torch
    module = pytest.importorskip("tests.twins._spandrel").spandrel_architecture("NAFNet")
    torch.manual_seed(0)
    network = module.NAFNet(img_channel=3, **kw)
    with torch.no_grad():
        for name, p in network.named_parameters():
            if name.endswith((".beta", ".gamma")):
                p.uniform_(-0.5, 0.5)
    hyper = spandrel_checks.check_spandrel_file(module, network, tmp_path, size=size)
    assert hyper["width"] == kw["width"] and hyper["enc_blk_nums"] == kw["enc_blk_nums"]


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(), (2, 3, 8, 8))


def test_card_of_the_published_models():
    """NAFNet-SIDD-width64 and -GoPro-width64, counted layer by layer (one NAFBlock of c channels:
    7 c^2 + 33 c)."""
    def blocks(c, n):
        return n * (7 * c * c + 33 * c)

    def count(w, enc, mid, dec):
        total = (3 * w * 9 + w) * 2 - w + 3  # intro (w outputs) + ending (3 outputs)
        for i, (ne, nd) in enumerate(zip(enc, dec)):
            c = w * 2 ** i
            total += blocks(c, ne) + blocks(c, nd) + (2 * c * c * 4 + 2 * c) + 2 * c * 4 * c
        return total + blocks(w * 2 ** len(enc), mid)
    for kw in (SIDD, GOPRO):
        c = card({"type": "NAFNet", "width": 64, **kw})
        assert c.parameters == count(64, kw["enc_blk_nums"], kw["middle_blk_num"], kw["dec_blk_nums"])
        assert (c.role, c.scale, c.pads_to, c.channel_keys) == ("restoration", 1, 16, ("img_channel",))


@pytest.mark.parametrize("kw,match", [
    ({"enc_blk_nums": [1], "dec_blk_nums": [1, 1]}, r"NAFNet: enc_blk_nums \[1\] and dec_blk_nums \[1, 1\]"),
    ({"scale": 2}, r"NAFNet: scale must be 1 \(a restoration network"),
    ({"width": 0}, r"NAFNet: width must be a positive int"),
    ({"enc_blk_nums": [1, -1]}, r"NAFNet: enc_blk_nums must be a list of ints >= 0"),
    ({"middle_blk_num": -1}, r"NAFNet: middle_blk_num must be"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build(spec(**kw))
