"""`--tile auto` (issue 44.2): the tile is the largest whose run fits a memory budget, measured from
the model's own activations; a run stays under the budget (tracemalloc) and equals an explicit tile
of the same size; a 12 MP image with a SwinIR-M-size model is planned under the budget."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from framework.engine.inference import autotile
from framework.engine.inference.autotile import parse_memory, plan_tile
from framework.engine.inference.upscale import upscale_file
from framework.io.image import read_image, write_image
from tests.models.cases import build


@pytest.mark.parametrize("text,want", [("300000", 300000), ("512M", 512 << 20), ("1.5G", 3 << 29),
                                       ("4GiB", 4 << 30), (" 64 kb ", 64 << 10), ("2t", 2 << 40)])
def test_parse_memory(text, want):
    assert parse_memory(text) == want


@pytest.mark.parametrize("text", ["", "lots", "-1G", "0", "4 GB RAM", "nanG"])
def test_parse_memory_refuses_with_one_line(text):
    with pytest.raises(ValueError, match=r"^--max-memory must be"):
        parse_memory(text)


def test_default_budget_is_half_of_memavailable(tmp_path, monkeypatch):
    fake = tmp_path / "meminfo"
    fake.write_text("MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\n")
    assert autotile.available_memory(str(fake)) == 8000000 * 1024
    assert autotile.available_memory(str(tmp_path / "none")) is None
    monkeypatch.setattr(autotile, "available_memory", lambda: 8000000 * 1024)
    assert autotile.default_budget() == 4000000 * 1024


# SwinIR-M x4 (embed 180, 6 x 6 blocks, window 8): measured by autotile.measure, 4.49 KiB per LR
# pixel + 18 MiB (measured once on two probe images, 26 s: too slow for the suite).
SWINIR_M = (18 * 2 ** 20, 4.49 * 1024)


def test_a_12_megapixel_image_with_a_swinir_size_model_is_planned_under_the_budget():
    h, w, budget = 3000, 4000, 8 << 30
    fixed = 3 * h * w * 4 + 3 * h * 4 * w * 4  # float LR planes + the 8-bit x4 output
    whole = fixed + SWINIR_M[0] + SWINIR_M[1] * h * w
    assert whole > 6 * budget  # untiled it needs ~50 GiB (the issue: 64 GB and swap)
    plan = plan_tile((h, w), 16, budget, fixed, *SWINIR_M, multiple=8, workers=2)
    assert plan.tile is not None and plan.peak <= budget
    assert (plan.tile + 32) % 8 == 0  # context a multiple of the window: no padding wasted
    # the next larger context would not fit even alone: the largest tile is chosen
    ctx = plan.tile + 32 + 8
    assert fixed + SWINIR_M[0] + SWINIR_M[1] * ctx * ctx > budget
    n = plan.batch or autotile.batch_tiles(ctx - 8, ctx - 8, 2)
    assert plan.peak == int(fixed + SWINIR_M[0] + SWINIR_M[1] * (ctx - 8) ** 2 * n)
    with pytest.raises(ValueError, match=r"--max-memory 200\.0 MiB: the image's own buffers need"):
        plan_tile((h, w), 16, 200 << 20, fixed, *SWINIR_M, multiple=8)
    with pytest.raises(ValueError, match=r"even one tile of 8 px with its 16 px of context needs"):
        plan_tile((h, w), 16, fixed + (1 << 20), fixed, *SWINIR_M, multiple=8)


@pytest.fixture
def swinir():
    model, spec = build("SwinIR", 2, 3, small=True)
    model.eval()
    return model, {"model": spec, "scale": 2}


def test_auto_tile_run_stays_under_the_budget_and_equals_the_explicit_tile(tmp_path, swinir):
    """A scaled case: a 96x80 image and a budget of a few MiB, half of what its whole run needs."""
    model, info = swinir
    src = tmp_path / "lr.png"
    write_image(src, np.random.default_rng(0).uniform(0, 1, (3, 80, 96)).astype(np.float32))
    upscale_file(model, info, src, tmp_path / "warm.png", 16, 4)  # kernels compiled at its batches
    said = []
    upscale_file(model, info, src, tmp_path / "whole.png", "auto", 4, max_memory=1 << 30,
                 say=said.append)  # fits: the whole image, and the model measured
    assert not said
    (_, overhead, per_pixel), = autotile._MEASURED.values()
    fixed = 3 * 80 * 96 * 4 + 3 * 160 * 192
    budget = int(fixed + overhead + per_pixel * 80 * 96) // 2
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        upscale_file(model, info, src, tmp_path / "auto.png", "auto", 4, max_memory=budget,
                     say=said.append)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= budget, (peak, budget)
    tile = int(said[0].split("tiles of ")[1].split(" px")[0])
    assert 8 <= tile < 80 and (tile + 8) % 4 == 0
    upscale_file(model, info, src, tmp_path / "explicit.png", tile, 4)
    np.testing.assert_array_equal(read_image(tmp_path / "auto.png")[0],
                                  read_image(tmp_path / "explicit.png")[0])


def test_an_image_that_fits_runs_whole(tmp_path, swinir):
    model, info = swinir
    src = tmp_path / "lr.png"
    write_image(src, np.random.default_rng(1).uniform(0, 1, (3, 70, 90)).astype(np.float32))
    said = []
    upscale_file(model, info, src, tmp_path / "auto.png", "auto", 4, max_memory=1 << 30,
                 say=said.append)
    upscale_file(model, info, src, tmp_path / "whole.png", None, 4)
    assert not said
    np.testing.assert_array_equal(read_image(tmp_path / "auto.png")[0],
                                  read_image(tmp_path / "whole.png")[0])


def test_srgrad_infer_tiles_by_default_under_max_memory(tmp_path, capsys):
    """The command: no --tile is --tile auto; --max-memory sets the budget (the plan is printed)
    and the image equals --tile with the printed size; a bad --max-memory is one line, exit 2."""
    from framework.engine import build_model
    from framework.engine.commands.cli import eval_main, infer_main
    from framework.nn import init
    from framework.weights import save_weights
    spec = {"type": "FSRCNN", "d": 8, "s": 4, "m": 1}
    init.manual_seed(0)
    weights = tmp_path / "net.safetensors"
    save_weights(weights, build_model(spec, scale=2).state_dict(), model={**spec, "scale": 2},
                 scale=2)
    src = tmp_path / "lr.png"
    write_image(src, np.random.default_rng(2).uniform(0, 1, (3, 150, 170)).astype(np.float32))
    run = (lambda *a: infer_main(["--weights", str(weights), "-i", str(src), "--no-progress",
                                  *map(str, a)]))
    assert run("-o", tmp_path / "auto.png", "--max-memory", "4M") == 0
    out = capsys.readouterr().out
    tile = int(out.split("tiles of ")[1].split(" px")[0])
    assert run("-o", tmp_path / "fixed.png", "-t", tile) == 0
    np.testing.assert_array_equal(read_image(tmp_path / "auto.png")[0],
                                  read_image(tmp_path / "fixed.png")[0])
    assert run("-o", tmp_path / "x.png", "--max-memory", "lots") == 2
    assert capsys.readouterr().err.strip().endswith("--max-memory must be a size such as 4G, "
                                                    "512M or a number of bytes, got 'lots'")
    with pytest.raises(SystemExit):
        eval_main(["--weights", str(weights), "--input", str(src), "-t", "auto"])
    assert "auto is srgrad-infer's" in capsys.readouterr().err


@pytest.mark.parametrize("name,kw,want", [
    ("RealCUGAN", {}, (2, 32)), ("RealCUGAN", {"fast": True}, (4, 40)), ("SAFMN", {}, (8, 1)),
    ("DAT", {}, (4, 1)), ("SwinIR", {}, (4, 1)), ("OmniSR", {}, (4, 16)), ("EDSR", {}, (1, 1))])
def test_size_rules_are_the_models_padding(name, kw, want):
    """The multiple and minimum each model pads an input up to (its window, spandrel's
    requirements), from its card: the tile's context is a multiple of the first and at least the
    second."""
    from framework.engine.inference.upscale import size_rules
    from tests.models.cases import spec_of
    spec = spec_of(name, 2, 3, small=True, **kw)
    assert size_rules({"model": spec, "scale": 2}) == want
