"""DnCNN / FDnCNN: KAIR's keys (spandrel's detection keys: BR's batch norms, R's conv stack), parity
with the torch twin (KAIR's network, spandrel's FDnCNN call) of the output and every gradient in
float64 and float32 for each activation mode, batch norm's running statistics (KAIR's momentum 0.9)
after a training step and in eval(); detection (spandrel's rule, FDnCNN's noise level said as
assumed, a 7-layer IRCNN-like stack refused); .pth both ways; spandrel 0.4.2's own files in each
published layout through srgrad-infer give spandrel's image; errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.card import card
from framework.detect import DetectError, detect, identify
from framework.registry import MODELS

from . import basicsr_checks as checks
from . import published_checks, spandrel_checks


def spec(**kw):
    return {"type": "DnCNN", "in_nc": 3, "out_nc": 3, "nc": 6, "nb": 5, "act_mode": "BR", "scale": 1,
            **kw}


def full(**kw):
    """spec() with every keyword detection returns."""
    return {"mode": "DnCNN", **spec(**kw)}


FDNCNN = {"in_nc": 4, "out_nc": 3, "act_mode": "R", "nb": 8, "mode": "FDnCNN"}


def test_keys_are_kairs():
    sd = checks.build(spec()).state_dict()
    keys = checks.check_keys(spec())
    # head conv + ReLU (0, 1), three body layers of conv, BN, ReLU (2-10), tail conv (11)
    assert [k for k in keys if k.endswith(".weight")] == [
        "model.0.weight", "model.2.weight", "model.3.weight", "model.5.weight", "model.6.weight",
        "model.8.weight", "model.9.weight", "model.11.weight"]
    assert "model.3.running_mean" in keys and sd["model.11.weight"].shape == (3, 6, 3, 3)
    r = checks.check_keys(spec(**FDNCNN))
    assert r[-2:] == ["model.14.weight", "model.14.bias"] and not any("running" in k for k in r)


PARITY = [({}, (2, 3, 7, 9)), ({"act_mode": "BL", "in_nc": 1, "out_nc": 1}, (3, 1, 6, 5)),
          (FDNCNN, (1, 3, 5, 8)), ({**FDNCNN, "act_mode": "L", "noise_level": 50}, (2, 3, 4, 6))]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw,shape", PARITY)
def test_matches_the_twin(kw, shape, dtype):
    checks.check_parity(spec(**kw), shape, dtype)


def test_batch_norm_statistics_and_eval_match_the_twin():
    """KAIR's BatchNorm2d(momentum=0.9, eps=1e-4): after a training forward the running statistics
    equal torch's; in eval() with those statistics (not the identity init) the outputs agree."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    model = checks.build(spec()).to(np.float64)
    twin = twins.twin_of(model, spec())
    x = np.random.default_rng(1).uniform(0, 1, (2, 3, 6, 7))
    with sg.no_grad(), torch.no_grad():
        model(sg.tensor(x))
        twin(torch.from_numpy(x))
    theirs = twin.state_dict()
    for k, v in model.state_dict().items():
        if "running" in k:
            np.testing.assert_allclose(v, theirs[k].numpy(), rtol=1e-12, atol=1e-14, err_msg=k)
    assert np.abs(model.state_dict()["model.3.running_mean"]).max() > 1e-3  # they moved
    model.eval(), twin.eval()
    y = np.random.default_rng(2).uniform(0, 1, (1, 3, 5, 9))
    with sg.no_grad(), torch.no_grad():
        checks.assert_close(model(sg.tensor(y)).data, twin(torch.from_numpy(y)).numpy(), np.float64,
                            "eval() output")


def test_fdncnn_map_is_the_level_over_255_or_the_inputs_own():
    model = checks.build(spec(**FDNCNN, noise_level=25)).to(np.float64)
    x = np.random.default_rng(0).uniform(0, 1, (2, 3, 6, 5))
    own = np.concatenate([x, np.full((2, 1, 6, 5), 25 / 255)], axis=1)
    with sg.no_grad():
        y = model(sg.tensor(x)).data
        np.testing.assert_array_equal(model(sg.tensor(own)).data, y)
        model.noise_level = 50.0
        assert np.abs(model(sg.tensor(x)).data - y).max() > 1e-4


def test_dncnn_learns_the_noise():
    """mode DnCNN: output = input - stack (a stack of zeros returns the input)."""
    model = checks.build(spec()).to(np.float64)
    model.model[-1].weight.data[...] = 0
    model.model[-1].bias.data[...] = 0
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 4, 4))
    with sg.no_grad():
        np.testing.assert_array_equal(model(sg.tensor(x)).data, x)


@pytest.mark.parametrize("kw", [{}, {"nb": 4, "in_nc": 1, "out_nc": 1}, {"nb": 9, "act_mode": "R"},
                                FDNCNN])
def test_detect(kw):
    """spandrel's keywords; act_mode assumed quietly; FDnCNN's noise level said."""
    sd = checks.build(spec(**kw)).state_dict()
    match = identify(sd)
    fd = kw.get("mode") == "FDnCNN"
    assert match.spec == full(**kw, **({"noise_level": 15.0} if fd else {}))
    assert [n.split(":")[0] for n in match.notes] == (["noise_level=15.0"] if fd else [])
    assert detect(sd, act_mode="BL" if "B" in full(**kw)["act_mode"] else "L")["act_mode"] in ("BL", "L")
    MODELS.build(match.spec).load_state_dict(sd, strict=True)


def test_a_short_stack_is_refused_not_run_undilated():
    """KAIR's IRCNN (7 convs with dilations 1-4-1, ReLU) has the keys of a 7-layer R stack: spandrel's
    rule needs model.14, so does srgrad's, and the file is refused naming the reason."""
    sd = checks.build(spec(act_mode="R", nb=7)).state_dict()
    with pytest.raises(DetectError, match=r"DnCNN: no key 'model.14.weight' \(spandrel's DnCNN rule"):
        identify(sd)


def test_pth_both_ways(tmp_path):
    published_checks.check_pth_both_ways(spec(), (1, 3, 7, 10), tmp_path)


def test_published_file_runs_without_a_model_spec(tmp_path):
    """dncnn_25's layout (gray, BR) at a small width and depth."""
    published_checks.check_published_file(spec(in_nc=1, out_nc=1, nb=6), (1, 1, 10, 9), tmp_path,
                                          want=full(in_nc=1, out_nc=1, nb=6))


@pytest.mark.parametrize("kw,size", [
    ({"in_nc": 3, "out_nc": 3, "nc": 8, "nb": 5, "act_mode": "BR"}, (11, 14)),  # dncnn_color_blind
    ({"in_nc": 4, "out_nc": 3, "nc": 8, "nb": 8, "act_mode": "R", "mode": "FDnCNN"}, (9, 13)),
])
def test_spandrels_own_files_give_spandrels_image(kw, size, tmp_path):
    """issue 40's done-when: DnCNN (BR, with running statistics moved off the init) and FDnCNN
    (R; spandrel's call at noise level 15, as srgrad-infer's assumption) built by spandrel's own
    class."""
    import torch
    module = pytest.importorskip("tests.twins._spandrel").spandrel_architecture("DnCNN")
    torch.manual_seed(0)
    network = module.DnCNN(**kw)
    with torch.no_grad():
        network.train()(torch.rand(2, kw["in_nc"], 8, 8))  # running statistics of a batch
    hyper = spandrel_checks.check_spandrel_file(module, network, tmp_path, size=size)
    assert hyper["nb"] == kw["nb"] and hyper["act_mode"] == kw["act_mode"]


def test_gray_published_layouts_detect():
    """dncnn_15/25/50 (gray, nb 17), dncnn_gray_blind (nb 20), fdncnn_gray (R, nb 20, in_nc 2) at the
    published width 64: the shapes alone (no weights drawn by the test)."""
    for kw, want in (({"in_nc": 1, "out_nc": 1, "nb": 17}, "DnCNN"),
                     ({"in_nc": 1, "out_nc": 1, "nb": 20}, "DnCNN"),
                     ({"in_nc": 2, "out_nc": 1, "nb": 20, "act_mode": "R", "mode": "FDnCNN"}, "FDnCNN")):
        s = {"type": "DnCNN", "nc": 64, **kw}
        shapes = {k: np.empty(v.shape, np.float32) for k, v in checks.build(s).state_dict().items()}
        got = detect(shapes)
        assert (got["nb"], got["mode"], got["in_nc"], got["nc"]) == (kw["nb"], want, kw["in_nc"], 64)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(), (2, 3, 8, 8))


def test_card_of_the_published_models():
    """dncnn_25: 557,057 parameters (17 convs of 64 with bias, 15 batch norms); fdncnn_color:
    the R stack of 20 convs, 4 channels in."""
    def count(cin, cout, nb, bn):
        return (cin * 64 * 9 + 64) + (nb - 2) * (64 * 64 * 9 + 64 + (128 if bn else 0)) + 64 * cout * 9 + cout
    for kw, cin, cout, nb, bn, image in (({}, 1, 1, 17, True, 1),
                                         ({"in_nc": 4, "out_nc": 3, "nb": 20, "act_mode": "R",
                                           "mode": "FDnCNN"}, 4, 3, 20, False, 3)):
        c = card({"type": "DnCNN", **kw})
        assert c.parameters == count(cin, cout, nb, bn)
        assert (c.role, c.scale, c.in_channels, c.out_channels) == ("restoration", 1, image, cout)
    assert card({"type": "DnCNN"}).parameters == 557_057  # 640 + 15 x 37,056 + 577


@pytest.mark.parametrize("kw,match", [
    ({"nb": 1}, r"DnCNN: nb must be"),
    ({"act_mode": "IR"}, r"DnCNN: act_mode must be one of"),
    ({"mode": "FFDNet"}, r"DnCNN: mode must be one of"),
    ({"out_nc": 1}, r"DnCNN: mode 'DnCNN' subtracts the stack from its input, so in_nc must equal"),
    ({"in_nc": 1, "out_nc": 1, "mode": "FDnCNN"}, r"DnCNN: mode 'FDnCNN' takes the image plus"),
    ({"noise_level": -1}, r"DnCNN: noise_level must be >= 0"),
    ({"scale": 2}, r"DnCNN: scale must be 1"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build(spec(**kw))


def test_wrong_channels_say_what_the_model_takes():
    model = checks.build(spec(**FDNCNN))
    with pytest.raises(ValueError, match=r"FDnCNN\): expected an image of 3 channels \(in_nc 4 less"):
        model(sg.tensor(np.zeros((1, 1, 8, 8), np.float32)))
    with pytest.raises(ValueError, match=r"Conv2d"):
        checks.build(spec())(sg.tensor(np.zeros((1, 1, 8, 8), np.float32)))
    assert F  # the functional face stays importable beside the model
