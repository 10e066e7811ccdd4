"""ATD's ONNX export: argsort as TopK (its stable order; torch's CPU order is refused with the way
out), AC-MSA's grouping as GatherElements / ScatterElements sized from the input's Shape, ATD's
symmetric padding as a Gather of rows; whole ATDs (category_order "stable") at fixed sizes and one
dynamic graph right at other sizes; srgrad-export of a file with --model-arg
category_order=stable."""
from __future__ import annotations

import numpy as np
import pytest

from framework.onnx import export
from framework.onnx.graph import ConversionError
from tests.models.cases import build

from ._util import check, image, ort_run, require_onnx, srgrad_run

require_onnx()

SMALL = {"embed_dim": 8, "depths": [2], "num_heads": [2], "window_size": 4, "category_size": 16,
         "num_tokens": 5, "reducted_dim": 3, "mlp_ratio": 2, "category_order": "stable"}


@pytest.mark.parametrize("scale,channels,batch,size,kw", [
    (2, 3, 1, (7, 9), {}),  # 8x12: 96 tokens in 6 groups
    (3, 1, 2, (8, 5), {"upsampler": "pixelshuffledirect", "category_size": 7}),  # 64 = 9 x 7 + 1
    (4, 3, 1, (4, 5), {"upsampler": "nearest+conv", "category_size": 100})])  # one group
def test_fixed_size_export_runs_like_srgrad(tmp_path, scale, channels, batch, size, kw):
    model, _ = build("ATD", scale, channels, **{**SMALL, **kw})
    x = image(batch, channels, *size)
    report, ops = check(model, x, tmp_path, dynamic=False, atol=1e-4)
    assert report.output_shapes == [[batch, channels, size[0] * scale, size[1] * scale]]
    assert {"TopK", "GatherElements", "ScatterElements", "ArgMax", "Softmax"} <= set(ops)


def test_one_dynamic_graph_right_at_every_size(tmp_path):
    model, _ = build("ATD", 2, 3, **SMALL)
    model.eval()
    report = export(model, image(1, 3, 16, 16), tmp_path / "m.onnx", dynamic=True)
    assert report.dynamic and {s[0] % 4 for s in report.checked_sizes} == {0, 1, 2, 3}
    for x in (image(1, 3, 23, 31, seed=1), image(2, 3, 12, 5, seed=2)):
        got, want = ort_run(tmp_path / "m.onnx", x)[0], srgrad_run(model, x)[0]
        assert got.shape == (x.shape[0], 3, x.shape[2] * 2, x.shape[3] * 2)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


def test_torchs_cpu_order_is_refused_with_the_way_out(tmp_path):
    model, _ = build("ATD", 2, 3, **{**SMALL, "category_order": "torch_cpu"})
    with pytest.raises(ConversionError, match=r"argsort\(stable=False\).*category_order=stable"):
        export(model.eval(), image(1, 3, 8, 8), tmp_path / "m.onnx", dynamic=False)
    assert not (tmp_path / "m.onnx").exists()


def test_srgrad_export_of_a_pth_with_the_stable_order(tmp_path, capsys):
    """srgrad-export --weights a .pth (detected) --model-arg category_order=stable: written,
    checked against srgrad by the command, one dynamic graph."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine.commands.export import main
    torch.manual_seed(0)
    kw = {k: v for k, v in SMALL.items() if k != "category_order"}
    twin = twins.build_twin({"type": "ATD", "scale": 2, **kw})
    torch.save({"params_ema": twin.state_dict()}, str(tmp_path / "atd.pth"))
    code = main(["--weights", str(tmp_path / "atd.pth"), "--output", str(tmp_path / "atd.onnx"),
                 "--input-size", "12", "8", "--model-arg", "category_order=stable",
                 "--model-arg", "category_size=16"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (tmp_path / "atd.onnx").exists() and "fixed-size export" not in captured.err
