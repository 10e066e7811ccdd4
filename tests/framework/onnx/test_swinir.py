"""SwinIR's ONNX export: dynamic axes refused with the reason (its window partition and shifted-window
mask are computed for the input size), fixed-size exports that ONNX Runtime runs like srgrad: at
img_size (the stored attn_mask) and at a size that pads (the mask computed for the padded size), for
the upsamplers."""
from __future__ import annotations

import pytest

from framework.onnx import ExportError, export
from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()

SMALL = {"embed_dim": 8, "depths": [2], "num_heads": [2], "window_size": 4, "img_size": 8,
         "mlp_ratio": 2, "drop_path_rate": 0.0}


def test_dynamic_axes_are_refused_with_the_reason(tmp_path):
    model, _ = build("SwinIR", 2, 3, **SMALL)
    with pytest.raises(ExportError, match=r"dynamic axes are impossible: WindowPartitionFunction\(.*\): "
                                          r"the window partition and shifted-window attention "
                                          r"mask are computed for the input size\. Export at a fixed size"):
        export(model, image(1, 3, 8, 8), tmp_path / "m.onnx", dynamic=True)
    assert not (tmp_path / "m.onnx").exists()
    with pytest.warns(UserWarning, match="fixed-size export at \\(1, 3, 8, 8\\)"):
        report = export(model, image(1, 3, 8, 8), tmp_path / "m.onnx")  # default: warn, fix the size
    assert not report.dynamic and "window partition" in report.reason


@pytest.mark.parametrize("upsampler,scale,size", [("pixelshuffle", 2, (8, 8)),
                                                  ("pixelshuffledirect", 3, (7, 9)), ("", 1, (7, 9)),
                                                  ("nearest+conv", 2, (7, 9))])
def test_fixed_size_export_runs_like_srgrad(tmp_path, upsampler, scale, size):
    model, _ = build("SwinIR", scale, 3, **SMALL, upsampler=upsampler)
    h, w = size
    report, ops = check(model, image(1, 3, h, w), tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[1, 3, h * scale, w * scale]]
    assert {"MatMul", "Softmax", "LayerNormalization", "Transpose"} <= set(ops)


def test_batch_of_two_at_img_size(tmp_path):
    model, _ = build("SwinIR", 2, 1, **SMALL, resi_connection="3conv")
    x = image(2, 1, 8, 8)
    report, _ = check(model, x, tmp_path, dynamic=False, atol=1e-4)
    assert report.input_shape == [2, 1, 8, 8]
