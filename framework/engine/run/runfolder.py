"""A run folder, the object a Trainer owns: its lock, config.yaml, the checkpoints (written
atomically, found, pruned and read back, the newest loadable one first), the weights files
(net_latest, net_best) and metrics.csv. Rank 0 alone writes. What goes into a checkpoint is the Trainer's and
its recipe's; the files' format is framework/weights/checkpoint.py's.

A run trains only in a folder srgrad made (`adoption_problem`): one that does not exist yet or is
empty (it is then marked with MARKER, written atomically), one that holds MARKER, or one an srgrad
from before the marker made (config.yaml beside checkpoints/iter_*.safetensors in srgrad's
checkpoint format: marked when it is resumed). Any other folder holds the user's files, which
config.yaml, metrics.csv and the checkpoints would replace: refused.
"""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from ... import weights as ckpt
from ...io.atomic import is_temp_name, write_atomic
from ...io.config import dump_config
from .runlog import MetricsLog, RunLock

__all__ = ["RunFolder", "TrainingError", "TrainingInterrupted", "find_latest_checkpoint",
           "CKPT_GLOB", "MARKER", "adoption_problem"]

CKPT_GLOB = "iter_*.safetensors"
MARKER = ".srgrad-run"  # in every run folder srgrad-train made or adopted
_OWN = (".lock", MARKER)  # srgrad's files in a folder it has not marked yet (a run starting)


def adoption_problem(path):
    """Why srgrad-train may not make `path` its run folder (a one-line message), or None: see the
    module docstring. srgrad's lock file, marker and partial files count as nothing."""
    path = Path(path)
    if not path.exists():
        return None
    if not path.is_dir():
        return (f"run folder {path} is a file, not a folder: choose another name with --set "
                f"name=NEW_NAME")
    marker = path / MARKER
    if marker.is_file() and not marker.is_symlink():
        return None
    foreign = sorted(n for n in os.listdir(path) if n not in _OWN and not is_temp_name(n))
    if not foreign or _made_before_the_marker(path):
        return None
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    return (f"run folder {path} holds files srgrad did not make ({shown}): refusing to train "
            f"there (config.yaml, metrics.csv and checkpoints would replace files of those names); "
            f"choose another name with --set name=NEW_NAME, or empty the folder")


def _made_before_the_marker(path: Path) -> bool:
    """config.yaml beside a checkpoint in srgrad's format: a run folder of an srgrad before the
    marker (its checkpoints' headers are read, not the whole files)."""
    if not (path / "config.yaml").is_file():
        return False
    return any(ckpt.file_format(f) == ckpt.CHECKPOINT_FORMAT
               for f in sorted((path / "checkpoints").glob(CKPT_GLOB), reverse=True))


class TrainingError(RuntimeError):
    """Training cannot go on (non-finite loss, run folder already used, ...)."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: a checkpoint was saved (or the message says which one is the latest);
    `resume_hint` says how to continue, `signum` which signal it was (the exit code is 128 + it).
    `saved`: every rank stopped at the same iteration after the checkpoint was written (False: a
    second signal stopped this process at once)."""

    def __init__(self, message, resume_hint="", signum=signal.SIGINT, saved=True):
        super().__init__(message)
        self.resume_hint, self.signum, self.saved = resume_hint, int(signum), saved


def find_latest_checkpoint(run_dir):
    """The checkpoint with the highest iteration in run_dir/checkpoints, or None."""
    files = sorted(Path(run_dir, "checkpoints").glob(CKPT_GLOB))
    return files[-1] if files else None


class RunFolder:
    """`path` (created by `open`); `write`: this process writes it (rank 0)."""

    def __init__(self, path, write: bool = True):
        self.path = Path(path)
        self.write = write
        self.checkpoints = self.path / "checkpoints"
        self.lock = RunLock(self.path)
        self.log = None  # metrics.csv, from `start`

    def open(self) -> None:
        """Create the folder; the writer checks it may (TrainingError: a folder of the user's),
        takes its lock (RunLockedError when another process holds it) and marks it as a run
        folder (MARKER)."""
        problem = adoption_problem(self.path) if self.write else None
        if problem:
            raise TrainingError(problem)
        self.path.mkdir(parents=True, exist_ok=True)
        if self.write:
            self.lock.acquire()
            marker = self.path / MARKER
            if not marker.is_file() or marker.is_symlink():
                write_atomic(marker, json.dumps({"made_by": "srgrad-train",
                                                 "format": "srgrad.run/1"}).encode() + b"\n")

    def close(self) -> None:
        self.lock.release()

    def latest(self):
        """The newest checkpoint file, or None."""
        return find_latest_checkpoint(self.path)

    def load_newest(self, load, say):
        """`load(path)` the newest checkpoint that loads; one that does not (truncated by a copy cut
        short, or a disk that lied about fsync) is skipped with a line saying why (`say`). Returns
        the path loaded, or None when there is no checkpoint; TrainingError when none loads."""
        files = sorted(self.checkpoints.glob(CKPT_GLOB))
        for path in reversed(files):
            try:
                load(path)
                return path
            except ckpt.CheckpointError as exc:
                older = "trying the one before" if path != files[0] else "no older one"
                say(f"warning: skipping checkpoint {path}: {exc} ({older})")
        if files:
            raise TrainingError(f"no checkpoint in {self.checkpoints} loads (each is named above); "
                                f"start another run with --set name=NEW_NAME")
        return None

    def start(self, cfg: dict, columns, resumed_at) -> None:
        """The writer's first writes: the checkpoints folder, config.yaml (the resolved config)
        and metrics.csv (rows after `resumed_at`, an iteration or None, dropped)."""
        if not self.write:
            return
        self.checkpoints.mkdir(exist_ok=True)
        write_atomic(self.path / "config.yaml", dump_config(cfg).encode())
        self.log = MetricsLog(self.path / "metrics.csv", columns, resume_iteration=resumed_at)

    def save_checkpoint(self, iteration: int, nets: dict, states: dict, /, **info) -> Path:
        """iter_<iteration>.safetensors (atomic): `nets` (state_dicts by name, "model" among them)
        and `states` (optimizer / scheduler states by name, "optimizer" and "scheduler" among them),
        with JSON `info`."""
        nets, states = dict(nets), dict(states)
        path = self.checkpoints / f"iter_{iteration:08d}.safetensors"
        ckpt.save_checkpoint(path, nets.pop("model"), states.pop("optimizer"),
                             states.pop("scheduler"), nets=nets, states=states,
                             iteration=iteration, **info)
        return path

    def save_weights(self, filename: str, model_state: dict, ema_state, /, **info) -> None:
        """A weights file of the folder (net_latest / net_best.safetensors), atomic."""
        ckpt.save_weights(self.path / filename, model_state, ema_state=ema_state, **info)

    def prune(self, keep: int) -> None:
        """Delete all but the newest `keep` checkpoints."""
        for old in sorted(self.checkpoints.glob(CKPT_GLOB))[:-keep]:
            old.unlink()

    def on_disk(self, iteration: int) -> str:
        """What a process stopped at once (maybe inside a write) at `iteration` leaves: writes are
        atomic, so a checkpoint file there is whole; net_latest may lag behind it."""
        latest = self.latest()
        latest_iter = int(latest.stem.split("_")[1]) if latest is not None else None
        if latest_iter == iteration:
            state = f"the checkpoint of iteration {iteration} was written: {latest}"
        elif latest is not None:
            state = (f"no checkpoint of iteration {iteration}; the latest is {latest} "
                     f"(iteration {latest_iter})")
        else:
            state = "no checkpoint has been written yet"
        weights = self.path / "net_latest.safetensors"
        try:
            lagging = ckpt.load_weights(weights)[1].get("iteration") != latest_iter
        except (ckpt.CheckpointError, OSError):
            lagging = latest is not None
        if lagging and latest is not None:
            state += f" ({weights.name} may be older)"
        return state
