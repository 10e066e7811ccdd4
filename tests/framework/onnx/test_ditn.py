"""DITN's ONNX export: one dynamic graph (the padding to 8 from the Shape, the patch cut and stitch
as Reshape / Transpose read from the input's size, ISA's normalised channel attention as MatMul and
Softmax) that ONNX Runtime runs like srgrad at sizes that pad and that do not, patch sizes 8 and 4."""
from __future__ import annotations

import pytest

from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()


@pytest.mark.parametrize("scale,kw", [(2, {}), (3, {"patch_size": 4, "bias": True, "UFONE_blocks": 2})])
def test_dynamic_export_runs_like_srgrad(tmp_path, scale, kw):
    model, _ = build("DITN", scale, 3, dim=8, ITL_blocks=1, SAL_blocks=1, **kw)
    report, ops = check(model, image(1, 3, 13, 10), tmp_path,
                        others=[image(2, 3, 16, 8, seed=1), image(1, 3, 5, 21, seed=2)],
                        dynamic=True, atol=1e-4)
    assert report.output_shapes == [["batch", 3, "output_height", "output_width"]]
    assert {"Softmax", "MatMul", "Tanh", "DepthToSpace", "Gather"} <= set(ops), ops
