"""MoESR's ONNX export: the pad to even sides, the inception convs, the MSG's unshuffle / shuffle and
each upsampler kind but DySample as one dynamic graph that ONNX Runtime runs like srgrad at two
sizes (odd sides: the reflection pad and the crop); the MetaUpsample buffer is no graph input.
DySample at a fixed size, dynamic axes refused naming the size-dependent node."""
from __future__ import annotations

import pytest

from framework.onnx import ExportError, export
from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()


@pytest.mark.parametrize("scale,kw,ops", [
    (2, {"upsampler": "pixelshuffledirect"}, {"DepthToSpace", "SpaceToDepth", "Split", "Gather"}),
    (3, {"upsampler": "pixelshuffle", "in_ch": 1, "out_ch": 1}, {"DepthToSpace", "LeakyRelu"}),
    (4, {"upsampler": "nearest+conv"}, {"Resize", "LeakyRelu"}),
    (1, {"upsampler": "conv"}, {"Conv", "Mul"})])
def test_dynamic_export_runs_like_srgrad(tmp_path, scale, kw, ops):
    c = kw.get("in_ch", 3)
    model, _ = build("MoESR", scale, c, small=True, **kw)
    report, got = check(model, image(2, c, 7, 9), tmp_path, others=[image(1, c, 5, 4)],
                        dynamic=True, atol=1e-4)
    assert report.output_shapes == [["batch", c, "output_height", "output_width"]]
    assert ops <= set(got), got


def test_dysample_exports_at_a_fixed_size(tmp_path):
    model, _ = build("MoESR", 2, 3, small=True, upsampler="dysample", out_ch=1)
    report, ops = check(model, image(1, 3, 6, 5), tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[1, 1, 12, 10]] and {"GridSample", "Sigmoid"} <= set(ops)
    with pytest.raises(ExportError, match=r"dynamic axes are impossible: .*Export at a fixed size"):
        export(model, image(1, 3, 6, 5), tmp_path / "d.onnx", dynamic=True)
