"""What a run folder holds besides checkpoints: the lock file, metrics.csv, the curve PNG and the
per-image comparison PNGs; and what a run prints while it goes (Progress)."""
from __future__ import annotations

import csv
import io
import math
import os
import socket
import stat
import sys
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

import numpy as np

from ...io.atomic import clean_partial_writes, write_atomic

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # (absent on Windows, where links need privileges)

__all__ = ["RunLockedError", "RunLock", "MetricsLog", "plot_curves", "curve_panels",
           "comparison_strip", "labelled_strip", "detail_box", "Progress", "duration"]


class RunLockedError(RuntimeError):
    """Another live process trains in the same run folder."""


class RunLock:
    """`run_dir/.lock`, held with flock(2) on an open descriptor: the kernel releases it when its
    process ends however it ends (kill -9 included), so a stale lock cannot exist and two processes
    can never both hold it (taking over a stale PID file was a race: both could judge it stale and
    one could delete the other's fresh lock). The file holds "PID HOSTNAME" of the owner, only for
    messages. It is opened without following a symbolic link and must be a regular file of this
    user with one link: a `.lock` that is a link to a file elsewhere (in a shared folder, an
    attack) would have that file truncated and overwritten, so it is refused (RunLockedError) and
    left as it is. Where fcntl is missing (Windows) the file is created with O_EXCL and a leftover
    one must be deleted by hand. flock is not reliable on some network file systems
    (docs/reliability.md). Taking the lock also removes what a killed run left half-written in the
    folder (framework.io.atomic.clean_partial_writes)."""

    def __init__(self, run_dir):
        self.path = Path(run_dir) / ".lock"
        self.owned = False
        self._fd = None

    def acquire(self) -> None:
        me = f"{os.getpid()} {socket.gethostname()}\n".encode()
        if fcntl is None:
            return self._acquire_excl(me)
        for _ in range(10):
            fd = self._open(os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise RunLockedError(self._in_use()) from None
            # The owner deletes the file on release: if ours is no longer the file at the path, we
            # locked a deleted inode (opened just before the unlink); try the path again.
            try:
                same = os.path.samestat(os.fstat(fd), os.lstat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.pwrite(fd, me, 0)
                self._fd, self.owned = fd, True
                # the folder is ours: what a killed run left half-written goes (io.atomic's rule)
                clean_partial_writes(self.path.parent, recursive=True)
                return
            os.close(fd)
        raise RunLockedError(f"could not take the lock {self.path}: it keeps being replaced")

    def _open(self, flags: int) -> int:
        """The lock file's descriptor, opened without following a link (and without blocking on a
        FIFO); RunLockedError unless it is a regular file of this user with one link."""
        try:
            fd = os.open(self.path, flags | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0), 0o644)
        except FileExistsError:
            raise
        except OSError as exc:
            if os.path.islink(self.path):
                raise RunLockedError(self._refused("a symbolic link")) from None
            raise OSError(exc.errno, f"cannot open the lock file {self.path}: "
                                     f"{exc.strerror or exc}") from None
        st = os.fstat(fd)
        problem = ("not a regular file" if not stat.S_ISREG(st.st_mode) else
                   f"a file with {st.st_nlink} hard links" if st.st_nlink != 1 else
                   f"owned by another user (uid {st.st_uid})"
                   if hasattr(os, "geteuid") and st.st_uid != os.geteuid() else None)
        if problem:
            os.close(fd)
            raise RunLockedError(self._refused(problem))
        return fd

    def _refused(self, what: str) -> str:
        return (f"refusing the lock file {self.path}: it is {what}, not a lock file this run made "
                f"(srgrad creates it as a regular file and never follows a link there). Nothing "
                f"was written to it; remove it if it is yours, or use another run folder")

    def _acquire_excl(self, me: bytes) -> None:
        try:
            fd = self._open(os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            raise RunLockedError(self._in_use() + " If that process is gone, delete the lock "
                                 "file.") from None
        os.write(fd, me)
        os.close(fd)
        self.owned = True

    def _in_use(self) -> str:
        try:  # the owner's "PID HOST", read without following a link
            fd = os.open(self.path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
            try:
                owner = os.read(fd, 256).decode(errors="replace").strip()
            finally:
                os.close(fd)
        except OSError:
            owner = ""
        pid, _, host = owner.partition(" ")
        who = f"process {pid} on {host}" if pid.isdigit() and host else "a starting process"
        return (f"run folder {self.path.parent} is in use by {who} (lock file {self.path}). Wait "
                f"for that run to finish or use another run name (--set name=...).")

    def release(self) -> None:
        if not self.owned:
            return
        try:
            os.remove(self.path)  # while still locked: a waiter then finds the path gone and retries
        except OSError:
            pass
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None
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


def curve_panels(rows: list[dict], psnr_key=None, baseline_key=None) -> list[dict]:
    """What curves.png shows, from metrics.csv's rows: the training losses (the total `loss` and
    every term, BasicSR's `l_*` columns: l_g_pix, l_g_percep, l_g_gan, l_d_real, l_d_fake, ...),
    the discriminator's mean outputs (`out_*`: out_d_real, out_d_fake) when a GAN logs them, and
    the validation PSNR against the baseline's. Each panel: {"ylabel", "series": [(label, its
    iterations, its values)], "log": whether every value is > 0 (log scale), "markers"}."""
    columns = list(rows[0]) if rows else []
    losses = [c for c in columns if c == "loss" or c.startswith("l_")]
    outputs = [c for c in columns if c.startswith("out_")]

    def series(keys):
        out = []
        for key in keys:
            points = [(_num(r["iteration"]), _num(r.get(key))) for r in rows if r.get(key)]
            if points:
                out.append((key, [p[0] for p in points], [p[1] for p in points]))
        return out

    panels = [{"ylabel": "training loss", "series": series(losses), "markers": False}]
    if outputs:
        panels.append({"ylabel": "discriminator output (mean)", "series": series(outputs),
                       "markers": False})
    if psnr_key:
        val = series([psnr_key, baseline_key] if baseline_key else [psnr_key])
        labels = {psnr_key: "model", baseline_key: "bicubic"}
        panels.append({"ylabel": f"validation PSNR, {'Y' if psnr_key.endswith('_y') else 'RGB'} "
                                 f"(dB)", "series": [(labels[k], x, y) for k, x, y in val],
                       "markers": True})
    for panel in panels:
        values = [v for _, _, ys in panel["series"] for v in ys]
        panel["log"] = panel["ylabel"] == "training loss" and bool(values) and \
            all(v > 0 for v in values)
    return panels


def plot_curves(log: MetricsLog, out_path, psnr_key=None, baseline_key=None) -> bool:
    """curve_panels side by side in one PNG; False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = curve_panels(log.read(), psnr_key, baseline_key)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.5), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        for label, xs, ys in panel["series"]:
            ax.plot(xs, ys, "o-" if panel["markers"] and label == "model" else
                    "--" if label == "bicubic" else "-", lw=1, label=label)
        if panel["log"]:
            ax.set_yscale("log")
        if len(panel["series"]) > 1:
            ax.legend(fontsize="small")
        ax.set_xlabel("iteration")
        ax.set_ylabel(panel["ylabel"])
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    write_atomic(out_path, png.getvalue())
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


def labelled_strip(panels, gap: int = 4, max_side: int = 512) -> np.ndarray:
    """[(label, image (C, H, W) in [0, 1])] side by side (comparison_strip) under a white band
    with each panel's label (e.g. "bicubic 27.31 dB | SR 29.02 dB | HR"). Returns (C, 16 + H, W')."""
    from PIL import Image, ImageDraw, ImageFont
    strip = comparison_strip(*(im for _, im in panels), gap=gap)
    band = 16
    canvas = Image.new("L", (strip.shape[2], band), 255)
    draw, font = ImageDraw.Draw(canvas), ImageFont.load_default()
    x = 0
    for label, im in panels:
        draw.text((x + 3, 2), label, fill=0, font=font)
        x += im.shape[2] + gap
    text = np.asarray(canvas, np.float32)[None] / 255
    return np.concatenate([np.repeat(text, strip.shape[0], axis=0).astype(strip.dtype), strip], 1)


def detail_box(image: np.ndarray, size: int = 384) -> tuple[int, int, int, int]:
    """(y0, y1, x0, x1) of the size x size window of `image` (C, H, W) with the most detail (the
    largest sum of absolute horizontal and vertical differences), searched on a half-window grid;
    the whole image when it is no larger."""
    _, h, w = image.shape
    if h <= size and w <= size:
        return 0, h, 0, w
    sh, sw = min(h, size), min(w, size)
    gray = image.mean(axis=0)
    energy = np.zeros((h, w))
    energy[:, 1:] += np.abs(np.diff(gray, axis=1))
    energy[1:, :] += np.abs(np.diff(gray, axis=0))
    table = np.pad(energy.cumsum(0).cumsum(1), ((1, 0), (1, 0)))  # summed-area table
    best, box = -1.0, (0, sh, 0, sw)
    for y0 in sorted({*range(0, h - sh + 1, max(1, sh // 2)), h - sh}):
        for x0 in sorted({*range(0, w - sw + 1, max(1, sw // 2)), w - sw}):
            total = (table[y0 + sh, x0 + sw] - table[y0, x0 + sw] - table[y0 + sh, x0]
                     + table[y0, x0])
            if total > best:
                best, box = total, (y0, y0 + sh, x0, x0 + sw)
    return box


def duration(seconds: float) -> str:
    """'42s', '3m05s', '2h07m', '3d04h'."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


class Progress:
    """What a training run prints as it goes. On a terminal: a tqdm bar with loss and lr. With
    `bar=False` (--no-progress) or when stderr is not a terminal (a log file, a batch job): one
    plain line every `every` iterations (iteration, loss, lr, it/s, ETA) instead of carriage-return
    soup. `enabled=False` (ranks other than 0): nothing."""

    def __init__(self, total: int, initial: int, desc: str, every: int, bar: bool = True,
                 enabled: bool = True, stream=None):
        from tqdm.auto import tqdm
        self.total, self.every, self.desc, self.enabled = total, every, desc, enabled
        self.stream = stream or sys.stderr
        self.bar = bar and enabled and getattr(self.stream, "isatty", lambda: False)()
        self._tqdm = tqdm(total=total, initial=initial, desc=desc, unit="it", dynamic_ncols=True,
                          disable=not self.bar, file=self.stream)
        self._mark = (initial, time.perf_counter())

    def update(self, iteration: int, loss, lr: float) -> None:
        shown = "nan" if loss is None else f"{loss:.4g}"
        if self.bar:
            self._tqdm.update(1)
            self._tqdm.set_postfix(loss=shown, lr=f"{lr:.3g}", refresh=False)
            return
        if not self.enabled or (iteration % self.every and iteration != self.total):
            return
        it0, t0 = self._mark
        now = time.perf_counter()
        rate = (iteration - it0) / max(now - t0, 1e-9)
        self._mark = (iteration, now)
        self.write(f"[{self.desc}] iter {iteration}/{self.total}  loss {shown}  lr {lr:.3g}  "
                   f"{rate:.3g} it/s  ETA {duration((self.total - iteration) / max(rate, 1e-9))}")

    def write(self, msg: str) -> None:
        if not self.enabled:
            return
        if self.bar:
            self._tqdm.write(msg, file=self.stream)
        else:
            print(msg, file=self.stream, flush=True)

    def close(self) -> None:
        self._tqdm.close()
