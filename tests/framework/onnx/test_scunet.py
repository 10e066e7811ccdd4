"""SCUNet's ONNX export: srgrad-export on a published-layout .pth (detected), ONNX Runtime within
1e-4 of srgrad at the traced size; its graph holds for that size (the padding to 40 and then to 64,
the windows and the shift mask follow the size), as its card says."""
from __future__ import annotations

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework.card import card
from framework.nn import init
from framework.registry import MODELS

from ._util import export_published, image, ort_run, require_onnx, srgrad_run

require_onnx()


def test_export_a_published_file(tmp_path):
    pytest.importorskip("torch")
    init.manual_seed(0)
    spec = {"type": "SCUNet", "in_nc": 3, "dim": 64, "config": [2, 0, 0, 1, 0, 0, 1]}
    model = MODELS.build(spec)
    out, text, model = export_published(model, tmp_path, "scunet_color_25", (37, 45))
    assert card(spec).fixed_onnx and "takes 37x45 (height x width) inputs only" in text
    for seed in (0, 1):
        x = image(1, 3, 37, 45, seed=seed)
        np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)
