"""Uformer's ONNX export: fixed-size graphs (the padding to a square multiple of 128 and the shift
masks hold for the traced size; the card says so) that ONNX Runtime runs like srgrad: a published
layout (linear projection, LeFF, the modulator) through srgrad-export of its .pth (detected), and
the conv projection with FastLeFF and the cross modulator."""
from __future__ import annotations

import numpy as np
import pytest

from tests.models.cases import build

from ._util import check, export_published, image, op_types, ort_run, require_onnx, srgrad_run

require_onnx()

SMALL = {"embed_dim": 4, "depths": [1, 2, 1, 1, 2, 1, 1, 2, 1], "num_heads": [1, 2, 1, 2, 4, 2, 2, 1, 2],
         "win_size": 2, "drop_path_rate": 0.0}


def test_export_a_published_file(tmp_path):
    pytest.importorskip("torch")
    model, _ = build("Uformer", 1, 3, **SMALL, modulator=True)
    out, text, model = export_published(model, tmp_path, "Uformer_B", (13, 10))
    assert "fixed" in text
    ops = op_types(out)
    assert {"MatMul", "Softmax", "ConvTranspose", "Erf"} <= set(ops)
    x = image(1, 3, 13, 10)
    np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)


def test_conv_projection_fastleff_cross_modulator(tmp_path):
    model, _ = build("Uformer", 1, 3, **SMALL, token_projection="conv", token_mlp="fastleff",
                     cross_modulator=True)
    report, ops = check(model, image(2, 3, 9, 14), tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[2, 3, 9, 14]]
