"""What a run folder holds besides checkpoints: the lock file, metrics.csv, the curve PNG and the
per-image comparison PNGs."""
from __future__ import annotations

import csv
import io
import math
import os
import socket
import time
from pathlib import Path

import numpy as np

from ..io.checkpoint import write_atomic

__all__ = ["RunLockedError", "RunLock", "MetricsLog", "plot_curves", "comparison_strip"]


class RunLockedError(RuntimeError):
    """Another live process trains in the same run folder."""


# seconds an empty or unreadable lock file counts as being written by a starting process
LOCK_WRITE_GRACE = 10.0


def _age(path) -> float:
    try:
        return time.time() - os.stat(path).st_mtime
    except OSError:  # gone meanwhile
        return math.inf


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class RunLock:
    """`run_dir/.lock` holding "PID HOSTNAME", created with O_EXCL so two processes cannot both own
    it. A lock left by a dead process on this host (kill -9, power loss) is taken over; an empty
    one is taken over only once it is LOCK_WRITE_GRACE seconds old (younger, its owner may still
    be writing its PID)."""

    def __init__(self, run_dir):
        self.path = Path(run_dir) / ".lock"
        self.owned = False

    def acquire(self) -> None:
        me = f"{os.getpid()} {socket.gethostname()}"
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._check_stale()
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(me + "\n")
            self.owned = True
            return
        raise RunLockedError(f"could not take the lock {self.path}")

    def _check_stale(self) -> None:
        try:
            pid_s, _, host = self.path.read_text().strip().partition(" ")
            pid = int(pid_s)
        except (OSError, ValueError):
            pid, host = None, ""
        if pid is None and _age(self.path) < LOCK_WRITE_GRACE:
            # its owner has created it (O_EXCL) but not yet written "PID HOST": not garbage
            raise RunLockedError(
                f"run folder {self.path.parent} is being claimed by another process (lock file "
                f"{self.path} is empty); try again in a moment or use another run name")
        if pid is not None and (host != socket.gethostname() or _pid_alive(pid)):
            raise RunLockedError(
                f"run folder {self.path.parent} is in use by process {pid} on {host} (lock file "
                f"{self.path}). Wait for that run to finish or use another run name "
                f"(--set name=...). If that process is gone, delete the lock file.")
        # stale: its owner died without cleaning up (or the file is unreadable garbage)
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def release(self) -> None:
        if self.owned:
            try:
                if self.path.read_text().split(" ", 1)[0] == str(os.getpid()):
                    os.remove(self.path)
            except OSError:
                pass
            self.owned = False


class MetricsLog:
    """metrics.csv: one row per log or validation event, fixed columns, appended and flushed as it
    goes. On resume, rows after the resumed iteration (logged after the last checkpoint by the
    interrupted run) are dropped so the file reads as one uninterrupted run."""

    def __init__(self, path, columns, resume_iteration=None):
        self.path, self.columns = Path(path), list(columns)
        rows = []
        if resume_iteration is not None and self.path.exists():
            with open(self.path, newline="") as fh:
                rows = [r for r in csv.DictReader(fh) if _num(r.get("iteration")) <= resume_iteration]
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, self.columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        # atomically: a crash while rewriting must not lose the rows of the runs before it
        write_atomic(self.path, text.getvalue().encode())

    def write(self, **row) -> None:
        try:
            with open(self.path, "a", newline="") as fh:
                csv.DictWriter(fh, self.columns, extrasaction="ignore").writerow(
                    {k: _fmt(v) for k, v in row.items()})
        except OSError as exc:  # e.g. a full disk: say which file
            raise OSError(exc.errno, f"cannot append to {self.path}: {exc.strerror or exc}") \
                from exc

    def read(self) -> list[dict]:
        with open(self.path, newline="") as fh:
            return list(csv.DictReader(fh))


def _fmt(v):
    return f"{v:.6g}" if isinstance(v, float) else v


def _num(s) -> float:
    try:
        return float(s)
    except (TypeError, ValueError):
        return math.nan


def plot_curves(log: MetricsLog, out_path, psnr_key=None, baseline_key=None) -> bool:
    """Loss and validation PSNR against iteration in one PNG; False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = log.read()
    train = [(_num(r["iteration"]), _num(r["loss"])) for r in rows if r.get("loss")]
    fig, axes = plt.subplots(1, 2 if psnr_key else 1, figsize=(10 if psnr_key else 5, 3.5),
                             squeeze=False)
    ax = axes[0][0]
    if train:
        ax.plot(*zip(*train), lw=1)
        ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("training loss")
    if psnr_key:
        ax = axes[0][1]
        val = [(_num(r["iteration"]), _num(r[psnr_key]), _num(r.get(baseline_key)))
               for r in rows if r.get(psnr_key)]
        if val:
            it, sr, bic = zip(*val)
            ax.plot(it, sr, "o-", label="model")
            ax.plot(it, bic, "--", label="bicubic")
            ax.legend()
        ax.set_xlabel("iteration")
        ax.set_ylabel(f"validation PSNR, {'Y' if psnr_key.endswith('_y') else 'RGB'} (dB)")
    fig.tight_layout()
    tmp = f"{out_path}.tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, out_path)
    return True


def comparison_strip(*images, gap: int = 4) -> np.ndarray:
    """Images (C, H, W) of equal height side by side with white gaps (bicubic | SR | HR)."""
    c = max(im.shape[0] for im in images)
    h = max(im.shape[1] for im in images)
    parts = []
    for i, im in enumerate(images):
        if im.shape[0] != c:
            im = np.repeat(im, c, axis=0)
        im = np.pad(im, ((0, 0), (0, h - im.shape[1]), (0, 0)), constant_values=1.0)
        parts.append(im)
        if i < len(images) - 1:
            parts.append(np.ones((c, h, gap), im.dtype))
    return np.clip(np.concatenate(parts, axis=2), 0.0, 1.0)
