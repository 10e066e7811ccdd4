"""FBCNN: the original's keys (spandrel's detection keys; ModuleList upsamplers keep their own
index), parity with the torch twin (the original network, the image as spandrel's call) of the
image and every gradient in float64 and float32 for each down / upsampler, and of the original's
(image, qf) pair through forward_qf; the quality factor given (the keyword, or qf_input as FBCNN's
test scripts pass it) instead of the predicted one; detection (spandrel's rule); .pth both ways;
spandrel 0.4.2's own files through srgrad-infer give spandrel's image, and --model-arg
quality_factor sets the embedding; errors. nc[3] is 512 (the original's fixed Linear widths), the
other widths tiny."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import framework as sg
import framework.functional as F
from framework.card import card
from framework.detect import detect, identify
from framework.registry import MODELS

from . import basicsr_checks as checks
from . import published_checks, spandrel_checks

SPANDREL_KEYS = ["m_head.weight", "m_down1.0.res.0.weight", "m_down2.0.res.0.weight",
                 "m_body_encoder.0.res.0.weight", "m_tail.weight", "qf_pred.0.res.0.weight"]


def spec(**kw):
    return {"type": "FBCNN", "in_nc": 3, "out_nc": 3, "nc": [4, 6, 8, 512], "nb": 1, "scale": 1, **kw}


def full(**kw):
    """spec() with every keyword detection returns."""
    return {"act_mode": "R", "downsample_mode": "strideconv", "upsample_mode": "convtranspose",
            **spec(**kw)}


@pytest.mark.parametrize("kw", [{}, {"nb": 2, "downsample_mode": "avgpool"},
                                {"upsample_mode": "pixelshuffle", "in_nc": 1, "out_nc": 1},
                                {"upsample_mode": "upconv", "act_mode": "L"}])
def test_keys_are_the_originals(kw):
    keys = checks.check_keys(spec(**kw))
    if kw == {}:
        assert set(SPANDREL_KEYS) - set(keys) == {"m_body_encoder.0.res.0.weight"}
        assert "m_up3.0.weight" in keys
        assert keys.index("qf_pred.0.res.0.weight") > keys.index("m_tail.bias")
        assert "qf_pred.3.weight" in keys and "qf_pred.7.weight" in keys  # pool, flatten at 1, 2
        assert "m_body_encoder.res.0.weight" in keys  # one block: KAIR's sequential unwraps it
    if kw.get("nb") == 2:
        assert set(SPANDREL_KEYS) <= set(keys) and "m_body_encoder.1.res.0.weight" in keys and "m_down1.3.weight" in keys
    if kw.get("upsample_mode") == "pixelshuffle":
        assert "m_up3.0.0.weight" in keys
    if kw.get("upsample_mode") == "upconv":
        assert "m_up3.0.1.weight" in keys


PARITY = [  # sizes that are no multiple of 8 take the original's replication padding
    ({}, (2, 3, 8, 16)),
    ({"downsample_mode": "avgpool", "upsample_mode": "pixelshuffle"}, (1, 3, 13, 6)),
    ({"in_nc": 1, "out_nc": 1, "upsample_mode": "upconv", "act_mode": "L", "quality_factor": 30},
     (2, 1, 5, 11)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw,shape", PARITY)
def test_matches_the_twin(kw, shape, dtype):
    checks.check_parity(spec(**kw), shape, dtype)


@pytest.mark.parametrize("qf_input", [None, 0.7])
def test_the_pair_and_its_gradients_match_the_original(qf_input):
    """forward_qf = the original's forward: the image and qf (N, 1); an L1 loss on the image plus
    KAIR's QF loss (weight 0.001... here 1, so its gradient shows) on qf, every gradient vs torch."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    model = checks.build(spec()).to(np.float64)
    twin = twins.twin_of(model, spec())
    rng = np.random.default_rng(0)
    x, t, q = rng.uniform(0, 1, (2, 3, 9, 8)), rng.uniform(0, 1, (2, 3, 9, 8)), rng.uniform(0, 1, (2, 1))
    given = None if qf_input is None else np.full((2, 1), qf_input)
    xs = sg.tensor(x, requires_grad=True)
    y, qf = model.forward_qf(xs, None if given is None else sg.tensor(given))
    (F.l1_loss(y, sg.tensor(t)) + F.l1_loss(qf, sg.tensor(q))).backward()
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    ty, tqf = twin.forward_qf(tx, None if given is None else torch.from_numpy(given))
    (torch.nn.functional.l1_loss(ty, torch.from_numpy(t))
     + torch.nn.functional.l1_loss(tqf, torch.from_numpy(q))).backward()
    checks.assert_close(y.data, ty.detach().numpy(), np.float64, "image")
    checks.assert_close(qf.data, tqf.detach().numpy(), np.float64, "qf")
    theirs = dict(twin.named_parameters())
    floor = max(np.abs(p.grad.numpy()).max() for p in theirs.values() if p.grad is not None)
    checks.assert_close(xs.grad.data, tx.grad.numpy(), np.float64, "input gradient", floor)
    for k, p in model.named_parameters():
        if theirs[k].grad is None:
            assert p.grad is None, k
            continue
        checks.assert_close(p.grad.data, theirs[k].grad.numpy(), np.float64, k, floor)
    assert theirs["qf_pred.7.weight"].grad is not None  # the QF loss reaches the predictor


def test_the_quality_factor_replaces_the_prediction():
    """quality_factor=Q is qf_input = 1 - Q / 100 (FBCNN's QF_control); a (1, 1) qf_input serves the
    batch; another QF, another image; the predicted qf is what forward_qf returns either way."""
    model = checks.build(spec()).to(np.float64)
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (2, 3, 8, 8)))
    with sg.no_grad():
        free, qf = model.forward_qf(x)
        given = model(x, sg.tensor(np.full((2, 1), 0.7)))
        np.testing.assert_allclose(model(x, 0.7).data, given.data, rtol=0, atol=1e-15)
        model.quality_factor = 30.0
        np.testing.assert_allclose(model(x).data, given.data, rtol=0, atol=1e-15)
        assert np.abs(given.data - free.data).max() > 1e-6
        np.testing.assert_array_equal(model.forward_qf(x)[1].data, qf.data)
        model.quality_factor = 90.0
        assert np.abs(model(x).data - given.data).max() > 1e-6


@pytest.mark.parametrize("kw", [{}, {"nb": 2, "downsample_mode": "avgpool"},
                                {"upsample_mode": "pixelshuffle", "in_nc": 1, "out_nc": 1},
                                {"upsample_mode": "upconv", "downsample_mode": "avgpool"}])
def test_detect(kw):
    sd = checks.build(spec(**kw)).state_dict()
    match = identify(sd)
    assert match.spec == {**full(**kw), "quality_factor": None}
    assert [n.split(":")[0] for n in match.notes] == ["quality_factor=None"]
    assert detect(sd, quality_factor=40) == full(**kw, quality_factor=40)
    assert identify(sd, quality_factor=40).notes == []
    assert detect(sd, act_mode="L")["act_mode"] == "L"  # LeakyReLU's files have the same keys
    MODELS.build(match.spec).load_state_dict(sd, strict=True)


def test_pth_both_ways(tmp_path):
    published_checks.check_pth_both_ways(spec(upsample_mode="pixelshuffle"), (1, 3, 7, 10), tmp_path)


def test_published_file_runs_without_a_model_spec(tmp_path):
    """fbcnn_gray's layout (in_nc 1, out_nc 1) at small widths."""
    published_checks.check_published_file(spec(in_nc=1, out_nc=1), (1, 1, 10, 9), tmp_path,
                                          want=full(in_nc=1, out_nc=1))


@pytest.mark.parametrize("kw,size", [({}, (19, 22)),
                                     ({"downsample_mode": "avgpool",
                                       "upsample_mode": "pixelshuffle"}, (16, 13)),
                                     ({"upsample_mode": "upconv"}, (9, 20))])
def test_spandrels_own_files_give_spandrels_image(kw, size, tmp_path, capsys):
    """issue 40's done-when: fbcnn_color's layout (and the other samplers) built by spandrel's own
    class; spandrel's call returns the first of the pair (the predicted QF's image), and so does
    srgrad-infer, saying the QF is predicted."""
    import torch
    module = pytest.importorskip("tests.twins._spandrel").spandrel_architecture("FBCNN")
    s = {k: v for k, v in full(nb=2, **kw).items() if k not in ("type", "scale")}
    torch.manual_seed(0)
    network = module.FBCNN(**s)  # nb 2: spandrel's rule needs m_body_encoder.0
    hyper = spandrel_checks.check_spandrel_file(module, network, tmp_path, size=size)
    assert hyper["nc"] == s["nc"] and hyper["upsample_mode"] == s["upsample_mode"]
    err = capsys.readouterr().err  # srgrad-infer says the QF is predicted and how to give it
    assert "assumed quality_factor=None: the network predicts the JPEG quality" in err, err
    assert "(--model-arg quality_factor=VALUE changes it)" in err, err


def test_infer_takes_the_quality_factor(tmp_path):
    """srgrad-infer --model-arg quality_factor=20 runs the embedding at qf_input 0.8 (the model's
    own output for that QF), not the predicted one."""
    torch = pytest.importorskip("torch")
    from framework.engine.commands.cli import infer_main
    model = checks.build(spec(quality_factor=20), seed=3)
    torch.save({k: torch.from_numpy(v.copy()) for k, v in model.state_dict().items()},
               tmp_path / "fbcnn.pth")
    rgb = np.random.default_rng(0).integers(0, 256, (12, 17, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "in.png")
    out = tmp_path / "out.png"
    assert infer_main(["--weights", str(tmp_path / "fbcnn.pth"), "--input", str(tmp_path / "in.png"),
                       "--output", str(out), "--no-progress", "--model-arg", "quality_factor=20"]) == 0
    got = np.asarray(Image.open(out)).astype(np.int64)
    x = sg.tensor(rgb.astype(np.float32).transpose(2, 0, 1)[None] / 255)
    with sg.no_grad():
        want = np.round(np.clip(model(x).data[0].transpose(1, 2, 0), 0, 1) * 255)
        model.quality_factor = None
        free = np.round(np.clip(model(x).data[0].transpose(1, 2, 0), 0, 1) * 255)
    assert np.abs(got - want).max() <= 1
    assert np.abs(got - free).max() > 1  # the predicted QF is not 20


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(), (2, 3, 8, 8))


def test_card_of_the_published_models():
    """fbcnn_color: 71,921,796 parameters, counted layer by layer (the paper's 72M; the original class's count); fbcnn_gray
    differs in m_head and m_tail only. The input is padded to a multiple of 8."""
    def count(c, nc=(64, 128, 256, 512), nb=4):
        blocks = 2 * nb * (2 * sum(n * n * 9 + n for n in nc[:3]) + 3 * (nc[3] * nc[3] * 9 + nc[3]))
        samplers = sum(2 * a * b * 4 + a + b for a, b in zip(nc[:3], nc[1:]))
        mlps = 4 * (512 * 512 + 512) + (512 + 1) + (512 + 512) + 2 * sum(512 * n + n for n in nc[:3])
        return c * nc[0] * 9 + nc[0] + blocks + samplers + mlps + nc[0] * c * 9 + c
    for c, want in ((3, 71_921_796), (1, 71_919_490)):
        k = card({"type": "FBCNN", "in_nc": c, "out_nc": c})
        assert k.parameters == count(c) == want
        assert (k.role, k.scale, k.in_channels, k.out_channels, k.pads_to) == ("restoration", 1, c, c, 8)


@pytest.mark.parametrize("kw,match", [
    ({"nc": [4, 6, 8, 16]}, r"FBCNN: nc\[3\] must be 512"),
    ({"nb": 0}, r"FBCNN: nb must be a positive int"),
    ({"act_mode": "BR"}, r"FBCNN: act_mode must be one of 'R', 'L'"),
    ({"downsample_mode": "maxpool"}, r"FBCNN: downsample_mode 'maxpool' does not run"),
    ({"upsample_mode": "nearest"}, r"FBCNN: upsample_mode must be one of"),
    ({"quality_factor": 120}, r"FBCNN: quality_factor must be"),
    ({"scale": 2}, r"FBCNN: scale must be 1"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build(spec(**kw))


def test_wrong_channels_say_what_the_model_takes():
    model = checks.build(spec())
    with pytest.raises(ValueError, match=r"FBCNN: expected an image of 3 channels \(in_nc\), got 1"):
        model(sg.tensor(np.zeros((1, 1, 8, 8), np.float32)))
