"""SeemoRe's ONNX export: one dynamic graph (the padding to 16 from the Shape, the calibration's
stride-4 pooling and bilinear resize back to the input's size, the router's softmax and TopK /
ScatterElements routing, every expert weighted) that ONNX Runtime runs like srgrad at sizes that pad
and that do not, in batches whose images take different experts."""
from __future__ import annotations

import pytest

from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()


@pytest.mark.parametrize("scale,kw", [(2, {}), (3, {"lr_space": "exp", "use_shuffle": False,
                                                    "recursive": 1, "topk": 2})])
def test_dynamic_export_runs_like_srgrad(tmp_path, scale, kw):
    model, _ = build("SeemoRe", scale, 3, embedding_dim=8, num_layers=1, num_experts=3, **kw)
    report, ops = check(model, image(1, 3, 13, 10), tmp_path,
                        others=[image(2, 3, 20, 17, seed=1), image(2, 3, 5, 21, seed=2)],
                        dynamic=True, atol=1e-4)
    assert report.output_shapes == [["batch", 3, "output_height", "output_width"]]
    assert {"TopK", "ScatterElements", "Softmax", "Resize", "DepthToSpace"} <= set(ops), ops
