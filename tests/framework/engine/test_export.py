"""srgrad-export on a weights file written by save_weights: exit 0 and the max difference printed;
an existing output, the weights file itself, and a bad model are refused."""
from __future__ import annotations

import numpy as np
import pytest

from framework.engine.commands.export import main
from framework.weights import save_weights
from tests.models.cases import build
from tests.framework.onnx._util import image, ort_run, require_onnx, srgrad_run

require_onnx()


@pytest.fixture
def weights(tmp_path):
    model, spec = build("ESPCN", 3, 1)
    path = tmp_path / "net.safetensors"
    save_weights(path, model.state_dict(), model=spec)
    return path, model


def test_export_from_weights(tmp_path, weights, capsys):
    path, model = weights
    out = tmp_path / "espcn.onnx"
    assert main(["--weights", str(path), "--output", str(out), "--input-size", "9", "7"]) == 0
    text = capsys.readouterr().out
    assert "max |ONNX Runtime - srgrad| = " in text and "dynamic" in text
    diff = float(text.split("max |ONNX Runtime - srgrad| = ")[1].split()[0])
    assert diff <= 1e-4
    x = image(1, 1, 5, 6)
    model.eval()
    np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)


def test_static_fp16_and_model_args(tmp_path, weights, capsys):
    path, _ = weights
    out = tmp_path / "m.onnx"
    argv = ["--weights", str(path), "--output", str(out), "--static", "--fp16", "--input-size", "6",
            "5", "--model", "ESPCN", "--scale", "3", "--model-arg", "num_in_ch=1",
            "--model-arg", "num_out_ch=1"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "fixed size: a fixed size was asked: this file takes 6x5 (height x width) inputs " \
        "only, 1 image at a time" in text and "float16" in text
    assert ort_run(out, image(1, 1, 6, 5))[0].shape == (1, 1, 18, 15)


def test_a_gray_model_of_another_keyword_exports_with_one_channel(tmp_path):
    """RealPLKSR in_ch=1: the example input has the card's channels (was: 3, a conv error)."""
    spec = {"type": "RealPLKSR", "in_ch": 1, "out_ch": 1, "dim": 8, "n_blocks": 1,
            "kernel_size": 5, "scale": 2}
    model, _ = build("RealPLKSR", 2, 1, dim=8, n_blocks=1, kernel_size=5)
    path = tmp_path / "g.safetensors"
    save_weights(path, model.state_dict(), model=spec, scale=2, dtype="float32")
    out = tmp_path / "g.onnx"
    assert main(["--weights", str(path), "--output", str(out), "--input-size", "8", "8"]) == 0
    x = image(1, 1, 8, 8)
    model.eval()
    np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)


def test_refusals(tmp_path, weights, capsys):
    path, _ = weights
    out = tmp_path / "m.onnx"
    out.write_bytes(b"old")
    assert main(["--weights", str(path), "--output", str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_bytes() == b"old"
    before = path.read_bytes()
    assert main(["--weights", str(path), "--output", str(path), "--overwrite"]) == 2
    assert "is the --weights file" in capsys.readouterr().err and path.read_bytes() == before
    link = tmp_path / "link.onnx"
    link.symlink_to(path)
    assert main(["--weights", str(path), "--output", str(link), "--overwrite"]) == 2
    assert "is the --weights file" in capsys.readouterr().err and path.read_bytes() == before
    assert main(["--weights", str(path), "--output", str(tmp_path / "x.onnx"), "--model",
                 "NoSuchNet", "--scale", "2"]) == 1
    assert "NoSuchNet" in capsys.readouterr().err
    assert not (tmp_path / "x.onnx").exists()


def test_a_model_whose_card_fixes_the_graph_exports_one_size(tmp_path, capsys):
    """RGT's graph holds for the sizes of one count of RG-SA reductions (its card's fixed_onnx):
    the traces at two small sizes agree, so without the card a dynamic graph was written that
    is wrong from 1024 px on. --dynamic is refused naming why; the default fixes the size."""
    model, spec = build("RGT", 2, 1, small=True)
    path = tmp_path / "rgt.safetensors"
    save_weights(path, model.state_dict(), model=spec, scale=2, dtype="float32")
    out = tmp_path / "rgt.onnx"
    base = ["--weights", str(path), "--output", str(out), "--input-size", "16", "16"]
    assert main(base + ["--dynamic"]) == 1
    err = capsys.readouterr().err
    assert "--dynamic: a RGT graph holds for one input size only (RG-SA reduces" in err
    assert not out.exists()
    assert main(base) == 0
    captured = capsys.readouterr()
    assert "exporting for 16x16" in captured.err and "fixed size" in captured.out
    x = image(1, 1, 16, 16)
    model.eval()
    np.testing.assert_allclose(ort_run(out, x)[0], srgrad_run(model, x)[0], rtol=0, atol=1e-4)
