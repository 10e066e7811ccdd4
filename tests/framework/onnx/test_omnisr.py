"""OmniSR's ONNX export: srgrad-export on a published-layout .pth (detected), one dynamic graph (its
window partitions reshape to counts computed from the Shape, and ESA upsamples to the size of a
value read from a Shape), ONNX Runtime within 1e-4 of srgrad; the fused window attention's
converter included."""
from __future__ import annotations

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
    model = MODELS.build({"type": "OmniSR", "num_feat": 16, "window_size": 4, "scale": 3})
    out, text, model = export_published(model, tmp_path, "OmniSR_x3", (19, 16))
    assert "dynamic batch/height/width" in text
    for seed, (h, w) in enumerate([(19, 16), (7, 30), (20, 21)]):
        x = image(1, 3, h, w, seed=seed)
        np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)
