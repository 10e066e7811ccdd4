"""`srgrad-prepare`: cut large HR images (DIV2K) into sub-images with their bicubic LR partners, so
training reads small PNGs instead of decoding and resizing a 2040x1356 image per sample.

    srgrad-prepare --input HR_DIR --output OUT_DIR [--crop-size 480] [--step 240]
                   [--thresh-size 0] [--scales 2 3 4] [--workers N] [--no-progress]

writes OUT_DIR/HR/<stem>_sNNN.png and OUT_DIR/LR_bicubic/X<s>/<stem>_sNNN.png: BasicSR's layout
of sub-image folders (extract_subimages.py names an LR sub-image as its HR one, dropping DIV2K's
`x2`), which `PairedImageDataset(gt_root=OUT_DIR/HR, lq_root=OUT_DIR/LR_bicubic/X<s>, scale=s)`
reads with its default filename_tmpl '{name}', as BasicSR's option files read their `_sub` folders
with `filename_tmpl: '{}'` (srgrad-convert options keeps that).

Windows follow BasicSR's extract_subimages.py: crop_size squares every `step` pixels, plus one
flush with the bottom/right edge when more than `thresh_size` pixels would be left over; numbered
row by row from s001; PNG compression level 3. Where BasicSR crops the LR sub-images out of LR
images of the whole photo, each LR here is `F.imresize` of its own HR sub-image (MATLAB bicubic with
antialias, clipped and rounded to 8 bits: exactly HRImageDataset's LR for that HR file), so every
pair is an exact imresize pair; each HR sub-image is first cut at the bottom/right to a multiple of
every scale. A side shorter than crop_size is kept whole (one window). Sub-images keep the source's
channels (gray stays gray) and bit depth (16-bit gray HR stays 16-bit; LR is always 8-bit); alpha is
dropped, as the datasets drop it.

Resumable: every file is written atomically, so an existing output is complete and is skipped
(an image whose outputs all exist is not even decoded); a re-run after a kill finishes the job.
OUT_DIR/prepare.json records crop_size / step / thresh_size, and a re-run with others is refused.
Exit codes: 0 done, 1 some images failed (each reported, the others done), 2 bad arguments,
130 interrupted.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np

__all__ = ["main", "windows", "prepare_image"]

SETTINGS_FILE = "prepare.json"
# the LR sub-image's name for HR sub-image {name} (recorded in prepare.json: an older srgrad-prepare
# wrote {name}x{scale}, and a folder is never filled with both)
LR_NAME = "{name}"
_STOP = None  # in pool workers: the parent's stop Event (see _results)


class _Stopped(Exception):
    """The parent stopped the pool: leave this image (its written files are whole)."""


def _axis_starts(n: int, crop: int, step: int, thresh: int) -> tuple[list[int], int]:
    """(window starts, window length) along a side of n pixels (BasicSR's rule; a side shorter
    than the crop is one window of n)."""
    if n <= crop:
        return [0], n
    starts = list(range(0, n - crop + 1, step))
    if n - (starts[-1] + crop) > thresh:
        starts.append(n - crop)
    return starts, crop


def windows(width: int, height: int, crop: int, step: int, thresh: int, multiple: int = 1):
    """Sub-image boxes (top, left, h, w) of a width x height image, row by row; h and w cut down
    to multiples of `multiple` (all boxes are empty when a side is shorter than it)."""
    tops, h = _axis_starts(height, crop, step, thresh)
    lefts, w = _axis_starts(width, crop, step, thresh)
    h, w = h - h % multiple, w - w % multiple
    return [(top, left, h, w) for top in tops for left in lefts]


def _targets(out: Path, stem: str, count: int, scales):
    """[(hr_path, [(scale, lr_path), ...]), ...] of sub-images 1..count of `stem`."""
    result = []
    for k in range(1, count + 1):
        name = f"{stem}_s{k:03d}"
        result.append((out / "HR" / f"{name}.png",
                       [(s, out / "LR_bicubic" / f"X{s}" / f"{LR_NAME.format(name=name)}.png")
                        for s in scales]))
    return result


def _save(path: Path, q: np.ndarray, level: int) -> None:
    """Write (C, H, W) uint8/uint16 as a PNG (gray or RGB), atomically."""
    from PIL import Image
    from ..io.atomic import atomic_open
    im = Image.fromarray(q[0]) if q.shape[0] == 1 else Image.fromarray(q.transpose(1, 2, 0), "RGB")
    with atomic_open(path) as fh:
        im.save(fh, format="PNG", compress_level=level)


def _lr_levels(hr: np.ndarray, scale: int) -> np.ndarray:
    """uint8 (C, h, w): HRImageDataset's quantised LR of float32 HR (C, H, W), as 0..255 levels."""
    from .. import functional as F
    from ..autograd import no_grad
    from ..tensor import Tensor
    with no_grad():
        lr = F.imresize(Tensor(hr[None]), scale_factor=1 / scale).data[0]
    # the same float32 arithmetic as HRImageDataset(lq_quantize=True), so reading the file back
    # (levels / 255 in float32) gives its LR bit for bit
    return np.round(np.clip(lr, 0, 1) * np.float32(255)).astype(np.uint8)


def prepare_image(path, out, crop: int, step: int, thresh: int, scales, level: int = 3) -> dict:
    """Cut one HR image into OUT's HR and LR_bicubic/X<s> folders, skipping existing files.
    Returns {"image", "subimages", "written", "skipped", "error"} (error: None or a message:
    a bad image is reported, never raised, so one file cannot stop a pool)."""
    from ..io.image import image_size, read_image
    path, out = Path(path), Path(out)
    result = {"image": str(path), "subimages": 0, "written": 0, "skipped": 0, "error": None}
    multiple = math.lcm(*scales)
    try:
        width, height = image_size(path)
        boxes = windows(width, height, crop, step, thresh, multiple)
        if boxes[0][2] == 0 or boxes[0][3] == 0:
            raise ValueError(f"{path}: image is {width}x{height}, smaller than {multiple} (a "
                             f"multiple of every scale in {list(scales)})")
        targets = _targets(out, path.stem, len(boxes), scales)
        result["subimages"] = len(boxes)
        todo = [(box, hr_path, lrs) for box, (hr_path, lrs) in zip(boxes, targets)
                if not hr_path.exists() or not all(p.exists() for _, p in lrs)]
        result["skipped"] = (len(boxes) - len(todo)) * (1 + len(scales))
        if not todo:
            return result
        for folder in {todo[0][1].parent, *(p.parent for _, p in todo[0][2])}:
            folder.mkdir(parents=True, exist_ok=True)
        img, info = read_image(path)  # float32 (C, H, W), levels / 255 (or / 65535)
        peak = np.float32(65535 if info["bits"] == 16 else 255)
        dtype = np.uint16 if info["bits"] == 16 else np.uint8

        def write(target, make):
            if _STOP is not None and _STOP.is_set():
                raise _Stopped(str(path))
            if target.exists():
                result["skipped"] += 1
            else:
                _save(target, make(), level)
                result["written"] += 1

        for (top, left, h, w), hr_path, lrs in todo:
            hr = np.ascontiguousarray(img[:, top:top + h, left:left + w])
            write(hr_path, lambda: np.round(hr * peak).astype(dtype))
            for s, lr_path in lrs:
                write(lr_path, lambda: _lr_levels(hr, s))
    except (ValueError, OSError) as exc:
        result["error"] = str(exc)
    return result


# -- the command ----------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        raise _BadArgument(f"{message} (see srgrad-prepare --help)")


class _BadArgument(Exception):
    pass


def _parser():
    p = _Parser(prog="srgrad-prepare", description="Cut HR images into sub-images with bicubic LR "
                "partners (BasicSR's extract_subimages.py + MATLAB imresize), for "
                "PairedImageDataset: OUT_DIR/HR/<stem>_sNNN.png and "
                "OUT_DIR/LR_bicubic/X<s>/<stem>_sNNN.png (the LR named as its HR, BasicSR's "
                "layout: filename_tmpl '{name}', the default). Resumable: existing outputs are "
                "skipped.")
    p.add_argument("--input", required=True, metavar="HR_DIR", help="folder of HR images (or, "
                   "through srgrad-prepare, --dataset NAME [--sha256 HEX]: a data set srgrad "
                   "fetches by name, engine/hub/datasets.py)")
    p.add_argument("--output", required=True, metavar="OUT_DIR", help="writes OUT_DIR/HR and "
                   "OUT_DIR/LR_bicubic/X<s> (must not be HR_DIR or inside it)")
    p.add_argument("--crop-size", type=int, default=480, help="sub-image side (default 480)")
    p.add_argument("--step", type=int, default=240, help="window stride (default 240)")
    p.add_argument("--thresh-size", type=int, default=0, help="add a window flush with the edge "
                   "when more than this many pixels are left over (default 0)")
    p.add_argument("--scales", type=int, nargs="+", default=[2, 3, 4], help="LR scales (default "
                   "2 3 4)")
    p.add_argument("--workers", type=int, default=None, help="processes (default: the CPUs this "
                   "process may use)")
    p.add_argument("--compression-level", type=int, default=3, help="PNG zlib level 0-9 "
                   "(default 3, as BasicSR)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _same(a: Path, b_stat) -> bool:
    try:
        st = a.stat()
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (b_stat.st_dev, b_stat.st_ino)


def _within(path: Path, folder_stat) -> bool:
    """Whether `path` (existing or not) is the folder or inside it, by file identity: symlinks
    and `..` are followed, so two spellings of one folder are the same."""
    from ..engine.commands.outputs import landing
    resolved = landing(path)
    return any(_same(p, folder_stat) for p in (resolved, *resolved.parents))


def _check(args) -> tuple[Path, Path, list[Path], tuple[int, ...]]:
    """Validate the arguments; (input, output, images, scales), else a _BadArgument."""
    from ..io.image import list_images
    for name, value, low in (("--crop-size", args.crop_size, 1), ("--step", args.step, 1),
                             ("--thresh-size", args.thresh_size, 0), ("--workers", args.workers, 1),
                             ("--compression-level", args.compression_level, 0)):
        if value is not None and value < low:
            raise _BadArgument(f"{name} must be >= {low}, got {value}")
    if args.compression_level > 9:
        raise _BadArgument(f"--compression-level must be <= 9, got {args.compression_level}")
    if min(args.scales) < 1:
        raise _BadArgument(f"--scales must be >= 1, got {args.scales}")
    scales = tuple(sorted(set(args.scales)))
    src, out = Path(args.input), Path(args.output)
    if not src.is_dir():
        raise _BadArgument(f"--input {src}: not a folder")
    if out.exists() and not out.is_dir():
        raise _BadArgument(f"--output {out}: exists and is not a folder")
    src_stat = src.stat()
    folders = [out, out / "HR"] + [out / "LR_bicubic" / f"X{s}" for s in scales]
    try:
        inside = [f for f in folders if _within(f, src_stat)]
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise _BadArgument(f"--output {out}: cannot resolve ({exc})") from None
    if inside:
        raise _BadArgument(f"--output {out}: {inside[0]} would be the input folder {src} or "
                           f"inside it; choose an output folder outside the input")
    try:
        images = list_images(src)
    except ValueError as exc:
        raise _BadArgument(str(exc)) from None
    stems = {}
    for p in images:
        stems.setdefault(p.stem, []).append(p.name)
    clashes = [names for names in stems.values() if len(names) > 1]
    if clashes:
        raise _BadArgument(f"--input {src}: {' and '.join(clashes[0])} would give the same "
                           f"sub-image names ({len(clashes)} such clash(es)); rename or move one")
    return src, out, images, scales


def _check_settings(out: Path, settings: dict) -> None:
    """Refuse to mix sub-images cut with other settings into one output folder."""
    from ..io.atomic import write_atomic
    path = out / SETTINGS_FILE
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise _BadArgument(f"{path}: unreadable ({exc}); delete it or use another --output")
        if old.get("lr_name", "{name}x{scale}") != settings["lr_name"]:
            raise _BadArgument(f"--output {out} was prepared by an older srgrad-prepare, which named "
                               f"LR files <stem>_sNNNx<scale>.png (now <stem>_sNNN.png, BasicSR's "
                               f"layout): use another --output (or keep that folder and read it "
                               f"with filename_tmpl: '{{name}}x{{scale}}')")
        if {k: old.get(k) for k in settings} != settings:
            shown = ", ".join(f"{k} {old.get(k)}" for k in settings if k != "lr_name")
            raise _BadArgument(f"--output {out} was prepared with {shown}: use the same settings "
                               f"to resume, or another --output")
        return
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(settings, indent=1) + "\n").encode())


def _worker_start(parent: int, stop):
    """Pool workers: one numba / BLAS thread each (the pool is the parallelism); Ctrl-C is left to
    the parent, which sets `stop`; a watchdog ends the worker if the parent dies."""
    global _STOP
    _STOP = stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from ..threads import set_num_threads
    set_num_threads(1)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _watch_parent(parent: int):
    """A killed parent leaves its workers blocked on the task queue forever (each holds the queue's
    write end, so it never sees EOF), or draining the images already queued to them and racing a
    re-run over the same files: exit as soon as the parent is gone."""
    while os.getppid() == parent:
        time.sleep(0.1)
    os._exit(1)


def _default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _results(tasks, workers):
    """prepare_image's results, in completion order: inline for one worker, else from a pool of
    spawned processes (a fork would copy the parent's OpenMP state, which is not fork-safe).
    Closing the generator early (Ctrl-C, kill) stops the workers before their next file."""
    if workers <= 1:
        yield from (prepare_image(*task) for task in tasks)
        return
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_start,
                               initargs=(os.getpid(), stop))
    try:
        futures = {pool.submit(prepare_image, *task): task[0] for task in tasks}
        for future in as_completed(futures):
            try:
                yield future.result()
            except Exception as exc:  # prepare_image reports bad images itself: this is worse
                why = ("the worker process died (out of memory?)"
                       if isinstance(exc, BrokenProcessPool) else f"{type(exc).__name__}: {exc}")
                yield {"image": str(futures[future]), "subimages": 0, "written": 0, "skipped": 0,
                       "error": f"{futures[future]}: {why}"}
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)


def main(argv=None) -> int:
    """The `srgrad-prepare` command; returns the exit code (0, 1, 2 or 130)."""
    from tqdm.auto import tqdm
    try:
        args = _parser().parse_args(argv)
        src, out, images, scales = _check(args)
        settings = {"crop_size": args.crop_size, "step": args.step,
                    "thresh_size": args.thresh_size, "lr_name": LR_NAME}
        _check_settings(out, settings)
    except _BadArgument as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    from ..io.atomic import clean_partial_writes
    for folder in [out, out / "HR", *(out / "LR_bicubic" / f"X{s}" for s in scales)]:
        clean_partial_writes(folder)  # what a killed run left half-written
    tasks = [(p, out, args.crop_size, args.step, args.thresh_size, scales, args.compression_level)
             for p in images]
    workers = min(args.workers or _default_workers(), len(tasks))
    totals = {"subimages": 0, "written": 0, "skipped": 0}
    failed = []
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM)
    if main_thread:
        signal.signal(signal.SIGTERM, _raise_interrupt)  # kill: stop the pool as Ctrl-C does
    bar = tqdm(total=len(tasks), desc="prepare", unit="img", disable=args.no_progress)
    try:
        with contextlib.closing(_results(tasks, workers)) as results:
            for r in results:
                for key in totals:
                    totals[key] += r[key]
                if r["error"] is not None:
                    failed.append(r["image"])
                    tqdm.write(f"failed: {r['error']}", file=sys.stderr)
                bar.update(1)
    except KeyboardInterrupt:
        bar.close()
        print(f"interrupted after {bar.n} of {len(tasks)} images: run the same command again "
              f"to finish", file=sys.stderr)
        return 130
    finally:
        bar.close()
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    print(f"srgrad-prepare: {len(tasks)} images -> {totals['subimages']} sub-images x "
          f"{1 + len(scales)} files: written {totals['written']}, skipped {totals['skipped']} "
          f"(already there), failed {len(failed)} image(s)")
    print(f"  read with: {{type: PairedImageDataset, gt_root: {out / 'HR'}, lq_root: "
          f"{out / 'LR_bicubic' / f'X{scales[0]}'}}} (LR named as HR: filename_tmpl '{LR_NAME}', "
          f"the default)")
    return 1 if failed else 0


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt
