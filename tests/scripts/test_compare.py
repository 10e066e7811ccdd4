"""scripts/compare.py: bicubic | each model | HR on one validation image, PSNR in the labels; never
replaces its output."""
import sys
from pathlib import Path

import numpy as np
import pytest

from framework.weights import save_weights
from framework.io.image import read_image, write_image
from framework.nn import init
from framework.engine.inference.zoo import load_zoo
from framework.registry import MODELS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
compare = pytest.importorskip("compare")


def test_strip_of_bicubic_models_and_hr(tmp_path, capsys):
    rng = np.random.default_rng(0)
    (tmp_path / "val").mkdir()
    write_image(tmp_path / "val" / "a.png", rng.uniform(0, 1, (3, 40, 48)).astype(np.float32))
    spec = {"type": "ESPCN", "scale": 2}
    load_zoo()
    init.manual_seed(0)
    save_weights(tmp_path / "w.safetensors", MODELS.build(spec).state_dict(), model=spec, scale=2)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"name: t\nscale: 2\nmodel: {{type: ESPCN}}\n"
                   f"datasets:\n  train: {{type: HRImageDataset, root: {tmp_path / 'val'}, gt_size: 16}}\n"
                   f"  val: {{type: HRImageDataset, root: {tmp_path / 'val'}}}\n"
                   f"train: {{total_iters: 1, batch_size: 1, optimizer: {{type: Adam, lr: 1e-3}}, loss: {{type: L1Loss}}}}\n")
    out = tmp_path / "s.png"
    argv = ["--config", str(cfg), "--weights", f"a={tmp_path / 'w.safetensors'}",
            f"b={tmp_path / 'w.safetensors'}", "--output", str(out)]
    assert compare.main(argv) == 0
    strip, _ = read_image(out)
    # 4 panels of 48 px (the image is under the crop) and 3 gaps of 4, under a 16 px label band
    assert strip.shape == (3, 16 + 40, 4 * 48 + 3 * 4)
    hr = read_image(tmp_path / "val" / "a.png")[0]
    np.testing.assert_allclose(strip[:, 16:, -48:], hr, atol=1 / 255)
    said = capsys.readouterr().out
    assert "bicubic" in said and "| a " in said and "| b " in said and "HR" in said
    before = out.read_bytes()
    assert compare.main(argv) == 1 and out.read_bytes() == before
    assert "not replaced" in capsys.readouterr().err
