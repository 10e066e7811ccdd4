"""SwinIR's ONNX export: fixed-size exports that ONNX Runtime runs like srgrad: at img_size (the
stored attn_mask) and at a size that pads (the mask computed for the padded size), for the
upsamplers. Dynamic axes: tests/framework/onnx/test_dynamic.py."""
from __future__ import annotations

import pytest

from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()

SMALL = {"embed_dim": 8, "depths": [2], "num_heads": [2], "window_size": 4, "img_size": 8,
         "mlp_ratio": 2, "drop_path_rate": 0.0}


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
