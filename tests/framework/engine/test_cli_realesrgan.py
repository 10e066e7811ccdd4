"""srgrad-infer with Real-ESRGAN's inference_realesrgan.py habits (issue 28.4): the short flags,
--tile_pad, -t 0, --suffix joined with "_", an RGBA image in a --ext jpg folder written as PNG,
--fp32 (a no-op, said once), --face_enhance (refused), --pre_pad, --alpha_upsampler realesrgan,
-o as a folder to make; srgrad's own flags keep working."""
import os

import numpy as np
import pytest
from PIL import Image

import models  # noqa: F401  registers the architectures
from framework.engine import build_model
from framework.engine.commands.cli import infer_main
from framework.engine.inference.upscale import model_fn, upscale
from framework.io.image import quantise_into, read_image
from framework.nn import init
from framework.weights import save_weights
from tests.framework.engine.test_cli_infer import _png

SPEC = {"type": "SRVGGNetCompact", "num_feat": 8, "num_conv": 2, "scale": 2}


@pytest.fixture
def model():
    init.manual_seed(0)
    return build_model(SPEC).eval()


@pytest.fixture
def weights(tmp_path, model):
    path = tmp_path / "net.safetensors"
    save_weights(path, model.state_dict(), model=SPEC, scale=2)
    return path


def run(weights, *args):
    return infer_main(["--weights", str(weights), *map(str, args), "--no-progress"])


def _quantised(planes):
    out = np.empty(planes.shape[1:] + planes.shape[:1], np.uint8)
    quantise_into(out, np.clip(planes, 0, 1), 8)
    return out


def test_short_flags_and_tile_pad_are_the_long_ones(weights, tmp_path):
    src = _png(tmp_path / "a.png", 20, 23)
    assert run(weights, "-i", src, "-o", tmp_path / "short.png", "-t", "8", "--tile_pad", "3",
               "-s", "3") == 0
    assert run(weights, "--input", src, "--output", tmp_path / "long.png", "--tile", "8",
               "--tile-overlap", "3", "--outscale", "3") == 0
    short, long_ = (np.asarray(Image.open(tmp_path / n)) for n in ("short.png", "long.png"))
    assert short.shape == (60, 69, 3)
    np.testing.assert_array_equal(short, long_)
    # -t 0 is no tiling, as Real-ESRGAN's
    assert run(weights, "-i", src, "-o", tmp_path / "t0.png", "-t", "0") == 0
    assert run(weights, "-i", src, "-o", tmp_path / "whole.png") == 0
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "t0.png")),
                                  np.asarray(Image.open(tmp_path / "whole.png")))


def test_suffix_is_joined_with_an_underscore_as_realesrgan(weights, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _png(src / "0014.png")
    out = tmp_path / "out"
    assert run(weights, "--input", src, "--output", out, "--suffix", "out") == 0
    assert run(weights, "--input", src, "--output", out, "--suffix", "_x{scale}") == 0
    assert run(weights, "--input", src, "--output", out, "--suffix=-sr") == 0
    assert sorted(os.listdir(out)) == ["0014-sr.png", "0014_out.png", "0014_x2.png"]


def test_an_rgba_image_in_a_jpg_folder_is_written_as_png(weights, tmp_path, capsys):
    src = tmp_path / "in"
    src.mkdir()
    _png(src / "rgb.png")
    _png(src / "logo.png", channels=4)
    out = tmp_path / "out"
    assert run(weights, "--input", src, "--output", out, "--ext", "jpg") == 0
    assert sorted(os.listdir(out)) == ["logo_x2.png", "rgb_x2.jpg"]
    assert Image.open(out / "logo_x2.png").mode == "RGBA"
    assert "logo.png has an alpha channel, which JPEG cannot store: writing" in \
        capsys.readouterr().err


def test_an_output_without_extension_is_a_folder_to_make(weights, tmp_path):
    src = _png(tmp_path / "a.png")
    assert run(weights, "-i", src, "-o", tmp_path / "results", "--suffix", "out") == 0
    assert os.listdir(tmp_path / "results") == ["a_out.png"]


def test_fp32_is_said_once_face_enhance_is_refused_gpu_is_ignored(weights, tmp_path, capsys):
    src = tmp_path / "in"
    src.mkdir()
    _png(src / "a.png"), _png(src / "b.png", seed=1)
    assert run(weights, "-i", src, "-o", tmp_path / "out", "--fp32", "-g", "0") == 0
    err = capsys.readouterr().err
    assert err.count("note: --fp32 changes nothing: srgrad computes in float32 already") == 1
    assert "note: --gpu-id 0 ignored: srgrad runs on the CPU" in err
    assert run(weights, "-i", src, "-o", tmp_path / "face", "--face_enhance") == 2
    assert "--face_enhance is not available: face restoration needs GFPGAN, which is not part " \
        "of srgrad" in capsys.readouterr().err
    assert not (tmp_path / "face").exists()


def test_a_model_is_needed(tmp_path, capsys):
    src = _png(tmp_path / "a.png")
    assert infer_main(["-i", str(src), "-o", str(tmp_path / "b.png")]) == 2
    assert "give --weights FILE or -n NAME" in capsys.readouterr().err


def test_pre_pad_reflects_then_crops(weights, model, tmp_path, capsys):
    src = _png(tmp_path / "a.png", 12, 15)
    assert run(weights, "-i", src, "-o", tmp_path / "p.png", "--pre_pad", "4") == 0
    lq = read_image(src)[0]
    padded = np.pad(lq, ((0, 0), (0, 4), (0, 4)), mode="reflect")
    expected = _quantised(upscale(model, padded)[:, :24, :30])
    got = np.asarray(Image.open(tmp_path / "p.png"))
    np.testing.assert_array_equal(got, expected)
    assert not np.array_equal(got, _quantised(upscale(model, lq)))  # the border did change
    assert run(weights, "-i", src, "-o", tmp_path / "q.png", "--pre_pad", "12") == 1
    assert "--pre_pad 12 must be smaller than the image (15x12)" in capsys.readouterr().err


def test_alpha_by_the_model_as_realesrgan(weights, model, tmp_path):
    src = _png(tmp_path / "a.png", 10, 9, channels=4)
    assert run(weights, "-i", src, "-o", tmp_path / "m.png", "--alpha_upsampler", "realesrgan") == 0
    assert run(weights, "-i", src, "-o", tmp_path / "b.png") == 0  # default: bicubic
    alpha = read_image(src)[1]["alpha"]
    sr = np.clip(model_fn(model)(np.repeat(alpha, 3, axis=0)[None])[0], 0, 1)
    gray = sr[0:1] * 0.299 + sr[1:2] * 0.587 + sr[2:3] * 0.114  # OpenCV's RGB2GRAY
    got = np.asarray(Image.open(tmp_path / "m.png"))[..., 3]
    np.testing.assert_array_equal(got, _quantised(gray)[..., 0])
    assert not np.array_equal(got, np.asarray(Image.open(tmp_path / "b.png"))[..., 3])
