"""RGT's ONNX export: fixed-size graphs that ONNX Runtime runs like srgrad, at the stored masks' size
and at a size the rectangle windows pad; srgrad-export of a twin .pth writes one dynamic graph,
checked by the command, which holds while RG-SA's reduction count is the traced size's (two in
evaluation from 16 to 1023 px: the card's fixed_onnx says so)."""
from __future__ import annotations

import pytest

from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()

SMALL = {"embed_dim": 32, "depth": [3, 2], "num_heads": [4, 2], "split_size": [2, 4], "img_size": 16,
         "mlp_ratio": 2.0, "drop_path_rate": 0.0}


@pytest.mark.parametrize("scale,size", [(2, (16, 16)), (3, (17, 21))])
def test_fixed_size_export_runs_like_srgrad(tmp_path, scale, size):
    model, _ = build("RGT", scale, 3, **SMALL)
    model.eval()
    h, w = size
    report, ops = check(model, image(1, 3, h, w), tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[1, 3, h * scale, w * scale]]
    assert {"MatMul", "Softmax", "Conv"} <= set(ops)


def test_srgrad_export_of_a_twin_pth(tmp_path, capsys):
    """Detected, no --model; the card fixes the graph to the traced size (RG-SA's reduction
    count follows the size: a dynamic graph traced below 1024 px is wrong from 1024 on)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine.commands.export import main
    torch.manual_seed(0)
    twin = twins.build_twin({"type": "RGT", "scale": 2, **SMALL})
    torch.save({"params": twin.state_dict()}, str(tmp_path / "rgt.pth"))
    code = main(["--weights", str(tmp_path / "rgt.pth"), "--output", str(tmp_path / "rgt.onnx"),
                 "--input-size", "16", "20"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (tmp_path / "rgt.onnx").exists() and "fixed size" in captured.out
    assert "a RGT graph holds for one input size only (RG-SA reduces" in captured.err
