"""SR datasets: HR images with LR made by MATLAB-style bicubic `imresize`, or paired HR/LR folders
(DIV2K layout). Both registered in DATASETS.

Colour: every image is brought to the dataset's `color` the same way, whatever its file mode:
grayscale (L, 1-bit, 16-bit) is replicated to RGB, palette is expanded, alpha is dropped; with
color="y" the RGB result is converted to BT.601 Y (1 channel), exactly as BasicSR reads images with
cv2.IMREAD_COLOR and converts BGR to Y. So a mixed folder gives consistent 3- (or 1-) channel data.

Caching: with cache=True (default) each image is decoded once, on first use, and kept with its LR
as float32: about 12 x (1 + 1/scale^2) bytes per HR pixel in RGB. Use cache=False for sets that
do not fit in memory (each access then re-decodes, and for HRImageDataset re-runs imresize).
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from .. import functional as F
from .._check import int_arg
from ..autograd import no_grad
from ..io.image import image_size, list_images, read_image
from ..color import rgb_to_y
from ..registry import DATASETS
from ..tensor import Tensor
from .augment import augment, paired_random_crop

__all__ = ["HRImageDataset", "PairedImageDataset", "SingleImageDataset", "mod_crop"]

_COLORS = ("rgb", "y")


def folders(owner: str, name: str, value) -> list[Path]:
    """A folder (or an image file), or a list of them (traiNNer-redux's dataroot lists), as
    Paths."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"{owner}: {name} is an empty list (give a folder, or several)")
        return [Path(v) for v in value]
    return [Path(value)]


def _files(roots: list[Path]) -> list[Path]:
    """The images of each root in turn (a root may be one image file)."""
    return [p for r in roots for p in ([r] if r.is_file() else list_images(r))]


def mod_crop(img: np.ndarray, scale: int) -> np.ndarray:
    """Crop (C, H, W) at the bottom/right to H and W multiples of `scale` (BasicSR's mod_crop)."""
    h, w = img.shape[-2:]
    return img[..., :h - h % scale, :w - w % scale]


def _load(path: Path, color: str) -> np.ndarray:
    """Decode to float32 (3, H, W) RGB or (1, H, W) Y, per the module's colour rule."""
    img, _ = read_image(path)  # alpha (if any) is dropped: SR data is colour only
    if img.shape[0] == 1:
        img = np.repeat(img, 3, axis=0)
    return rgb_to_y(img) if color == "y" else img


class _SRDataset:
    """Shared machinery: argument checks, the decode cache and `get` (crop + augment)."""

    def __init__(self, scale, gt_size, use_flip, use_rot, color, cache, bad_files):
        name = type(self).__name__
        self.scale = int_arg(name, "scale", scale)
        self.gt_size = None if gt_size is None else int_arg(name, "gt_size", gt_size)
        if self.gt_size is not None and self.gt_size % self.scale:
            raise ValueError(f"gt_size={gt_size} must be a multiple of scale={scale}")
        if color not in _COLORS:
            raise ValueError(f"color must be one of {_COLORS}, got {color!r}")
        if bad_files not in ("error", "skip"):
            raise ValueError(f"bad_files must be 'error' or 'skip', got {bad_files!r}")
        self.use_flip, self.use_rot = bool(use_flip), bool(use_rot)
        self.color, self.cache, self.bad_files = color, bool(cache), bad_files
        self.channels = 1 if color == "y" else 3
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.names: list[str] = []

    def __len__(self) -> int:
        return len(self.names)

    def _scan(self, items):
        """Keep the items whose files all read (header only; full decode with bad_files='skip', so
        truncated files are found now, not in the middle of training). `items` are tuples whose
        first element is the name, the rest paths."""
        kept = []
        for item in items:
            try:
                for path in item[1:]:
                    if self.bad_files == "skip":
                        read_image(path)
                    else:
                        image_size(path)
            except ValueError as e:
                if self.bad_files == "error":
                    raise
                warnings.warn(f"skipping unreadable image: {e}", stacklevel=3)
                continue
            kept.append(item)
        if not kept:
            raise ValueError(f"{type(self).__name__}: no readable images left after skipping")
        return kept

    def _check_crop_fits(self, name: str, hr_w: int, hr_h: int):
        w, h = hr_w - hr_w % self.scale, hr_h - hr_h % self.scale
        if self.gt_size is not None and min(w, h) < self.gt_size:
            raise ValueError(f"{name}: image is {w}x{h} (HR, after mod-crop to scale {self.scale}), "
                             f"smaller than the {self.gt_size}x{self.gt_size} crop (gt_size)")

    def pair(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Full (lq, gt) float32 arrays of image `index` (cached read-only when cache=True)."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for a dataset of {len(self)} images")
        if index in self._cache:
            return self._cache[index]
        lq, gt = self._make_pair(index)
        if self.cache:
            lq.flags.writeable = gt.flags.writeable = False  # shared: never edited in place
            self._cache[index] = (lq, gt)
        return lq, gt

    def get(self, index: int, rng: np.random.Generator | None = None) -> dict:
        """dict(lq=float32 (C, h, w), gt=float32 (C, h*scale, w*scale), name=str).

        With `rng`: a random aligned crop of gt_size (when set) and random flips/transposition;
        without: the full mod-cropped image (validation). Arrays are fresh copies."""
        lq, gt = self.pair(index)
        if rng is not None:
            if self.gt_size is not None:
                lq, gt = paired_random_crop(lq, gt, self.gt_size, self.scale, rng, self.names[index])
            lq, gt = augment([lq, gt], rng, self.use_flip, self.use_rot)
        return {"lq": np.array(lq, np.float32), "gt": np.array(gt, np.float32),
                "name": self.names[index]}

    def __getitem__(self, index: int) -> dict:
        return self.get(index)

    def _make_pair(self, index: int):
        raise NotImplementedError


@DATASETS.register()
class HRImageDataset(_SRDataset):
    """HR images from a folder; LR made on the fly by `F.imresize(hr, 1/scale)` (MATLAB bicubic
    with antialiasing, the SR literature's degradation) from the whole mod-cropped HR image, once.

    Args: root (a folder of PNG/JPEG/BMP/TIFF/WebP images, or one image file, or a list of them),
    scale (int >= 1), gt_size (HR crop size, a multiple
    of scale; None = full images), use_flip / use_rot (augmentations, default True), color ("rgb" or
    "y"), cache (default True), lq_quantize (default True: clip the LR to [0, 1] and round it to
    8-bit levels, as if saved as an 8-bit PNG the way DIV2K's LR sets are), bad_files ("error" or
    "skip" with a warning).
    """

    def __init__(self, root, scale: int, gt_size: int | None = None, use_flip: bool = True,
                 use_rot: bool = True, color: str = "rgb", cache: bool = True,
                 lq_quantize: bool = True, bad_files: str = "error"):
        super().__init__(scale, gt_size, use_flip, use_rot, color, cache, bad_files)
        roots = folders("HRImageDataset", "root", root)
        self.root = roots[0] if len(roots) == 1 else roots
        self.lq_quantize = bool(lq_quantize)
        items = self._scan([(p.name, p) for p in _files(roots)])
        for name, path in items:
            width, height = image_size(path)
            if min(width, height) < self.scale:
                raise ValueError(f"{path}: image is {width}x{height}, smaller than scale={scale}")
            self._check_crop_fits(str(path), width, height)
        self.paths = [path for _, path in items]
        self.names = [name for name, _ in items]

    def _make_pair(self, index):
        gt = np.ascontiguousarray(mod_crop(_load(self.paths[index], self.color), self.scale))
        with no_grad():
            lq = F.imresize(Tensor(gt[None]), scale_factor=1 / self.scale).data[0]
        if self.lq_quantize:
            lq = np.round(np.clip(lq, 0, 1) * np.float32(255)) / np.float32(255)
        return np.ascontiguousarray(lq, dtype=np.float32), gt


@DATASETS.register()
class PairedImageDataset(_SRDataset):
    """HR and LR folders: for HR file `0001.png` the LR file is
    `lq_root / filename_tmpl.format(name="0001", scale=scale)` with any image extension. The
    default template "{name}" is BasicSR's (`filename_tmpl: '{}'`): the LR file named as its HR
    file, as in BasicSR's sub-image folders, Set5's LRbicx2 and srgrad-prepare's output; DIV2K's
    own LR files (`0001x2.png`) take "{name}x{scale}" (BasicSR's '{}x2'). When LR partners are
    missing, the error says which of these two templates the folder follows.

    gt_root and lq_root may be lists of as many folders (traiNNer-redux's dataroot lists): the
    partners of gt_root[i]'s images are in lq_root[i]. The HR image is mod-cropped to the scale;
    the LR image must then be exactly HR / scale.
    Missing LR files, ambiguous matches (two extensions) and size mismatches are ValueErrors found
    when the dataset is built. Other args as HRImageDataset (no lq_quantize: the LR is the file).
    """

    def __init__(self, gt_root, lq_root, scale: int, filename_tmpl: str = "{name}",
                 gt_size: int | None = None, use_flip: bool = True, use_rot: bool = True,
                 color: str = "rgb", cache: bool = True, bad_files: str = "error"):
        super().__init__(scale, gt_size, use_flip, use_rot, color, cache, bad_files)
        gt_roots = folders("PairedImageDataset", "gt_root", gt_root)
        lq_roots = folders("PairedImageDataset", "lq_root", lq_root)
        if len(gt_roots) != len(lq_roots):
            raise ValueError(f"PairedImageDataset: gt_root lists {len(gt_roots)} folder(s) and "
                             f"lq_root {len(lq_roots)}: the LR partners of the HR images of "
                             f"gt_root[i] are in lq_root[i]")
        self.filename_tmpl = filename_tmpl
        one = len(gt_roots) == 1
        self.gt_root = gt_roots[0] if one else gt_roots
        self.lq_root = lq_roots[0] if one else lq_roots
        items = self._scan([item for g, q in zip(gt_roots, lq_roots)
                            for item in self._partners(g, q, filename_tmpl)])
        for name, gt_path, lq_path in items:
            gw, gh = image_size(gt_path)
            lw, lh = image_size(lq_path)
            if (lw, lh) != (gw // self.scale, gh // self.scale) or lw == 0 or lh == 0:
                raise ValueError(f"{lq_path}: LR size {lw}x{lh} should be {gw // self.scale}x"
                                 f"{gh // self.scale} (HR {gt_path.name} is {gw}x{gh}, scale "
                                 f"{self.scale})")
            self._check_crop_fits(str(gt_path), gw, gh)
        self.gt_paths = [item[1] for item in items]
        self.lq_paths = [item[2] for item in items]
        self.names = [item[0] for item in items]

    def _partners(self, gt_root: Path, lq_root: Path, filename_tmpl: str) -> list:
        """(name, HR path, LR path) of every HR image of gt_root, its partner found in lq_root
        (one folder pair)."""
        lq_by_stem: dict[str, list[Path]] = {}
        for p in list_images(lq_root):
            lq_by_stem.setdefault(p.stem, []).append(p)
        items, missing = [], []
        for gt_path in list_images(gt_root):
            try:
                stem = filename_tmpl.format(name=gt_path.stem, scale=self.scale)
            except (KeyError, IndexError, ValueError) as e:
                raise ValueError(f"filename_tmpl {filename_tmpl!r} must use only {{name}} and "
                                 f"{{scale}}: {e!r}") from None
            found = lq_by_stem.get(stem, [])
            if len(found) > 1:
                raise ValueError(f"{gt_path.name}: several LR files match {stem!r} in "
                                 f"{lq_root}: {', '.join(p.name for p in found)}")
            if not found:
                missing.append(stem)
            else:
                items.append((gt_path.name, gt_path, found[0]))
        if missing:
            shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
            raise ValueError(f"{len(missing)} HR image(s) in {gt_root} have no LR partner in "
                             f"{lq_root} (filename_tmpl {filename_tmpl!r}, any image "
                             f"extension); missing: {shown}"
                             f"{_template_hint(gt_root, lq_by_stem, filename_tmpl, self.scale)}")
        return items

    def _make_pair(self, index):
        gt = np.ascontiguousarray(mod_crop(_load(self.gt_paths[index], self.color), self.scale))
        lq = _load(self.lq_paths[index], self.color)
        return lq, gt


# the two LR naming conventions of SR data: named as the HR file (BasicSR's sub-image folders,
# Set5's LRbicx2, srgrad-prepare), and DIV2K's own 0001x2.png
_TEMPLATES = ("{name}", "{name}x{scale}")


def _template_hint(gt_root, lq_by_stem, tmpl, scale) -> str:
    """'; the LR files are named ...: set filename_tmpl ...' when another common template finds
    every partner, else ''."""
    stems = [p.stem for p in list_images(gt_root)]
    for other in _TEMPLATES:
        if other != tmpl and all(other.format(name=s, scale=scale) in lq_by_stem for s in stems):
            example = f"{stems[0]} -> {other.format(name=stems[0], scale=scale)}"
            return (f". The LR files there are named {other!r} ({example}): set filename_tmpl: "
                    f"'{other}'")
    return ""


@DATASETS.register()
class SingleImageDataset:
    """LR images only, for test sets without ground truth (BasicSR's SingleImageDataset):
    srgrad-eval upscales and saves them, with no metrics; training refuses it (`has_gt`).

    `get(index, rng=None)` -> dict(lq=float32 (C, h, w), name=str). Args: lq_root (a folder of
    images, or one image file), scale (the run's; kept for the record), color ("rgb" or "y", as
    HRImageDataset), bad_files ("error" or "skip" with a warning)."""

    has_gt = False

    def __init__(self, lq_root, scale: int = 1, color: str = "rgb", bad_files: str = "error"):
        self.scale = int_arg("SingleImageDataset", "scale", scale)
        if color not in _COLORS:
            raise ValueError(f"color must be one of {_COLORS}, got {color!r}")
        if bad_files not in ("error", "skip"):
            raise ValueError(f"bad_files must be 'error' or 'skip', got {bad_files!r}")
        roots = folders("SingleImageDataset", "lq_root", lq_root)
        self.lq_root, self.color = roots[0] if len(roots) == 1 else roots, color
        files = _files(roots)
        kept = []
        for path in files:
            try:
                read_image(path) if bad_files == "skip" else image_size(path)
            except ValueError as e:
                if bad_files == "error":
                    raise
                warnings.warn(f"skipping unreadable image: {e}", stacklevel=2)
                continue
            kept.append(path)
        if not kept:
            raise ValueError(f"SingleImageDataset: no readable images in {self.lq_root}")
        self.paths, self.names = kept, [p.name for p in kept]

    def __len__(self) -> int:
        return len(self.paths)

    def get(self, index: int, rng=None) -> dict:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for a dataset of {len(self)} images")
        return {"lq": np.ascontiguousarray(_load(self.paths[index], self.color)),
                "name": self.names[index]}
