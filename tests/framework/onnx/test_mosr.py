"""MoSR's ONNX export for each upsampler: the pixel shuffle and the geo-ensemble pixel shuffle as one
dynamic graph that ONNX Runtime runs like srgrad at two sizes; DySample (its own out_ch) at a fixed
size, dynamic axes refused naming the size-dependent node (its sampling grid)."""
from __future__ import annotations

import pytest

from framework.onnx import ExportError, export
from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()


@pytest.mark.parametrize("scale,kw,ops", [
    (2, {"upsampler": "ps"}, {"DepthToSpace", "Split", "Concat"}),
    (3, {"upsampler": "gps", "in_ch": 1, "out_ch": 1}, {"Split", "Div", "DepthToSpace"})])
def test_dynamic_export_runs_like_srgrad(tmp_path, scale, kw, ops):
    model, spec = build("MoSR", scale, kw.get("in_ch", 3), dim=8, n_block=2, kernel_size=5, **kw)
    out = kw.get("in_ch", 3)
    c = kw.get("in_ch", 3)
    report, got = check(model, image(2, c, 7, 9), tmp_path, others=[image(1, c, 5, 4)],
                        dynamic=True, atol=1e-4)
    assert report.output_shapes == [["batch", out, "output_height", "output_width"]]
    assert ops <= set(got), got


def test_dysample_exports_at_a_fixed_size(tmp_path):
    model, _ = build("MoSR", 4, 3, dim=8, n_block=1, upsampler="dys", out_ch=1)
    report, ops = check(model, image(1, 3, 6, 5), tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[1, 1, 24, 20]] and {"GridSample", "Sigmoid"} <= set(ops)
    with pytest.raises(ExportError, match=r"dynamic axes are impossible: .*Export at a fixed size"):
        export(model, image(1, 3, 6, 5), tmp_path / "d.onnx", dynamic=True)
