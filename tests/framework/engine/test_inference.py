"""Inference: tiled == untiled, every image mode through srgrad-infer, srgrad-eval's table and CSV."""
import csv

import numpy as np
import pytest
from PIL import Image

import models  # noqa: F401  registers the architectures
from framework.engine import build_model, load_model, upscale
from framework.engine.commands.cli import eval_main, infer_main
from framework.weights import save_weights
from framework.nn import init

SPECS = {
    "FSRCNN": {"type": "FSRCNN", "d": 8, "s": 4, "m": 1},
    "UpsampleNet": {"type": "UpsampleNet", "num_feat": 4, "num_conv": 1, "num_refine": 1},
}


def tiny_model(spec):
    init.manual_seed(0)
    model = build_model(spec, scale=2)
    model.eval()
    return model


@pytest.mark.parametrize("name", sorted(SPECS))
def test_tiled_equals_untiled_when_overlap_covers_the_receptive_field(name):
    model = tiny_model(SPECS[name])
    lq = np.random.default_rng(1).random((3, 37, 45), dtype=np.float32)
    whole = upscale(model, lq)
    assert whole.shape == (3, 74, 90)
    tiled = upscale(model, lq, tile=16, overlap=10)
    np.testing.assert_allclose(tiled, whole, rtol=0, atol=1e-5)
    # without context the tile seams show: the equality above is not vacuous
    assert np.abs(upscale(model, lq, tile=16, overlap=0) - whole).max() > 1e-3


def test_small_tiles_run_as_batches_of_one_shape():
    """Tiles whose contexts share a shape run together, at most 2 per worker and BATCH_PIXELS
    pixels a batch; every tile exactly once (issue 28: one small tile per call left a core idle)."""
    from framework.engine.inference.upscale import tile_batches, tile_boxes
    boxes = tile_boxes(80, 80, 16, 4)  # contexts 20 px at the borders, 24 px inside
    batches = tile_batches(boxes, workers=2)
    assert sorted(b for batch in batches for b in batch) == sorted(boxes)
    assert all(len({(e[1] - e[0], e[3] - e[2]) for _, e in batch}) == 1 for batch in batches)
    assert sorted(map(len, batches)) == [1, 2, 2, 4, 4, 4, 4, 4]  # 4 corners, 6 + 6 edges, 9 inside
    big = tile_boxes(700, 700, 300, 16)  # a 332 px context alone is over BATCH_PIXELS
    assert [len(b) for b in tile_batches(big, workers=2)] == [1] * 9


@pytest.mark.parametrize("spec", [SPECS["UpsampleNet"], {"type": "SRVGGNetCompact", "num_feat": 16,
                                                          "num_conv": 2, "act_type": "prelu"}],
                         ids=["UpsampleNet-im2col", "SRVGGNetCompact-direct"])
@pytest.mark.parametrize("tta", [False, True], ids=["plain", "tta"])
def test_batched_tiles_equal_tiles_run_one_by_one_exactly(spec, tta):
    """Batched tiles give exactly the output of each tile run alone (what srgrad-infer --tile did
    before tile_batches, issue 28): a conv does each image's arithmetic in one fixed order whatever
    the batch, and picks its route (im2col or direct) from shapes, never from the batch."""
    from framework import nn
    from framework.engine.inference.upscale import model_fn, tile_boxes

    class Recorder(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.batches = inner, []

        def forward(self, x):
            self.batches.append(x.shape[0])
            return self.inner(x)

    model = Recorder(tiny_model(spec))
    lq = np.random.default_rng(1).random((3, 50, 70), dtype=np.float32)
    tiled = upscale(model, lq, tile=16, overlap=5, self_ensemble=tta)
    assert max(model.batches) > 1 and sum(model.batches) == 5 * 4 * (8 if tta else 1)
    alone = model_fn(model.inner, tta)
    expected = np.empty_like(tiled)
    for (y0, y1, x0, x1), (ey0, ey1, ex0, ex1) in tile_boxes(50, 70, 16, 5):
        one = alone(np.ascontiguousarray(lq[None, :, ey0:ey1, ex0:ex1]))[0]
        expected[:, 2 * y0:2 * y1, 2 * x0:2 * x1] = \
            one[:, 2 * (y0 - ey0):2 * (y1 - ey0), 2 * (x0 - ex0):2 * (x1 - ex0)]
    np.testing.assert_array_equal(tiled, expected)


def test_tile_arguments_are_checked():
    model = tiny_model(SPECS["FSRCNN"])
    lq = np.zeros((3, 8, 8), np.float32)
    with pytest.raises(ValueError, match="tile must be >= 1, got 0"):
        upscale(model, lq, tile=0)
    with pytest.raises(ValueError, match="tile overlap must be >= 0, got -1"):
        upscale(model, lq, tile=4, overlap=-1)


@pytest.fixture
def weights(tmp_path):
    spec = {**SPECS["FSRCNN"], "scale": 2}
    path = tmp_path / "net.safetensors"
    save_weights(path, tiny_model(spec).state_dict(), model=spec, scale=2, dtype="float32")
    return path


def _save(path, array, mode):
    Image.fromarray(array, mode=mode).save(path) if mode else Image.fromarray(array).save(path)


def test_infer_rgba_keeps_alpha_and_size(weights, tmp_path):
    rng = np.random.default_rng(2)
    rgba = rng.integers(0, 256, (14, 20, 4), dtype=np.uint8)
    rgba[..., 3] = np.linspace(0, 255, 20, dtype=np.uint8)[None, :]
    _save(tmp_path / "in.png", rgba, None)
    assert infer_main(["--weights", str(weights), "--input", str(tmp_path / "in.png"),
                       "--output", str(tmp_path / "out.png"), "--no-progress"]) == 0
    out = Image.open(tmp_path / "out.png")
    assert out.mode == "RGBA" and out.size == (40, 28)
    alpha = np.asarray(out)[..., 3].astype(float)
    assert alpha[:, 0].mean() < 20 and alpha[:, -1].mean() > 235  # the ramp survived upscaling


def test_infer_16bit_gray_gives_16bit_gray(weights, tmp_path):
    ramp = np.linspace(0, 65535, 18 * 22).reshape(18, 22).astype(np.uint16)
    Image.fromarray(ramp).save(tmp_path / "g16.png")
    assert Image.open(tmp_path / "g16.png").mode.startswith("I;16")
    assert infer_main(["--weights", str(weights), "--input", str(tmp_path / "g16.png"),
                       "--output", str(tmp_path / "o16.png"), "--no-progress", "--tile", "8",
                       "--tile-overlap", "10"]) == 0
    out = Image.open(tmp_path / "o16.png")
    assert out.mode.startswith("I;16") and out.size == (44, 36)
    values = np.asarray(out, dtype=np.int64)
    assert values.max() > 255 and np.any(values % 257 != 0)  # real 16-bit values, not 8-bit * 257


@pytest.mark.parametrize("spec", [
    {"type": "SwinIR", "in_chans": 1, "upsampler": "pixelshuffledirect", "img_size": 8, "embed_dim": 8,
     "depths": [1], "num_heads": [2], "window_size": 4, "mlp_ratio": 1},
    {"type": "RealCUGAN", "in_channels": 1, "out_channels": 1},
    {"type": "RealPLKSR", "in_ch": 1, "out_ch": 1, "dim": 8, "n_blocks": 1, "kernel_size": 5},
    {"type": "MoSR", "in_ch": 1, "out_ch": 1, "dim": 8, "n_block": 1}])
def test_a_gray_model_of_any_keyword_naming_gets_a_gray_image(spec, tmp_path):
    """A 1-channel model whatever its keyword (num_in_ch, SwinIR's in_chans, Real-CUGAN's
    in_channels, MoSR's and RealPLKSR's in_ch; the model's card says): an RGB input goes through it as Y
    (was: fed as 3 channels, a conv error), by srgrad-infer and srgrad-eval."""
    path = tmp_path / "gray.safetensors"
    save_weights(path, tiny_model({**spec, "scale": 2}).state_dict(), model={**spec, "scale": 2}, scale=2,
                 dtype="float32")
    rgb = np.random.default_rng(0).integers(0, 256, (9, 10, 3), dtype=np.uint8)
    _save(tmp_path / "in.png", rgb, None)
    assert infer_main(["--weights", str(path), "--input", str(tmp_path / "in.png"),
                       "--output", str(tmp_path / "out.png"), "--no-progress"]) == 0
    assert Image.open(tmp_path / "out.png").size == (20, 18)
    hr = tmp_path / "hr"
    hr.mkdir()
    _save(hr / "a.png", np.random.default_rng(1).integers(0, 256, (30, 32, 3), dtype=np.uint8), None)
    assert eval_main(["--no-save", "--weights", str(path), "--input", str(hr), "--no-progress",
                      "--csv", str(tmp_path / "eval.csv")]) == 0
    assert "mean" in (tmp_path / "eval.csv").read_text()


def test_infer_16bit_rgb_png_stays_16bit_and_jpg_falls_back_to_8(weights, tmp_path):
    from framework.io.image import read_image, write_image
    ramp = np.linspace(0, 1, 3 * 12 * 16).reshape(3, 12, 16)
    write_image(tmp_path / "rgb16.png", ramp, bits=16)
    for name, bits in (("o16.png", 16), ("o8.jpg", 8)):
        assert infer_main(["--weights", str(weights), "--input", str(tmp_path / "rgb16.png"),
                           "--output", str(tmp_path / name), "--no-progress"]) == 0
        img, meta = read_image(tmp_path / name)
        assert img.shape == (3, 24, 32) and meta["bits"] == bits
    q = np.rint(read_image(tmp_path / "o16.png")[0] * 65535).astype(np.int64)
    assert np.any(q % 257 != 0)  # real 16-bit values, not 8-bit * 257


def test_infer_folder_of_mixed_modes(weights, tmp_path):
    rng = np.random.default_rng(3)
    src = tmp_path / "in"
    src.mkdir()
    _save(src / "gray.png", rng.integers(0, 256, (10, 12), dtype=np.uint8), None)
    _save(src / "rgb.jpg", rng.integers(0, 256, (10, 12, 3), dtype=np.uint8), None)
    _save(src / "rgb.bmp", rng.integers(0, 256, (9, 7, 3), dtype=np.uint8), None)
    assert infer_main(["--weights", str(weights), "--input", str(src), "--output",
                       str(tmp_path / "out"), "--no-progress"]) == 0
    assert Image.open(tmp_path / "out" / "gray_x2.png").mode == "L"
    assert Image.open(tmp_path / "out" / "gray_x2.png").size == (24, 20)
    assert Image.open(tmp_path / "out" / "rgb_x2.jpg").mode == "RGB"
    assert Image.open(tmp_path / "out" / "rgb_x2.bmp").size == (14, 18)


def test_weights_without_spec_need_a_model(tmp_path, capsys):
    bare = tmp_path / "bare.safetensors"
    save_weights(bare, tiny_model(SPECS["FSRCNN"]).state_dict())
    img = tmp_path / "x.png"
    _save(img, np.zeros((8, 8, 3), np.uint8), None)
    argv = ["--weights", str(bare), "--input", str(img), "--output", str(tmp_path / "y.png"),
            "--no-progress"]
    # FSRCNN's weights fix its sizes but not its scale (the deconvolution's stride): asked for
    assert infer_main(argv) == 1
    err = capsys.readouterr().err
    assert "carries no model spec and detect: the state_dict is a FSRCNN(" in err
    assert "do not fix scale" in err and "pass --scale S" in err, err
    assert infer_main(argv + ["--scale", "2"]) == 0
    assert "detected FSRCNN(" in capsys.readouterr().err and "d=8" in err
    assert Image.open(tmp_path / "y.png").size == (16, 16)
    assert infer_main(argv + ["--model", "FSRCNN", "--scale", "2", "--model-arg", "d=8",
                              "--model-arg", "s=4", "--model-arg", "m=1", "--overwrite"]) == 0
    assert infer_main(argv + ["--model", "FSRCNN", "--scale", "2", "--overwrite"]) == 1
    assert "shape mismatches" in capsys.readouterr().err


def test_scale_disagreeing_with_the_weights_is_an_error(weights, tmp_path, capsys):
    img = tmp_path / "x.png"
    _save(img, np.zeros((8, 8, 3), np.uint8), None)
    assert infer_main(["--weights", str(weights), "--input", str(img), "--output",
                       str(tmp_path / "y.png"), "--scale", "3", "--no-progress"]) == 1
    assert "the model is x2, --scale 3 disagrees" in capsys.readouterr().err


def test_evaluate_prints_table_and_writes_csv(weights, tmp_path, capsys):
    from framework import functional as F
    from framework import metrics as M
    from framework.engine import bicubic
    from framework.io.image import read_image
    from framework.tensor import Tensor
    hr_dir = tmp_path / "hr"
    hr_dir.mkdir()
    rng = np.random.default_rng(4)
    for name in ("a.png", "b.png"):
        _save(hr_dir / name, rng.integers(0, 256, (33, 30, 3), dtype=np.uint8), None)
    out_csv = tmp_path / "eval.csv"
    assert eval_main(["--no-save", "--weights", str(weights), "--input", str(hr_dir), "--scale", "2",
                      "--csv", str(out_csv), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "x2, Y channel, crop_border=2, LR made by MATLAB imresize, bicubic = MATLAB imresize" \
        in text and "mean" in text
    with open(out_csv) as fh:
        rows = list(csv.DictReader(fh))
    assert [r["image"] for r in rows] == ["a.png", "b.png", "mean"]
    hr, _ = read_image(hr_dir / "a.png")
    hr = np.ascontiguousarray(hr[:, :32, :30])  # mod-cropped to the scale
    lq = F.imresize(Tensor(hr[None]), scale_factor=0.5).data[0]
    lq = np.round(np.clip(lq, 0, 1) * 255) / 255  # 8-bit LR, as validation during training
    expected = M.psnr(bicubic(lq, 2), hr, crop_border=2)
    assert float(rows[0]["bicubic_psnr_y"]) == pytest.approx(expected, abs=1e-4)
    mean = (float(rows[0]["psnr_y"]) + float(rows[1]["psnr_y"])) / 2
    assert float(rows[2]["psnr_y"]) == pytest.approx(mean, abs=1e-3)
    for r in rows:  # the delta-vs-bicubic column
        assert float(r["delta_psnr_y"]) == pytest.approx(float(r["psnr_y"]) -
                                                         float(r["bicubic_psnr_y"]), abs=2e-4)


def test_bicubic_baselines():
    from framework import functional as F
    from framework.engine import bicubic
    from framework.tensor import Tensor
    lq = np.random.default_rng(5).random((3, 9, 7), dtype=np.float32)
    ref = F.interpolate(Tensor(lq[None]), scale_factor=2, mode="bicubic", align_corners=False)
    np.testing.assert_array_equal(bicubic(lq, 2, "interpolate"), np.clip(ref.data[0], 0, 1))
    matlab = bicubic(lq, 2, "imresize")
    assert matlab.shape == (3, 18, 14) and np.abs(matlab - bicubic(lq, 2, "interpolate")).max() > 1e-4
    with pytest.raises(ValueError, match=r"bicubic: method: unknown baseline 'cubic'.* Known: imresize, interpolate"):
        bicubic(lq, 2, "cubic")
