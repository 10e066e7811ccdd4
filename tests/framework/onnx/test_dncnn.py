"""DnCNN's ONNX export: srgrad-export on a published-layout .pth (dncnn_color_blind's BR layout:
the batch norms folded into eval's affine, the residual subtraction) and on FDnCNN's (the noise map
made from the input, so it takes its size; --model-arg noise_level holds another level), one
dynamic graph each, ONNX Runtime within 1e-4 of srgrad at other sizes."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework.nn import init
from framework.registry import MODELS

from ._util import export_published, image, ort_run, require_onnx, srgrad_run

require_onnx()


def _moved(model):
    """Batch norm statistics off their identity init (a trained file's)."""
    rng = np.random.default_rng(4)
    for k, v in model.state_dict().items():
        if k.endswith("running_mean"):
            v[...] = rng.uniform(-0.2, 0.2, v.shape)
        elif k.endswith("running_var"):
            v[...] = rng.uniform(0.5, 2.0, v.shape)
    return model


def test_export_dncnn(tmp_path):
    pytest.importorskip("torch")
    init.manual_seed(0)
    model = _moved(MODELS.build({"type": "DnCNN", "in_nc": 3, "out_nc": 3, "nc": 6, "nb": 5}))
    out, text, model = export_published(model, tmp_path, "dncnn_color_blind", (9, 10))
    assert "dynamic batch/height/width" in text
    for x in (image(1, 3, 9, 10), image(2, 3, 16, 7, seed=1)):
        np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)


def test_export_fdncnn_with_its_noise_level(tmp_path):
    pytest.importorskip("torch")
    init.manual_seed(0)
    model = MODELS.build({"type": "DnCNN", "in_nc": 4, "out_nc": 3, "nc": 6, "nb": 8,
                          "act_mode": "R", "mode": "FDnCNN"})
    out, text, model = export_published(model, tmp_path, "fdncnn_color", (8, 8))
    assert "dynamic batch/height/width" in text
    for x in (image(1, 3, 8, 8), image(1, 3, 13, 6, seed=1)):
        np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)
    from framework.engine.commands.export import main
    other = tmp_path / "fdncnn_50.onnx"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--weights", str(tmp_path / "fdncnn_color.pth"), "--output", str(other),
                     "--input-size", "8", "8", "--model-arg", "noise_level=50"]) == 0
    model.noise_level = 50.0
    x = image(1, 3, 11, 9, seed=3)
    err = np.abs(ort_run(other, x)[0] - srgrad_run(model, x)[0]).max()
    assert err <= 1e-4 and np.abs(ort_run(other, x)[0] - ort_run(out, x)[0]).max() > 10 * err
