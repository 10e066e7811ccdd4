"""DCTLSA's ONNX export: one dynamic graph (the padding to 16 and each BasicLayer's reflection to
the window's multiple from the Shape, the window partition and the shifted windows' Roll, the
linear attention's MatMuls, BatchNorm with its running statistics) that ONNX Runtime runs like
srgrad at sizes that pad and that do not."""
from __future__ import annotations

import numpy as np

from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()


def test_dynamic_export_runs_like_srgrad(tmp_path):
    model, _ = build("DCTLSA", 2, 3, nf=8, num_head=2)
    rng = np.random.default_rng(0)
    for k, v in model.state_dict().items():  # statistics off their 0 / 1
        if "running" in k:
            v[...] = rng.uniform(0.5, 1.5, v.shape) if k.endswith("var") else rng.uniform(-0.2, 0.2, v.shape)
    report, ops = check(model, image(1, 3, 13, 10), tmp_path,
                        others=[image(2, 3, 20, 17, seed=1)],
                        dynamic=True, atol=1e-4)
    assert report.output_shapes == [["batch", 3, "output_height", "output_width"]]
    assert {"Softmax", "MatMul", "LayerNormalization", "DepthToSpace"} <= set(ops), ops
