"""DRUNet: KAIR's keys (spandrel's detection keys; nb 1 unwraps m_body as KAIR's `sequential`),
the noise map (its level a keyword, the map also given as the input's last channel), parity with the
torch twin (spandrel's network and its call: the multiple-of-8 padding, the map) of the output and
every gradient in float64 and float32 for each down / upsampler; detection (spandrel's rule, the
noise level said as assumed); .pth both ways; a published-layout file through srgrad's inference
with no model spec; files built by spandrel 0.4.2's own class through srgrad-infer give spandrel's
image, and --model-arg noise_level sets the map; errors."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import framework as sg
from framework.card import card
from framework.detect import detect, identify
from framework.registry import MODELS

from . import basicsr_checks as checks
from . import published_checks, spandrel_checks

SPANDREL_KEYS = [  # spandrel 0.4.2's KeyCondition for DRUNet
    "m_head.weight", "m_down1.0.res.0.weight", "m_down1.0.res.2.weight", "m_down2.0.res.0.weight",
    "m_down3.0.res.0.weight", "m_body.0.res.0.weight", "m_body.0.res.2.weight",
    "m_up3.2.res.0.weight", "m_up3.2.res.2.weight", "m_up2.2.res.0.weight", "m_up1.2.res.0.weight",
    "m_tail.weight"]


def spec(**kw):
    return {"type": "DRUNet", "in_nc": 4, "out_nc": 3, "nc": [4, 6, 8, 10], "nb": 2, "scale": 1, **kw}


def full(**kw):
    """spec() with every keyword detection returns."""
    return {"act_mode": "R", "downsample_mode": "strideconv", "upsample_mode": "convtranspose",
            "noise_level": 15.0, **spec(**kw)}


@pytest.mark.parametrize("kw", [{}, {"nb": 1, "downsample_mode": "avgpool"},
                                {"upsample_mode": "pixelshuffle", "in_nc": 2, "out_nc": 1},
                                {"upsample_mode": "upconv", "act_mode": "L"}])
def test_keys_are_kairs(kw):
    keys = checks.check_keys(spec(**kw))
    sd = checks.build(spec(**kw)).state_dict()
    assert all(not k.endswith(".bias") for k in keys)
    if kw == {}:
        assert set(SPANDREL_KEYS) <= set(keys)
        assert sd["m_down1.2.weight"].shape == (6, 4, 2, 2)  # strideconv after nb = 2 blocks
        assert sd["m_up3.0.weight"].shape == (10, 8, 2, 2)  # transposed: (in, out, 2, 2)
    if kw.get("nb") == 1:
        assert "m_body.res.0.weight" in keys and "m_down1.2.weight" in keys  # pool at m_down1.1
    if kw.get("upsample_mode") == "pixelshuffle":
        assert sd["m_up3.0.weight"].shape == (32, 10, 3, 3) and sd["m_head.weight"].shape == (4, 2, 3, 3)


def test_noise_map_is_the_level_over_255_or_the_inputs_own():
    """An image of in_nc - 1 channels gets noise_level / 255 appended; the same image with that
    map as its last channel gives the same output; another level, another output."""
    model = checks.build(spec(noise_level=25)).to(np.float64)
    x = np.random.default_rng(0).uniform(0, 1, (2, 3, 8, 16))
    own = np.concatenate([x, np.full((2, 1, 8, 16), 25 / 255)], axis=1)
    with sg.no_grad():
        y = model(sg.tensor(x)).data
        np.testing.assert_array_equal(model(sg.tensor(own)).data, y)
        model.noise_level = 50.0
        assert np.abs(model(sg.tensor(x)).data - y).max() > 1e-4


PARITY = [  # sizes that are no multiple of 8 take spandrel's padding (reflect, then replicate)
    ({}, (2, 3, 8, 16)),
    ({"nb": 1, "downsample_mode": "avgpool", "upsample_mode": "pixelshuffle", "noise_level": 50},
     (1, 3, 13, 6)),
    ({"in_nc": 2, "out_nc": 1, "upsample_mode": "upconv", "act_mode": "L"}, (1, 1, 5, 11)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw,shape", PARITY)
def test_matches_the_twin(kw, shape, dtype):
    checks.check_parity(spec(**kw), shape, dtype)


@pytest.mark.parametrize("kw", [{}, {"nb": 1, "downsample_mode": "avgpool"},
                                {"nb": 3, "upsample_mode": "pixelshuffle", "in_nc": 2, "out_nc": 1},
                                {"upsample_mode": "upconv", "downsample_mode": "avgpool"}])
def test_detect(kw):
    """spandrel's keywords; act_mode R and noise_level 15 assumed (the level said)."""
    sd = checks.build(spec(**kw)).state_dict()
    match = identify(sd)
    assert match.spec == full(**kw)
    assert [n.split(":")[0] for n in match.notes] == ["noise_level=15.0"]
    assert detect(sd, noise_level=30, act_mode="L") == full(**kw, noise_level=30, act_mode="L")
    MODELS.build(match.spec).load_state_dict(sd, strict=True)


def test_pth_both_ways(tmp_path):
    published_checks.check_pth_both_ways(spec(upsample_mode="pixelshuffle"), (1, 3, 7, 10), tmp_path)


def test_published_file_runs_without_a_model_spec(tmp_path):
    """drunet_gray's layout (in_nc 2, out_nc 1) at small widths."""
    published_checks.check_published_file(spec(in_nc=2, out_nc=1), (1, 1, 10, 9), tmp_path,
                                          want=full(in_nc=2, out_nc=1))


@pytest.mark.parametrize("kw,size", [({}, (19, 22)),
                                     ({"downsample_mode": "avgpool",
                                       "upsample_mode": "pixelshuffle"}, (16, 13)),
                                     ({"upsample_mode": "upconv"}, (9, 20))])
def test_spandrels_own_files_give_spandrels_image(kw, size, tmp_path):
    """issue 40's done-when: drunet_color's layout (and the other samplers) built by spandrel's
    own class; spandrel's call runs it at noise level 15, as srgrad-infer's assumption."""
    import torch
    module = pytest.importorskip("tests.twins._spandrel").spandrel_architecture("DRUNet")
    s = {k: v for k, v in full(**kw).items() if k not in ("type", "noise_level", "scale")}
    torch.manual_seed(0)
    network = module.DRUNet(**s)  # nb 2: spandrel's rule needs m_body.0 and m_up3.2
    hyper = spandrel_checks.check_spandrel_file(module, network, tmp_path, size=size)
    assert hyper["nc"] == s["nc"] and hyper["upsample_mode"] == s["upsample_mode"]


def test_infer_says_the_noise_level_and_takes_it(tmp_path, capsys):
    """srgrad-infer on a detected file says it assumed noise_level 15 and how to change it;
    --model-arg noise_level=40 runs the map at 40 / 255 (the model's own output for that level)."""
    torch = pytest.importorskip("torch")
    from framework.engine.commands.cli import infer_main
    model = checks.build(spec(noise_level=40), seed=3)
    torch.save({k: torch.from_numpy(v.copy()) for k, v in model.state_dict().items()},
               tmp_path / "drunet.pth")
    rgb = np.random.default_rng(0).integers(0, 256, (12, 17, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "in.png")
    outs = {}
    for extra in ([], ["--model-arg", "noise_level=40"]):
        out = tmp_path / f"out{len(extra)}.png"
        assert infer_main(["--weights", str(tmp_path / "drunet.pth"), "--input", str(tmp_path / "in.png"),
                           "--output", str(out), "--no-progress", *extra]) == 0
        err = capsys.readouterr().err
        assumed = "assumed noise_level=15.0: the noise level (sigma of 255)"
        assert (assumed in err) == (not extra), err
        if not extra:
            assert "(--model-arg noise_level=VALUE changes it)" in err
        outs[len(extra)] = np.asarray(Image.open(out)).astype(np.int64)
    x = sg.tensor(rgb.astype(np.float32).transpose(2, 0, 1)[None] / 255)
    with sg.no_grad():
        want = np.round(np.clip(model(x).data[0].transpose(1, 2, 0), 0, 1) * 255)
    assert np.abs(outs[2] - want).max() <= 1
    assert np.abs(outs[0] - outs[2]).max() > 1  # 15 is not 40


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(), (2, 3, 8, 8))


def test_card_of_the_published_models():
    """drunet_color and drunet_gray: 32,640,960 and 32,638,656 parameters (KAIR's README: 32.64M),
    counted layer by layer; the image has in_nc - 1 channels."""
    def count(cin, cout, nc=(64, 128, 256, 512), nb=4):
        blocks = 2 * nb * (2 * sum(c * c * 9 for c in nc[:3]) + nc[3] * nc[3] * 9)
        samplers = sum(2 * a * b * 4 for a, b in zip(nc[:3], nc[1:]))  # 2x2 down and up
        return cin * nc[0] * 9 + blocks + samplers + nc[0] * cout * 9
    for cin, cout, want in ((4, 3, 32_640_960), (2, 1, 32_638_656)):
        c = card({"type": "DRUNet", "in_nc": cin, "out_nc": cout})
        assert c.parameters == count(cin, cout) == want
        assert (c.role, c.scale, c.in_channels, c.out_channels, c.pads_to) == \
            ("restoration", 1, cin - 1, cout, 8)


@pytest.mark.parametrize("kw,match", [
    ({"in_nc": 1}, r"DRUNet: in_nc must be"),
    ({"nc": [4, 8, 8]}, r"DRUNet: nc must be a list of 4 ints"),
    ({"nb": 0}, r"DRUNet: nb must be a positive int"),
    ({"act_mode": "BR"}, r"DRUNet: act_mode must be one of 'R', 'L'"),
    ({"downsample_mode": "maxpool"}, r"DRUNet: downsample_mode 'maxpool' does not run"),
    ({"upsample_mode": "nearest"}, r"DRUNet: upsample_mode must be one of"),
    ({"noise_level": -1}, r"DRUNet: noise_level must be >= 0"),
    ({"scale": 2}, r"DRUNet: scale must be 1"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build(spec(**kw))


def test_wrong_channels_say_what_the_model_takes():
    model = checks.build(spec())
    with pytest.raises(ValueError, match=r"DRUNet: expected an image of 3 channels \(in_nc 4 less the "
                                         r"noise map; or 4 with its own map last\), got 1"):
        model(sg.tensor(np.zeros((1, 1, 8, 8), np.float32)))
