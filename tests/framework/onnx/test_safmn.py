"""SAFMN's ONNX export: srgrad-export on a published-layout .pth (detected), one dynamic graph (the
padding to a multiple of 8 from the Shape; SAFM's pools become MaxPools of 2^i and its upsampling a
nearest Resize by 2^i at every size), ONNX Runtime within 1e-4 of srgrad at sizes that pad."""
from __future__ import annotations

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
    model = MODELS.build({"type": "SAFMN", "dim": 12, "n_blocks": 2, "scale": 2})
    out, text, model = export_published(model, tmp_path, "SAFMN_DF2K_x2", (21, 16), wrap="params")
    assert "dynamic batch/height/width" in text
    ops = op_types(out)
    assert ops.count("MaxPool") == 6 and ops.count("Resize") == 6 and "LayerNormalization" in ops
    for x in (image(1, 3, 21, 16), image(2, 3, 9, 30, seed=1)):
        np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)
