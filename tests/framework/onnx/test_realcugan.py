"""Real-CUGAN's ONNX export: srgrad-export on a published-layout .pth (the model detected from its
keys), one dynamic graph (its input padding, spandrel's size requirement and the border, computed
from the Shape), ONNX Runtime within 1e-4 of srgrad at the traced size and at an odd one; below
the 32-pixel minimum: test_dynamic.py."""
from __future__ import annotations

import numpy as np
import pytest

from tests.models.cases import build

from ._util import check, export_published, image, ort_run, require_onnx, srgrad_run

require_onnx()


def test_export_a_published_file(tmp_path):
    pytest.importorskip("torch")
    model, _ = build("RealCUGAN", 4, pro=True)
    out, text, model = export_published(model, tmp_path, "pro-conservative-up4x", (34, 36))
    assert "dynamic batch/height/width" in text
    for x in (image(1, 3, 34, 36), image(2, 3, 33, 41, seed=1)):
        np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)


@pytest.mark.parametrize("scale,kw", [(3, {}), (2, {"fast": True})])
def test_variants_export_one_dynamic_graph(tmp_path, scale, kw):
    model, _ = build("RealCUGAN", scale, **kw)
    size = (40, 44) if kw.get("fast") else (32, 35)
    report, ops = check(model, image(1, 3, *size), tmp_path, [image(1, 3, 45, 41, seed=2)],
                        atol=1e-4)
    assert report.dynamic and {"Conv", "ConvTranspose", "Gather", "ReduceMean", "Sigmoid"} <= set(ops)
