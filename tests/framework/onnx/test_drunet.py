"""DRUNet's ONNX export: srgrad-export on a published-layout .pth (detected; noise level 15 assumed),
one dynamic graph (the padding to a multiple of 8 from the Shape, the noise map made from the input
so it takes its size), ONNX Runtime within 1e-4 of srgrad at other sizes; and a graph exported with
--model-arg noise_level=50 holds that level."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework.nn import init
from framework.registry import MODELS

from ._util import export_published, image, op_types, ort_run, require_onnx, srgrad_run

require_onnx()


def test_export_a_published_file(tmp_path):
    pytest.importorskip("torch")
    init.manual_seed(0)
    model = MODELS.build({"type": "DRUNet", "in_nc": 4, "out_nc": 3, "nc": [4, 6, 8, 10], "nb": 2})
    out, text, model = export_published(model, tmp_path, "drunet_color", (13, 10))
    assert "dynamic batch/height/width" in text
    assert op_types(out).count("ConvTranspose") == 3
    for x in (image(1, 3, 13, 10), image(2, 3, 16, 24, seed=1), image(1, 3, 9, 12, seed=2)):
        np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)
    from framework.engine.commands.export import main
    other = tmp_path / "drunet_50.onnx"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--weights", str(tmp_path / "drunet_color.pth"), "--output", str(other),
                     "--input-size", "8", "8", "--model-arg", "noise_level=50"]) == 0
    model.noise_level = 50.0
    x = image(1, 3, 11, 9, seed=3)
    np.testing.assert_allclose(ort_run(other, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)
    assert np.abs(ort_run(other, x)[0] - ort_run(out, x)[0]).max() > 1e-3
