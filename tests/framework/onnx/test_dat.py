"""DAT's ONNX export: fixed-size exports (eval mode: BatchNorm with its statistics) that ONNX
Runtime runs like srgrad for both upsamplers, at img_size and at a size that pads; srgrad-export
of a twin .pth, one dynamic graph (test_dynamic.py checks every residue of the window)."""
from __future__ import annotations

import pytest

from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()

SMALL = {"embed_dim": 32, "depth": [3, 1], "num_heads": [2, 2], "split_size": [2, 4], "img_size": 8,
         "expansion_factor": 2.0, "drop_path_rate": 0.0}


@pytest.mark.parametrize("upsampler,scale,size", [("pixelshuffle", 2, (8, 8)),
                                                  ("pixelshuffledirect", 3, (7, 9))])
def test_fixed_size_export_runs_like_srgrad(tmp_path, upsampler, scale, size):
    model, _ = build("DAT", scale, 3, **SMALL, upsampler=upsampler)
    model.eval()
    h, w = size
    report, ops = check(model, image(1, 3, h, w), tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[1, 3, h * scale, w * scale]]
    assert {"MatMul", "Softmax", "Sigmoid"} <= set(ops)


def test_srgrad_export_of_a_twin_pth(tmp_path, capsys):
    """srgrad-export --weights a .pth the torch twin saved (detected, no --model; BatchNorm
    statistics moved off their init): written, checked against srgrad by the command itself
    (one dynamic graph, checked at every residue of the window)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine.commands.export import main
    torch.manual_seed(0)
    twin = twins.build_twin({"type": "DAT", "scale": 2, **SMALL})
    with torch.no_grad():
        twin(torch.rand(2, 3, 8, 8))
    torch.save({"params": twin.state_dict()}, str(tmp_path / "dat.pth"))
    code = main(["--weights", str(tmp_path / "dat.pth"), "--output", str(tmp_path / "dat.onnx"),
                 "--input-size", "12", "8"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (tmp_path / "dat.onnx").exists() and "dynamic batch/height/width" in captured.out
    assert "fixed-size" not in captured.err
