"""ncnn export (issue 44.3): .param + .bin written directly from the trace for the conv families
(Real-ESRGAN's compact and RRDB nets, EDSR, RCAN, FSRCNN, SPAN, MSRResNet, ESPCN), run by ncnn's
own Python runtime within 1e-4 of srgrad at sizes other than the example's; a model with an op
ncnn's layers are not written for is refused naming it, nothing written; srgrad-export --format
ncnn on a published-layout .pth."""
from __future__ import annotations

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework.onnx.ncnn import NcnnError, _ncnn_run, export_ncnn, unavailable_reason
from framework.registry import MODELS
from tests.models.cases import build

from ._util import image, srgrad_run

if unavailable_reason():
    pytest.skip(unavailable_reason(), allow_module_level=True)

SPECS = {
    "SRVGGNetCompact": {"type": "SRVGGNetCompact", "scale": 4, "num_feat": 8, "num_conv": 2},
    "RRDBNet": {"type": "RRDBNet", "scale": 4, "num_feat": 8, "num_block": 1, "num_grow_ch": 4},
    "EDSR": {"type": "EDSR", "scale": 2, "num_feat": 8, "num_block": 1},
    "RCAN": {"type": "RCAN", "scale": 2, "num_feat": 8, "num_group": 1, "num_block": 1,
             "squeeze_factor": 4},
    "FSRCNN": {"type": "FSRCNN", "scale": 3, "d": 8, "s": 4, "m": 1},
    "SPAN": None, "MSRResNet": None, "ESPCN": None}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_ncnn_runs_like_srgrad(tmp_path, name):
    from framework.nn import init
    init.manual_seed(0)
    model = build(name, 2, 3, small=True)[0] if SPECS[name] is None else MODELS.build(SPECS[name])
    model.eval()
    report = export_ncnn(model, image(1, 3, 12, 10), tmp_path / "m.param")
    assert report.max_abs_diff <= 1e-4 and len(report.checked_sizes) == 3
    lines = (tmp_path / "m.param").read_text().splitlines()
    assert lines[0] == "7767517" and lines[2].split()[:2] == ["Input", "data"]
    assert any(line.split()[-1] == "output" or " output " in line for line in lines[2:])
    x = image(1, 3, 9, 14, seed=3)
    np.testing.assert_allclose(_ncnn_run(tmp_path / "m.param", tmp_path / "m.bin", x),
                               srgrad_run(model, x)[0], rtol=0, atol=1e-4)


def test_an_op_ncnn_is_not_written_for_is_refused_by_name(tmp_path):
    model, _ = build("SwinIR", 2, 3, small=True)
    with pytest.raises(NcnnError, match=r"no ncnn layer is written for PadToMultipleFunction"):
        export_ncnn(model, image(1, 3, 8, 8), tmp_path / "m.param")
    assert not list(tmp_path.iterdir())


def test_srgrad_export_format_ncnn_of_a_published_pth(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from framework.engine.commands.export import main
    from framework.nn import init
    init.manual_seed(1)
    model = MODELS.build({"type": "SRVGGNetCompact", "scale": 4, "num_feat": 8, "num_conv": 2})
    state = {k: torch.from_numpy(v.copy()) for k, v in model.state_dict().items()}
    torch.save({"params": state}, tmp_path / "realesr-general-x4v3.pth")
    args = ["--weights", str(tmp_path / "realesr-general-x4v3.pth"), "--format", "ncnn",
            "--output", str(tmp_path / "x4.param"), "--input-size", "16", "12"]
    assert main(args) == 0
    assert "wrote" in capsys.readouterr().out and (tmp_path / "x4.bin").exists()
    x = image(1, 3, 11, 7)
    np.testing.assert_allclose(_ncnn_run(tmp_path / "x4.param", tmp_path / "x4.bin", x),
                               srgrad_run(model.eval(), x)[0], rtol=0, atol=1e-4)
    assert main(args) == 2  # exists: --overwrite replaces it
    assert "exists" in capsys.readouterr().err
    other = args[:-5] + ["--output", str(tmp_path / "y.param"), "--fp16"]
    assert main(other) == 2 and "ONNX options" in capsys.readouterr().err
