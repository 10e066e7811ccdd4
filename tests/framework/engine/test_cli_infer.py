"""srgrad-infer and srgrad-eval at the edges: never over an input, never over an existing file without
--overwrite, outputs named and typed as asked, checked before any work, written atomically, memory
bounded by a tile; eval on one image, on given LR images, with a delta column and a CSV that never
replaces another's."""
import csv
import os
import tracemalloc

import numpy as np
import pytest
from PIL import Image

import models  # noqa: F401  registers the architectures
from framework.engine import build_model, load_model
from framework.engine.inference import upscale as inference
from framework.engine.commands.cli import eval_main, infer_main
from framework.io import image as image_io
from framework.weights import save_weights
from framework.nn import init
from tests.conftest import dead_pid, partial_name

SPEC = {"type": "FSRCNN", "d": 8, "s": 4, "m": 1}


@pytest.fixture
def weights(tmp_path):
    init.manual_seed(0)
    model = build_model(SPEC, scale=2)
    path = tmp_path / "net.safetensors"
    save_weights(path, model.state_dict(), model={**SPEC, "scale": 2}, scale=2)
    return path


def _png(path, h=10, w=12, channels=3, seed=0):
    rng = np.random.default_rng(seed)
    shape = (h, w) if channels == 1 else (h, w, channels)
    Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).save(path)
    return path


def infer(weights, *args):
    return infer_main(["--weights", str(weights), *map(str, args), "--no-progress"])


# -- never over an input ------------------------------------------------------------------------
def test_same_folder_without_a_suffix_is_refused_before_any_work(weights, tmp_path, capsys):
    """The independent check's case: --input DIR --output DIR replaced the originals."""
    src = tmp_path / "photos"
    src.mkdir()
    a, b = _png(src / "a.png"), _png(src / "b.png", seed=1)
    before = {p: p.read_bytes() for p in (a, b)}
    for extra in ([], ["--overwrite"]):
        assert infer(weights, "--input", src, "--output", src, "--suffix", "", *extra) == 2
        err = capsys.readouterr().err
        assert f"refusing to write {src / 'a.png'}: it is the input {src / 'a.png'} (the same " \
               f"file)" in err, err
    assert {p: p.read_bytes() for p in (a, b)} == before and sorted(os.listdir(src)) == \
        ["a.png", "b.png"]
    # with the default suffix the same folder is fine: photo.png -> photo_x2.png beside it
    assert infer(weights, "--input", src, "--output", src) == 0
    assert sorted(os.listdir(src)) == ["a.png", "a_x2.png", "b.png", "b_x2.png"]
    assert {p: p.read_bytes() for p in (a, b)} == before


def test_output_equal_to_the_input_file_or_a_link_to_it_is_refused(weights, tmp_path, capsys):
    src = _png(tmp_path / "a.png")
    link = tmp_path / "link.png"
    link.symlink_to(src)
    before = src.read_bytes()
    for out in (src, link, tmp_path / "sub" / ".." / "a.png"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        assert infer(weights, "--input", src, "--output", out, "--overwrite") == 2
        assert "it is the input" in capsys.readouterr().err
    assert src.read_bytes() == before


def test_case_insensitive_clash_is_caught_by_identity(weights, tmp_path, capsys, monkeypatch):
    """On a case-insensitive file system A.PNG and a.png are one file: the check compares files
    (device and inode), not names. Simulated here by making os.stat say so for the upper-case
    name."""
    src = _png(tmp_path / "a.png")
    out = tmp_path / "A.PNG"
    out.write_bytes(b"exists")  # on such a system it would be the input itself
    real = os.stat

    def stat(x, *args, **kw):
        if isinstance(x, (str, os.PathLike)):
            x = os.fspath(x).replace("A.PNG", "a.png")
        return real(x, *args, **kw)
    monkeypatch.setattr(os, "stat", stat)
    assert infer(weights, "--input", src, "--output", out, "--overwrite") == 2
    assert "it is the input" in capsys.readouterr().err


# -- existing outputs -----------------------------------------------------------------------------
def test_existing_outputs_are_skipped_or_need_overwrite(weights, tmp_path, capsys):
    src = tmp_path / "in"
    src.mkdir()
    _png(src / "a.png"), _png(src / "b.png", seed=1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "a_x2.png").write_bytes(b"precious")
    assert infer(weights, "--input", src, "--output", out) == 0
    err = capsys.readouterr().err
    assert f"skipped {src / 'a.png'}: {out / 'a_x2.png'} exists (--overwrite replaces it)" in err
    assert (out / "a_x2.png").read_bytes() == b"precious" and (out / "b_x2.png").exists()
    assert infer(weights, "--input", src, "--output", out, "--overwrite") == 0
    assert Image.open(out / "a_x2.png").size == (24, 20)
    # one file: an existing output is an error without --overwrite
    single = tmp_path / "single.png"
    single.write_bytes(b"precious")
    assert infer(weights, "--input", src / "a.png", "--output", single) == 2
    assert f"--output {single} exists; pass --overwrite to replace it" in capsys.readouterr().err
    assert single.read_bytes() == b"precious"


# -- names, formats and checks before any work ----------------------------------------------------
def test_suffix_and_ext(weights, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _png(src / "a.png"), _png(src / "g.png", channels=1)
    out = tmp_path / "out"
    assert infer(weights, "--input", src, "--output", out, "--suffix", "_sr{scale}x",
                 "--ext", "webp") == 0
    assert sorted(os.listdir(out)) == ["a_sr2x.webp", "g_sr2x.webp"]
    im = Image.open(out / "a_sr2x.webp")
    assert im.format == "WEBP" and im.size == (24, 20)
    # WebP reads back as an input too
    assert infer(weights, "--input", out / "a_sr2x.webp", "--output", tmp_path / "b.png") == 0
    assert Image.open(tmp_path / "b.png").size == (48, 40)


@pytest.mark.parametrize("args,match", [
    (["--output", "OUT/x.gif"], r"--output .*x\.gif: extension '\.gif' is not one srgrad writes"),
    (["--output", "FILE"], r"--output .*file\.txt is a file, not a folder"),  # folder mode
    (["--ext", "png", "--output", "RO"], r"--output .*ro is not writable"),
])
def test_bad_outputs_are_one_line_errors_before_any_work(weights, tmp_path, capsys, monkeypatch,
                                                         args, match):
    src = tmp_path / "in"
    src.mkdir()
    _png(src / "a.png")
    (tmp_path / "file.txt").write_text("I am a file")
    ro = tmp_path / "ro"
    ro.mkdir()
    real_touch = type(ro).touch
    monkeypatch.setattr(type(ro), "touch", lambda p, *a, **k: (_ for _ in ()).throw(
        PermissionError(13, "Permission denied")) if p.parent == ro else real_touch(p, *a, **k))
    ran = []
    monkeypatch.setattr(inference, "upscale_file", lambda *a, **k: ran.append(a))
    args = [a.replace("OUT", str(tmp_path / "out")).replace("FILE", str(tmp_path / "file.txt"))
            .replace("RO", str(ro)) for a in args]
    inp = src / "a.png" if args[1].endswith(".gif") else src
    assert infer(weights, "--input", inp, *args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    import re
    assert re.search(match, err, re.I), err
    assert not ran


def test_jpeg_cannot_take_alpha(weights, tmp_path, capsys):
    src = _png(tmp_path / "rgba.png", channels=4)
    assert infer(weights, "--input", src, "--output", tmp_path / "out.jpg") == 2
    assert "has an alpha channel, which JPEG cannot store" in capsys.readouterr().err


# -- atomic outputs -------------------------------------------------------------------------------
def test_an_interrupted_image_write_leaves_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "x.png"
    image_io.write_image(path, np.full((3, 8, 8), 0.5, np.float32))
    before = path.read_bytes()
    real = Image.Image.save

    def dying(self, fp, *a, **k):
        fp.write(b"\x89PNG half")
        raise KeyboardInterrupt  # e.g. kill while encoding
    monkeypatch.setattr(Image.Image, "save", dying)
    with pytest.raises(KeyboardInterrupt):
        image_io.write_image(path, np.zeros((3, 8, 8), np.float32))
    monkeypatch.setattr(Image.Image, "save", real)
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["x.png"]


def _old_temp_name_link(kind, src, out):
    """A symlink or hard link at `<output>.tmp` (the temporary name the writer once used) pointing
    to the input: another user's trap in a shared folder."""
    trap = out.parent / (out.name + ".tmp")
    if kind == "symlink":
        trap.symlink_to(src)
    else:
        os.link(src, trap)
    return trap


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_link_at_the_old_temp_name_never_redirects_the_write(weights, tmp_path, kind):
    src = _png(tmp_path / "in.png")
    before = src.read_bytes()
    out = tmp_path / "out.png"
    trap = _old_temp_name_link(kind, src, out)
    assert infer(weights, "--input", src, "--output", out) == 0
    assert src.read_bytes() == before  # the input is untouched...
    assert image_io.read_image(out)[0].shape == (3, 20, 24)  # ...and the output is the SR image
    assert trap.is_symlink() if kind == "symlink" else os.path.samefile(trap, src)


def test_an_input_named_like_the_old_temp_name_is_neither_consumed_nor_deleted(weights, tmp_path):
    src = tmp_path / "x.png.tmp"
    os.rename(_png(tmp_path / "made.png"), src)  # a PNG whatever its name says
    before = src.read_bytes()
    assert infer(weights, "--input", src, "--output", tmp_path / "x.png") == 0
    assert src.read_bytes() == before
    assert image_io.read_image(tmp_path / "x.png")[0].shape == (3, 20, 24)


def test_partial_files_of_killed_writes_in_the_output_folder_are_removed(weights, tmp_path):
    """Only those of dead processes, and never an input, whatever its name."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    _png(src / "a.png")
    dead = dead_pid()
    out.mkdir()
    partial = out / partial_name("a_x2.png", dead)
    partial.write_bytes(b"half a PNG")
    alive = out / partial_name("b_x2.png", os.getpid())
    alive.write_bytes(b"a write in progress")
    assert infer(weights, "--input", src, "--output", out) == 0
    assert not partial.exists() and alive.exists()
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["a_x2.png"]
    # an input named like a leftover, in the output folder itself: read, never removed
    odd = src / partial_name("c.png", dead)
    os.rename(src / "a.png", odd)
    assert infer(weights, "--input", odd, "--output", src / "c_x2.png") == 0
    assert odd.exists() and (src / "c_x2.png").exists()


# -- memory: tiled inference is bounded by a tile -------------------------------------------------
def test_tiled_upscale_file_allocates_no_full_size_float_image(weights, tmp_path):
    """A 360x480 RGB image x2 with 64-pixel tiles: numpy's peak allocation stays near the LR image +
    the 8-bit output buffer (+ Pillow's copy), far below one float32 HR image (8.3 MB), and the
    result equals untiled inference (overlap covers FSRCNN's receptive field)."""
    src = _png(tmp_path / "big.png", h=360, w=480)
    model, info = load_model(weights)
    inference.upscale_file(model, info, src, tmp_path / "warm.png", tile=64, overlap=8)  # compile
    tracemalloc.start()
    inference.upscale_file(model, info, src, tmp_path / "tiled.png", tile=64, overlap=8)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    lr_float = 360 * 480 * 3 * 4
    hr_uint8 = 720 * 960 * 3
    assert peak < lr_float + 2 * hr_uint8 + 2 * 2**20, peak / 2**20
    inference.upscale_file(model, info, src, tmp_path / "whole.png")
    tiled = np.asarray(Image.open(tmp_path / "tiled.png")).astype(int)
    whole = np.asarray(Image.open(tmp_path / "whole.png")).astype(int)
    # equal up to float rounding, which can move a value across a quantisation step
    assert np.abs(tiled - whole).max() <= 1 and (tiled != whole).mean() < 1e-3


# -- srgrad-eval ----------------------------------------------------------------------------------
def test_eval_single_image_paired_lr_and_csv_never_replaced(weights, tmp_path, capsys):
    hr = tmp_path / "hr"
    hr.mkdir()
    _png(hr / "0001.png", h=32, w=28, seed=3)
    _png(hr / "0002.png", h=32, w=28, seed=4)
    lq = tmp_path / "lq"
    lq.mkdir()
    for name in ("0001", "0002"):
        Image.open(hr / f"{name}.png").resize((14, 16), Image.BICUBIC).save(lq / f"{name}x2.png")
    results = tmp_path / "results"
    assert eval_main(["--no-save", "--weights", str(weights), "--input", str(hr / "0001.png"),
                      "--no-progress", "--results", str(results)]) == 0
    first = results / "net" / "metrics.csv"  # BasicSR's place: <results>/<name>/, the images' too
    rows = list(csv.DictReader(open(first)))
    assert [r["image"] for r in rows] == ["0001.png", "mean"]
    assert not list(weights.parent.glob("eval_*.csv"))  # no longer beside the weights
    assert eval_main(["--no-save", "--weights", str(weights), "--input", str(hr / "0001.png"),
                      "--no-progress", "--results", str(results)]) == 0
    assert (results / "net_2" / "metrics.csv").exists()  # the first one is kept
    assert list(csv.DictReader(open(first))) == rows
    out = capsys.readouterr().out
    assert f"results: {results / 'net_2'}/ (the scores in metrics.csv)" in out
    assert eval_main(["--weights", str(weights), "--input", str(hr / "0001.png"),
                      "--no-progress", "--results", str(results)]) == 0
    out = capsys.readouterr().out.splitlines()  # said once: one folder, both kinds of output
    assert [line for line in out if str(results) in line] == \
        [f"results: {results / 'net_3'}/ (the SR images in visualization/ and the scores in "
         f"metrics.csv)"]
    assert (results / "net_3" / "visualization" / "0001" / "0001_net.png").is_file()
    assert eval_main(["--no-save", "--weights", str(weights), "--input", str(hr), "--lq", str(lq),
                      "--csv", str(tmp_path / "paired.csv"), "--no-progress"]) == 2
    err = capsys.readouterr().err  # BasicSR's default template is the HR name; DIV2K's is named
    assert "The LR files there are named '{name}x{scale}' (0001 -> 0001x2): set filename_tmpl" in err
    assert eval_main(["--no-save", "--weights", str(weights), "--input", str(hr), "--lq", str(lq),
                      "--lq-template", "{name}x{scale}", "--csv", str(tmp_path / "paired.csv"),
                      "--no-progress"]) == 0
    assert "LR from" in capsys.readouterr().out
    paired = list(csv.DictReader(open(tmp_path / "paired.csv")))
    assert [r["image"] for r in paired] == ["0001.png", "0002.png", "mean"]
    # paired LR differ from imresize LR: the bicubic baseline differs too
    assert paired[0]["bicubic_psnr_y"] != rows[0]["bicubic_psnr_y"]


# -- --tta and --outscale -------------------------------------------------------------------------
def _quantised(path):
    """An output file as its (H, W, C) uint8/uint16 buffer (what write_quantised was given)."""
    img, meta = image_io.read_image(path)
    planes = img if meta["alpha"] is None else np.concatenate([img, meta["alpha"]])
    peak = 65535 if meta["bits"] == 16 else 255
    dtype = np.uint16 if meta["bits"] == 16 else np.uint8
    return np.rint(planes.astype(np.float64) * peak).astype(dtype).transpose(1, 2, 0)


@pytest.mark.parametrize("kind,outscale,mode,size", [
    ("rgba", "3", "bicubic", (30, 36)),      # enlarge past the model's x2; alpha follows
    ("rgb", "1.5", "lanczos", (15, 18)),     # shrink the x2 output, antialiased
    ("gray16", "2.6", "bilinear", (26, 31)),  # 16-bit stays 16-bit; floor(2.6 * 12) = 31
])
def test_outscale_resizes_the_quantised_sr_image(weights, tmp_path, kind, outscale, mode, size):
    src = tmp_path / f"{kind}.png"
    if kind == "gray16":
        ramp = np.linspace(0, 65535, 10 * 12).reshape(10, 12).astype(np.uint16)
        Image.fromarray(ramp).save(src)
    else:
        _png(src, channels=4 if kind == "rgba" else 3)
    assert infer(weights, "--input", src, "--output", tmp_path / "plain.png") == 0
    out = tmp_path / "out"
    out.mkdir()
    assert infer(weights, "--input", src, "--output", out, "--outscale", outscale,
                 "--outscale-mode", mode) == 0
    result = out / f"{kind}_x{outscale}.png"  # {scale} in the default suffix is the outscale
    got = _quantised(result)
    assert got.shape[:2] == size
    np.testing.assert_array_equal(got, inference.resize_quantised(
        _quantised(tmp_path / "plain.png"), size, mode))
    if kind == "gray16":
        assert Image.open(result).mode.startswith("I;16") and np.any(got % 257 != 0)
    if kind == "rgba":
        assert Image.open(result).mode == "RGBA"
    # the model's own scale is no resize at all
    assert infer(weights, "--input", src, "--output", tmp_path / "same.png", "--outscale", "2") == 0
    assert (tmp_path / "same.png").read_bytes() == (tmp_path / "plain.png").read_bytes()


@pytest.mark.parametrize("value,match", [
    ("0", "--outscale must be > 0, got 0.0"), ("-2", "--outscale must be > 0, got -2.0"),
    ("nan", "--outscale must be > 0, got nan"), ("inf", "--outscale must be a finite number > 0"),
    ("x3", "--outscale must be a number > 0, got 'x3'"),
    ("0.05", r"--outscale 0.05: .*a.png \(12x10\) would become 0x0 pixels"),
    ("3", r"--outscale 3: .*a.png \(12x10\) would become 36x30 = 1080 pixels, over the limit "
          r"of 1000 \(framework.io.image.MAX_PIXELS\)"),
])
def test_bad_outscale_is_a_one_line_error_before_any_work(weights, tmp_path, capsys, monkeypatch,
                                                          value, match):
    src = tmp_path / "in"
    src.mkdir()
    _png(src / "a.png")
    monkeypatch.setattr(image_io, "MAX_PIXELS", 1000)
    ran = []
    monkeypatch.setattr(inference, "upscale_file", lambda *a, **k: ran.append(a))
    assert infer(weights, "--input", src, "--output", tmp_path / "out", "--outscale", value) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    import re
    assert re.search("^error: " + match, err), err
    assert not ran and not list(tmp_path.glob("out/*"))


def test_tta_output_is_the_quantised_ensemble(weights, tmp_path):
    src = _png(tmp_path / "a.png", h=11, w=14)
    assert infer(weights, "--input", src, "--output", tmp_path / "tta.png", "--tta") == 0
    assert infer(weights, "--input", src, "--output", tmp_path / "tiled.png", "--tta", "--tile",
                 "6", "--tile-overlap", "10") == 0
    assert infer(weights, "--input", src, "--output", tmp_path / "plain.png") == 0
    model, info = load_model(weights)
    sr = inference.super_resolve(model, image_io.read_image(src)[0], 2, 3, self_ensemble=True)
    expected = np.rint(sr.astype(np.float64) * 255).transpose(1, 2, 0)
    got = _quantised(tmp_path / "tta.png")
    np.testing.assert_array_equal(got, expected)
    assert np.abs(_quantised(tmp_path / "tiled.png").astype(int) - got).max() <= 1
    assert np.abs(_quantised(tmp_path / "plain.png").astype(int) - got).max() > 2


def test_eval_tta_says_so_in_the_table_and_the_csv(weights, tmp_path, capsys):
    hr = _png(tmp_path / "0001.png", h=32, w=28, seed=3)
    for extra in ([], ["--tta"]):
        assert eval_main(["--no-save", "--weights", str(weights), "--input", str(hr), "--no-progress",
                          "--results", str(tmp_path / "r"), *extra]) == 0
    out = capsys.readouterr().out
    assert "no self-ensemble" in out and "self-ensemble x8 (--tta)" in out
    plain = list(csv.DictReader(open(tmp_path / "r" / "net" / "metrics.csv")))
    tta = list(csv.DictReader(open(tmp_path / "r" / "net_2" / "metrics.csv")))
    assert [r["tta"] for r in plain] == ["0", "0"] and [r["tta"] for r in tta] == ["1", "1"]
    assert tta[0]["psnr_y"] != plain[0]["psnr_y"]
    assert tta[0]["bicubic_psnr_y"] == plain[0]["bicubic_psnr_y"]


def test_eval_csv_follows_the_output_rules(weights, tmp_path, capsys):
    """Issue 26: --csv replaced any file silently, the image being evaluated or the weights file
    included. Now it refuses an input (also through a link, with or without --overwrite) and an
    existing file without --overwrite, before any work."""
    hr = tmp_path / "hr"
    hr.mkdir()
    img = _png(hr / "0001.png", h=32, w=28, seed=3)
    other = tmp_path / "notes.csv"
    other.write_text("mine\n")
    link = tmp_path / "link.csv"
    link.symlink_to(img)
    kept = {p: p.read_bytes() for p in (img, weights, other)}

    def run(csv_path, *extra):
        return eval_main(["--no-save", "--weights", str(weights), "--input", str(hr), "--csv", str(csv_path),
                          "--no-progress", *extra])
    for target, what in ((img, "input image"), (weights, "--weights file"), (link, "input image")):
        for extra in ([], ["--overwrite"]):
            assert run(target, *extra) == 2
            err = capsys.readouterr().err
            assert f"refusing to write --csv {target}: it is the {what}" in err, err
    assert run(other) == 2
    assert f"--csv {other} exists; pass --overwrite to replace it" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in (img, weights, other)} == kept and link.is_symlink()
    assert run(other, "--overwrite") == 0
    assert list(csv.DictReader(open(other)))[0]["image"] == "0001.png"


def test_eval_takes_any_registered_metric_and_names_columns_as_metrics_csv(weights, tmp_path,
                                                                           capsys, monkeypatch):
    """--metrics: a user's metric from an --import module beside psnr; columns <metric>_y /
    <metric>_rgb and bicubic_ ones as metrics.csv, the delta of psnr; an unknown name a one-line
    error naming the known ones."""
    (tmp_path / "my_metric.py").write_text(
        "from framework.registry import METRICS\n\n"
        "@METRICS.register('mean_abs')\n"
        "def mean_abs(sr, hr, crop_border, y_channel):\n"
        "    return float(abs(sr - hr).mean())\n"
        "mean_abs.higher_is_better = False\n")
    monkeypatch.chdir(tmp_path)
    img = _png(tmp_path / "0001.png", h=32, w=28, seed=3)
    out = tmp_path / "m.csv"
    assert eval_main(["--no-save", "--weights", str(weights), "--input", str(img), "--csv", str(out),
                      "--import", "my_metric", "--metrics", "mean_abs", "psnr", "--rgb",
                      "--no-progress"]) == 0
    rows = list(csv.DictReader(open(out)))
    assert list(rows[0]) == ["image", "mean_abs_rgb", "psnr_rgb", "bicubic_mean_abs_rgb",
                             "bicubic_psnr_rgb", "delta_psnr_rgb", "tta"]
    model, _ = load_model(weights)
    from framework.data import HRImageDataset
    item = HRImageDataset(img, 2).get(0)
    sr = inference.super_resolve(model, item["lq"], 2, 3)
    # mean_abs ignores crop_border: the whole image; psnr measured on RGB, cropped by the scale
    assert float(rows[0]["mean_abs_rgb"]) == pytest.approx(float(abs(sr - item["gt"]).mean()),
                                                           abs=1e-4)
    from framework.metrics import psnr
    assert float(rows[0]["psnr_rgb"]) == pytest.approx(psnr(sr, item["gt"], crop_border=2,
                                                            y_channel=False), abs=1e-4)
    assert eval_main(["--no-save", "--weights", str(weights), "--input", str(img), "--metrics", "nope",
                      "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--metrics" in err and "nope" in err and "psnr" in err
