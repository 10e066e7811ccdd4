"""srgrad-prepare: BasicSR's windows and names, LR partners that PairedImageDataset reads as exactly
HRImageDataset's LR, resumable after a kill, never writing into the input, one-line errors."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from framework.data import HRImageDataset, PairedImageDataset
from framework.data.prepare import main, windows

from ...conftest import partial_name, smooth_image

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def hr_dir(tmp_path):
    """Three HR images: RGB 50x37, 8-bit gray 40x40, 16-bit gray 30x44."""
    root = tmp_path / "hr"
    root.mkdir()
    rng = np.random.default_rng(2)
    Image.fromarray(smooth_image(rng, 37, 50)).save(root / "a.png")
    Image.fromarray(smooth_image(rng, 40, 40, 1)[:, :, 0]).save(root / "b.png")
    deep = (rng.random((44, 30)) * 65535).astype(np.uint16)
    Image.fromarray(deep).save(root / "c.png")
    return root


def _run(capsys, *argv):
    code = main([str(a) for a in argv] + ["--no-progress"])
    out, err = capsys.readouterr()
    return code, out, err


def _tree(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*"))
            if p.is_file()}


def test_windows_follow_basicsr():
    # DIV2K 2040x1356 at 480/240: rows 0..720 step 240 plus 876 flush with the bottom edge,
    # columns 0..1440 plus 1560
    boxes = windows(2040, 1356, 480, 240, 0)
    assert len(boxes) == 5 * 8
    assert sorted({b[0] for b in boxes}) == [0, 240, 480, 720, 876]
    assert sorted({b[1] for b in boxes}) == [0, 240, 480, 720, 960, 1200, 1440, 1560]
    assert boxes[:2] == [(0, 0, 480, 480), (0, 240, 480, 480)]  # row by row
    assert boxes[-1] == (876, 1560, 480, 480)
    # 120 pixels left over at the right, 156 at the bottom: thresh 130 keeps only the bottom one
    assert sorted({b[1] for b in windows(2040, 1356, 480, 240, 130)})[-1] == 1440
    assert sorted({b[0] for b in windows(2040, 1356, 480, 240, 130)})[-1] == 876
    # a side shorter than the crop is one window, cut to the multiple
    assert windows(100, 50, 480, 240, 0, multiple=12) == [(0, 0, 48, 96)]
    assert windows(30, 30, 16, 16, 0) == [(0, 0, 16, 16), (0, 14, 16, 16), (14, 0, 16, 16),
                                          (14, 14, 16, 16)]


def test_outputs_are_paired_dataset_folders_equal_to_hrimagedataset(hr_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = _run(capsys, "--input", hr_dir, "--output", out, "--crop-size", 24,
                             "--step", 12, "--scales", 3, 2, "--workers", 1)
    assert code == 0, err
    # a 50x37: rows 0, 12, 13; columns 0, 12, 24, 26 -> 12 sub-images, each 24x24 (lcm 6)
    names = sorted(p.name for p in (out / "HR").iterdir())
    assert [n for n in names if n.startswith("a_")] == [f"a_s{k:03d}.png" for k in range(1, 13)]
    # BasicSR's layout of sub-image folders: the LR sub-image is named as its HR one
    assert sorted(p.name for p in (out / "LR_bicubic" / "X3").iterdir()) == names
    n = len(names)  # a: 12, b (40x40): 3 x 3 = 9, c (30x44): 3 x 2 = 6
    assert n == 12 + 9 + 6
    assert stdout.splitlines()[0] == (f"srgrad-prepare: 3 images -> {n} sub-images x 3 files: "
                                      f"written {3 * n}, skipped 0 (already there), failed 0 "
                                      f"image(s)")
    assert stdout.splitlines()[1] == (f"  read with: {{type: PairedImageDataset, gt_root: "
                                      f"{out / 'HR'}, lq_root: {out / 'LR_bicubic' / 'X2'}}} (LR "
                                      f"named as HR: filename_tmpl '{{name}}', the default)")
    # the HR sub-image is the source's pixels; the LR file is HRImageDataset's LR, bit for bit
    src = np.asarray(Image.open(hr_dir / "a.png"))
    np.testing.assert_array_equal(np.asarray(Image.open(out / "HR" / "a_s004.png")),
                                  src[0:24, 26:50])
    for scale in (2, 3):
        paired = PairedImageDataset(out / "HR", out / "LR_bicubic" / f"X{scale}", scale=scale,
                                    cache=False)
        made = HRImageDataset(out / "HR", scale=scale, cache=False)
        assert paired.names == made.names == names
        for i in range(n):
            for a, b in zip(paired.pair(i), made.pair(i)):
                assert a.dtype == b.dtype == np.float32
                np.testing.assert_array_equal(a, b)
    # gray stays gray, 16-bit HR stays 16-bit; LR is 8-bit
    assert Image.open(out / "HR" / "b_s001.png").mode == "L"
    assert Image.open(out / "HR" / "c_s001.png").mode == "I;16"
    assert Image.open(out / "LR_bicubic" / "X2" / "c_s001.png").mode == "L"
    assert Image.open(out / "LR_bicubic" / "X2" / "a_s001.png").size == (12, 12)


def test_a_rerun_writes_only_what_is_missing(hr_dir, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    args = ("--input", hr_dir, "--output", out, "--crop-size", 16, "--step", 16, "--scales", 2,
            "--workers", 1)
    assert _run(capsys, *args)[0] == 0
    first = _tree(out)
    (out / "HR" / "a_s002.png").unlink()
    (out / "LR_bicubic" / "X2" / "b_s001.png").unlink()
    (out / "HR" / "b_s003.png.tmp").write_bytes(b"half a file")  # not the writer's name: kept
    partial = out / "HR" / partial_name("b_s003.png")
    partial.write_bytes(b"half a file")  # left by a kill: removed when the rerun starts
    decoded = []
    import framework.io.image as image_io
    real = image_io.read_image
    monkeypatch.setattr(image_io, "read_image", lambda p, *a: decoded.append(Path(p).name)
                        or real(p, *a))
    code, stdout, _ = _run(capsys, *args)
    assert code == 0
    assert "written 2, skipped" in stdout
    assert sorted(decoded) == ["a.png", "b.png"]  # c's outputs all exist: not even decoded
    second = _tree(out)
    second.pop("HR/b_s003.png.tmp")  # a stale temporary is harmless: never listed as an image
    assert second == first and not partial.exists()


def _processes_with(marker):
    """Pids of live processes whose environment holds `marker` (a child and its workers)."""
    found = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker.encode() in env.read_bytes():
                found.append(int(env.parent.name))
        except OSError:
            pass
    return found


def _start(args, out, marker):
    """srgrad-prepare with two workers in a child process (its own session), its environment
    holding `marker`; returns once its first sub-image is written."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from framework.data.prepare "
                             "import main; sys.exit(main(sys.argv[1:]))",
                             *map(str, args), "--output", str(out), "--workers", "2",
                             "--no-progress"],
                            env={**os.environ, "PYTHONPATH": str(REPO), marker: "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True,
                            # Ctrl-C as in a terminal, even when the suite runs as a background job
                            # (which starts its processes with SIGINT ignored)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    before = set(out.glob("HR/*.png"))
    while time.time() < deadline and not set(out.glob("HR/*.png")) - before:
        time.sleep(0.002)
    return proc


def _none_left(marker):
    for _ in range(50):  # killed workers are gone at once, orphans within 0.1 s
        if not _processes_with(marker):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_interrupted_and_killed_runs_finish_when_run_again(tmp_path, capsys):
    """A run of two workers is Ctrl-C'd (the whole process group, as a terminal does), a second
    one killed (the parent only, no cleanup at all: its workers must notice), each after its
    first new files: no worker outlives them, and the same command run again completes the set,
    identical to an uninterrupted run."""
    big = tmp_path / "big"
    big.mkdir()
    rng = np.random.default_rng(5)
    for i in range(4):
        Image.fromarray(smooth_image(rng, 64, 64)).save(big / f"{i}.png")
    args = ["--input", big, "--crop-size", 16, "--step", 8, "--scales", 2, 4]
    reference = tmp_path / "reference"
    assert _run(capsys, *args, "--output", reference, "--workers", 1)[0] == 0
    total = len(list(reference.rglob("*.png")))
    out = tmp_path / "out"
    marker = f"SRGRAD_PREPARE_TEST_{tmp_path.name}".replace("-", "_")

    proc = _start(args, out, marker)
    t = time.perf_counter()
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert time.perf_counter() - t < 5  # the workers stop before their next file
    err = proc.stderr.read().decode()
    assert "interrupted after" in err and "run the same command again" in err
    assert _none_left(marker)
    first = len(list(out.rglob("*.png")))
    assert 0 < first < total

    proc = _start(args, out, marker)
    proc.kill()
    proc.wait(timeout=30)
    assert _none_left(marker)
    assert first < len(list(out.rglob("*.png"))) < total

    code, stdout, err = _run(capsys, *args, "--output", out, "--workers", 1)
    assert code == 0, err
    assert "skipped 0 " not in stdout
    after = {k: v for k, v in _tree(out).items() if not k.endswith(".tmp")}
    assert after == _tree(reference)


@pytest.mark.parametrize("where", ["same", "inside", "symlink", "parent_of_HR"])
def test_never_writes_into_the_input_folder(tmp_path, capsys, where):
    hr = tmp_path / ("HR" if where == "parent_of_HR" else "hr")
    hr.mkdir()
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(hr / "x.png")
    out = {"same": tmp_path / "." / "hr", "inside": tmp_path / "hr" / "sub" / "out",
           "symlink": tmp_path / "link" / "out", "parent_of_HR": tmp_path / "hr_parent" / ".."}
    (tmp_path / "link").symlink_to(hr)
    before = _tree(tmp_path)
    code, _, err = _run(capsys, "--input", hr, "--output", out[where], "--crop-size", 16)
    assert code == 2
    assert err.startswith("error: --output") and "input" in err and err.count("\n") == 1
    assert _tree(tmp_path) == before  # nothing written anywhere


def test_an_output_beside_the_input_is_fine(tmp_path, capsys):
    hr = tmp_path / "hr"
    hr.mkdir()
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(hr / "x.png")
    code, _, err = _run(capsys, "--input", hr, "--output", hr / ".." / "out", "--crop-size", 16,
                        "--scales", 2)
    assert code == 0, err
    assert (tmp_path / "out" / "HR" / "x_s001.png").is_file()
    assert sorted(p.name for p in hr.iterdir()) == ["x.png"]


@pytest.mark.parametrize("extra,message", [
    (["--crop-size", "0"], "--crop-size must be >= 1, got 0"),
    (["--step", "-3"], "--step must be >= 1"),
    (["--thresh-size", "-1"], "--thresh-size must be >= 0"),
    (["--scales", "2", "0"], "--scales must be >= 1"),
    (["--workers", "0"], "--workers must be >= 1"),
    (["--compression-level", "10"], "--compression-level must be <= 9"),
    (["--step", "x"], "invalid int value: 'x'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_arguments_are_one_line_errors(hr_dir, tmp_path, capsys, extra, message):
    code, _, err = _run(capsys, "--input", hr_dir, "--output", tmp_path / "out", *extra)
    assert code == 2
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_bad_folders_are_one_line_errors(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    clash = tmp_path / "clash"
    clash.mkdir()
    for ext in ("png", "bmp"):
        Image.fromarray(np.zeros((20, 20), np.uint8)).save(clash / f"a.{ext}")
    for src, message in [(tmp_path / "missing", "not a folder"), (empty, "no image files"),
                         (clash, "a.bmp and a.png would give the same sub-image names")]:
        code, _, err = _run(capsys, "--input", src, "--output", tmp_path / "out")
        assert code == 2 and message in err and err.count("\n") == 1, err
    (tmp_path / "file").write_text("x")
    code, _, err = _run(capsys, "--input", clash, "--output", tmp_path / "file")
    assert code == 2 and "is not a folder" in err


def test_other_settings_are_refused_in_the_same_output(hr_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert _run(capsys, "--input", hr_dir, "--output", out, "--crop-size", 16, "--scales", 2,
                "--workers", 1)[0] == 0
    code, _, err = _run(capsys, "--input", hr_dir, "--output", out, "--crop-size", 20)
    assert code == 2 and "prepared with crop_size 16, step 240, thresh_size 0" in err
    # another scale with the same windows is fine: only its LR folder is written
    code, stdout, _ = _run(capsys, "--input", hr_dir, "--output", out, "--crop-size", 16,
                           "--scales", 2, 4, "--workers", 1)
    assert code == 0 and "failed 0" in stdout
    assert len(list((out / "LR_bicubic" / "X4").iterdir())) == len(list((out / "HR").iterdir()))


def test_unreadable_and_too_small_images_are_reported_and_skipped(hr_dir, tmp_path, capsys):
    (hr_dir / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"junk" * 10)
    Image.fromarray(np.zeros((5, 9, 3), np.uint8)).save(hr_dir / "tiny.png")
    out = tmp_path / "out"
    code, stdout, err = _run(capsys, "--input", hr_dir, "--output", out, "--crop-size", 16,
                             "--scales", 2, 3, "--workers", 1)
    assert code == 1
    assert "broken.png" in err and "tiny.png: image is 9x5, smaller than 6" in err
    assert "failed 2 image(s)" in stdout
    assert (out / "HR" / "a_s001.png").is_file() and not list((out / "HR").glob("broken*"))


def test_help_exits_zero(capsys):
    assert main(["--help"]) == 0
    assert "srgrad-prepare" in capsys.readouterr().out


def test_a_translated_basicsr_option_file_reads_the_output(hr_dir, tmp_path, capsys):
    """BasicSR's option files read sub-image folders with filename_tmpl '{}' (extract_subimages.py
    names an LR sub-image as its HR one); srgrad-prepare writes that layout, so the translation
    of such a file reads its output (it wrote <stem>_sNNNx4.png, and the two disagreed)."""
    from framework.engine.config.options import translate_options
    from framework.registry import DATASETS
    out = tmp_path / "out"
    assert _run(capsys, "--input", hr_dir, "--output", out, "--crop-size", 16, "--step", 16,
                "--scales", 4, "--workers", 1)[0] == 0
    options = {"name": "x", "model_type": "SRModel", "scale": 4,
               "datasets": {"train": {"name": "DIV2K", "type": "PairedImageDataset",
                                      "dataroot_gt": str(out / "HR"),
                                      "dataroot_lq": str(out / "LR_bicubic" / "X4"),
                                      "filename_tmpl": "{}", "io_backend": {"type": "disk"},
                                      "gt_size": 8}},
               "network_g": {"type": "MSRResNet", "upscale": 4},
               "train": {"total_iter": 10, "optim_g": {"type": "Adam", "lr": 2e-4}}}
    cfg, _ = translate_options(options)
    data = DATASETS.build(cfg["datasets"]["train"], scale=4)
    assert len(data) == len(list((out / "HR").iterdir())) and data.get(0)["lq"].shape == (3, 4, 4)


def test_an_output_of_the_older_naming_is_refused(hr_dir, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "prepare.json").write_text('{"crop_size": 16, "step": 16, "thresh_size": 0}')
    code, _, err = _run(capsys, "--input", hr_dir, "--output", out, "--crop-size", 16, "--step",
                        16, "--scales", 2)
    assert code == 2 and "was prepared by an older srgrad-prepare, which named LR files " \
        "<stem>_sNNNx<scale>.png" in err and "filename_tmpl: '{name}x{scale}'" in err
    assert sorted(p.name for p in out.iterdir()) == ["prepare.json"]  # nothing written
