"""Training runs from YAML on tiny images: artefacts, exact resume, Ctrl-C, NaN stop, lock file."""
import csv
import os
import pathlib
import signal
import subprocess
import sys

import numpy as np
import pytest

from framework.engine import Trainer, TrainingError, TrainingInterrupted, load_model
from framework.engine.commands.cli import train_main
from framework.engine.run.runlog import RunLock, RunLockedError
from framework.weights import checkpoint as ckpt
from framework.engine.config.schema import load_config

REPO = pathlib.Path(__file__).resolve().parents[3]


def trainer(path, overrides=(), **kw):
    return Trainer(load_config(path, overrides), progress=False, **kw)


def test_five_iterations_write_every_artefact(make_config, tmp_path, capsys, tiny_data):
    path = make_config(iters=5, every=5)
    assert train_main([str(path), "--no-progress"]) == 0
    run = tmp_path / "runs" / "tiny"
    captured = capsys.readouterr()
    out = captured.out
    assert f"Run folder: {run}" in out and "net_best.safetensors" in out
    resolved = load_config(run / "config.yaml")  # the resolved config is itself a valid config
    assert resolved["train"]["total_iters"] == 5 and resolved["val"]["y_channel"] is True
    with open(run / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3, 4, 5]
    assert all(np.isfinite(float(r["loss"])) and float(r["lr"]) > 0 for r in rows)
    last = rows[-1]
    assert 5 < float(last["psnr_y"]) < 60 and 0 < float(last["ssim_y"]) <= 1
    assert float(last["bicubic_psnr_y"]) > 15  # measured on Y and said so in the column name
    assert (run / "checkpoints" / "iter_00000005.safetensors").is_file()
    state = ckpt.load_checkpoint(run / "checkpoints" / "iter_00000005.safetensors")
    assert state["iteration"] == 5 and state["optimizer"]["state"]
    for name in ("net_latest.safetensors", "net_best.safetensors"):
        model, info = load_model(run / name)  # loadable without the config
        assert info["model"]["type"] == "FSRCNN" and info["scale"] == 2
    from framework.io.image import read_image
    # one labelled strip per image and validation: images/<name>/<name>_<iter>.png (BasicSR's)
    strip, _ = read_image(run / "images" / "v_rgb" / "v_rgb_5.png")
    assert strip.shape == (3, 16 + 32, 3 * 32 + 2 * 4)  # labels over bicubic | SR | HR, 4 px gaps
    assert strip[:, :16].min() < 0.3 and np.median(strip[:, :16]) == 1.0  # dark text on white
    hr, _ = read_image(tiny_data / "val" / "v_rgb.png")
    np.testing.assert_array_equal(strip[:, 16:, 72:], hr)
    assert (run / "images" / "v_gray" / "v_gray_5.png").is_file()
    err = captured.err
    assert "warning: train.scheduler: T_max 6 differs from total_iters 5" in err
    assert "model: FSRCNN, " in err and " parameters (float32)" in err  # the start-up summary
    assert "data: 3 training images (HRImageDataset, patches gt 16x16 -> lq 8x8, batch 2), 2 " \
        "validation images" in err
    assert "[tiny] iter 5/5  loss " in err and "it/s  ETA 0s" in err  # plain lines, not a bar
    pytest.importorskip("matplotlib")
    assert (run / "curves.png").stat().st_size > 1000
    assert not (run / ".lock").exists()


def test_resume_after_3_of_6_is_bit_exact(make_config, tmp_path):
    straight = make_config("a.yaml", iters=6, every=3)
    trainer(straight, ["name=straight"]).fit()
    split = make_config("b.yaml", iters=3, every=3)
    trainer(split, ["name=split"]).fit()
    # a new process would rebuild everything from the config: so does a new Trainer
    result = trainer(split, ["name=split", "train.total_iters=6"], resume="auto").fit()
    assert result["iteration"] == 6
    a, _ = ckpt.load_weights(tmp_path / "runs" / "straight" / "net_latest.safetensors")
    b, _ = ckpt.load_weights(tmp_path / "runs" / "split" / "net_latest.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    sa = ckpt.load_checkpoint(tmp_path / "runs" / "straight" / "checkpoints" / "iter_00000006.safetensors")
    sb = ckpt.load_checkpoint(tmp_path / "runs" / "split" / "checkpoints" / "iter_00000006.safetensors")
    np.testing.assert_array_equal(sa["optimizer"]["state"]["0"]["exp_avg_sq"],
                                  sb["optimizer"]["state"]["0"]["exp_avg_sq"])
    assert sa["scheduler"] == sb["scheduler"]
    with open(tmp_path / "runs" / "split" / "metrics.csv") as fh:
        assert [int(r["iteration"]) for r in csv.DictReader(fh)] == [1, 2, 3, 4, 5, 6]


def test_fresh_run_refuses_a_folder_with_checkpoints(make_config):
    path = make_config(iters=2, every=2)
    trainer(path).fit()
    with pytest.raises(TrainingError, match=r"already holds checkpoints: continue it with "
                                            r"--resume auto"):
        trainer(path).fit()


def test_sigint_saves_a_checkpoint_and_exits_130(make_config, tmp_path, monkeypatch, capsys):
    path = make_config(iters=50, every=50)
    original = Trainer._train_step

    def step(self, batch):
        if self.iteration == 2:  # a real SIGINT, delivered to our own process mid-training
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, batch)

    monkeypatch.setattr(Trainer, "_train_step", step)
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when the suite runs as a background job
    assert train_main([str(path), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert "interrupted at iteration 3" in err and f"srgrad-train {path} --resume auto" in err
    run = tmp_path / "runs" / "tiny"
    assert ckpt.load_checkpoint(run / "checkpoints" / "iter_00000003.safetensors")["iteration"] == 3
    assert not (run / ".lock").exists()
    assert signal.getsignal(signal.SIGINT) is before  # put back as it was


@pytest.mark.parametrize("when", ["last step", "closing", "curves"])
def test_a_signal_after_the_last_step_begins_stops_and_says_the_run_is_complete(make_config, tmp_path,
                                                                               monkeypatch, capsys, when):
    """A Ctrl-C during the last iteration (or its save) was acknowledged ("saving a checkpoint after
    this iteration") and then lost: the run drew its curves and exited 0. It now stops there with
    130, and says that nothing is left to resume; one while the loop closes (its batch loader) or
    while curves.png is drawn stops at once."""
    from framework.data import Prefetcher
    path = make_config(iters=4, every=4)
    original_step, original_plot, original_close = Trainer._train_step, Trainer._plot, Prefetcher.close

    def close(self, *args, **kwargs):
        if when == "closing":
            os.kill(os.getpid(), signal.SIGINT)
        return original_close(self, *args, **kwargs)

    def step(self, batch):
        if when == "last step" and self.iteration == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return original_step(self, batch)

    def plot(self):
        if when == "curves":
            os.kill(os.getpid(), signal.SIGINT)
        return original_plot(self)

    monkeypatch.setattr(Trainer, "_train_step", step)
    monkeypatch.setattr(Trainer, "_plot", plot)
    monkeypatch.setattr(Prefetcher, "close", close)
    # without a validation set: a signal in the last step would otherwise stop the final validation
    # (test_sigint_during_validation_records_no_partial_result)
    assert train_main([str(path), "--no-progress", "--set", "datasets.val=null"]) == 130
    err = capsys.readouterr().err
    run = tmp_path / "runs" / "tiny"
    assert f"interrupted after the last iteration (4): the run is complete, its checkpoint saved in " \
           f"{run / 'checkpoints'}; {run / 'curves.png'} not drawn" in err, err
    assert ("saving a checkpoint after this iteration" in err) == (when != "curves")
    assert ckpt.load_checkpoint(run / "checkpoints" / "iter_00000004.safetensors")["iteration"] == 4
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["iter_00000004.safetensors"]
    assert not (run / "curves.png").exists() and not (run / ".lock").exists()
    monkeypatch.undo()
    assert train_main([str(path), "--no-progress", "--resume", "auto", "--set", "datasets.val=null"]) == 0
    assert (run / "curves.png").exists()


def test_nan_loss_stops_and_keeps_the_last_checkpoint(make_config, tmp_path):
    path = make_config(iters=6, every=2)
    # capture off: a captured step replays the ops it recorded, not the Python that chose them
    # (this poisoning by iteration number; docs/config.md, train.capture)
    t = trainer(path, ["train.capture=off"])
    loss_fn = t.recipe.criteria["pixel"]

    def poisoned(out, gt):
        loss = loss_fn(out, gt)
        return loss * float("nan") if t.iteration == 3 else loss

    t.recipe.criteria["pixel"] = poisoned
    with pytest.raises(TrainingError, match=r"loss is nan at iteration 4: training stopped\. The "
                                            r"last good checkpoint \(.*iter_00000002.safetensors\)"):
        t.fit()
    folder = tmp_path / "runs" / "tiny" / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == ["iter_00000002.safetensors"]
    assert ckpt.load_checkpoint(folder / "iter_00000002.safetensors")["iteration"] == 2


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # backward of an inf loss
def test_nan_loss_can_skip_the_batch(make_config):
    path = make_config(iters=3, every=3)
    t = trainer(path, ["train.nonfinite_loss=skip"])
    loss_fn = t.recipe.criteria["pixel"]
    t.recipe.criteria["pixel"] = lambda out, gt: loss_fn(out, gt) * (float("inf") if t.iteration == 1
                                                                   else 1.0)
    assert t.fit()["iteration"] == 3


def test_second_run_on_a_locked_folder_is_refused(make_config, tmp_path):
    path = make_config(iters=2, every=2)
    run = tmp_path / "runs" / "tiny"
    run.mkdir(parents=True)
    holder = RunLock(run)  # another open file description: flock conflicts even in one process
    holder.acquire()
    try:
        with pytest.raises(RunLockedError, match=rf"run folder {run} is in use by process "
                                                 rf"{os.getpid()}"):
            trainer(path).fit()
    finally:
        holder.release()
    assert not (run / "checkpoints").exists()


def test_stale_lock_from_a_dead_process_is_taken_over(make_config, tmp_path):
    path = make_config(iters=2, every=2)
    run = tmp_path / "runs" / "tiny"
    run.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (run / ".lock").write_text(f"{dead.pid} {os.uname().nodename}\n")
    assert trainer(path).fit()["iteration"] == 2
    assert not (run / ".lock").exists()


def test_custom_layer_trains_from_yaml_through_imports(tiny_data, tmp_path):
    """The shipped configs/custom_layer.yaml (imports: [my_layers]) on tiny data."""
    cfg = load_config(REPO / "configs" / "custom_layer.yaml", [
        f"datasets.train.root={tiny_data / 'train'}", "datasets.train.gt_size=16",
        f"datasets.val.root={tiny_data / 'val'}", f"run_root={tmp_path}", "model.num_feat=8",
        "model.num_block=1", "model.block.channels=8", "train.total_iters=3",
        "train.batch_size=2", "train.optimizer.lr=1e-2", "val.every=3", "checkpoint.every=3"])
    t = Trainer(cfg, progress=False)
    scales = [m for m in t.model.modules() if type(m).__name__ == "ChannelScale"]
    assert len(scales) == 1 and np.all(scales[0].weight.data == 1.0)
    result = t.fit()
    assert result["iteration"] == 3
    assert not np.allclose(scales[0].weight.data, 1.0)  # the custom layer's parameter was trained
    model, _ = load_model(tmp_path / cfg["name"] / "net_latest.safetensors")
    np.testing.assert_array_equal(model.state_dict()["body.0.extra.weight"], scales[0].weight.data)
    # inference: the shipped config brings the imports, the weights their own (smaller) spec
    from framework.engine.commands.cli import infer_main
    assert infer_main(["--weights", str(tmp_path / cfg["name"] / "net_latest.safetensors"),
                       "--config", str(REPO / "configs" / "custom_layer.yaml"), "--input",
                       str(tiny_data / "val" / "v_rgb.png"), "--output", str(tmp_path / "o.png"),
                       "--no-progress"]) == 0
    from PIL import Image
    assert Image.open(tmp_path / "o.png").size == (64, 64)


def test_custom_layer_gradcheck():
    sys.path.insert(0, str(REPO / "configs"))
    try:
        import my_layers
    finally:
        sys.path.remove(str(REPO / "configs"))
    import framework as sg
    rng = np.random.default_rng(0)
    x = sg.tensor(rng.standard_normal((2, 3, 4, 5)), requires_grad=True, dtype=np.float64)
    w = sg.tensor(rng.standard_normal(3), requires_grad=True, dtype=np.float64)
    assert sg.gradcheck(my_layers.ChannelScaleFn.apply, (x, w))


def test_resume_from_a_run_folder_uses_its_config(make_config, tmp_path, capsys):
    path = make_config(iters=2, every=2)
    assert train_main([str(path), "--no-progress"]) == 0
    run = tmp_path / "runs" / "tiny"
    path.unlink()  # the run folder's resolved config.yaml is enough
    assert train_main(["--resume", str(run), "--set", "train.total_iters=4", "--no-progress"]) == 0
    assert "resumed from" in capsys.readouterr().err
    assert ckpt.load_checkpoint(run / "checkpoints" / "iter_00000004.safetensors")["iteration"] == 4
    assert train_main(["--resume", str(tmp_path / "nowhere"), "--no-progress"]) == 2


@pytest.mark.parametrize("script", ["train.py", "infer.py", "evaluate.py"])
def test_scripts_are_thin_command_lines(script):
    done = subprocess.run([sys.executable, str(REPO / "scripts" / script), "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "usage: srgrad-" in done.stdout


def test_sigint_during_validation_records_no_partial_result(make_config, tmp_path):
    path = make_config(iters=50, every=2)
    t = trainer(path)
    get = t.val_set.get

    def get_then_interrupt(i, rng=None):
        os.kill(os.getpid(), signal.SIGINT)
        return get(i, rng)

    t.val_set.get = get_then_interrupt
    with pytest.raises(TrainingInterrupted):
        t.fit()
    run = tmp_path / "runs" / "tiny"
    assert not (run / "net_best.safetensors").exists()  # one image of two is not a validation
    with open(run / "metrics.csv") as fh:
        assert not any(r["psnr_y"] for r in csv.DictReader(fh))
    assert ckpt.load_checkpoint(run / "checkpoints" / "iter_00000002.safetensors")["iteration"] == 2


def test_only_the_newest_checkpoints_are_kept(make_config, tmp_path):
    path = make_config(iters=5, every=1)  # keep: 2
    trainer(path, ["val.every=100"]).fit()
    folder = tmp_path / "runs" / "tiny" / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == ["iter_00000004.safetensors",
                                                         "iter_00000005.safetensors"]


def test_y_channel_training_and_rgb_inference(tiny_data, tmp_path):
    """BasicSR's Y-channel setting: 1-channel model on Y data; inference on an RGB file runs the
    model on Y and bicubic on Cb/Cr, and writes RGB."""
    from PIL import Image
    from framework.engine.commands.cli import infer_main
    from .conftest import config_text
    text = config_text(tiny_data, tmp_path / "runs", iters=2, every=2,
                       model="{type: FSRCNN, d: 8, s: 4, m: 1, num_in_ch: 1, num_out_ch: 1}")
    text = text.replace("gt_size: 16}", "gt_size: 16, color: y}").replace(
        f"root: {tiny_data / 'val'}}}", f"root: {tiny_data / 'val'}, color: y}}")
    path = tmp_path / "y.yaml"
    path.write_text(text)
    result = trainer(path).fit()
    assert result["val"]["psnr_y"] > 5
    weights = tmp_path / "runs" / "tiny" / "net_best.safetensors"
    assert infer_main(["--weights", str(weights), "--input", str(tiny_data / "val" / "v_rgb.png"),
                       "--output", str(tmp_path / "o.png"), "--no-progress"]) == 0
    out = Image.open(tmp_path / "o.png")
    assert out.mode == "RGB" and out.size == (64, 64)
    # the colour comes through Cb/Cr: each channel's mean difference to the input stays small
    src = np.asarray(Image.open(tiny_data / "val" / "v_rgb.png"), float).mean(axis=(0, 1))
    got = np.asarray(out, float).mean(axis=(0, 1))
    assert np.abs((got - got.mean()) - (src - src.mean())).max() < 8


def test_validation_with_self_ensemble_scores_the_ensemble(make_config, tmp_path, tiny_data):
    from framework.data import HRImageDataset
    from framework.engine import upscale
    from framework.metrics import measure
    path = make_config(iters=2, every=2)
    trainer(path, ["val.self_ensemble=true"]).fit()
    run = tmp_path / "runs" / "tiny"
    with open(run / "metrics.csv") as fh:
        last = list(csv.DictReader(fh))[-1]
    model, _ = load_model(run / "net_latest.safetensors")
    val = HRImageDataset(tiny_data / "val", scale=2)
    scores = {}
    for ensemble in (True, False):
        scores[ensemble] = np.mean([measure(np.clip(upscale(model, val.get(i)["lq"],
                                                            self_ensemble=ensemble), 0, 1),
                                            val.get(i)["gt"], ["psnr"], 2, True)["psnr"]
                                    for i in range(len(val))])
    assert float(last["psnr_y"]) == pytest.approx(scores[True], abs=5e-5)  # csv: 6 digits
    assert abs(scores[True] - scores[False]) > 1e-3
