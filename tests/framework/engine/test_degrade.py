"""srgrad-degrade end to end on two tiny HR images: the files and their sizes, the samples equal to
what BatchLoader / RealESRGANDataset.get give for the same (seed, position), the CSV of draws,
determinism, one-file input, and the refusals (exit 2, nothing written, inputs untouched)."""
import csv
import re
import textwrap

import numpy as np
import pytest
from PIL import Image

from framework.data import BatchLoader, RealESRGANDataset
from framework.data.realesrgan import TRACE_KEYS
from framework.engine.commands.degrade import main
from tests.conftest import partial_name, smooth_image

SEED, BATCH = 3, 2
DATA = dict(scale=2, gt_size=16, crop_pad_size=32)
TRAIN = "{type: RealESRGANDataset, root: nowhere, gt_size: 16, crop_pad_size: 32}"


@pytest.fixture(scope="module")
def hr(tmp_path_factory):
    """Two HR images: 40x36 (cropped to 32) and 28x30 (reflect-padded to 32)."""
    root = tmp_path_factory.mktemp("hr")
    rng = np.random.default_rng(0)
    Image.fromarray(smooth_image(rng, 36, 40)).save(root / "a.png")
    Image.fromarray(smooth_image(rng, 30, 28)).save(root / "b.png")
    return root


def _config(path, train=TRAIN, scale=2):
    path.write_text(textwrap.dedent(f"""\
        name: look
        scale: {scale}
        seed: {SEED}
        model: {{type: FSRCNN, d: 8, s: 4, m: 1}}
        datasets:
          train: {train}
        train:
          total_iters: 10
          batch_size: {BATCH}
          optimizer: {{type: Adam, lr: 1e-3}}
        """))
    return path


@pytest.fixture(scope="module")
def usm_config(tmp_path_factory):
    return _config(tmp_path_factory.mktemp("cfg") / "realesr.yaml",
                   TRAIN.replace("}", ", gt_usm: true}"))


def _read(path):
    return np.asarray(Image.open(path), np.float64).transpose(2, 0, 1)


def _run(*argv):
    return main([*map(str, argv), "--no-progress"])


def test_samples_are_the_trainers(hr, usm_config, tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--config", usm_config, "--input", hr, "--output", out, "--count", 3, "--size",
                "train") == 0
    assert "3 sample(s) of 2 image(s), seed 3" in capsys.readouterr().out
    ds = RealESRGANDataset(hr, gt_usm=True, **DATA)
    loader = BatchLoader(ds, BATCH, seed=SEED)
    batches = [loader.get_batch(0), loader.get_batch(1)]
    rows = list(csv.DictReader(open(out / "degradations.csv", newline="")))
    assert [r["sample"] for r in rows] == ["0", "1", "2"]
    assert list(rows[0]) == ["sample", "iteration", "row", "image", *TRACE_KEYS]
    files = {"degradations.csv"}
    for k, row in enumerate(rows):
        batch, j = batches[k // BATCH], k % BATCH
        name = batch["names"][j]
        assert (row["image"], row["iteration"], row["row"]) == (name, str(k // BATCH), str(j))
        stem = name[:-4]
        lq, gt, usm = (_read(out / f"{stem}_{k}_{kind}.png") for kind in ("lq", "gt", "gt_usm"))
        files |= {f"{stem}_{k}_{kind}.png" for kind in ("lq", "gt", "gt_usm")}
        assert lq.shape == (3, 8, 8) and gt.shape == usm.shape == (3, 16, 16)
        np.testing.assert_array_equal(lq, batch["lq"][j] * 255)  # 8-bit levels: exact
        np.testing.assert_array_equal(gt, batch["gt"][j] * 255)
        np.testing.assert_array_equal(usm, np.round(np.clip(batch["gt_usm"][j], 0, 1) * 255))
    assert {p.name for p in out.iterdir()} == files
    # sample 2 opens epoch 1: the dataset's get() with the loader's generator for (seed, 1, 0)
    trace = {}
    index = int(loader.order(1)[0])
    sample = ds.get(index, np.random.default_rng([SEED, 1, 0]), trace=trace)
    stem = ds.names[index][:-4]
    np.testing.assert_array_equal(_read(out / f"{stem}_2_lq.png"), sample["lq"] * 255)
    assert rows[2]["kernel1"] == trace["kernel1"] and rows[2]["kernel1"] != ""
    assert float(rows[2]["jpeg1_quality"]) == pytest.approx(trace["jpeg1_quality"], rel=1e-5)
    assert float(rows[2]["noise2_level"]) == pytest.approx(trace["noise2_level"], rel=1e-5)
    assert rows[2]["noise1_gray"] == str(trace["noise1_gray"]).lower()


def test_same_seed_same_bytes_other_seed_other_bytes(hr, tmp_path):
    config = _config(tmp_path / "c.yaml")
    outs = [tmp_path / name for name in ("x", "y", "z")]
    assert _run("--config", config, "--input", hr, "--output", outs[0]) == 0  # seed 3: config's
    assert _run("--config", config, "--input", hr, "--output", outs[1], "--seed", SEED) == 0
    assert _run("--config", config, "--input", hr, "--output", outs[2], "--seed", 4) == 0
    names = sorted(p.name for p in outs[0].iterdir())
    lq = [n for n in names if n.endswith("_lq.png")]  # one sample per image by default
    assert len(names) == 5 and sorted(n[0] + n[2] for n in lq) in (["a0", "b1"], ["a1", "b0"])
    for name in names:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    for k in range(2):
        mine, other = (next(out.glob(f"*_{k}_lq.png")).read_bytes() for out in (outs[0], outs[2]))
        assert mine != other
    tables = [(out / "degradations.csv").read_bytes() for out in outs]
    assert tables[0] == tables[1] != tables[2]


def test_the_default_sample_is_the_whole_degraded_square(hr, tmp_path, capsys):
    """Samples were the gt_size training crop (16x16 -> 8x8 here, 64 -> 16 in the CPU configs):
    by default the whole crop_pad_size square now, of which the training crop is a window with
    the same draws; --size N for larger views; --set as srgrad-train's."""
    config = _config(tmp_path / "c.yaml")
    full, train = tmp_path / "full", tmp_path / "train"
    assert _run("--config", config, "--input", hr, "--output", full, "--set",
                "datasets.train.gt_usm=true") == 0
    assert _run("--config", config, "--input", hr, "--output", train, "--size", "train",
                "--set", "datasets.train.gt_usm=true") == 0
    for k in range(2):
        stem = next(full.glob(f"*_{k}_lq.png")).name.split("_")[0]
        big = {kind: _read(full / f"{stem}_{k}_{kind}.png") for kind in ("lq", "gt", "gt_usm")}
        crop = {kind: _read(train / f"{stem}_{k}_{kind}.png") for kind in ("lq", "gt", "gt_usm")}
        assert big["lq"].shape == (3, 16, 16) and big["gt"].shape == (3, 32, 32)
        assert crop["lq"].shape == (3, 8, 8)
        windows = [(y, x) for y in range(9) for x in range(9)
                   if np.array_equal(big["lq"][:, y:y + 8, x:x + 8], crop["lq"])]
        assert windows, "the training crop is a window of the whole degraded square"
        y, x = windows[0]
        np.testing.assert_array_equal(big["gt"][:, 2 * y:2 * y + 16, 2 * x:2 * x + 16], crop["gt"])
    rows = [list(csv.DictReader(open(out / "degradations.csv"))) for out in (full, train)]
    assert [r["kernel1"] for r in rows[0]] == [r["kernel1"] for r in rows[1]]
    wide = tmp_path / "wide"
    assert _run("--config", config, "--input", hr, "--output", wide, "--size", 48) == 0
    assert _read(next(wide.glob("*_0_lq.png"))).shape == (3, 24, 24)
    assert main(["--config", str(config), "--input", str(hr), "--output", str(tmp_path / "x"),
                 "--size", "7", "--no-progress"]) == 2
    assert "(root: the --input images, crop and gt_size: --size 7): gt_size=7 must be a multiple " \
        "of scale=2" in capsys.readouterr().err


def test_one_file_is_a_dataset_of_one_image(hr, tmp_path):
    config = _config(tmp_path / "c.yaml")
    out = tmp_path / "out"
    assert _run("--config", config, "--input", hr / "b.png", "--output", out, "--count", 2,
                "--size", "train") == 0
    assert sorted(p.name for p in out.iterdir()) == ["b_0_gt.png", "b_0_lq.png", "b_1_gt.png",
                                                      "b_1_lq.png", "degradations.csv"]
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "b.png").write_bytes((hr / "b.png").read_bytes())
    ds = RealESRGANDataset(alone, **DATA)
    for k in range(2):  # one image: sample k is epoch k, position 0
        want = ds.get(0, np.random.default_rng([SEED, k, 0]))
        np.testing.assert_array_equal(_read(out / f"b_{k}_lq.png"), want["lq"] * 255)
        np.testing.assert_array_equal(_read(out / f"b_{k}_gt.png"), want["gt"] * 255)


def test_refuses_an_existing_output_until_overwrite(hr, tmp_path, capsys):
    config = _config(tmp_path / "c.yaml")
    out = tmp_path / "out"
    assert _run("--config", config, "--input", hr, "--output", out) == 0
    table = out / "degradations.csv"
    table.write_text("mine")
    partial = out / partial_name("degradations.csv")
    partial.write_text("half")  # a killed run's
    assert _run("--config", config, "--input", hr, "--output", out) == 2
    err = capsys.readouterr().err
    assert "exists (and 4 more of this run's outputs); pass --overwrite" in err
    assert err.count("\n") == 1 and table.read_text() == "mine" and partial.exists()
    assert _run("--config", config, "--input", hr, "--output", out, "--overwrite") == 0
    assert table.read_text().startswith("sample,iteration,row,image,kernel1,")
    assert not partial.exists()  # a run that writes removes what a killed one left


@pytest.mark.parametrize("case, match", [
    ("into the input", "--output .* is the --input folder"),
    ("output is a file", "--output .* is a file, not a folder"),
    ("no input", "--input .*: no such file or folder"),
    ("not an image", "--input .*: not an image file"),
    ("empty folder", "--input .*: no image files"),
    ("count 0", "--count must be >= 1, got 0"),
    ("negative seed", "--seed must be >= 0, got -1"),
    ("not RealESRGAN", "datasets.train is a HRImageDataset; srgrad-degrade shows"),
    ("bad dataset", "datasets.train .*(gt_size|crop_pad_size)=30 must be a multiple of scale=4"),
    ("no config", "cannot read config"),
])
def test_refusals_are_one_line_exit_2_and_write_nothing(hr, tmp_path, capsys, case, match):
    before = sorted((p.name, p.stat().st_mtime_ns) for p in hr.iterdir())
    config, src, out, extra = _config(tmp_path / "c.yaml"), hr, tmp_path / "out", []
    if case == "into the input":
        out = hr
    elif case == "output is a file":
        out.write_text("x")
    elif case == "no input":
        src = tmp_path / "missing"
    elif case == "not an image":
        src = tmp_path / "notes.txt"
        src.write_text("x")
    elif case == "empty folder":
        src = tmp_path / "empty"
        src.mkdir()
    elif case == "count 0":
        extra = ["--count", 0]
    elif case == "negative seed":
        extra = ["--seed", -1]
    elif case == "not RealESRGAN":
        config = _config(tmp_path / "c.yaml", "{type: HRImageDataset, root: x, gt_size: 16}")
    elif case == "bad dataset":
        config = _config(tmp_path / "c.yaml", TRAIN.replace("32", "30"), scale=4)
    elif case == "no config":
        config = tmp_path / "missing.yaml"
    assert _run("--config", config, "--input", src, "--output", out, *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert re.search(match, err), err
    assert sorted((p.name, p.stat().st_mtime_ns) for p in hr.iterdir()) == before
    assert not (out.is_dir() and any(out.iterdir())) or out == hr
