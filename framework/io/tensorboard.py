"""TensorBoard event files without TensorFlow: `SummaryWriter(logdir)` writes scalars and images
that `tensorboard --logdir` shows (no tensorboard, tensorflow or protobuf package needed).

The format (tensorflow/core/util/event.proto, core/framework/summary.proto,
core/lib/io/record_writer.cc):
- a file of TFRecords: uint64 length, uint32 masked CRC32C of those 8 bytes, the data, uint32
  masked CRC32C of the data (little-endian); mask(c) = rotr(c, 15) + 0xa282ead8 (mod 2^32);
- each record an `Event` protobuf: wall_time (double, field 1), step (int64, 2), file_version
  (string, 3: "brain.Event:2" in the first record), summary (Summary, 5);
- Summary: value (repeated Value, 1); Value: tag (string, 1), then simple_value (float, 2) or
  image (Image, 4); Image: height (1), width (2), colorspace (3: 1 gray, 2 gray + alpha, 3 RGB,
  4 RGBA), encoded_image_string (4: PNG bytes).

The file is appended to as training runs (TensorBoard reads it while it grows), so it is not
written through atomic_open; records are buffered and flushed every `flush_secs` and on
flush()/close().
"""
from __future__ import annotations

import io
import itertools
import os
import socket
import struct
import time
from pathlib import Path

import numpy as np
from PIL import Image

from .._check import int_arg, number
from .._jit import kernel
from .image import quantise_into

__all__ = ["SummaryWriter", "crc32c", "masked_crc32c", "tfrecord"]

_CASTAGNOLI = 0x82F63B78  # the CRC-32C polynomial, bit-reversed
_MASK_DELTA = 0xA282EAD8
_FILE_VERSION = "brain.Event:2"
_COLORSPACE_MODE = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
_writer_ids = itertools.count()  # two writers in one process and one second get two files


def _crc_table() -> np.ndarray:
    table = np.empty(256, np.uint32)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (_CASTAGNOLI if c & 1 else 0)
        table[n] = c
    return table


_TABLE = _crc_table()


@kernel
def _crc_update(crc, data, table):
    for i in range(data.size):
        crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8)
    return crc


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of bytes-like `data`, continuing from `crc` (0 to start)."""
    buf = np.frombuffer(data, np.uint8)
    return int(_crc_update(np.int64(crc ^ 0xFFFFFFFF), buf, _TABLE)) ^ 0xFFFFFFFF


def masked_crc32c(data) -> int:
    """TFRecord's masked CRC: a CRC of data that itself contains CRCs is a poor check, so the
    stored value is rotated and offset."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def tfrecord(data: bytes) -> bytes:
    """One TFRecord: length, masked CRC of the length, data, masked CRC of the data."""
    header = struct.pack("<Q", len(data))
    return (header + struct.pack("<I", masked_crc32c(header)) + data
            + struct.pack("<I", masked_crc32c(data)))


# -- protobuf wire format: (field << 3 | wire type), then the value ---------------------------------
def _varint(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF  # int64 as two's complement, as protobuf does
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _int_field(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n)


def _double_field(field: int, x: float) -> bytes:
    return _varint(field << 3 | 1) + struct.pack("<d", x)


def _float_field(field: int, x: float) -> bytes:
    with np.errstate(over="ignore"):  # beyond float32's range: stored as +-inf
        return _varint(field << 3 | 5) + np.asarray(x, "<f4").tobytes()


def _bytes_field(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _event(wall_time: float, step: int, file_version: str | None = None,
           summary: bytes | None = None) -> bytes:
    out = _double_field(1, wall_time)
    if step:  # proto3 leaves defaults out
        out += _int_field(2, step)
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    if summary is not None:
        out += _bytes_field(5, summary)
    return out


def _summary(tag: str, value: bytes) -> bytes:
    """Summary{value: [Value{tag, <value>}]} with `value` an already encoded oneof field."""
    return _bytes_field(1, _bytes_field(1, tag.encode()) + value)


class SummaryWriter:
    """Write TensorBoard event files into `logdir` (created if missing), as
    torch.utils.tensorboard.SummaryWriter does: one new file
    `events.out.tfevents.<10-digit time>.<host>.<pid>.<n>` per writer.

    `add_scalar(tag, value, step)`, `add_image(tag, image, step)`, `flush()`, `close()`; a context
    manager (closes on exit). Records are buffered and flushed at most `flush_secs` (default 120,
    as PyTorch) after they are added, and by flush()/close().
    """

    def __init__(self, logdir, flush_secs: float = 120.0):
        self.flush_secs = number("SummaryWriter", "flush_secs", flush_secs, low=0)
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        now = time.time()
        self.path = self.logdir / (f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}."
                                   f"{os.getpid()}.{next(_writer_ids)}")
        self._fh = open(self.path, "xb")  # never another writer's file
        self._last_flush = time.monotonic()
        self._write(_event(now, 0, file_version=_FILE_VERSION))
        self.flush()

    def add_scalar(self, tag: str, value, step: int = 0, walltime: float | None = None) -> None:
        """Log a real number (Python/numpy number, 0-d or one-element array or Tensor) under `tag`
        at `step` (an int >= 0). NaN and inf are logged as they are."""
        owner = "SummaryWriter.add_scalar"
        tag = _tag(owner, tag)
        arr = np.asarray(value.data if hasattr(value, "requires_grad") else value)
        if arr.size != 1 or arr.dtype.kind not in "fiu":
            raise TypeError(f"{owner}: value must be a real number, got {value!r}")
        self._add(owner, tag, _float_field(2, float(arr.reshape(()))), step, walltime)

    def add_image(self, tag: str, image, step: int = 0, walltime: float | None = None) -> None:
        """Log an image under `tag` at `step`: float (C, H, W) in [0, 1] (clipped, rounded to 8
        bits) or uint8 (H, W, C), C = 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA; a 2-D array is
        gray. Stored as PNG."""
        owner = "SummaryWriter.add_image"
        tag = _tag(owner, tag)
        hwc = _as_uint8_hwc(owner, image)
        height, width, channels = hwc.shape
        png = io.BytesIO()
        Image.fromarray(hwc[:, :, 0] if channels == 1 else hwc).save(png, format="PNG")
        message = (_int_field(1, height) + _int_field(2, width) + _int_field(3, channels)
                   + _bytes_field(4, png.getvalue()))
        self._add(owner, tag, _bytes_field(4, message), step, walltime)

    def flush(self) -> None:
        """Hand every record added so far to the operating system (TensorBoard then sees it)."""
        self._check_open()
        self._fh.flush()
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Flush and close the file; further add_*/flush calls raise ValueError. Idempotent."""
        if not self._fh.closed:
            self.flush()
            self._fh.close()

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SummaryWriter({str(self.path)!r}{', closed' if self._fh.closed else ''})"

    def _add(self, owner: str, tag: str, value: bytes, step, walltime) -> None:
        step = int_arg(owner, "step", step, minimum=0)
        wall = time.time() if walltime is None else number(owner, "walltime", walltime)
        self._write(_event(wall, step, summary=_summary(tag, value)))

    def _write(self, event: bytes) -> None:
        self._check_open()
        self._fh.write(tfrecord(event))
        if time.monotonic() - self._last_flush >= self.flush_secs:
            self.flush()

    def _check_open(self) -> None:
        if self._fh.closed:
            raise ValueError(f"SummaryWriter: {self.path} is closed")


def _tag(owner: str, tag) -> str:
    if not isinstance(tag, str) or not tag:
        raise TypeError(f"{owner}: tag must be a non-empty str, got {tag!r}")
    return tag


def _as_uint8_hwc(owner: str, image) -> np.ndarray:
    """float (C, H, W) in [0, 1] or uint8 (H, W, C) (2-D: gray) -> uint8 (H, W, C), C = 1..4."""
    arr = np.asarray(image.data if hasattr(image, "requires_grad") else image)
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
