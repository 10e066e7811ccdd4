"""SAFMN-BCIE's ONNX export: at upscaling factors 2 and 3 the padding to lcm(16, u) leaves features
that are multiples of 8, so one dynamic graph (unshuffle, SAFM's pools, shuffle, the crop back to
the input's size) runs in ONNX Runtime like srgrad at sizes that need padding and not; at u = 4 the
card fixes the graph to one size and dynamic axes are refused."""
from __future__ import annotations

import pytest

import models  # noqa: F401  registers the architectures

from framework.card import card
from framework.onnx import ExportError, export
from framework.registry import MODELS
from framework.nn import init

from ._util import check, image, require_onnx

require_onnx()

SMALL = {"type": "SAFMNBCIE", "dim": 8, "n_blocks": 1, "num_layers": 1}


@pytest.mark.parametrize("u", [2, 3])
def test_dynamic_export_runs_like_srgrad(tmp_path, u):
    init.manual_seed(0)
    model = MODELS.build({**SMALL, "upscaling_factor": u})
    report, got = check(model, image(1, 3, 48, 48), tmp_path, others=[image(2, 3, 17, 30)],
                        dynamic=True, atol=1e-4)
    assert report.output_shapes == [["batch", 3, "output_height", "output_width"]]
    assert {"SpaceToDepth", "DepthToSpace", "Resize", "Gather"} <= set(got), got


def test_upscaling_factor_4_exports_at_a_fixed_size(tmp_path):
    spec = {**SMALL, "upscaling_factor": 4}
    assert "not multiples of 8" in card(spec).fixed_onnx
    init.manual_seed(0)
    model = MODELS.build(spec)
    report, _ = check(model, image(1, 3, 20, 33), tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[1, 3, 20, 33]]
    with pytest.raises(ExportError, match=r"dynamic axes are impossible"):
        export(model, image(1, 3, 20, 33), tmp_path / "d.onnx", dynamic=True)


def test_safmn_traced_at_8_pixels_is_one_graph_for_every_size(tmp_path):
    """SAFM's pools are max pools of 2^i (was: adaptive pools, whose coarsest level over an 8-pixel
    map traced as a GlobalMaxPool bound to that size): SAFMN traced at 8 pixels runs at 17 x 30."""
    init.manual_seed(0)
    model = MODELS.build({"type": "SAFMN", "dim": 8, "n_blocks": 1, "scale": 2})
    report, got = check(model, image(1, 3, 8, 8), tmp_path, others=[image(1, 3, 17, 30)],
                        dynamic=True, atol=1e-4)
    assert report.dynamic and "GlobalMaxPool" not in got and got.count("MaxPool") == 3
