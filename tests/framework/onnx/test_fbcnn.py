"""FBCNN's ONNX export: srgrad-export on a published-layout .pth (fbcnn_color's, small widths but
the fixed 512 bottom): the replication padding to a multiple of 8 and the crop, the QF predictor's
global pool and MLP, the embedding's gamma / beta broadcast per channel; one dynamic graph, ONNX
Runtime within 1e-4 of srgrad at other sizes; a graph exported with --model-arg quality_factor=10
holds that QF (the embedding a constant, the predictor left out)."""
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


def test_export_a_published_file(tmp_path):
    pytest.importorskip("torch")
    init.manual_seed(0)
    model = MODELS.build({"type": "FBCNN", "in_nc": 3, "out_nc": 3, "nc": [4, 4, 4, 512], "nb": 1})
    out, text, model = export_published(model, tmp_path, "fbcnn_color", (13, 10))
    assert "dynamic batch/height/width" in text
    for x in (image(1, 3, 13, 10), image(2, 3, 16, 24, seed=1)):
        np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)
    from framework.engine.commands.export import main
    other = tmp_path / "fbcnn_qf10.onnx"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--weights", str(tmp_path / "fbcnn_color.pth"), "--output", str(other),
                     "--input-size", "8", "8", "--model-arg", "quality_factor=10"]) == 0
    model.quality_factor = 10.0
    x = image(1, 3, 11, 9, seed=3)
    err = np.abs(ort_run(other, x)[0] - srgrad_run(model, x)[0]).max()
    assert err <= 1e-4 and np.abs(ort_run(other, x)[0] - ort_run(out, x)[0]).max() > 10 * err
