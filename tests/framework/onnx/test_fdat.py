"""FDAT's ONNX export: the zero-padded spatial windows with their learned bias, the channel
attention, the gates and each upsampler kind but the sampling ones (transpose+conv, pa_up, unshuffle_mod
with its reflection pad) as one dynamic graph that ONNX Runtime runs like srgrad at sizes that do
and do not fill the windows; DySample and LDA-AQU at a fixed size, dynamic axes refused."""
from __future__ import annotations

import pytest

from framework.onnx import ExportError, export
from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()


@pytest.mark.parametrize("scale,kw,ops", [
    (4, {"upsampler_type": "transpose+conv"}, {"ConvTranspose", "Softmax"}),
    (3, {"upsampler_type": "pa_up", "num_in_ch": 1, "num_out_ch": 1}, {"Resize", "Sigmoid"}),
    (2, {"upsampler_type": "pixelshuffle", "unshuffle_mod": True}, {"SpaceToDepth", "DepthToSpace"})])
def test_dynamic_export_runs_like_srgrad(tmp_path, scale, kw, ops):
    c = kw.get("num_in_ch", 3)
    model, _ = build("FDAT", scale, c, small=True, **kw)
    report, got = check(model, image(2, c, 7, 9), tmp_path, others=[image(1, c, 8, 4)],
                        dynamic=True, atol=1e-4)
    assert report.output_shapes == [["batch", c, "output_height", "output_width"]]
    assert ops <= set(got), got


@pytest.mark.parametrize("kind,ops", [("dysample", {"GridSample", "Sigmoid"}),
                                      ("lda", {"GridSample", "Tanh", "Softmax", "Resize"})])
def test_sampling_upsamplers_export_at_a_fixed_size(tmp_path, kind, ops):
    model, _ = build("FDAT", 2, 3, small=True, upsampler_type=kind, num_out_ch=1)
    report, got = check(model, image(1, 3, 6, 5), tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[1, 1, 12, 10]] and ops <= set(got), got
    with pytest.raises(ExportError, match=r"dynamic axes are impossible: .*Export at a fixed size"):
        export(model, image(1, 3, 6, 5), tmp_path / "d.onnx", dynamic=True)
