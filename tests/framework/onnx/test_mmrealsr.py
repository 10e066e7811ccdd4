"""MM-RealSR's ONNX export: one dynamic graph (de_net's scores from a mean over the image, the
per-sample modulation, spandrel's 16 px minimum as a pad) that ONNX Runtime runs like srgrad at
other sizes and batches, with estimated and with user-given scores (custom_degrees)."""
from __future__ import annotations

from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()


def test_dynamic_export_runs_like_srgrad(tmp_path):
    """A given blur score and an estimated noise score: both paths in one graph (test_export.py's
    every-model check exports the all-estimated one)."""
    model, _ = build("MMRealSR", 4, 3, num_feat=8, num_block=1, num_grow_ch=4, num_feats=[4, 6],
                     num_blocks=[1, 1], downscales=[2, 1], custom_degrees=[0.7, None])
    report, ops = check(model, image(2, 3, 17, 18), tmp_path,
                        others=[image(1, 3, 9, 5, seed=1), image(3, 3, 20, 16, seed=2)],
                        dynamic=True, atol=1e-4)
    assert report.output_shapes == [["batch", 3, "output_height", "output_width"]]
    assert {"ReduceMean", "Sigmoid"} <= set(ops), ops
