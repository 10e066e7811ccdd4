"""engine/inference/loading.py (and framework/loading.py under it): a stored model spec is checked against the
file's tensors before anything is built (a ~100-byte file asking for a huge model is refused at
once, in one line, allocating nothing big); --model-arg without --model reaches the model (the detection, or the stored spec);
a published layout converts with srgrad-convert and fine-tunes through train.pretrained."""
from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework.engine import load_model
from framework.loading import load_into
from framework.engine.commands.cli import infer_main
from framework.engine.commands.convert import main as convert_main
from framework.weights import CheckpointError, load_weights, save_weights
from framework.nn import init
from framework.registry import MODELS

TINY = {"type": "SRVGGNetCompact", "num_feat": 1, "num_conv": 0, "scale": 1, "act_type": "prelu"}


def tiny_file(tmp_path, spec):
    """A weights file holding a 1-feature SRVGGNetCompact (a few dozen values) and `spec`."""
    init.manual_seed(0)
    path = tmp_path / "tiny.safetensors"
    save_weights(path, MODELS.build(TINY).state_dict(), model=spec, scale=spec.get("scale", 1))
    return path


@pytest.mark.parametrize("ask,why", [
    ({"num_feat": 8000}, "the weights say num_feat=1, 8000 was given"),
    ({"num_conv": 10 ** 9}, "the weights say num_conv=0, 1000000000 was given"),
    ({"num_conv": 10 ** 7, "num_feat": 64}, "the weights say num_feat=1, 64 was given")])
def test_a_tiny_file_asking_for_a_huge_model_is_refused_at_once(tmp_path, ask, why):
    path = tiny_file(tmp_path, {**TINY, **ask})
    assert path.stat().st_size < 1000
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(CheckpointError) as err:
            load_model(path, say=lambda m: None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 120  # a hang guard, not a speed test: it built 10^9 layers for minutes
    assert peak < 64 * 2 ** 20, peak  # num_feat 8000 allocated 2.3 GB before
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{path} does not fit the model SRVGGNetCompact("), msg
    assert why in msg and "refused before building it" in msg, msg


def _rule_less_model():
    """A user's model (registered from an --import module) without a detect rule."""
    from framework import nn
    if "LoadingTestNet" not in MODELS.names():
        @MODELS.register("LoadingTestNet")
        class LoadingTestNet(nn.Module):
            def __init__(self, scale=1, width=4, depth=1):
                super().__init__()
                self.convs = nn.Sequential(*[nn.Conv2d(3 if i == 0 else width, width, 3, padding=1)
                                             for i in range(depth)])

            def forward(self, x):
                return self.convs(x)


@pytest.mark.parametrize("ask", [{"width": 4000}, {"depth": 10 ** 9}])
def test_a_model_without_a_rule_is_built_within_the_file_s_budget(tmp_path, ask):
    """A model without a detect rule: the budget alone stops a spec far bigger than the file."""
    _rule_less_model()
    path = tiny_file(tmp_path, {"type": "LoadingTestNet", "scale": 1, **ask})
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match=r"would hold more than \d+ values, more than its "
                                                  r"weights: refused before building it"):
            load_model(path, say=lambda m: None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2 ** 20, peak


def test_a_spec_that_fits_loads_as_before(tmp_path):
    path = tiny_file(tmp_path, TINY)
    model, info = load_model(path, say=lambda m: None)
    assert info["model"] == TINY and model.num_parameters() == 28 + 1 + 3 * 1 * 9 + 3


def _swinir_car(tmp_path):
    """A window-7, no-upsampler SwinIR state_dict (the 006_colorCAR layout), as a .pth."""
    from framework.weights import write_pth
    init.manual_seed(0)
    spec = {"type": "SwinIR", "upsampler": "", "scale": 1, "window_size": 7, "img_size": 14,
            "embed_dim": 6, "depths": [2], "num_heads": [2], "mlp_ratio": 2.0}
    path = tmp_path / "car.pth"
    write_pth(path, {"params": MODELS.build(spec).state_dict()})
    return path


def test_model_arg_without_model_overrides_the_detected_keyword(tmp_path, capsys):
    """srgrad-infer ignored `--model-arg k=v` without --model (same output, no warning)."""
    from PIL import Image
    path = _swinir_car(tmp_path)
    img = tmp_path / "x.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (9, 8, 3), np.uint8)).save(img)
    base = ["--weights", str(path), "--input", str(img), "--no-progress"]
    assert infer_main(base + ["--output", str(tmp_path / "a.png")]) == 0
    err = capsys.readouterr().err
    assert "assumed img_range=255.0" in err and "--model-arg img_range=VALUE changes it" in err
    assert infer_main(base + ["--output", str(tmp_path / "b.png"), "--model-arg",
                              "img_range=1"]) == 0
    err = capsys.readouterr().err
    assert "img_range=1" in err and "assumed img_range" not in err, err
    a, b = (np.asarray(Image.open(tmp_path / n)) for n in ("a.png", "b.png"))
    assert np.abs(a.astype(int) - b.astype(int)).max() > 0
    assert infer_main(base + ["--output", str(tmp_path / "c.png"), "--model-arg", "img_range"]) == 2
    assert "--model-arg 'img_range': expected KEY=VALUE" in capsys.readouterr().err


def test_model_arg_replaces_a_stored_keyword_and_says_so(tmp_path):
    init.manual_seed(0)
    spec = {"type": "EDSR", "scale": 2, "num_feat": 8, "num_block": 1}
    path = tmp_path / "edsr.safetensors"
    save_weights(path, MODELS.build(spec).state_dict(), model=spec, scale=2)
    said = []
    model, info = load_model(path, say=said.append, known={"img_range": 1.0})
    assert info["model"]["img_range"] == 1.0 and model.img_range == 1.0
    assert said == [f"--model-arg img_range=1.0 replaces img_range=255.0 of the spec stored in "
                    f"{path} (its default)"], said
    with pytest.raises(CheckpointError, match=r"the weights say num_feat=8, 16 was given"):
        load_model(path, say=said.append, known={"num_feat": 16, "num_block": 10 ** 8})


def test_a_published_layout_converts_and_fine_tunes(tmp_path, capsys):
    """srgrad-convert maps the original ESRGAN layout to srgrad's keys (the converted file then
    loads with no detection); load_into (train.pretrained) takes the layout into a config's model."""
    torch = pytest.importorskip("torch")
    from tests.models.published import save_pth
    from tests.twins.esrgan import ESRGANSequential
    torch.manual_seed(0)
    twin = ESRGANSequential(nf=8, nb=1, gc=4, stages=1)
    src = save_pth(twin, tmp_path / "2x_old.pth", "legacy")
    out = tmp_path / "2x.safetensors"
    assert convert_main(["weights", str(src), str(out)]) == 0
    err = capsys.readouterr().err
    assert "detected RRDBNet(" in err and ": SR x2, 3 -> 3 channels, " in err  # and its card
    state, info = load_weights(out)
    spec = info["model"]
    assert spec["shuffle_factor"] == 1 and spec["scale"] == 2
    np.testing.assert_array_equal(state["conv_up1.weight"], twin.model[3].weight.detach().numpy())
    np.testing.assert_array_equal(state["body.0.rdb2.conv5.bias"],
                                  twin.model[1].sub[0].RDB2.conv5[0].bias.detach().numpy())
    model = MODELS.build(spec)
    load_into(model, src, spec=spec, where="train.pretrained")
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, state[k])
    wrong = MODELS.build({**spec, "num_feat": 16})
    with pytest.raises(CheckpointError, match=r"train.pretrained: .*2x_old.pth does not fit the "
                                              r"model RRDBNet: as the original ESRGAN"):
        load_into(wrong, src, spec={**spec, "num_feat": 16}, where="train.pretrained")


def test_an_original_esrgan_layout_safetensors_file_runs_as_its_pth(tmp_path, capsys):
    """Issue 37: a `.safetensors` of the original ESRGAN layout (keys `model.0.weight`,
    `model.1.sub.0.RDB1.conv1.0.weight`, ...) written by safetensors' own writer was taken for
    srgrad's format (its `model.` prefix stripped) and refused. A file without srgrad's metadata is
    a plain state_dict: detected and run, equal to the same weights as `.pth`."""
    torch = pytest.importorskip("torch")
    from PIL import Image
    from safetensors.torch import save_file
    from tests.models.published import save_pth
    from tests.twins.esrgan import ESRGANSequential
    torch.manual_seed(0)
    twin = ESRGANSequential(nf=8, nb=1, gc=4, stages=1)
    save_file(twin.state_dict(), str(tmp_path / "2x_old.safetensors"))
    save_pth(twin, tmp_path / "2x_old.pth", "zip")
    state, info = load_weights(tmp_path / "2x_old.safetensors")
    assert "model.1.sub.0.RDB1.conv1.0.weight" in state and info.get("model") is None
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (6, 5, 3), np.uint8)).save(
        tmp_path / "x.png")
    outputs = []
    for ext in ("safetensors", "pth"):
        out = tmp_path / f"sr_{ext}.png"
        assert infer_main(["--weights", str(tmp_path / f"2x_old.{ext}"), "--input",
                           str(tmp_path / "x.png"), "--output", str(out), "--no-progress"]) == 0
        assert "detected RRDBNet(" in capsys.readouterr().err
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    sr = np.asarray(Image.open(tmp_path / "sr_pth.png"))
    assert sr.shape == (12, 10, 3) and sr.std() > 0
