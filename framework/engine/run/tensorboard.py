"""TensorBoard event files of a run (`train.tensorboard: true`: <run>/tensorboard), written by
tensorboardX (the optional extra `pip install 'srgrad[tensorboard]'`; `tensorboard --logdir` shows
them). What this adds to tensorboardX's writer: float images are clipped to [0, 1] and rounded to 8
bits as srgrad's PNGs are (tensorboardX truncates, and wraps values above 1), gray + alpha becomes
RGBA (tensorboardX takes 1, 3 or 4 channels and stores gray as RGB, as PyTorch's writer does), one
file per writer even for two writers in the same second, and a message naming the extra when
tensorboardX is missing.
"""
from __future__ import annotations

import itertools
import os

import numpy as np

from ...io.image import quantise_into

__all__ = ["SummaryWriter", "MISSING", "tensorboardx", "scalar_tag"]

MISSING = ("TensorBoard event files need the tensorboardX package, which is not installed: pip "
           "install 'srgrad[tensorboard]' (or tensorboardX)")
_writer_ids = itertools.count()


def scalar_tag(key: str, metric_columns=(), set_name: str = "val") -> str:
    """The TensorBoard tag of a metrics.csv column, grouped as BasicSR groups its own: the loss
    terms (`l_*`, and srgrad's total `loss`) under `losses/` (losses/l_g_pix), the validation
    columns under `metrics/<set>/` (metrics/val/psnr_y, metrics/val/bicubic_psnr_y), the rest
    (lr, out_d_real, ...) as they are."""
    if key == "loss" or key.startswith("l_"):
        return f"losses/{key}"
    if key in metric_columns:
        return f"metrics/{set_name}/{key}"
    return key


def tensorboardx():
    """The tensorboardX module, or ModuleNotFoundError with MISSING."""
    try:
        import tensorboardX
    except ImportError:
        raise ModuleNotFoundError(MISSING, name="tensorboardX") from None
    return tensorboardX


class SummaryWriter:
    """Event files in `logdir` (created if missing), one new file per writer
    (`events.out.tfevents.<time>.<host>.<pid>.<n>`): add_scalar, add_image, close; a context
    manager. tensorboardX writes records from a background thread and flushes them every
    `flush_secs` (default 120, as PyTorch); close() writes every record added."""

    def __init__(self, logdir, flush_secs: float = 120.0):
        self._writer = tensorboardx().SummaryWriter(
            os.fspath(logdir), flush_secs=flush_secs,
            filename_suffix=f".{os.getpid()}.{next(_writer_ids)}")

    def add_scalar(self, tag: str, value, step: int) -> None:
        """Log a real number (a Python or numpy number, a one-element array or Tensor)."""
        arr = np.asarray(_array(value))
        if arr.size != 1 or arr.dtype.kind not in "fiu":
            raise TypeError(f"SummaryWriter.add_scalar: {tag}: value must be a real number, got "
                            f"{type(value).__name__}")
        self._writer.add_scalar(tag, float(arr.reshape(())), step)

    def add_image(self, tag: str, image, step: int) -> None:
        """Log an image: float (C, H, W) in [0, 1] (clipped, rounded to 8 bits) or uint8
        (H, W, C); C = 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA; a 2-D array is gray."""
        hwc = _uint8_hwc(tag, np.asarray(_array(image)))
        if hwc.shape[2] == 2:
            hwc = hwc[:, :, [0, 0, 0, 1]]
        self._writer.add_image(tag, hwc, step, dataformats="HWC")

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _array(value):
    return value.data if hasattr(value, "requires_grad") else value  # a Tensor's array


def _uint8_hwc(tag: str, arr: np.ndarray) -> np.ndarray:
    owner = f"SummaryWriter.add_image: {tag}"
    if arr.dtype.kind == "f":
        chw = arr[None] if arr.ndim == 2 else arr
        if chw.ndim != 3 or not 1 <= chw.shape[0] <= 4 or 0 in chw.shape:
            raise ValueError(f"{owner}: a float image must be (C, H, W) with C = 1..4, got shape "
                             f"{arr.shape}")
        if not np.isfinite(chw).all():
            raise ValueError(f"{owner}: image contains NaN or Inf values")
        hwc = np.empty(chw.shape[1:] + chw.shape[:1], np.uint8)
        quantise_into(hwc, chw, 8)
        return hwc
    if arr.dtype != np.uint8:
        raise TypeError(f"{owner}: image must be float (C, H, W) in [0, 1] or uint8 (H, W, C), got "
                        f"dtype {arr.dtype}")
    hwc = arr[:, :, None] if arr.ndim == 2 else arr
    if hwc.ndim != 3 or not 1 <= hwc.shape[2] <= 4 or 0 in hwc.shape:
        raise ValueError(f"{owner}: a uint8 image must be (H, W, C) with C = 1..4, got shape "
                         f"{arr.shape}")
    return np.ascontiguousarray(hwc)
