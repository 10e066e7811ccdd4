"""A small 16-bit PNG codec for what Pillow cannot do: read 16-bit RGB, RGBA and gray + alpha
without dropping them to 8 bits, and write 16-bit gray, gray + alpha, RGB and RGBA.

Reading (`read_png16`): bit depth 16, colour types 0 (gray), 2 (RGB), 4 (gray + alpha) and 6 (RGBA),
plain or Adam7-interlaced, the five row filters. tRNS is ignored (as read_image does for 8-bit RGB);
an eXIf chunk is returned raw for the caller to orient the pixels. Hostile files are refused with
a one-line ValueError naming the file, and nothing large is allocated before it is known to be
needed:
- every chunk's CRC is checked, and a chunk longer than the rest of the file is "truncated";
- the pixel count in IHDR is checked against `max_pixels` before anything is inflated;
- the inflated size is exact (known from IHDR): the pixel buffer is allocated once, and inflating
  stops one byte past it (a zlib bomb costs nothing); an IHDR claiming more pixel data than the
  file could hold (deflate compresses at most 1032:1) is refused before that allocation.

Writing (`write_png16`): never interlaced, each row's filter chosen by the PNG specification's
heuristic (smallest sum of |filtered byte| as signed), zlib level 6, streamed a band of rows at a
time, written atomically through framework.io.atomic.
"""
from __future__ import annotations

import os
import struct
import sys
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._jit import kernel
from .atomic import atomic_open

__all__ = ["SIGNATURE", "Header", "probe", "read_png16", "write_png16", "encode_png16",
           "pixel_limit_message"]

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel
_VALID_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
# Adam7 passes as (x0, y0, dx, dy): pixel (x0 + i*dx, y0 + j*dy) is pass pixel (j, i).
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))
_MAX_DEFLATE_RATIO = 1032  # zlib's documented worst case: 258 bytes per 2 bits
_PIECE = 1 << 20  # a chunk's data is read (and inflated) this many bytes at a time
_IDAT_SIZE = 1 << 18  # compressed bytes per written IDAT chunk
_BAND_BYTES = 1 << 21  # the writer filters and compresses about this many bytes of rows at a time
_KNOWN_CRITICAL = (b"IHDR", b"PLTE", b"IDAT", b"IEND")


class Header(NamedTuple):
    """The IHDR fields."""
    width: int
    height: int
    bit_depth: int
    color_type: int
    compression: int
    filter_method: int
    interlace: int


def probe(path) -> Header | None:
    """The IHDR of a PNG file from its first 33 bytes (CRC not checked), or None when the file
    does not start like a PNG: a cheap test of whether this codec should read it."""
    with open(path, "rb") as fh:
        head = fh.read(33)
    if len(head) < 33 or head[:8] != SIGNATURE or head[8:16] != b"\x00\x00\x00\x0dIHDR":
        return None
    return Header(*struct.unpack(">IIBBBBB", head[16:29]))


def pixel_limit_message(path, width: int, height: int, limit: int) -> str:
    return (f"{path}: {width}x{height} = {width * height} pixels exceeds the limit of {limit} "
            f"(framework.io.image.MAX_PIXELS); refusing to decode a possible decompression bomb")


def read_png16(path, max_pixels: int):
    """Decode a 16-bit PNG. Returns `(pixels, info)`: pixels uint16 (H, W, C) with C = 1 (gray),
    2 (gray, alpha), 3 (RGB) or 4 (RGBA), as stored (no orientation applied); info =
    {"color_type": 0/2/4/6, "interlaced": bool, "exif": raw eXIf chunk bytes or None}.
    ValueError naming the file for anything else (see the module docstring)."""
    path = Path(path)
    with open(path, "rb") as fh:
        file_size = os.fstat(fh.fileno()).st_size
        if fh.read(8) != SIGNATURE:
            raise ValueError(f"{path}: not a PNG file (bad signature)")
        ctype, ihdr = _read_chunk(fh, path, file_size)
        if ctype != b"IHDR":
            raise ValueError(f"{path}: corrupt PNG: first chunk is {_name(ctype)}, not IHDR")
        header = _check_header(path, ihdr)
        if header.width * header.height > max_pixels:
            raise ValueError(pixel_limit_message(path, header.width, header.height, max_pixels))
        passes = _passes(header)
        raw_size = sum(rows * (1 + w * 2 * _CHANNELS[header.color_type])
                       for *_, w, rows in passes)
        if raw_size > _MAX_DEFLATE_RATIO * file_size:
            raise ValueError(f"{path}: truncated or corrupt PNG: a {header.width}x{header.height} "
                             f"image needs {raw_size} bytes of pixel data, more than a "
                             f"{file_size}-byte file can hold")
        raw = np.empty(raw_size, np.uint8)
        inflater = _Inflater(path, raw)
        exif = _read_chunks(fh, path, file_size, inflater)
    inflater.finish(header)
    return _unfilter_image(path, raw, header, passes), {
        "color_type": header.color_type, "interlaced": bool(header.interlace), "exif": exif}


def _read_chunks(fh, path: Path, file_size: int, inflater: "_Inflater"):
    """Read every chunk after IHDR up to IEND, inflating IDAT into the pixel buffer; returns the
    eXIf chunk's data or None."""
    exif = None
    while True:
        ctype, data = _read_chunk(fh, path, file_size, inflater)
        if ctype == b"IEND":
            return exif
        if ctype == b"IHDR":
            raise ValueError(f"{path}: corrupt PNG: a second IHDR chunk")
        if ctype == b"eXIf":
            exif = data
        elif ctype[0] < 0x61 and ctype not in _KNOWN_CRITICAL:  # upper case first letter: critical
            raise ValueError(f"{path}: unsupported PNG: unknown critical chunk {_name(ctype)}")


def _read_chunk(fh, path: Path, file_size: int, inflater: "_Inflater" | None = None):
    """One chunk: (type, data), with its length bounded by the file and its CRC checked. IDAT data
    goes to `inflater` a piece at a time (data returned as None); a zlib error in it is reported
    only after the CRC check, so a damaged chunk reads as a bad CRC."""
    head = fh.read(8)
    if len(head) < 8:
        raise ValueError(f"{path}: truncated PNG (the file ends before the IEND chunk)")
    length, ctype = struct.unpack(">I4s", head)
    if not all(0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A for c in ctype):
        raise ValueError(f"{path}: corrupt PNG: invalid chunk type {ctype!r}")
    if length > 0x7FFFFFFF or length + 4 > file_size - fh.tell():
        raise ValueError(f"{path}: truncated PNG: chunk {_name(ctype)} claims {length} bytes, "
                         f"more than the rest of the file")
    crc = zlib.crc32(ctype)
    data = None
    if ctype == b"IDAT" and inflater is not None:
        for start in range(0, length, _PIECE):
            piece = _read_exact(fh, path, min(_PIECE, length - start), ctype)
            crc = zlib.crc32(piece, crc)
            inflater.feed(piece)
    else:
        data = _read_exact(fh, path, length, ctype)
        crc = zlib.crc32(data, crc)
    stored = _read_exact(fh, path, 4, ctype)
    if struct.unpack(">I", stored)[0] != crc:
        raise ValueError(f"{path}: corrupt PNG: bad CRC in chunk {_name(ctype)}")
    if inflater is not None:
        inflater.raise_error()
    return ctype, data


def _read_exact(fh, path: Path, n: int, ctype: bytes) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise ValueError(f"{path}: truncated PNG (the file ends inside chunk {_name(ctype)})")
    return data


def _name(ctype: bytes) -> str:
    return ctype.decode("latin-1")


def _check_header(path: Path, data: bytes) -> Header:
    if len(data) != 13:
        raise ValueError(f"{path}: corrupt PNG: IHDR has {len(data)} bytes, not 13")
    h = Header(*struct.unpack(">IIBBBBB", data))
    if not (0 < h.width <= 0x7FFFFFFF and 0 < h.height <= 0x7FFFFFFF):
        raise ValueError(f"{path}: corrupt PNG: invalid size {h.width}x{h.height} in IHDR")
    if h.bit_depth not in _VALID_DEPTHS.get(h.color_type, ()):
        raise ValueError(f"{path}: corrupt PNG: bit depth {h.bit_depth} is invalid for colour "
                         f"type {h.color_type}")
    if h.compression != 0 or h.filter_method != 0 or h.interlace not in (0, 1):
        raise ValueError(f"{path}: corrupt PNG: unknown compression/filter/interlace method "
                         f"({h.compression}, {h.filter_method}, {h.interlace}) in IHDR")
    if h.bit_depth != 16:
        raise ValueError(f"{path}: unsupported by the 16-bit PNG reader: bit depth "
                         f"{h.bit_depth} (Pillow reads it)")
    return h


def _passes(h: Header) -> list[tuple[int, int, int, int, int, int]]:
    """(x0, y0, dx, dy, width, height) of each sub-image stored: the whole image, or the Adam7
    passes (an empty pass stores nothing, not even filter bytes)."""
    if not h.interlace:
        return [(0, 0, 1, 1, h.width, h.height)]
    out = []
    for x0, y0, dx, dy in _ADAM7:
        w = (h.width - x0 + dx - 1) // dx if h.width > x0 else 0
        rows = (h.height - y0 + dy - 1) // dy if h.height > y0 else 0
        if w and rows:
            out.append((x0, y0, dx, dy, w, rows))
    return out


class _Inflater:
    """zlib-inflates into a preallocated buffer of the exact size IHDR implies, never beyond it."""

    def __init__(self, path: Path, out: np.ndarray):
        self.path, self.out, self.pos = path, out, 0
        self.zobj = zlib.decompressobj()
        self.error = None

    def feed(self, data: bytes) -> None:
        if self.error is not None or self.zobj.eof:
            return  # bytes after the end of the zlib stream are ignored, as libpng does
        try:
            while data:
                room = self.out.size - self.pos
                piece = self.zobj.decompress(data, room + 1)  # one byte over: enough to detect
                if len(piece) > room:
                    self.error = ("corrupt PNG: more pixel data than the IHDR size "
                                  f"({self.out.size} bytes) describes")
                    return
                self.out[self.pos:self.pos + len(piece)] = np.frombuffer(piece, np.uint8)
                self.pos += len(piece)
                if self.zobj.eof or (not piece and len(self.zobj.unconsumed_tail) == len(data)):
                    return
                data = self.zobj.unconsumed_tail
        except zlib.error as e:
            self.error = f"corrupt PNG pixel data (zlib: {e})"

    def raise_error(self) -> None:
        if self.error is not None:
            raise ValueError(f"{self.path}: {self.error}")

    def finish(self, h: Header) -> None:
        self.raise_error()
        if self.pos < self.out.size or not self.zobj.eof:
            what = "IDAT chunk missing" if self.pos == 0 else \
                f"{self.pos} of {self.out.size} bytes of pixel data"
            raise ValueError(f"{self.path}: truncated PNG: {what} for a {h.width}x{h.height} image")


def _unfilter_image(path: Path, raw: np.ndarray, h: Header, passes) -> np.ndarray:
    """Undo the row filters (in place) and return native uint16 (H, W, C)."""
    channels = _CHANNELS[h.color_type]
    bpp = 2 * channels
    start = 0
    for x0, y0, dx, dy, w, rows in passes:
        stride = w * bpp
        bad = _unfilter(raw, start, rows, stride, bpp)
        if bad >= 0:
            where = f" of the Adam7 pass starting at ({x0}, {y0})" if h.interlace else ""
            raise ValueError(f"{path}: corrupt PNG: invalid filter type "
                             f"{raw[start + bad * (stride + 1)]} in row {bad}{where}")
        start += rows * (stride + 1)
    if not h.interlace:
        return _native(raw[:h.height * h.width * bpp]).reshape(h.height, h.width, channels)
    image = np.empty((h.height, h.width, channels), np.uint16)
    start = 0
    for x0, y0, dx, dy, w, rows in passes:
        image[y0::dy, x0::dx] = _native(raw[start:start + rows * w * bpp]).reshape(rows, w, channels)
        start += rows * (w * bpp + 1)
    return image


def _native(data: np.ndarray) -> np.ndarray:
    """Big-endian 16-bit samples in a uint8 buffer as native uint16 (swapped in place)."""
    samples = data.view(np.uint16)
    if sys.byteorder == "little":
        samples.byteswap(inplace=True)
    return samples


@kernel
def _unfilter(buf, start, rows, stride, bpp):
    """Undo the PNG row filters of `rows` rows of `stride` bytes, each stored after its filter
    type byte from buf[start], in place: row y's bytes end up at start + y*stride (always at or
    before where they are read, so a forward pass never overwrites unread input). Returns -1, or
    the first row whose filter type is not 0..4 (its type byte is then at start + y*stride + y).
    Sequential: Paeth, Sub and Average depend on the byte to the left."""
    for y in range(rows):
        src = start + y * (stride + 1)
        dst = start + y * stride
        up = dst - stride
        ftype = buf[src]
        if ftype > 4:
            return y
        src += 1
        for i in range(stride):
            x = np.int64(buf[src + i])
            a = np.int64(buf[dst + i - bpp]) if i >= bpp else np.int64(0)
            b = np.int64(buf[up + i]) if y > 0 else np.int64(0)
            c = np.int64(buf[up + i - bpp]) if (y > 0 and i >= bpp) else np.int64(0)
            if ftype == 1:
                x += a
            elif ftype == 2:
                x += b
            elif ftype == 3:
                x += (a + b) >> 1
            elif ftype == 4:
                x += _paeth(a, b, c)
            buf[dst + i] = x & 255
    return -1


@kernel
def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


@kernel
def _filter_rows(band, out, bpp):
    """PNG-filter rows 1..n of `band` (n+1, stride) uint8, row 0 being the row above (zeros at the
    top of the image), into out (n, stride + 1): each row's filter type, then its filtered bytes.
    The type per row: the smallest sum of |filtered byte| read as signed (the PNG specification's
    suggested heuristic)."""
    rows, stride = band.shape[0] - 1, band.shape[1]
    for y in range(1, rows + 1):
        best, best_sum = 0, np.int64(1) << 62
        for ftype in range(5):
            total = np.int64(0)
            for i in range(stride):
                v = _filtered(band, y, i, ftype, bpp)
                total += v if v < 128 else 256 - v
                if total >= best_sum:
                    break
            if total < best_sum:
                best, best_sum = ftype, total
        out[y - 1, 0] = best
        for i in range(stride):
            out[y - 1, i + 1] = _filtered(band, y, i, best, bpp)


@kernel
def _filtered(band, y, i, ftype, bpp):
    x = np.int64(band[y, i])
    a = np.int64(band[y, i - bpp]) if i >= bpp else np.int64(0)
    b = np.int64(band[y - 1, i])
    c = np.int64(band[y - 1, i - bpp]) if i >= bpp else np.int64(0)
    if ftype == 1:
        x -= a
    elif ftype == 2:
        x -= b
    elif ftype == 3:
        x -= (a + b) >> 1
    elif ftype == 4:
        x -= _paeth(a, b, c)
    return x & 255


def write_png16(path, pixels) -> None:
    """Write uint16 pixels (H, W, C) (or (H, W): gray) as a 16-bit PNG: C = 1 gray, 2 gray +
    alpha, 3 RGB, 4 RGBA. Atomic (framework.io.atomic.atomic_open); the folder must exist."""
    pixels = _check_pixels(pixels, path)
    with atomic_open(path) as fh:
        encode_png16(fh, pixels)


def encode_png16(fh, pixels) -> None:
    """Write the PNG encoding of uint16 (H, W, C) / (H, W) `pixels` to the binary file `fh`."""
    pixels = _check_pixels(pixels, getattr(fh, "name", "<stream>"))
    height, width, channels = pixels.shape
    color_type = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    fh.write(SIGNATURE)
    fh.write(_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 16, color_type, 0, 0, 0)))
    stride = width * channels * 2
    band_rows = max(1, _BAND_BYTES // stride)
    band = np.zeros((band_rows + 1, stride), np.uint8)  # row 0: the row above the band
    out = np.empty((band_rows, stride + 1), np.uint8)
    zobj = zlib.compressobj(6)
    pending = bytearray()
    for r in range(0, height, band_rows):
        n = min(band_rows, height - r)
        band[1:n + 1] = pixels[r:r + n].astype(">u2").view(np.uint8).reshape(n, stride)
        _filter_rows(band[:n + 1], out[:n], channels * 2)
        pending += zobj.compress(out[:n])
        band[0] = band[n]
        while len(pending) >= _IDAT_SIZE:
            fh.write(_chunk(b"IDAT", bytes(pending[:_IDAT_SIZE])))
            del pending[:_IDAT_SIZE]
    pending += zobj.flush()
    for start in range(0, len(pending), _IDAT_SIZE):
        fh.write(_chunk(b"IDAT", bytes(pending[start:start + _IDAT_SIZE])))
    fh.write(_chunk(b"IEND", b""))


def _chunk(ctype: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data))


def _check_pixels(pixels, where) -> np.ndarray:
    arr = np.asarray(pixels)
    if arr.dtype != np.uint16:
        raise TypeError(f"write_png16: pixels must be uint16, got {arr.dtype} for {where}")
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] not in (1, 2, 3, 4) or 0 in arr.shape[:2] \
            or max(arr.shape[:2]) > 0x7FFFFFFF:
        raise ValueError(f"write_png16: pixels must be (H, W, C) with C = 1..4 and H, W >= 1, got "
                         f"shape {arr.shape} for {where}")
    return arr
