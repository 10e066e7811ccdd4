"""Interruptions and faults during training: Ctrl-C, a non-finite loss, a second process on the same
run folder, a full disk or unwritable folder. Each keeps the last good checkpoint and says what
happened and what to do."""
import errno
import io
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from framework.engine import Trainer
from framework.engine.commands.cli import train_main
from framework.engine.run.runlog import MetricsLog
from framework.io import atomic
from framework.weights import checkpoint as ckpt

from tests.conftest import dead_pid, partial_name

from .conftest import REPO, as_in_a_terminal, driver_env, run_train, start_train


def wait_until(predicate, proc, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"training ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def logged_rows(run):
    try:
        return len((run / "metrics.csv").read_text().splitlines()) - 1
    except FileNotFoundError:
        return 0


def snapshot(folder):
    """{relative path: bytes} of every file under `folder`."""
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def checkpoints(run):
    return sorted(p.name for p in (run / "checkpoints").iterdir())


# -- Ctrl-C ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides", [[], ["--set", "name=renamed"]], ids=["plain", "with --set"])
def test_sigint_saves_prints_how_to_resume_and_exits_130(make_tiny_config, tmp_path, overrides):
    """A real SIGINT to a training process: it finishes the iteration, saves, prints a resume
    command that works as printed (overrides included), and exits 130."""
    cfg = make_tiny_config(iters=500, every=1000)  # no periodic checkpoint: only the interrupt saves
    run = tmp_path / "runs" / ("renamed" if overrides else "tiny")
    proc = start_train([cfg, *overrides])
    wait_until(lambda: logged_rows(run) >= 2, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    m = re.search(r"interrupted at iteration (\d+); checkpoint saved in (.+)\. Resume with:\n  "
                  r"(srgrad-train .+ --resume auto)\n", err)
    assert m, err
    n = int(m.group(1))
    assert n >= 2 and m.group(2) == str(run / "checkpoints")
    assert checkpoints(run) == [f"iter_{n:08d}.safetensors"]
    assert ckpt.load_checkpoint(run / "checkpoints" / f"iter_{n:08d}.safetensors")["iteration"] == n
    assert ckpt.load_weights(run / "net_latest.safetensors")[1]["iteration"] == n
    assert not (run / ".lock").exists() and not list(run.rglob("*.tmp"))
    # the printed command, run as printed (plus a shorter total), continues this run
    command = shlex.split(m.group(3))[1:]
    result = run_train(command + ["--set", f"train.total_iters={n + 2}"])
    assert result.returncode == 0, result.stderr
    assert f"resumed from {run / 'checkpoints' / f'iter_{n:08d}.safetensors'} at iteration {n}" \
        in result.stderr
    rows = (run / "metrics.csv").read_text().splitlines()[1:]
    assert [int(r.split(",")[0]) for r in rows] == list(range(1, n + 3))


def test_second_sigint_during_the_save_aborts_and_keeps_the_previous_checkpoint(make_tiny_config,
                                                                                 tmp_path):
    """Ctrl-C twice, the second while the first one's checkpoint is being written: the partial
    file is removed, the earlier checkpoint is intact, exit 130 with a message."""
    cfg = make_tiny_config(iters=2, every=1000)
    run = tmp_path / "runs" / "tiny"
    folder = run / "checkpoints"
    assert train_main([str(cfg), "--no-progress"]) == 0
    before = (folder / "iter_00000002.safetensors").read_bytes()
    # resumed for longer; the only checkpoint write is the interrupt's, and it waits 1 s between
    # its *.tmp and the os.replace
    proc = start_train([cfg, "--resume", "auto", "--set", "train.total_iters=500"],
                       SRGRAD_TEST_REPLACE_DELAY=1.0, SRGRAD_TEST_REPLACE_ONLY="checkpoints")
    wait_until(lambda: logged_rows(run) >= 4, proc)
    proc.send_signal(signal.SIGINT)
    wait_until(lambda: any(p.name.endswith(".tmp") for p in folder.iterdir()), proc)
    proc.send_signal(signal.SIGINT)  # while the interrupt's checkpoint is half-way
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    m = re.search(r"interrupted again at iteration (\d+): no checkpoint of iteration \1; the latest "
                  r"is (\S+) \(iteration 2\)\. Resume with:\n  srgrad-train ", err)
    assert m and m.group(2) == str(folder / "iter_00000002.safetensors"), err
    assert "Traceback" not in err
    assert checkpoints(run) == ["iter_00000002.safetensors"]
    assert (folder / "iter_00000002.safetensors").read_bytes() == before
    assert not (run / ".lock").exists()


def test_second_sigint_after_the_checkpoint_says_it_was_written(make_tiny_config, tmp_path):
    """The second Ctrl-C lands after the checkpoint, while net_latest is being written: the message
    says the checkpoint was written (it was: it loads) and that net_latest may lag (it does)."""
    cfg = make_tiny_config(iters=2, every=1000)
    run = tmp_path / "runs" / "tiny"
    assert train_main([str(cfg), "--no-progress"]) == 0
    proc = start_train([cfg, "--resume", "auto", "--set", "train.total_iters=500"],
                       SRGRAD_TEST_REPLACE_DELAY=1.0, SRGRAD_TEST_REPLACE_ONLY="net_latest")
    wait_until(lambda: logged_rows(run) >= 4, proc)
    proc.send_signal(signal.SIGINT)
    wait_until(lambda: any(run.glob(".net_latest.safetensors.*.srgrad.tmp")), proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    m = re.search(r"interrupted again at iteration (\d+): the checkpoint of iteration \1 was "
                  r"written: (\S+) \(net_latest.safetensors may be older\)", err)
    assert m, err
    n = int(m.group(1))
    assert ckpt.load_checkpoint(m.group(2))["iteration"] == n > 2
    assert ckpt.load_weights(run / "net_latest.safetensors")[1]["iteration"] == 2


def test_sigterm_is_handled_like_ctrl_c_with_exit_143(make_tiny_config, tmp_path):
    """SIGTERM (kill, Docker, Slurm, Kubernetes): checkpoint, resume hint, exit 143, lock released."""
    cfg = make_tiny_config(iters=500, every=1000)
    run = tmp_path / "runs" / "tiny"
    proc = start_train([cfg])
    wait_until(lambda: logged_rows(run) >= 2, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "SIGTERM: saving a checkpoint after this iteration" in err
    m = re.search(r"interrupted at iteration (\d+); checkpoint saved in .+\. Resume with:\n  "
                  r"srgrad-train .+ --resume auto\n", err)
    assert m, err
    n = int(m.group(1))
    assert checkpoints(run) == [f"iter_{n:08d}.safetensors"]
    assert not (run / ".lock").exists()


class StderrLines:
    """The lines a child writes to stderr, collected by a thread as they come."""

    def __init__(self, proc):
        self.lines = []
        self._thread = threading.Thread(target=lambda: self.lines.extend(proc.stderr), daemon=True)
        self._thread.start()

    def wait_for(self, text, proc, timeout=60.0):
        wait_until(lambda: any(text in line for line in self.lines), proc, timeout)

    def text(self):
        self._thread.join(timeout=30)
        return "".join(self.lines)


def start_guarded(args, **kwargs):
    """srgrad-train as its entry point runs it (srgrad_cli.run), through tests/reliability/
    starting.py: `ready` on stderr once inside the guard, before numpy and numba load."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import srgrad_cli; srgrad_cli.run('tests.reliability.starting', "
         "'main')", *map(str, args)], cwd=REPO, env=driver_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, **kwargs)
    assert proc.stderr.readline() == "ready\n"
    return proc


@pytest.mark.parametrize("after", [0.0, 0.15, 0.4])
def test_ctrl_c_while_the_command_starts_prints_no_traceback(make_tiny_config, after):
    """The installed command imports numpy and numba (about a second) before its first line: a
    Ctrl-C there printed a KeyboardInterrupt traceback from inside an import. srgrad_cli imports
    the command inside its guard: one line, exit 130, at any moment (`after` seconds into the
    import, or later: the run's own handling then)."""
    cfg = make_tiny_config(iters=500, every=1000)
    proc = start_guarded([cfg, "--no-progress"], preexec_fn=as_in_a_terminal)
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err, err


@pytest.mark.parametrize("swallow", ["0", "1"])
def test_ctrl_c_that_an_import_turns_into_another_error_or_swallows_is_still_a_ctrl_c(swallow):
    """A Ctrl-C inside numpy's import came out as an ImportError ('PyCapsule_Import could not import
    module "datetime"' and numpy's page of advice), exit 1 (2 of 30 repeated runs of the test above
    at 0.0 s failed so); one an import swallows would let the command run. The guard notes the signal during
    the import and ends as for any Ctrl-C there."""
    proc = subprocess.run(
        [sys.executable, "-c", "import srgrad_cli; srgrad_cli.run('tests.reliability.starting_lost', 'main')"],
        cwd=REPO, env=driver_env(SRGRAD_TEST_SWALLOW=swallow), capture_output=True, text=True, timeout=120,
        preexec_fn=as_in_a_terminal)
    assert (proc.returncode, proc.stderr) == (130, "interrupted\n"), proc.stderr


def test_sigterm_while_the_command_starts_exits_quietly(make_tiny_config):
    """SIGTERM before the trainer handles it: the process ends quietly, killed by the signal (the
    shell's 143, what a handled SIGTERM exits with too)."""
    cfg = make_tiny_config(iters=500, every=1000)
    proc = start_guarded([cfg, "--no-progress"])
    time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM) and err == "", err


def test_a_second_ctrl_c_while_the_process_exits_prints_no_traceback(make_tiny_config, tmp_path):
    """After the first Ctrl-C's checkpoint and resume hint, the interpreter waits for the batch
    loader's thread to finish its batch: a second Ctrl-C there printed a traceback from the
    threads' shutdown. Now it ends the process at once, quietly, with the same exit code."""
    cfg = make_tiny_config(iters=500, every=1000)
    run = tmp_path / "runs" / "tiny"
    proc = start_train([cfg], SRGRAD_TEST_LOAD_DELAY=1.0)  # each batch takes a second to load
    err = StderrLines(proc)
    wait_until(lambda: logged_rows(run) >= 1, proc)
    proc.send_signal(signal.SIGINT)
    err.wait_for("Resume with:", proc)
    wait_until(lambda: not (run / ".lock").exists(), proc)  # the trainer has returned
    proc.send_signal(signal.SIGINT)  # while a loader thread still sleeps in its batch
    proc.wait(timeout=60)
    text = err.text()
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "Exception ignored" not in text, text
    assert "nothing written" not in text, text  # (what a signal in the lock's release said)
    n = int(re.search(r"interrupted at iteration (\d+);", text).group(1))
    assert checkpoints(run) == [f"iter_{n:08d}.safetensors"]


# -- Ctrl-C during a validation ---------------------------------------------------------------------
def _with_validation(make_tiny_config, tiny_train, iters, val_every):
    """The tiny run with a validation set (the three training images) every `val_every`."""
    path = make_tiny_config(iters=iters, every=val_every)
    text = path.read_text().replace(
        "datasets:\n", f"datasets:\n  val: {{type: HRImageDataset, root: {tiny_train}}}\n")
    path.write_text(text + f"val: {{every: {val_every}}}\n")
    return path


def _metrics(run):
    """metrics.csv without the time column: what an uninterrupted run must reproduce exactly."""
    lines = (run / "metrics.csv").read_text().splitlines()
    return [",".join(c for i, c in enumerate(line.split(",")) if i != 1) for line in lines]


@pytest.mark.parametrize("final", [True, False], ids=["final validation", "mid-run validation"])
def test_ctrl_c_in_a_validation_is_saved_and_redone_on_resume(make_tiny_config, tiny_train,
                                                              tmp_path, final):
    """The independent check's case: Ctrl-C while the final validation writes its images exited 0
    with `done`, a stale (or no) net_best and a metrics row without PSNR, and --resume auto could
    not repair it. Now: exit 130 and the resume hint; --resume auto redoes that validation and the
    run ends exactly like an uninterrupted one (metrics.csv row for row, net_best)."""
    iters, every = (4, 4) if final else (4, 2)
    cfg = _with_validation(make_tiny_config, tiny_train, iters, every)
    run = tmp_path / "runs" / "tiny"
    # each comparison image waits 1 s before its rename: the signal lands inside the validation
    proc = start_train([cfg], SRGRAD_TEST_REPLACE_DELAY=1.0, SRGRAD_TEST_REPLACE_ONLY="images")
    wait_until(lambda: any(p.suffix == ".tmp" for p in (run / "images").rglob("*"))
               if (run / "images").exists() else False, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    n = every
    assert f"interrupted at iteration {n} during the validation of iteration {n} (it runs again " \
           f"on resume)" in err, err
    assert "Resume with:" in err and "done:" not in err
    rows = _metrics(run)
    assert all(not r.startswith(f"{n},") for r in rows[1:])  # the row waits for its validation
    result = run_train([cfg, "--resume", "auto"])
    assert result.returncode == 0, result.stderr
    assert f"[iter {n}] val" in result.stderr  # redone
    assert (run / "net_best.safetensors").exists()
    ref = make_tiny_config(name="ref.yaml")
    ref.write_text(cfg.read_text().replace("name: tiny", "name: ref"))
    assert run_train([ref]).returncode == 0
    assert _metrics(run) == _metrics(tmp_path / "runs" / "ref")
    best = ckpt.load_weights(run / "net_best.safetensors")
    ref_best = ckpt.load_weights(tmp_path / "runs" / "ref" / "net_best.safetensors")
    assert best[1]["best"] == ref_best[1]["best"]
    for k in best[0]:
        np.testing.assert_array_equal(best[0][k], ref_best[0][k])


def test_metrics_csv_after_a_resume_off_the_log_boundary_is_identical(make_tiny_config, tmp_path,
                                                                      monkeypatch, capsys):
    """A Ctrl-C resume from a checkpoint between two loss rows (here after iteration 5, log_every
    3) used to lose the running average: the next row averaged fewer iterations (row 6 averaged
    one loss). The checkpoint now carries it: metrics.csv equals an uninterrupted run's."""
    cfg = make_tiny_config(iters=8, every=4)
    cfg.write_text(cfg.read_text().replace("log_every: 1", "log_every: 3"))
    real_step = Trainer._train_step

    def step(self, batch):  # a Ctrl-C that arrives during iteration 5
        if self.iteration == 4 and "ref" not in str(self.run_dir):
            self._stop_signal = signal.SIGINT
        return real_step(self, batch)
    monkeypatch.setattr(Trainer, "_train_step", step)
    assert train_main([str(cfg), "--no-progress"]) == 130
    assert "interrupted at iteration 5" in capsys.readouterr().err
    monkeypatch.setattr(Trainer, "_train_step", real_step)
    assert train_main([str(cfg), "--resume", "auto", "--no-progress"]) == 0
    assert train_main([str(cfg), "--set", "name=ref", "--no-progress"]) == 0
    capsys.readouterr()
    assert _metrics(tmp_path / "runs" / "tiny") == _metrics(tmp_path / "runs" / "ref")
    assert [r.split(",")[0] for r in _metrics(tmp_path / "runs" / "ref")] == \
        ["iteration", "3", "6", "8"]


# -- non-finite loss ------------------------------------------------------------------------------
def saved_bytes(monkeypatch):
    """Record every checkpoint's bytes right after Trainer.save writes it."""
    record = {}
    original = Trainer.save

    def save(self):
        original(self)
        path = self.run_dir / "checkpoints" / f"iter_{self.iteration:08d}.safetensors"
        record[path] = path.read_bytes()

    monkeypatch.setattr(Trainer, "save", save)
    return record


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's overflow warnings are expected
def test_diverging_loss_stops_naming_the_iteration(make_tiny_config, tmp_path, monkeypatch, capsys):
    """SGD with lr 1e38: the weights after step 1 are finite but huge; the loss of iteration 2
    overflows to inf. Exit 1 with a message naming the iteration and the last good checkpoint,
    which is byte-identical to what was written."""
    cfg = make_tiny_config(iters=6, every=1)
    cfg.write_text(cfg.read_text().replace("{type: Adam, lr: 1e-2}", "{type: SGD, lr: 1e38}"))
    saved = saved_bytes(monkeypatch)
    assert train_main([str(cfg), "--no-progress"]) == 1
    err = capsys.readouterr().err
    run = tmp_path / "runs" / "tiny"
    last = run / "checkpoints" / "iter_00000001.safetensors"
    assert f"error: loss is inf at iteration 2: training stopped. The last good checkpoint " \
           f"({last}) is untouched. Lower train.optimizer.lr, set train.grad_clip, or set " \
           f"train.nonfinite_loss: skip" in err
    assert "Traceback" not in err
    assert checkpoints(run) == [last.name] and last.read_bytes() == saved[last]
    assert not (run / ".lock").exists()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_an_update_that_makes_the_weights_non_finite_is_never_checkpointed(make_tiny_config, tmp_path,
                                                                          capsys):
    """Adam with lr 1e38: the bias-corrected step (lr / 0.1) overflows float32 at step 1, with a
    finite loss. No checkpoint may hold those weights: "last good" must be good."""
    cfg = make_tiny_config(iters=6, every=1)
    cfg.write_text(cfg.read_text().replace("lr: 1e-2", "lr: 1e38"))
    assert train_main([str(cfg), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert re.search(r"error: the optimizer step made the weights non-finite \(the value of "
                     r"[\w.]+ is not finite, loss [\d.]+\) at iteration 1: training stopped\. The "
                     r"last good checkpoint \(none yet\) is untouched", err), err
    assert not (tmp_path / "runs" / "tiny" / ".lock").exists()
    run = tmp_path / "runs" / "tiny"
    for name in checkpoints(run):
        state = ckpt.load_checkpoint(run / "checkpoints" / name)
        assert all(np.isfinite(v).all() for v in state["model"].values()), name
    if (run / "net_latest.safetensors").exists():
        weights, _ = ckpt.load_weights(run / "net_latest.safetensors")
        assert all(np.isfinite(v).all() for v in weights.values())


def state_of(trainer):
    return ({k: v.copy() for k, v in trainer.model.state_dict().items()},
            trainer.recipe.optimizer.state_dict()["state"][0]["step"])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_skip_option_skips_non_finite_batches_and_leaves_the_state_alone(make_tiny_config, capsys):
    """train.nonfinite_loss: skip: a NaN loss, an Inf loss and a NaN gradient (with a finite loss)
    are each skipped with a warning naming the iteration; weights and optimizer state do not
    change on those iterations; training completes."""
    from framework.engine.config.schema import load_config
    cfg = load_config(make_tiny_config(iters=6, every=6), ["train.nonfinite_loss=skip"])
    t = Trainer(cfg, progress=False)
    loss_fn, reduce = t.recipe.criteria["pixel"], t.recipe.reduce
    poison = {2: float("nan"), 3: float("inf")}  # iteration (1-based) -> loss factor

    def loss(out, gt):
        return loss_fn(out, gt) * poison.get(t.iteration + 1, 1.0)

    def reduce_gradients(params, values):
        if t.iteration + 1 == 5:  # a NaN gradient in one weight, the loss itself finite
            p = next(iter(t.model.parameters()))
            p.grad.data[...] = np.nan
        return reduce(params, values)

    t.recipe.criteria["pixel"], t.recipe.reduce = loss, reduce_gradients
    states = []
    original = t._train_step

    def step(batch):
        result = original(batch)
        states.append(state_of(t))
        return result

    t._train_step = step
    assert t.fit()["iteration"] == 6
    err = capsys.readouterr().err
    assert "warning: loss is nan at iteration 2: batch skipped" in err
    assert "warning: loss is inf at iteration 3: batch skipped" in err
    assert "warning: the gradient of first_part.0.weight is not finite at iteration 5: batch " \
        "skipped" in err, err
    for skipped in (2, 3, 5):  # states[i - 1] is the state after iteration i
        before, after = states[skipped - 2], states[skipped - 1]
        assert after[1] == before[1]  # the optimizer did not step
        for k in before[0]:
            np.testing.assert_array_equal(after[0][k], before[0][k])
    assert states[3][1] == states[0][1] + 1  # iteration 4 trained
    assert all(np.isfinite(v).all() for v in states[-1][0].values())


# -- two processes, one run folder ----------------------------------------------------------------
def test_second_process_on_the_same_run_folder_is_refused(make_tiny_config, tmp_path, capsys):
    """A runs (paused by SIGSTOP after its second checkpoint); B, started fresh, with --resume auto
    and with --resume RUN_DIR, is refused with a message naming A; nothing in the folder changes."""
    cfg = make_tiny_config(iters=500, every=2)
    run = tmp_path / "runs" / "tiny"
    a = start_train([cfg])
    try:
        wait_until(lambda: (run / "checkpoints" / "iter_00000004.safetensors").exists(), a)
        a.send_signal(signal.SIGSTOP)
        time.sleep(0.2)  # let a write in flight land
        before = snapshot(run)
        for args in ([str(cfg)], [str(cfg), "--resume", "auto"], ["--resume", str(run)]):
            assert train_main(args + ["--no-progress"]) == 1, args
            err = capsys.readouterr().err
            assert f"error: run folder {run} is in use by process {a.pid} on " \
                   f"{socket.gethostname()} (lock file {run / '.lock'}). Wait for that run to " \
                   f"finish or use another run name" in err, err
            assert snapshot(run) == before, args
    finally:
        a.send_signal(signal.SIGCONT)
        a.send_signal(signal.SIGINT)
        _, err = a.communicate(timeout=120)
    assert a.returncode == 130, err  # A itself was not disturbed: it saves and stops normally
    m = re.search(r"interrupted at iteration (\d+)", err)
    n = int(m.group(1))
    assert ckpt.load_checkpoint(run / "checkpoints" / f"iter_{n:08d}.safetensors")["iteration"] == n


def test_a_resume_removes_partial_files_of_killed_writes_and_nothing_else(make_tiny_config,
                                                                           tmp_path):
    """A kill mid-write leaves a temporary file; the next run on the folder (which owns it once it
    holds the lock) removes those of dead processes, in every subfolder, and leaves any other file
    alone, a symlink with the same kind of name included."""
    cfg = make_tiny_config(iters=2, every=2)
    run = tmp_path / "runs" / "tiny"
    assert train_main([str(cfg), "--no-progress"]) == 0
    dead = dead_pid()
    partial = [run / partial_name("net_latest.safetensors", dead),
               run / "checkpoints" / partial_name("iter_00000004.safetensors", dead)]
    for path in partial:
        path.write_bytes(b"half a file")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not the run's")
    link = run / partial_name("config.yaml", dead)
    link.symlink_to(outside)
    assert train_main([str(cfg), "--resume", "auto", "--set", "train.total_iters=3",
                       "--no-progress"]) == 0
    assert not any(p.exists() for p in partial)
    assert link.is_symlink() and outside.read_bytes() == b"not the run's"


# -- full disk, unwritable folders ----------------------------------------------------------------
class FullDisk:
    """`open` for framework.weights.checkpoint: the first file (after `after` others) whose path
    contains `fail_on` takes half its bytes, then the disk is full (ENOSPC)."""

    def __init__(self, fail_on, after=0):
        self.fail_on, self.after, self.failures = fail_on, after, 0

    def __call__(self, path, mode="r", *args, **kwargs):
        fh = open(path, mode, *args, **kwargs)
        if "w" not in mode or self.fail_on not in os.fspath(path):
            return fh
        if self.after:  # let this many matching writes through first
            self.after -= 1
            return fh
        outer = self

        class Half(io.BufferedWriter):
            def write(self, data):
                fh.write(bytes(data[:len(data) // 2]))
                fh.flush()
                outer.failures += 1
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        return Half(fh.raw)


@pytest.mark.parametrize("fail_on", ["iter_00000004", "net_latest"])
def test_full_disk_while_saving_is_a_clear_error_and_keeps_the_previous_checkpoint(
        make_tiny_config, tmp_path, monkeypatch, capsys, fail_on):
    cfg = make_tiny_config(iters=6, every=2)
    run = tmp_path / "runs" / "tiny"
    saved = saved_bytes(monkeypatch)
    disk = FullDisk(fail_on, after=0 if fail_on.startswith("iter") else 1)
    monkeypatch.setattr(atomic, "open", disk, raising=False)
    assert train_main([str(cfg), "--no-progress"]) == 1
    err = capsys.readouterr().err
    target = (run / "checkpoints" / "iter_00000004.safetensors" if fail_on.startswith("iter")
              else run / "net_latest.safetensors")
    assert disk.failures == 1
    assert f"error: [Errno {errno.ENOSPC}] cannot write {target}: No space left on device (any " \
           f"previous version of the file is intact)" in err, err
    assert "Traceback" not in err
    second = run / "checkpoints" / "iter_00000002.safetensors"
    assert second.read_bytes() == saved[second]
    assert ckpt.load_checkpoint(second)["iteration"] == 2
    assert ckpt.load_weights(run / "net_latest.safetensors")[1]["iteration"] == 2
    assert not list(run.rglob("*.tmp")) and not (run / ".lock").exists()
    # space freed: the run resumes and ends like an uninterrupted one
    monkeypatch.undo()
    assert train_main([str(cfg), "--resume", "auto", "--no-progress"]) == 0
    assert train_main([str(cfg), "--set", "name=straight", "--no-progress"]) == 0
    a, _ = ckpt.load_weights(run / "net_latest.safetensors")
    b, _ = ckpt.load_weights(tmp_path / "runs" / "straight" / "net_latest.safetensors")
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_full_disk_when_a_resumed_run_writes_its_config(make_tiny_config, tmp_path, monkeypatch,
                                                       capsys):
    """The first write of a (resumed) run is config.yaml: ENOSPC there stops before training,
    names the file, and leaves the checkpoints and the old config.yaml as they were."""
    cfg = make_tiny_config(iters=2, every=2)
    run = tmp_path / "runs" / "tiny"
    assert train_main([str(cfg), "--no-progress"]) == 0
    before = snapshot(run)
    monkeypatch.setattr(atomic, "open", FullDisk("config.yaml"), raising=False)
    assert train_main([str(cfg), "--resume", "auto", "--set", "train.total_iters=4",
                       "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"cannot write {run / 'config.yaml'}: No space left on device" in err, err
    assert snapshot(run) == before


def test_full_disk_while_logging_names_the_file(make_tiny_config, tmp_path, monkeypatch, capsys):
    """metrics.csv is appended every log_every iterations: ENOSPC there names the file too."""
    import framework.engine.run.runlog as runlog
    cfg = make_tiny_config(iters=6, every=2)
    real_open = open

    def full(path, mode="r", *args, **kwargs):
        if "a" in mode and str(path).endswith("metrics.csv"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(runlog, "open", full, raising=False)
    assert train_main([str(cfg), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'runs' / 'tiny' / 'metrics.csv'}" in err and "No space left" in err, err
    assert not (tmp_path / "runs" / "tiny" / ".lock").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod; ENOSPC covers this")
def test_read_only_checkpoint_folder_is_a_clear_error(make_tiny_config, tmp_path, capsys):
    cfg = make_tiny_config(iters=4, every=2)
    run = tmp_path / "runs" / "tiny"
    assert train_main([str(cfg), "--set", "train.total_iters=2", "--no-progress"]) == 0
    before = (run / "checkpoints" / "iter_00000002.safetensors").read_bytes()
    os.chmod(run / "checkpoints", 0o555)
    try:
        assert train_main([str(cfg), "--resume", "auto", "--no-progress"]) == 1
    finally:
        os.chmod(run / "checkpoints", 0o755)
    err = capsys.readouterr().err
    assert "cannot write" in err and "Permission denied" in err and "intact" in err, err
    assert (run / "checkpoints" / "iter_00000002.safetensors").read_bytes() == before


def test_unusable_run_root_is_a_clear_error(make_tiny_config, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    cfg = make_tiny_config(iters=2, every=2)
    assert train_main([str(cfg), "--set", f"run_root={blocker}", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(blocker) in err and "Not a directory" in err, err
    assert "Traceback" not in err


def test_crash_while_rewriting_metrics_on_resume_keeps_every_row(tmp_path, monkeypatch):
    """On resume metrics.csv is rewritten without the rows after the checkpoint; a failure (or a
    kill) in the middle must leave the old file whole."""
    import framework.engine.run.runlog as runlog
    path = tmp_path / "metrics.csv"
    log = MetricsLog(path, ["iteration", "loss"])
    for i in range(1, 6):
        log.write(iteration=i, loss=1.0 / i)
    before = path.read_bytes()

    def crash(target, data):
        with open(f"{target}.tmp", "wb") as fh:
            fh.write(data[:10])
        raise OSError(errno.EIO, "simulated crash")

    monkeypatch.setattr(runlog, "write_atomic", crash)
    with pytest.raises(OSError):
        MetricsLog(path, ["iteration", "loss"], resume_iteration=3)
    assert path.read_bytes() == before
    monkeypatch.undo()
    MetricsLog(path, ["iteration", "loss"], resume_iteration=3)
    assert [r["iteration"] for r in MetricsLog(path, ["iteration", "loss"], 9).read()] == \
        ["1", "2", "3"]


def test_a_lock_file_nobody_holds_is_taken_the_kernel_lock_decides(make_tiny_config, tmp_path,
                                                                      capsys):
    """The lock is flock(2) on `.lock`: an empty, garbage or stale-PID file nobody holds is simply
    taken; a file a live process holds is refused even while it is still empty."""
    cfg = make_tiny_config(iters=2, every=2)
    run = tmp_path / "runs" / "tiny"
    run.mkdir(parents=True)
    for text in ("", "garbage", "999999 elsewhere\n"):
        (run / ".lock").write_text(text)
        assert train_main([str(cfg), "--no-progress", "--set", f"name=tiny", "--resume", "auto"]) == 0
        assert not (run / ".lock").exists()
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(run), "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert train_main([str(cfg), "--no-progress", "--resume", "auto"]) == 1
        err = capsys.readouterr().err
        assert f"error: run folder {run} is in use by a starting process (lock file " \
               f"{run / '.lock'})" in err, err
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("link", ["symlink", "hard link", "dangling symlink"])
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_untouched(make_tiny_config, tmp_path,
                                                                        capsys, link):
    """A `.lock` linked to a file elsewhere (a shared folder, an attack) had that file's content
    replaced by "PID host" and the run went on. It is opened no-follow and must be a regular file
    with one link: refused, one line, the target byte-identical (a dangling link creates nothing),
    nothing written in the run folder."""
    cfg = make_tiny_config(iters=2, every=2)
    run = tmp_path / "runs" / "tiny"
    run.mkdir(parents=True)
    target = tmp_path / "precious.txt"
    if link != "dangling symlink":
        target.write_text("someone's data\n")
    (os.link if link == "hard link" else os.symlink)(target, run / ".lock")
    assert train_main([str(cfg), "--no-progress"]) == 1
    err = capsys.readouterr().err
    what = "a file with 2 hard links" if link == "hard link" else "a symbolic link"
    assert f"error: refusing the lock file {run / '.lock'}: it is {what}, not a lock file this " \
           f"run made" in err, err
    assert "Traceback" not in err
    if link == "dangling symlink":
        assert not target.exists()
    else:
        assert target.read_text() == "someone's data\n"
    assert sorted(p.name for p in run.iterdir()) == [".lock"]  # no checkpoints, no config.yaml


# Holds the run lock of argv[1]: writes "PID HOST" unless argv[2] == "0" (then the file stays empty,
# as between a starting run's open and its write), prints "locked", waits to be killed.
LOCK_HOLDER = """
import fcntl, os, socket, sys, time
fd = os.open(os.path.join(sys.argv[1], ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
if sys.argv[2] != "0":
    os.write(fd, f"{os.getpid()} {socket.gethostname()}".encode())
print("locked", flush=True)
time.sleep(120)
"""


def _race(args):
    """One contender: wait at the barrier, try the lock, hold it 20 ms if won. Returns the
    (monotonic, system-wide) interval it owned the lock, or None."""
    run, barrier = args
    from framework.engine.run.runlog import RunLock, RunLockedError
    lock = RunLock(run)
    barrier.wait()
    try:
        lock.acquire()
    except RunLockedError:
        return None
    start = time.monotonic()
    time.sleep(0.02)
    end = time.monotonic()
    lock.release()
    return start, end


def test_simultaneous_restarts_after_a_kill_never_both_own_the_folder(tmp_path):
    """The race the PID-file takeover lost (27 of 600 trials): after a kill -9, several restarts at
    once each find a stale lock. 60 trials x 4 processes released together by a barrier: never do
    two own the folder at the same time, and a stale file never blocks (someone owns it). On a
    loaded machine a contender may arrive after the winner released: owning it then is right."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    run = tmp_path / "run"
    run.mkdir()
    with ctx.Manager() as manager, ctx.Pool(4) as pool:
        barrier = manager.Barrier(4)
        for trial in range(60):
            (run / ".lock").write_text("12345 deadhost\n" if trial % 2 else "")  # left by a kill
            owned = sorted(w for w in pool.map(_race, [(run, barrier)] * 4) if w is not None)
            assert owned, trial
            for (_, end), (start, _) in zip(owned, owned[1:]):
                assert end <= start, (trial, owned)  # one owner at a time


def test_a_dead_unreaped_owner_does_not_block_a_resume(make_tiny_config, tmp_path):
    """A rank that mpirun killed but nobody reaped yet (a zombie; in a container whose PID 1 never
    reaps, forever) counted as alive by the PID check; its flock went with its descriptors."""
    cfg = make_tiny_config(iters=2, every=2)
    run = tmp_path / "runs" / "tiny"
    run.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(run), "1"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    holder.kill()
    deadline = time.monotonic() + 10
    while open(f"/proc/{holder.pid}/stat").read().split(")")[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)  # killed, not yet reaped: a zombie holding its PID
    try:
        assert train_main([str(cfg), "--no-progress"]) == 0
    finally:
        holder.wait()


