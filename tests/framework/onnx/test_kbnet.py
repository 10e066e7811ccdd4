"""KBNet's ONNX export: srgrad-export on a published-layout .pth (detected), one dynamic graph (the
zero padding to 2^levels from the Shape; KBA as the unfold converter, MatMuls,
a product and a ReduceSum), ONNX Runtime within 1e-4 of srgrad at other sizes, ones that pad and
ones that do not."""
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
    model = MODELS.build({"type": "KBNet", "width": 4, "middle_blk_num": 1, "enc_blk_nums": [1, 2],
                          "dec_blk_nums": [1, 1]})
    rng = np.random.default_rng(0)
    for name, p in model.named_parameters():  # the gates: 0.01 at init
        if name.endswith((".beta", ".gamma", ".ga1", ".attgamma")):
            p.data[...] = rng.uniform(-1, 1, p.shape)
    out, text, model = export_published(model, tmp_path, "KBNet_s-SIDD", (13, 10))
    assert "dynamic batch/height/width" in text
    assert op_types(out).count("GlobalAveragePool") == 6  # one SCA a block
    for x in (image(1, 3, 13, 10), image(2, 3, 8, 20, seed=1), image(1, 3, 5, 3, seed=2)):
        np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)
