"""ZSSR end to end (framework/engine/zeroshot/zssr.py, the recipe's learning-rate policy): the policy drops
the rate on a flat error curve and not on a falling one, back-projection makes the SR consistent
with the input, Ctrl-C keeps the network so far, and `srgrad-zssr` on a tiny image (output rules,
the kernel file, values)."""
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from framework.data.zssr import downscale
from framework.engine.zeroshot import zssr as Z
from framework.engine.run.recipes.zssr import LearningRatePolicy, ZSSRRecipe
from framework.io.image import read_image, write_image

GRAVEL = Path(__file__).resolve().parents[3] / "data" / "val" / "gravel.png"


def _psnr(a, b):
    return float(10 * np.log10(1.0 / np.mean((np.asarray(a, np.float64) - b) ** 2)))


# -- the learning-rate policy ---------------------------------------------------------------------
def _policy_run(curve, iters=600):
    pol, lr, drops = LearningRatePolicy(), 1e-3, []
    for it in range(iters):
        if pol.due(it):
            pol.record(it, curve(it))
        new = pol.update(it, lr)
        if new != lr:
            drops.append(it)
        lr = new
    return drops, lr


def test_policy_drops_the_rate_when_the_error_stops_falling():
    rng = np.random.default_rng(0)
    drops, lr = _policy_run(lambda it: 0.01 + 1e-4 * rng.standard_normal())
    # the first check after min_iters (256) at (it + 1) % 60 == 0: 299; then 256 more: 599
    assert drops == [299, 599] and lr == pytest.approx(1e-5)


def test_policy_keeps_the_rate_while_the_error_falls():
    drops, lr = _policy_run(lambda it: 1.0 - 1e-3 * it)
    assert drops == [] and lr == 1e-3
    assert not LearningRatePolicy().done(1e-5) and LearningRatePolicy().done(8e-6)


# -- back-projection ------------------------------------------------------------------------------
def test_back_projection_reduces_the_lr_inconsistency(rng):
    hr = read_image(GRAVEL)[0][:, :64, :64]
    lr = downscale(hr, 2)
    sr = np.clip(hr + 0.05 * rng.standard_normal(hr.shape).astype(np.float32), 0, 1)
    before = np.abs(downscale(sr, 2) - lr).mean()
    after = sr
    for _ in range(3):
        after = Z.back_projection(after, lr)
    assert np.abs(downscale(after, 2) - lr).mean() < 0.2 * before
    assert after.shape == sr.shape and after.min() >= 0 and after.max() <= 1


def test_ctrl_c_keeps_the_network_so_far(monkeypatch):
    img = read_image(GRAVEL)[0][:, :32, :32]
    real_step = ZSSRRecipe.step

    def step(self, batch, iteration, dry=False):
        if iteration == 3:
            raise KeyboardInterrupt
        return real_step(self, batch, iteration, dry)

    monkeypatch.setattr(ZSSRRecipe, "step", step)
    said = []
    sr, interrupted = Z.zssr_result(img, 4, iters=50, crop_size=16, bp_iters=0, say=said.append,
                                    progress=False)
    # the size asked for: the x4 stage applies the network as it is, untrained
    assert interrupted and sr.shape == (1, 128, 128)
    assert said[0] == f"x2: training, at most 50 iterations (a line every {Z.LOG_EVERY})"
    assert said[1].startswith("x2: interrupted after 3 iterations")
    assert said[4] == "x4: not trained (interrupted before): the network as it is"


def test_without_a_bar_each_phase_and_every_log_every_iterations_print_a_line(monkeypatch):
    """--no-progress (progress=False): a line when a stage starts, every LOG_EVERY iterations
    and before the final pass, as srgrad-train's log lines (before: only the stage summaries)."""
    monkeypatch.setattr(Z, "LOG_EVERY", 2)
    said = []
    Z.zssr_result(read_image(GRAVEL)[0][:, :24, :24], 2, iters=5, crop_size=16, bp_iters=1,
                  say=said.append, progress=False)
    assert said[0] == "x2: training, at most 5 iterations (a line every 2)"
    assert [m.split(",")[0] for m in said[1:3]] == ["x2: iteration 2/5", "x2: iteration 4/5"]
    assert all(" loss " in m and " lr 1e-03" in m for m in said[1:3]), said
    assert said[3].startswith("x2: trained 5 iterations")
    assert said[4] == "x2: the final pass (1 back-projections)"
    assert said[5].startswith("x2: output 48x48") and len(said) == 6
    said.clear()
    Z.zssr_result(read_image(GRAVEL)[0][:, :24, :24], 2, iters=5, crop_size=16, bp_iters=1,
                  say=said.append, progress=True)
    assert [m.split(":")[1].split()[0] for m in said] == ["trained", "output"]  # the bar's job


# -- the command ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """A 40x40 gray LR image (gravel's 80x80 corner downscaled by bicubic) and its HR."""
    root = tmp_path_factory.mktemp("zssr")
    hr = read_image(GRAVEL)[0][:, :80, :80]
    lr = np.round(downscale(hr, 2) * 255) / 255
    write_image(root / "lr.png", lr)
    return root, hr, lr


def test_command_x2_values_and_output_rules(case, capsys):
    root, hr, lr = case
    out = root / "sr.png"
    args = ["--input", root / "lr.png", "--output", out, "--iters", "40", "--preset", "fast",
            "--no-progress"]
    assert Z.main(list(map(str, args))) == 0
    err = capsys.readouterr().err
    assert "x2: trained 40 iterations" in err and "10 back-projections" in err
    # blind by default, but 40x40 is too small for KernelGAN: the bicubic kernel, said so
    assert "40x40 is too small for KernelGAN's 64-pixel crops: the bicubic kernel" in err
    assert not list(root.glob("*kernel.npy"))
    sr = read_image(out)[0]
    assert sr.shape == (1, 80, 80)
    # back-projected: its bicubic downscale is the input, to the 8-bit rounding
    assert _psnr(downscale(sr, 2), lr) > 40
    # and at least as close to the HR image as bicubic interpolation
    from framework.engine.inference.upscale import bicubic
    assert _psnr(sr, hr) > _psnr(np.clip(bicubic(lr.astype(np.float32), 2), 0, 1), hr)
    before = out.read_bytes()
    assert Z.main(list(map(str, args))) == 2  # exists: refused without --overwrite
    assert "exists; pass --overwrite" in capsys.readouterr().err and out.read_bytes() == before
    assert Z.main(["--input", str(root / "lr.png"), "--output", str(root / "lr.png")]) == 2
    assert "it is the input" in capsys.readouterr().err


def test_command_estimates_and_writes_the_kernel(case, capsys, tmp_path, monkeypatch):
    root, _, _ = case
    monkeypatch.setattr(Z, "LOG_EVERY", 2)  # --no-progress: KernelGAN's lines too
    big = tmp_path / "big.png"  # KernelGAN's crops are 64 px: a larger image
    Image.fromarray(np.asarray(Image.open(GRAVEL))[:72, :72]).save(big)
    # the defaults: --kernel estimate, --preset fast
    args = ["--input", big, "--output", tmp_path / "out", "--kernelgan-iters", "3", "--iters", "2",
            "--bp-iters", "1", "--no-progress"]
    (tmp_path / "out").mkdir()
    assert Z.main(list(map(str, args))) == 0
    k = np.load(tmp_path / "out" / "big_x2_kernel.npy", allow_pickle=False)
    # the mean of 3 centred kernels (13x13 each, moved to their centre): odd, square, sum 1
    assert k.shape[0] == k.shape[1] and k.shape[0] % 2 == 1 and k.shape[0] >= 13
    assert k.sum() == pytest.approx(1.0, abs=1e-12)
    assert read_image(tmp_path / "out" / "big_x2.png")[0].shape == (1, 144, 144)
    err = capsys.readouterr().err
    # the fast preset: 3 runs (seeds 0, 1, 2), their kernels averaged
    assert "kernel: KernelGAN, 3 runs of 3 iterations (a line every 2)" in err
    assert "kernel: KernelGAN iteration 8/9, " in err
    assert "kernel: KernelGAN, 3 runs of 3 iterations (their mean) in" in err
    assert "x2: training, at most 2 iterations (a line every 2)" in err
    # the kernel file is an input of the next run
    args2 = ["--input", big, "--output", tmp_path / "again.png", "--kernel",
             tmp_path / "out" / "big_x2_kernel.npy", "--iters", "2", "--bp-iters", "0",
             "--no-progress"]
    assert Z.main(list(map(str, args2))) == 0


def test_command_refusals(case, capsys):
    root, _, _ = case
    base = ["--input", str(root / "lr.png"), "--output", str(root / "x.png")]
    assert Z.main(base + ["--kernel", "gauss"]) == 2
    assert "--kernel must be bicubic, estimate or a .npy file" in capsys.readouterr().err
    assert Z.main(base + ["--iters", "0"]) == 2
    assert "--iters" in capsys.readouterr().err
    assert Z.main(base + ["--kernel", str(root / "missing.npy")]) == 1
    assert Z.main(base + ["--kernelgan-restarts", "0"]) == 2
    assert "--kernelgan-restarts" in capsys.readouterr().err
    # asked for explicitly, an estimate of a 40x40 image is refused, not replaced by bicubic
    assert Z.main(base + ["--kernel", "estimate"]) != 0
    assert "is smaller than its" in capsys.readouterr().err and not (root / "x.png").exists()
    assert not (root / "x.png").exists()
