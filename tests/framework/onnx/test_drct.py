"""DRCT's ONNX export: whole DRCTs at fixed sizes (one that pads, a batch of two, x3 with the
identity residual on one channel) that ONNX Runtime runs like srgrad; dynamic axes refused with
the reason; srgrad-export of a twin's .pth (detected)."""
from __future__ import annotations

import pytest

from framework.onnx import ExportError, export
from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()

SMALL = {"embed_dim": 8, "depths": [1], "num_heads": [2], "window_size": 4, "img_size": 8,
         "mlp_ratio": 2, "gc": 4, "drop_path_rate": 0.0}


@pytest.mark.parametrize("scale,channels,batch,size,kw", [
    (2, 3, 1, (7, 9), {}), (3, 1, 2, (8, 8), {"resi_connection": "identity"}),
    (4, 3, 1, (4, 5), {"depths": [1, 1], "num_heads": [2, 4]})])
def test_fixed_size_export_runs_like_srgrad(tmp_path, scale, channels, batch, size, kw):
    model, _ = build("DRCT", scale, channels, **{**SMALL, **kw})
    x = image(batch, channels, *size)
    report, ops = check(model, x, tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[batch, channels, size[0] * scale, size[1] * scale]]
    assert {"MatMul", "Softmax", "Concat", "LeakyRelu"} <= set(ops)


def test_dynamic_axes_are_refused_with_the_reason(tmp_path):
    model, _ = build("DRCT", 2, 3, **SMALL)
    with pytest.raises(ExportError, match=r"dynamic axes are impossible: .*Export at a fixed size"):
        export(model, image(1, 3, 8, 8), tmp_path / "m.onnx", dynamic=True)
    assert not (tmp_path / "m.onnx").exists()


def test_srgrad_export_of_a_twin_pth(tmp_path, capsys):
    """srgrad-export --weights a .pth the torch twin saved (detected, no --model): written, checked
    against srgrad by the command itself (fixed size, with a warning naming the reason)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine.export import main
    torch.manual_seed(0)
    twin = twins.build_twin({"type": "DRCT", "scale": 2, **SMALL})
    torch.save({"params_ema": twin.state_dict()}, str(tmp_path / "drct.pth"))
    code = main(["--weights", str(tmp_path / "drct.pth"), "--output", str(tmp_path / "drct.onnx"),
                 "--input-size", "12", "8"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (tmp_path / "drct.onnx").exists() and "fixed-size export" in captured.err
