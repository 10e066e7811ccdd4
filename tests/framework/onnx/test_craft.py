"""CRAFT's ONNX export: one dynamic graph (spandrel's padding to 16, the original's mirror by a
window, the max pool, the channels-first norms, both attentions) that ONNX Runtime runs like srgrad
at sizes of every residue (the export's own check) and at others; srgrad-export of a twin .pth."""
from __future__ import annotations

import pytest

from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()

SMALL = {"embed_dim": 32, "depths": [1], "num_heads": [4], "split_size_0": 2, "split_size_1": 4,
         "window_size": 8}


def test_one_dynamic_graph_runs_like_srgrad(tmp_path):
    model, _ = build("CRAFT", 2, 3, **SMALL)
    others = [image(1, 3, 13, 18, seed=1), image(2, 3, 16, 33, seed=2), image(1, 3, 5, 7, seed=3)]
    report, ops = check(model, image(1, 3, 16, 16), tmp_path, others, dynamic=True, atol=1e-4)
    assert report.dynamic and report.output_shapes[0][1:2] == [3]
    assert {"MaxPool", "MatMul", "Softmax", "Conv"} <= set(ops)


def test_srgrad_export_of_a_twin_pth(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine.commands.export import main
    torch.manual_seed(0)
    twin = twins.build_twin({"type": "CRAFT", "scale": 3, **{**SMALL, "window_size": 16}})
    torch.save({"params": twin.state_dict()}, str(tmp_path / "craft.pth"))
    code = main(["--weights", str(tmp_path / "craft.pth"), "--output", str(tmp_path / "craft.onnx"),
                 "--input-size", "16", "20"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (tmp_path / "craft.onnx").exists() and "dynamic batch/height/width" in captured.out
