"""kill -9 at random moments, including inside checkpoint writes: nothing is lost, resume is exact.

Training subprocesses (a checkpoint every iteration; every `*.tmp` file waits a little before it is
`os.replace`d, see train_driver.py, so kills often land mid-write) are killed with SIGKILL at times
drawn from a seeded rng, in chains: start, kill, check the run folder, resume, kill, check, ...
Every chain is finally resumed to the end, and its weights, optimizer state and loss log must equal
an uninterrupted run's bit for bit (the trainer is deterministic: the loader is a pure function of
(seed, iteration) and every checkpoint holds the full optimizer and scheduler state).
"""
import csv
import signal
import time

import numpy as np
import pytest

from framework.engine.run.trainer import find_latest_checkpoint
from framework.weights import checkpoint as ckpt

from .conftest import run_train, start_train

ITERS = 6
TRIALS = 20
REPLACE_DELAY = 0.05  # seconds a written *.tmp waits before os.replace


def losses(run):
    with open(run / "metrics.csv", newline="") as fh:
        return [(int(r["iteration"]), r["loss"]) for r in csv.DictReader(fh)]


def check_run_folder(run, had_a_checkpoint):
    """Invariants after a kill: every checkpoint and net_latest load; none is ahead of the latest."""
    latest = find_latest_checkpoint(run)
    if latest is None:
        assert not had_a_checkpoint, f"{run}: the checkpoints disappeared"
        return None
    state = ckpt.load_checkpoint(latest)  # raises on a partial file
    it = state["iteration"]
    assert latest.name == f"iter_{it:08d}.safetensors"
    assert state["optimizer"]["state"], "optimizer state missing from the checkpoint"
    assert all(np.isfinite(v).all() for v in state["model"].values())
    # older checkpoints that are kept load as well
    for path in sorted((run / "checkpoints").glob("iter_*.safetensors")):
        assert ckpt.load_checkpoint(path)["iteration"] <= it
    # net_latest is written right after each checkpoint, so it loads and is never ahead of it (it
    # lags when kills fall between the two writes, possibly in several runs in a row)
    if (run / "net_latest.safetensors").exists():
        _, info = ckpt.load_weights(run / "net_latest.safetensors")
        assert info["iteration"] <= it
    return it


def newest_checkpoint(run):
    path = find_latest_checkpoint(run)
    return (path.name, path.stat().st_mtime_ns) if path else None


def kill_at(proc, delay, run, after_progress):
    """SIGKILL `proc` `delay` seconds after its start or, with `after_progress`, after it has
    written a new checkpoint (so the kill lands in the training loop, among the writes).
    Returns (exit code, whether a *.tmp file was left behind)."""
    if after_progress:
        before = newest_checkpoint(run)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if newest_checkpoint(run) != before:
                    break
            except FileNotFoundError:  # pruned between the listing and the stat
                pass
            time.sleep(0.002)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()  # reap it: a zombie's PID would still look alive to the lock
    return proc.returncode, any(run.rglob("*.tmp"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_train):
    """An uninterrupted run: (run folder, its final weights, seconds per iteration)."""
    from tests.conftest import tiny_config_text
    root = tmp_path_factory.mktemp("reference")
    cfg = root / "cfg.yaml"
    cfg.write_text(tiny_config_text(tiny_train, root / "runs", iters=ITERS, every=1))
    proc = start_train([cfg], SRGRAD_TEST_REPLACE_DELAY=REPLACE_DELAY)
    run = root / "runs" / "tiny"
    times = []  # when each checkpoint appeared
    while proc.poll() is None:
        if len(times) < ITERS and (run / "checkpoints" / f"iter_{len(times) + 1:08d}.safetensors"
                                   ).exists():
            times.append(time.monotonic())
        time.sleep(0.002)
    assert proc.wait() == 0, proc.communicate()[1]
    weights, _ = ckpt.load_weights(run / "net_latest.safetensors")
    return run, weights, (times[-1] - times[0]) / max(1, len(times) - 1)


def check_resumed_run_equals_reference(run, reference):
    ref_run, ref_weights, _ = reference
    ref_state = ckpt.load_checkpoint(ref_run / "checkpoints" / f"iter_{ITERS:08d}.safetensors")
    weights, info = ckpt.load_weights(run / "net_latest.safetensors")
    assert info["iteration"] == ITERS
    assert weights.keys() == ref_weights.keys()
    for key in weights:
        np.testing.assert_array_equal(weights[key], ref_weights[key], err_msg=f"{run}: {key}")
    state = ckpt.load_checkpoint(run / "checkpoints" / f"iter_{ITERS:08d}.safetensors")
    for i, s in ref_state["optimizer"]["state"].items():
        for name in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(state["optimizer"]["state"][i][name], s[name])
    assert state["scheduler"] == ref_state["scheduler"]
    # the loss log reads as one uninterrupted run, with the same numbers
    assert losses(run) == losses(ref_run), f"{run}: metrics.csv differs"
    assert not list(run.rglob("*.tmp")), f"{run}: temporary files left behind"
    assert not (run / ".lock").exists()


def test_kill_9_at_random_moments_loses_nothing_and_resumes_exactly(reference, make_tiny_config):
    """TRIALS kills in chains: start, kill, check; resume, kill, check; ... When a resumed run
    reaches the end before its kill, the chain's result is compared with the reference and a new
    chain starts. The last chain is resumed to the end and compared too."""
    rng = np.random.default_rng(20261129)
    cfg = make_tiny_config(iters=ITERS, every=1)
    period = reference[2]
    chain, fresh, compared = 0, True, 0
    killed_mid_write = killed_in_loop = 0
    trial = 0
    while trial < TRIALS:
        run_root = cfg.parent / f"chain{chain}"
        run = run_root / "tiny"
        args = [cfg, "--set", f"run_root={run_root}"] + ([] if fresh else ["--resume", "auto"])
        after_progress = bool(rng.random() < 0.75)
        delay = rng.uniform(0, 2.5 * period if after_progress else 3.0)
        had_checkpoint = find_latest_checkpoint(run) is not None
        proc = start_train(args, SRGRAD_TEST_REPLACE_DELAY=REPLACE_DELAY)
        code, tmp_left = kill_at(proc, delay, run, after_progress)
        if code == 0:  # it reached the end before the kill
            check_resumed_run_equals_reference(run, reference)
            compared += 1
            chain, fresh = chain + 1, True
            continue
        assert code == -signal.SIGKILL, f"trial {trial}: exit code {code}"
        trial += 1
        fresh = False
        killed_mid_write += tmp_left
        killed_in_loop += after_progress
        check_run_folder(run, had_checkpoint or after_progress)
    result = run_train([cfg, "--set", f"run_root={cfg.parent / f'chain{chain}'}", "--resume",
                        "auto"])
    assert result.returncode == 0, result.stderr
    check_resumed_run_equals_reference(cfg.parent / f"chain{chain}" / "tiny", reference)
    compared += 1
    # the seeded draws must have exercised the interesting moments
    assert killed_in_loop >= 5 and killed_mid_write >= 1, (killed_in_loop, killed_mid_write)
    print(f"{TRIALS} kills in {chain + 1} chains; {killed_mid_write} left a *.tmp (mid-write), "
          f"{compared} runs compared with the reference")
