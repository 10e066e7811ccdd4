"""DRCT's ONNX export: whole DRCTs at fixed sizes (one that pads, a batch of two, x3 with the
identity residual on one channel) that ONNX Runtime runs like srgrad; one dynamic graph (SwinIR's
window partition and mask built from the input's shape) right at other sizes; srgrad-export of a
twin's .pth (detected)."""
from __future__ import annotations

import numpy as np
import pytest

from framework.onnx import export
from tests.models.cases import build

from ._util import check, image, ort_run, require_onnx, srgrad_run

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


def test_one_dynamic_graph_right_at_every_size(tmp_path):
    model, _ = build("DRCT", 2, 3, **SMALL)
    model.eval()
    report = export(model, image(1, 3, 16, 16), tmp_path / "m.onnx", dynamic=True)
    assert report.dynamic and {s[0] % 4 for s in report.checked_sizes} == {0, 1, 2, 3}
    for x in (image(1, 3, 23, 31, seed=1), image(2, 3, 12, 5, seed=2)):
        got, want = ort_run(tmp_path / "m.onnx", x)[0], srgrad_run(model, x)[0]
        assert got.shape == (x.shape[0], 3, x.shape[2] * 2, x.shape[3] * 2)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


def test_srgrad_export_of_a_twin_pth(tmp_path, capsys):
    """srgrad-export --weights a .pth the torch twin saved (detected, no --model): written, checked
    against srgrad by the command itself, one dynamic graph (no fixed-size warning)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine.commands.export import main
    torch.manual_seed(0)
    twin = twins.build_twin({"type": "DRCT", "scale": 2, **SMALL})
    torch.save({"params_ema": twin.state_dict()}, str(tmp_path / "drct.pth"))
    code = main(["--weights", str(tmp_path / "drct.pth"), "--output", str(tmp_path / "drct.onnx"),
                 "--input-size", "12", "8"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (tmp_path / "drct.onnx").exists() and "fixed-size export" not in captured.err
