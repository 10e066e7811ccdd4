"""GRL's ONNX export: fixed-size exports that ONNX Runtime runs like srgrad for every upsampler
and anchor projection (window and anchored stripe cosine attention, their position-bias MLPs, the
shift masks), at a size that pads; srgrad-export on a detected .pth. One graph per input size (the
tables, indices and masks are built for the traced size), as the card says."""
from __future__ import annotations

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework.card import card
from framework.nn import init
from framework.registry import MODELS
from tests.models.cases import SMALL, build

from ._util import check, export_published, image, ort_run, require_onnx, srgrad_run

require_onnx()


@pytest.mark.parametrize("upsampler,scale,kw", [
    ("pixelshuffle", 2, {}), ("pixelshuffledirect", 3, {"anchor_proj_type": "patchmerging"}),
    ("nearest+conv", 4, {"qkv_proj_type": "separable_conv", "anchor_proj_type": "conv2d"}),
    ("", 1, {"anchor_proj_type": "separable_conv", "anchor_one_stage": False, "conv_type": "linear"})])
def test_fixed_size_export_runs_like_srgrad(tmp_path, upsampler, scale, kw):
    model, spec = build("GRL", scale, 3, small=True, upsampler=upsampler, **kw)
    assert card(spec).fixed_onnx
    report, ops = check(model, image(1, 3, 7, 9), tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[1, 3, 7 * scale, 9 * scale]]
    assert {"MatMul", "Softmax", "Sigmoid", "Exp"} <= set(ops)


def test_export_a_detected_file(tmp_path):
    """A file without the buffers (spandrel's x1 rule: window 8, stripes 8 x 8, df 4) through
    srgrad-export with no --model, at 13x10."""
    pytest.importorskip("torch")
    init.manual_seed(0)
    spec = {"type": "GRL", **{k: v for k, v in SMALL["GRL"].items()}, "window_size": 8,
            "anchor_window_down_factor": 4, "scale": 1, "upsampler": ""}
    model = MODELS.build(spec)
    out, text, model = export_published(model, tmp_path, "dn_grl_tiny", (13, 10))
    assert "takes 13x10 (height x width) inputs only" in text
    x = image(1, 3, 13, 10, seed=1)
    np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)
