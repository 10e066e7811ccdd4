"""`--tile auto`: the largest tile whose run fits a memory budget, measured from the model itself.

How much memory a tile needs depends on the model (SwinIR's attention keeps far more per pixel
than a compact conv net), so it is measured, not guessed: the patch function (the model, the
channel handling and TTA exactly as the run will call it) runs on two small probe patches under
tracemalloc, and the two peaks give a straight line, peak = overhead + per_pixel x pixels of a
batch. tracemalloc counts every numpy allocation (all of srgrad's activations); numba's internal
scratch buffers and Python objects besides are not counted, which is why the default budget is a
fraction of the available memory, not all of it.

The plan: the whole image when its run fits (results as without tiling); else the largest tile
whose batch (tile_batches: several tiles of one shape run together, up to BATCH_PIXELS) fits the
budget left after the image's own buffers (the float LR image, the 8/16-bit output); tile +
2 x overlap a multiple of the model's size multiple (no padding inside the model is wasted) and at
least its minimum. A budget that not even the smallest such tile fits is a one-line error.

The budget: `--max-memory` (bytes, or with K/M/G/T, 1024-based), by default MEMORY_FRACTION of
MemAvailable in /proc/meminfo (where there is none: no limit, the whole image).
"""
from __future__ import annotations

import math
import re
import sys
import tracemalloc
from dataclasses import dataclass

import numpy as np

from ...threads import get_num_threads

__all__ = ["MEMORY_FRACTION", "TilePlan", "available_memory", "default_budget", "parse_memory",
           "measure", "plan_tile", "batch_tiles", "auto_tile"]

MEMORY_FRACTION = 0.5  # of MemAvailable: the default budget
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


# Tiles run as batches of equal-shaped tiles, up to TILES_PER_WORKER per worker thread and at most
# BATCH_PIXELS LR pixels (context included) in a batch. A small tile alone is one task per
# convolution, which one core runs while the other waits; a batch of whole tiles gives every
# worker whole images to run (docs/benchmarks.md, "Tiled inference"). Memory is bounded by the
# larger of one tile and BATCH_PIXELS pixels.
TILES_PER_WORKER = 2
BATCH_PIXELS = 256 * 256


def available_memory(path: str = "/proc/meminfo") -> int | None:
    """MemAvailable in bytes (None where the file or the line is missing: not Linux)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def default_budget() -> int | None:
    """MEMORY_FRACTION of the available memory, or None when it cannot be read."""
    free = available_memory()
    return None if free is None else int(free * MEMORY_FRACTION)


def parse_memory(text, name: str = "--max-memory") -> int:
    """'2G', '512M', '1.5GiB', '300000' (bytes) -> bytes; a one-line ValueError naming `name`."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(f"{name} must be a size such as 4G, 512M or a number of bytes, got "
                         f"{text!r}")
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"{name} must be at least 1 byte, got {text!r}")
    return int(value)


def _padded(n: int, multiple: int, minimum: int) -> int:
    return -(-max(n, minimum) // multiple) * multiple


def measure(run, channels: int, dtype, multiple: int = 1, minimum: int = 1, base: int = 32):
    """(overhead bytes, bytes per LR pixel) of `run(lq)`, the whole per-image pipeline on an LR
    image (C, h, w) (the patch batch, the model, the quantisation into its output), from its
    tracemalloc peaks on two square probe images (base and 2 x base pixels a side, rounded up to
    the model's multiple and minimum) made beforehand, as the LR image is. A first unmeasured run
    of the small one compiles the kernels and fills the model's caches (their memory is not the
    run's: measured, it would make the line flatter than the run)."""
    sides = [_padded(base, multiple, minimum), _padded(2 * base, multiple, minimum)]
    if sides[1] == sides[0]:
        sides[1] += multiple
    rng = np.random.default_rng(0)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    peaks = []
    try:
        run(rng.uniform(0, 1, (channels, sides[0], sides[0])).astype(dtype))
        for s in sides:
            lq = rng.uniform(0, 1, (channels, s, s)).astype(dtype)
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            run(lq)
            peaks.append(max(tracemalloc.get_traced_memory()[1] - before, 0))
            del lq
    finally:
        if started:
            tracemalloc.stop()
    (a, b), (pa, pb) = (s * s for s in sides), peaks
    per_pixel = max((pb - pa) / (b - a), pb / b * 0.5, 1.0)  # a peak that did not grow: half the mean
    return max(pb - per_pixel * b, 0.0), per_pixel


def batch_tiles(context_h: int, context_w: int, workers: int | None = None) -> int:
    """How many context_h x context_w tiles run as one batch (inference.tile_batches' rule)."""
    return max(1, min(TILES_PER_WORKER * (workers or get_num_threads()),
                      BATCH_PIXELS // (context_h * context_w)))


@dataclass
class TilePlan:
    """tile: LR pixels (None: the whole image); batch: at most this many tiles run together (None:
    inference.tile_batches' own rule); peak: the predicted bytes of the run (the image's buffers +
    the model's batch); budget: what it had to fit."""

    tile: int | None
    batch: int | None
    peak: int
    budget: int | None
    overhead: float
    per_pixel: float

    def __str__(self):
        mib = (lambda n: f"{n / 2 ** 20:.1f} MiB")
        where = "the whole image" if self.tile is None else f"tiles of {self.tile} px"
        limit = "no limit" if self.budget is None else mib(self.budget)
        runs = "" if self.batch is None else f", {self.batch} at a time"
        return (f"--tile auto: {where}{runs}, about {mib(self.peak)} of {limit} "
                f"({self.per_pixel / 1024:.1f} KiB per LR pixel measured)")


def plan_tile(hw, overlap: int, budget: int | None, fixed: int, overhead: float, per_pixel: float,
              multiple: int = 1, minimum: int = 1, workers: int | None = None) -> TilePlan:
    """The largest tile (None: the whole h x w image), and the most tiles per batch up to
    tile_batches' own number, whose predicted peak, fixed + overhead + per_pixel x the batch's
    pixels (padded to the model's size rules), is within `budget`; ValueError when not even one
    tile of the smallest size fits."""
    h, w = hw

    def peak(context_h, context_w, n=1):
        pixels = _padded(context_h, multiple, minimum) * _padded(context_w, multiple, minimum)
        return int(fixed + overhead + per_pixel * pixels * n)
    whole = peak(h, w)
    if budget is None or whole <= budget:
        return TilePlan(None, None, whole, budget, overhead, per_pixel)
    if fixed >= budget:
        raise ValueError(f"--max-memory {budget / 2 ** 20:.1f} MiB: the image's own buffers need "
                         f"{fixed / 2 ** 20:.1f} MiB; raise --max-memory")
    # context sides that are multiples of the model's multiple (no padding inside it wasted); the
    # tile is the context without the overlap on both sides
    smallest = _padded(2 * overlap + 1, multiple, minimum)
    for context in range(_padded(max(h, w), multiple, 1), smallest - 1, -multiple):
        tile = context - 2 * overlap
        if tile >= max(h, w):
            continue  # the whole image, which did not fit
        ch, cw = min(context, h), min(context, w)
        most = batch_tiles(ch, cw, workers)
        n = next((n for n in range(most, 0, -1) if peak(ch, cw, n) <= budget), None)
        if n is not None:
            return TilePlan(tile, None if n == most else n, peak(ch, cw, n), budget, overhead,
                            per_pixel)
    need = peak(min(smallest, h), min(smallest, w))
    raise ValueError(f"--max-memory {budget / 2 ** 20:.1f} MiB: the model needs "
                     f"{per_pixel / 1024:.1f} KiB per LR pixel, and even one tile of "
                     f"{smallest - 2 * overlap} px with its {overlap} px of context needs "
                     f"{need / 2 ** 20:.1f} MiB; raise --max-memory or lower --tile-overlap")


_MEASURED: dict = {}  # (id(model), channels, tta, dtype) -> (model, overhead, per_pixel)


def auto_tile(model, run, img_shape, overlap: int, max_memory: int | None, fixed: int,
              self_ensemble: bool = False, size_rules: tuple = (1, 1)) -> TilePlan:
    """The TilePlan of one image (C, H, W); `run(lq)` is the untiled pipeline on an LR image, as
    measure() takes it: measured once per model, channel count and TTA setting, cached.
    `size_rules`: (multiple, minimum) the model pads an input up to, its card's pads_to and
    pad_minimum (inference.size_rules(info))."""
    c, h, w = img_shape
    budget = default_budget() if max_memory is None else int(max_memory)
    multiple, minimum = size_rules
    probe = _padded(64, multiple, minimum)
    if budget is None or h * w <= probe * probe:
        # no limit known, or an image no larger than the probe: its whole run needs no more
        # memory (nor time) than measuring would
        return TilePlan(None, None, fixed, budget, 0.0, 0.0)
    dtype = next((p.data.dtype for p in model.parameters()), np.dtype(np.float32))
    key = (id(model), c, bool(self_ensemble), np.dtype(dtype).str)
    hit = _MEASURED.get(key)
    if hit is None or hit[0] is not model:
        hit = (model, *measure(run, c, dtype, multiple, minimum))
        _MEASURED.clear()  # one model at a time: no references kept to older ones
        _MEASURED[key] = hit
    return plan_tile((h, w), overlap, budget, fixed, hit[1], hit[2], multiple, minimum)
