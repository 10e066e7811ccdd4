"""Image files <-> float arrays (C, H, W) in [0, 1], through Pillow and, for 16-bit colour PNG,
through our own codec (framework.io.png16).

Reading: PNG, JPEG, BMP, TIFF and WebP (only these decoders are enabled: fewer parsers, fewer ways
in).
Pillow modes map to arrays as follows:

| mode                         | array (C, H, W)   | alpha    | bits |
|------------------------------|-------------------|----------|------|
| 1, L                         | 1 channel          | None     | 8    |
| LA, La                       | 1 channel          | (1, H, W)| 8    |
| RGB, CMYK, YCbCr             | 3 channels (RGB)   | None     | 8    |
| RGBA, RGBa                   | 3 channels (RGB)   | (1, H, W)| 8    |
| P, PA (palette)              | RGB, or RGB + alpha when the palette has transparency | | 8 |
| I;16, I;16L, I;16B, I;16N, I | 1 channel / 65535  | None     | 16   |
| RGB;16, RGBA;16, LA;16 (PNG) | as RGB, RGBA, LA, / 65535 | (1, H, W) / 65535 | 16 |

The last row is 16-bit-per-channel PNG (colour types 2, 6, 4), which Pillow would silently decode
to 8 bits: framework.io.png16 reads it instead (16-bit gray PNG stays with Pillow's I;16). Pillow
also reads 16-bit RGB/RGBA TIFF as 8 bits (keeping the high byte) and cannot write it: such TIFFs
read as 8-bit.

Alpha is returned separately so that SR runs on the colour channels and the caller upscales alpha on
its own. EXIF orientation is applied, so arrays are upright as a viewer shows them.

Writing: 8-bit PNG/JPEG/BMP/TIFF with 1 or 3 channels and optional alpha (not JPEG); 16-bit PNG
with 1 or 3 channels and optional alpha (1 channel without alpha through Pillow's "I;16", the rest
through framework.io.png16); 16-bit TIFF for 1 channel without alpha. Other 16-bit requests raise
a ValueError rather than silently dropping precision (`supports_16bit` says beforehand).

Decompression bombs: the pixel count in the header is checked against `MAX_PIXELS` before any pixel
is decoded.
"""
from __future__ import annotations

import contextlib
import struct
import warnings
import zlib
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from . import png16
from .atomic import atomic_open

__all__ = ["MAX_PIXELS", "IMAGE_EXTENSIONS", "read_image", "image_size", "write_image",
           "write_quantised", "quantise_into", "supports_16bit", "list_images"]

# Largest width * height read_image decodes (Pillow's own default limit); a module constant so a
# user with genuinely huge images can raise it, or pass max_pixels= per call.
MAX_PIXELS = 178_956_970

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")
_FORMATS = ("PNG", "JPEG", "BMP", "TIFF", "WEBP")
_WRITE_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".bmp": "BMP", ".tif": "TIFF",
                  ".tiff": "TIFF", ".webp": "WEBP"}
WRITE_EXTENSIONS = tuple(_WRITE_FORMATS)
_ALPHA_MODES = ("RGBA", "RGBa", "LA", "La", "PA")
_ORIENTATION = 0x0112  # the EXIF tag
_16BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")
# PNG colour types framework.io.png16 reads (Pillow would drop them to 8 bits) -> our mode name
_PNG16_MODES = {2: "RGB;16", 4: "LA;16", 6: "RGBA;16"}
# Exceptions Pillow raises on corrupt or truncated data (zlib/struct errors escape some plugins).
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error, zlib.error)


def read_image(path, max_pixels: int | None = None):
    """Read an image file as float32 (C, H, W) in [0, 1].

    Returns `(array, info)` with info = {"mode": Pillow mode of the file, "bits": 8 or 16,
    "alpha": float32 (1, H, W) or None, "channels": C (1 or 3)}. `max_pixels` defaults to
    `MAX_PIXELS`. Raises FileNotFoundError for a missing file and ValueError naming the file for a
    non-image, corrupt or truncated file, an unsupported mode or an image over the pixel limit.
    """
    path = Path(path)
    limit = MAX_PIXELS if max_pixels is None else int(max_pixels)
    if not path.is_file():
        raise FileNotFoundError(f"image file not found: {path}")
    header = png16.probe(path)
    if header is not None and header.bit_depth == 16 and header.color_type in _PNG16_MODES:
        return _read_png16(path, limit)
    with _opened(path, "corrupt or truncated image") as im:
        _check_pixels(path, *im.size, limit)  # header only: nothing decoded yet
        mode = im.mode
        im.load()
        im = ImageOps.exif_transpose(im)
        return _to_array(im, mode, path)


def _read_png16(path: Path, limit: int):
    """A 16-bit RGB / RGBA / gray + alpha PNG through framework.io.png16, as read_image returns it."""
    pixels, meta = png16.read_png16(path, limit)
    pixels = _orient(pixels, _exif_orientation(meta["exif"]))
    channels = 1 if meta["color_type"] == 4 else 3
    planes = np.empty((pixels.shape[2],) + pixels.shape[:2], np.float32)
    for c in range(pixels.shape[2]):  # a plane at a time: no float copy of the interleaved image
        np.divide(pixels[:, :, c], np.float32(65535), out=planes[c], dtype=np.float32)
    alpha = planes[channels:] if pixels.shape[2] > channels else None
    info = {"mode": _PNG16_MODES[meta["color_type"]], "bits": 16, "alpha": alpha,
            "channels": channels}
    return planes[:channels], info


def _exif_orientation(raw) -> int:
    """The orientation tag of a raw EXIF block (1 when absent or unreadable: an ancillary chunk
    never makes an image unreadable)."""
    if not raw:
        return 1
    exif = Image.Exif()
    try:
        exif.load(raw)
        orientation = exif.get(_ORIENTATION, 1)
    except (*_DECODE_ERRORS, KeyError, TypeError):
        return 1
    return orientation if orientation in range(1, 9) else 1


def _orient(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """(H, W, C) pixels turned upright for an EXIF orientation, as ImageOps.exif_transpose does."""
    if orientation in (5, 6, 7, 8):  # a transpose, then the flips below
        pixels = pixels.transpose(1, 0, 2)
    if orientation in (3, 4, 7, 8):
        pixels = pixels[::-1]
    if orientation in (2, 3, 6, 7):
        pixels = pixels[:, ::-1]
    return pixels


def has_alpha(path) -> bool:
    """Whether an image file carries an alpha channel (from its header; False when unreadable: the
    read itself reports that)."""
    try:
        with _opened(Path(path), "corrupt image header") as im:
            return im.mode in _ALPHA_MODES or (im.mode == "P" and "transparency" in im.info)
    except (OSError, ValueError):
        return False


def image_size(path, max_pixels: int | None = None) -> tuple[int, int]:
    """(width, height) of an image file from its header alone (nothing decoded): a cheap check of
    a whole dataset folder. EXIF orientation is honoured, as in `read_image`. Raises like
    `read_image` for a missing or unreadable file or one over the pixel limit."""
    path = Path(path)
    limit = MAX_PIXELS if max_pixels is None else int(max_pixels)
    if not path.is_file():
        raise FileNotFoundError(f"image file not found: {path}")
    with _opened(path, "corrupt image header") as im:
        width, height = im.size
        _check_pixels(path, width, height, limit)
        # orientations 5-8 are a transpose or a 90-degree turn: width and height swap
        if _orientation(im) in (5, 6, 7, 8):
            width, height = height, width
        return width, height


@contextlib.contextmanager
def _opened(path: Path, broken: str):
    """Image.open with our decoders only, Pillow's failures turned into a ValueError that names
    the file (`broken` says what a decode error means here); missing/unreadable files still raise
    their OSError."""
    try:
        with warnings.catch_warnings():
            # Our own limit (_check_pixels) decides; Pillow's warning at its default is only noise.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path, formats=_FORMATS) as im:
                yield im
    except _Refused as e:
        raise ValueError(str(e)) from None
    except Image.DecompressionBombError as e:
        raise ValueError(f"{path}: refusing to decode a possible decompression bomb ({e})") from None
    except Image.UnidentifiedImageError:
        raise ValueError(f"{path}: not a readable image (supported formats: "
                         f"{', '.join(_FORMATS)})") from None
    except _DECODE_ERRORS as e:
        if isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        raise ValueError(f"{path}: {broken} ({type(e).__name__}: {e})") from None


def _check_pixels(path: Path, width: int, height: int, limit: int) -> None:
    if width * height > limit:
        raise _Refused(f"{path}: {width}x{height} = {width * height} pixels exceeds the limit of "
                       f"{limit} (framework.io.image.MAX_PIXELS); refusing to decode a possible "
                       f"decompression bomb")


def _orientation(im: Image.Image) -> int:
    """The EXIF orientation tag without decoding pixels (Pillow's PNG getexif() decodes the whole
    image to look for an eXIf chunk after the pixel data; one before it is already in im.info)."""
    if im.format == "PNG":
        raw = im.info.get("exif")
        if not raw:
            return 1
        exif = Image.Exif()
        exif.load(raw)
        return exif.get(_ORIENTATION, 1)
    return im.getexif().get(_ORIENTATION, 1)


class _Refused(Exception):
    """Internal: a deliberate refusal (size, mode) raised inside the Pillow context, kept apart from
    Pillow's decode errors so its message is not rewritten as "corrupt"."""


def _to_array(im: Image.Image, mode: str, path: Path):
    """Decoded Pillow image -> (float32 (C, H, W), info); `mode` is the file's original mode."""
    alpha = None
    bits = 8
    if im.mode in _16BIT_MODES:
        data = np.asarray(im)
        if im.mode == "I" and (data.min() < 0 or data.max() > 65535):
            raise _Refused(f"{path}: 32-bit integer images are not supported (values "
                             f"{data.min()}..{data.max()} exceed the 16-bit range)")
        color = (data.astype(np.float32) / np.float32(65535))[None]
        bits = 16
    else:
        if im.mode in ("P", "PA"):
            has_alpha = im.mode == "PA" or "transparency" in im.info
            im = im.convert("RGBA" if has_alpha else "RGB")
        elif im.mode == "1":
            im = im.convert("L")
        elif im.mode in ("CMYK", "YCbCr"):
            im = im.convert("RGB")
        elif im.mode in ("RGBa", "La"):  # premultiplied alpha: undo it
            im = im.convert(im.mode.upper())
        elif im.mode not in ("L", "LA", "RGB", "RGBA"):
            raise _Refused(f"{path}: unsupported image mode {im.mode!r} (supported: 1, L, LA, "
                             f"RGB, RGBA, P, CMYK, YCbCr and 16-bit grayscale)")
        data = np.asarray(im, dtype=np.float32) / np.float32(255)
        if data.ndim == 2:
            data = data[:, :, None]
        if im.mode in ("LA", "RGBA"):
            alpha = np.ascontiguousarray(data[:, :, -1][None])
            data = data[:, :, :-1]
        color = np.ascontiguousarray(data.transpose(2, 0, 1))
    info = {"mode": mode, "bits": bits, "alpha": alpha, "channels": color.shape[0]}
    return color, info


def write_image(path, array, bits: int = 8, alpha=None, quality: int = 95) -> None:
    """Write float (C, H, W) in [0, 1] (C = 1 or 3) to `path`; the format follows the extension.

    Values are clipped to [0, 1] and rounded to `bits` (8 or 16). `alpha` is (1, H, W) or (H, W) in
    [0, 1]; not for JPEG. 16 bits: PNG with any channels and alpha, TIFF with 1 channel and no
    alpha (`supports_16bit`); anything else at 16 bits raises ValueError. `quality` applies to
    JPEG. Parent folders are created.
    """
    path = Path(path)
    fmt = _WRITE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"write_image: cannot write {path}: extension {path.suffix!r} is not one of "
                         f"{', '.join(_WRITE_FORMATS)}")
    if bits not in (8, 16):
        raise ValueError(f"write_image: bits must be 8 or 16, got {bits!r}")
    color = _check_plane_stack(array, "array", path)
    if color.shape[0] not in (1, 3):
        raise ValueError(f"write_image: array must have 1 or 3 channels (C, H, W), got shape "
                         f"{color.shape} for {path}")
    if alpha is not None:
        alpha = _check_plane_stack(alpha, "alpha", path)
        if alpha.shape != (1,) + color.shape[1:]:
            raise ValueError(f"write_image: alpha shape {alpha.shape} does not match the image's "
                             f"(1, {color.shape[1]}, {color.shape[2]}) for {path}")
        if fmt == "JPEG":
            raise ValueError(f"write_image: JPEG cannot store alpha ({path}); use .png or .tif")
    nplanes = color.shape[0] + (alpha is not None)
    if bits == 16 and not supports_16bit(path, nplanes):
        raise ValueError(_no_16bit_message(path, nplanes))
    planes = color if alpha is None else np.concatenate([color, alpha], axis=0)
    out = np.empty(planes.shape[1:] + planes.shape[:1], np.uint16 if bits == 16 else np.uint8)
    quantise_into(out, planes, bits)
    write_quantised(path, out, bits, quality)


def quantise_into(out: np.ndarray, planes: np.ndarray, bits: int) -> None:
    """out (H, W, C) uint8/uint16 = planes (C, H, W) float clipped to [0, 1] and rounded to `bits`
    (round half to even, in float64 a band of rows at a time: exact for 65535 levels without a
    float64 copy of a whole large image)."""
    peak = 65535 if bits == 16 else 255
    rows = max(1, (1 << 22) // max(1, planes.shape[0] * planes.shape[2]))
    for r in range(0, planes.shape[1], rows):
        band = np.clip(planes[:, r:r + rows].astype(np.float64), 0.0, 1.0)
        out[r:r + rows] = np.round(band * peak).transpose(1, 2, 0)


def supports_16bit(path, planes: int) -> bool:
    """Whether `write_image` / `write_quantised` can write `planes` planes (colour channels plus
    alpha: 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA) at 16 bits to `path` (by its extension): PNG
    any, TIFF only 1 (Pillow cannot write 16-bit colour or alpha TIFF)."""
    fmt = _WRITE_FORMATS.get(Path(path).suffix.lower())
    return (fmt == "PNG" and planes in (1, 2, 3, 4)) or (fmt == "TIFF" and planes == 1)


def _no_16bit_message(path: Path, planes: int) -> str:
    what = {1: "gray", 2: "gray + alpha", 3: "RGB", 4: "RGBA"}.get(planes, f"{planes} planes")
    return (f"write_image: 16-bit output is supported only for PNG (gray, gray + alpha, RGB, "
            f"RGBA) and for 1-channel TIFF without alpha; got {what} as "
            f"{path.suffix.lstrip('.').upper() or 'no extension'} for {path}; use .png or bits=8")


def write_quantised(path, q: np.ndarray, bits: int = 8, quality: int = 95) -> None:
    """Write an (H, W, C) uint8 array (bits=8), or uint16 (bits=16, see `supports_16bit`): C = 1
    gray, 2 gray + alpha, 3 RGB, 4 RGBA; the format follows the extension. Written atomically (a
    temporary file, then renamed): an interrupted write never leaves a truncated image. Parent
    folders are created."""
    path = Path(path)
    fmt = _WRITE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"write_image: cannot write {path}: extension {path.suffix!r} is not one of "
                         f"{', '.join(_WRITE_FORMATS)}")
    if bits not in (8, 16):
        raise ValueError(f"write_image: bits must be 8 or 16, got {bits!r}")
    dtype = np.uint16 if bits == 16 else np.uint8
    if q.dtype != dtype or q.ndim != 3 or q.shape[2] not in (1, 2, 3, 4):
        raise ValueError(f"write_image: expected a {np.dtype(dtype)} (H, W, C) array with C = 1..4 "
                         f"for bits={bits}, got {q.dtype} {q.shape} for {path}")
    if bits == 16 and not supports_16bit(path, q.shape[2]):
        raise ValueError(_no_16bit_message(path, q.shape[2]))
    path.parent.mkdir(parents=True, exist_ok=True)
    if bits == 16 and q.shape[2] > 1:  # Pillow has no 16-bit colour or alpha mode
        png16.write_png16(path, q)
        return
    if bits == 16:
        im = Image.fromarray(np.ascontiguousarray(q[:, :, 0]))  # mode "I;16"
    else:
        mode = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[q.shape[2]]
        im = Image.fromarray(q[:, :, 0] if mode == "L" else q, mode=mode)
    options = {"quality": int(quality)} if fmt in ("JPEG", "WEBP") else {}
    with atomic_open(path) as fh:
        im.save(fh, format=fmt, **options)


def _check_plane_stack(array, name: str, path: Path) -> np.ndarray:
    """A float (C, H, W) array (an (H, W) array becomes (1, H, W)); integers are rejected because
    their range ([0, 255]? [0, 65535]?) would be a guess."""
    arr = np.asarray(array.data if hasattr(array, "requires_grad") else array)
    if arr.dtype.kind != "f":
        raise TypeError(f"write_image: {name} must be a float array in [0, 1], got dtype "
                        f"{arr.dtype} for {path}")
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1] == 0 or arr.shape[2] == 0:
        raise ValueError(f"write_image: {name} must be (C, H, W), got shape {arr.shape} for {path}")
    if not np.isfinite(arr).all():
        raise ValueError(f"write_image: {name} contains NaN or Inf values for {path}")
    return arr


def list_images(folder) -> list[Path]:
    """Sorted paths of the image files (by extension, case-insensitive) directly inside `folder`.
    Raises FileNotFoundError / NotADirectoryError / ValueError naming the folder when it is missing,
    not a folder, or holds no image."""
    folder = Path(folder)
    if not folder.exists():
        raise FileNotFoundError(f"image folder not found: {folder}")
    if not folder.is_dir():
        raise NotADirectoryError(f"not a folder: {folder}")
    paths = sorted(p for p in folder.iterdir()
                   if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
    if not paths:
        raise ValueError(f"no image files ({', '.join(IMAGE_EXTENSIONS)}) in folder {folder}")
    return paths
