"""HAT's ONNX export and its overlapping-windows op: overlap_windows alone (even and odd overlaps)
and whole HATs at fixed sizes (one that pads, a batch of two, x1 and x3, the identity residual)
that ONNX Runtime runs like srgrad; a twin .pth through srgrad-export as one dynamic graph."""
from __future__ import annotations

import numpy as np
import pytest

from framework.functional.windows import overlap_windows
from tests.models.cases import build

from ._util import Lambda, check, image, require_onnx

require_onnx()

SMALL = {"embed_dim": 8, "depths": [2], "num_heads": [2], "window_size": 4, "img_size": 8,
         "mlp_ratio": 2, "compress_ratio": 2, "squeeze_factor": 4, "drop_path_rate": 0.0}


@pytest.mark.parametrize("ws,ow,shape", [(4, 6, (2, 8, 12, 3)), (2, 3, (1, 4, 6, 2)),
                                         (3, 3, (1, 6, 3, 1))])
def test_overlap_windows_export(tmp_path, ws, ow, shape):
    model = Lambda(lambda m, x: overlap_windows(x, ws, ow) * 2.0)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    _, ops = check(model, x, tmp_path, dynamic=False, atol=0)
    assert {"Pad", "Gather"} <= set(ops)


@pytest.mark.parametrize("scale,channels,batch,size,kw", [
    (2, 3, 1, (7, 9), {}), (3, 3, 2, (8, 8), {"resi_connection": "identity"}),
    (1, 1, 1, (8, 5), {"overlap_ratio": 0.25, "depths": [1, 1], "num_heads": [2, 1]})])
def test_fixed_size_export_runs_like_srgrad(tmp_path, scale, channels, batch, size, kw):
    model, _ = build("HAT", scale, channels, **{**SMALL, **kw})
    x = image(batch, channels, *size)
    report, ops = check(model, x, tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[batch, channels, size[0] * scale, size[1] * scale]]
    assert {"MatMul", "Softmax", "Gather", "Sigmoid", "GlobalAveragePool"} & set(ops)


def test_srgrad_export_of_a_twin_pth(tmp_path, capsys):
    """srgrad-export --weights a .pth the torch twin saved (detected, no --model): written, checked
    against srgrad by the command itself (one dynamic graph, checked at every residue of the window)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine.commands.export import main
    torch.manual_seed(0)
    twin = twins.build_twin({"type": "HAT", "scale": 2, **SMALL})
    torch.save({"params_ema": twin.state_dict()}, str(tmp_path / "hat.pth"))
    code = main(["--weights", str(tmp_path / "hat.pth"), "--output", str(tmp_path / "hat.onnx"),
                 "--input-size", "12", "8"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (tmp_path / "hat.onnx").exists() and "dynamic batch/height/width" in captured.out
    assert "fixed-size" not in captured.err
