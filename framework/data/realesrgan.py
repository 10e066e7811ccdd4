"""Real-ESRGAN's second-order degradation (BasicSR's RealESRGANDataset + RealESRNetModel.feed_data)
as a dataset: HR images in, (LR, HR) pairs synthesised on the fly, every draw from the Generator the
loader passes, so a sample is a pure function of (seed, epoch, position).

One sample: flip/transpose the HR image, reflect-pad / randomly crop it to crop_pad_size, optionally
USM-sharpen it, then `degrade`:
  blur (kernel1) -> random resize -> Gaussian or Poisson noise -> JPEG,
  [blur (kernel2) with second_blur_prob] -> random resize to ~crop_pad_size / scale -> noise,
  then in a random order [resize to crop_pad_size / scale + final sinc] and JPEG,
  finally round to 8-bit levels; and a paired random crop to gt_size.

JPEG: `jpeg="diffjpeg"` (default) is what Real-ESRGAN's models run, BasicSR's DiffJPEG with plain
rounding on unrounded floats at a continuous quality (F.diff_jpeg); `jpeg="pillow"` is libjpeg
at the nearest integer quality on 8-bit levels (bit-identical to BasicSR's cv2 path). Both draw
the quality with one uniform, so every other draw is the same for the same seed.

Differences from BasicSR, all deliberate: every draw is per sample (BasicSR draws the resize
factors, resize modes, noise type and the blur-or-not coins once per GPU batch, and its gray
Gaussian noise field is shared by the batch), so there is no training-pair pool (`queue_size`): a
batch is already diverse; blur_kernel_size is used (kernel sizes are the odd 7..blur_kernel_size;
BasicSR reads it but hard-codes 7..21, which is the default here); the final sinc kernel's size
comes from the first range; kernels are not zero-padded to 21 (padding changes nothing but the
cost). With gt_usm the LR is degraded from the sharpened HR, as in both BasicSR models
(RealESRGANModel always, RealESRNetModel with gt_usm: True).

traiNNer-redux's on-the-fly keys are here too, each off by default (its default is Real-ESRGAN's
pipeline, and it spends no draw): blur_prob (the first order's blur odds), jpeg_prob / jpeg_prob2,
kernel_range / kernel_range2 / final_kernel_range ([low, high] odd sizes), and resize_mode_list /
resize_mode_prob (2, 3: the second and the final resize) with any of F.interpolate's modes
(nearest-exact, lanczos, ...). Its resizes also antialias bilinear and bicubic and clamp to
[0, 1], which these keep as Real-ESRGAN's (no antialias, no clamp).
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import time
from pathlib import Path

import numpy as np

from .. import functional as F
from .._check import choice, did_you_mean, flag, int_arg, number
from ..autograd import no_grad
from ..functional.resample import MODES
from ..io.image import list_images
from ..registry import DATASETS
from ..tensor import Tensor
from .augment import apply_flags, paired_random_crop, random_flags
from .datasets import _load, _SRDataset, folders
from .degradations import (JPEG_METHODS, KERNEL_TYPES, check_kernel_list, circular_lowpass_kernel,
                           filter2d, pick, probabilities, random_add_gaussian_noise,
                           random_add_jpg_compression, random_add_poisson_noise,
                           random_mixed_kernels, usm_sharp, value_range)
from .degradations._common import sequence

__all__ = ["DegradationOptions", "degrade", "RealESRGANDataset", "TRACE_KEYS", "REDUX_KEYS"]

_ALL_KERNELS = tuple(KERNEL_TYPES)
_KERNEL_PROB = (0.45, 0.25, 0.12, 0.03, 0.12, 0.03)
RESIZE_MODES = ("area", "bilinear", "bicubic")
# the keys traiNNer-redux adds to Real-ESRGAN's (DegradationOptions' last fields)
REDUX_KEYS = ("blur_prob", "kernel_range", "kernel_range2", "jpeg_prob", "jpeg_prob2",
              "resize_mode_list", "resize_mode_prob", "resize_mode_list2", "resize_mode_prob2",
              "resize_mode_list3", "resize_mode_prob3", "final_kernel_range")

# What `degrade(..., trace=)` records, in pipeline order. n = 1, 2 is the order. kernelN: a kernel
# type or "sinc" ("none": that order's blur skipped); sigmaN_x, sigmaN_y, thetaN (radians), betaN
# for the Gaussian family, omegaN (the cutoff, radians) for a sinc; resizeN: up, down or keep, by
# resizeN_scale (the first order skips a keep, so its mode is None); noiseN: gaussian (level =
# sigma on the 0..255 scale) or poisson (level = scale); jpegN_quality: a float with DiffJPEG,
# an int with Pillow; final_order: whether the last resize (+ sinc, final_omega of
# final_sinc_size, or None) comes before or after the second JPEG.
TRACE_KEYS = (
    "kernel1", "kernel1_size", "sigma1_x", "sigma1_y", "theta1", "beta1", "omega1",
    "resize1", "resize1_scale", "resize1_mode", "noise1", "noise1_level", "noise1_gray",
    "jpeg1_quality",
    "kernel2", "kernel2_size", "sigma2_x", "sigma2_y", "theta2", "beta2", "omega2",
    "resize2", "resize2_scale", "resize2_mode", "noise2", "noise2_level", "noise2_gray",
    "final_order", "final_resize_mode", "final_sinc_size", "final_omega", "jpeg2_quality",
)


# Each order's keys: the DegradationOrder field <- BasicSR's flat key in the first and in the
# second order (written out, so that a YAML key can be found here and followed to its field).
ORDER_KEYS = {
    "blur_kernel_size": ("blur_kernel_size", "blur_kernel_size2"),
    "kernel_list": ("kernel_list", "kernel_list2"),
    "kernel_prob": ("kernel_prob", "kernel_prob2"),
    "blur_sigma": ("blur_sigma", "blur_sigma2"),
    "betag_range": ("betag_range", "betag_range2"),
    "betap_range": ("betap_range", "betap_range2"),
    "sinc_prob": ("sinc_prob", "sinc_prob2"),
    "resize_prob": ("resize_prob", "resize_prob2"),
    "resize_range": ("resize_range", "resize_range2"),
    "gaussian_noise_prob": ("gaussian_noise_prob", "gaussian_noise_prob2"),
    "noise_range": ("noise_range", "noise_range2"),
    "poisson_scale_range": ("poisson_scale_range", "poisson_scale_range2"),
    "gray_noise_prob": ("gray_noise_prob", "gray_noise_prob2"),
    "jpeg_range": ("jpeg_range", "jpeg_range2"),
    # traiNNer-redux's, each off by default (Real-ESRGAN's pipeline, with no draw spent on them)
    "kernel_range": ("kernel_range", "kernel_range2"),
    "jpeg_prob": ("jpeg_prob", "jpeg_prob2"),
    "resize_mode_list": ("resize_mode_list", "resize_mode_list2"),
    "resize_mode_prob": ("resize_mode_prob", "resize_mode_prob2"),
}


@dataclasses.dataclass(frozen=True)
class DegradationOrder:
    """One order of the degradation, checked: its blur kernel (sizes 7..blur_kernel_size, a sinc
    with sinc_prob, else a type of kernel_list drawn with kernel_prob, with blur_sigma, betag_range,
    betap_range), its resize (resize_prob = (up, down, keep), resize_range), its noise (Gaussian
    with gaussian_noise_prob and noise_range, else Poisson with poisson_scale_range; gray with
    gray_noise_prob) and its JPEG quality range; traiNNer-redux's: the kernel sizes (kernel_range,
    [low, high] odd; None: 7..blur_kernel_size), the odds of its JPEG (jpeg_prob) and its resize
    modes (resize_mode_list drawn with resize_mode_prob; None: area, bilinear, bicubic alike).
    `n` (1 or 2) numbers its trace keys."""
    n: int
    blur_kernel_size: int
    kernel_list: tuple
    kernel_prob: tuple
    blur_sigma: tuple
    betag_range: tuple
    betap_range: tuple
    sinc_prob: float
    resize_prob: tuple
    resize_range: tuple
    gaussian_noise_prob: float
    noise_range: tuple
    poisson_scale_range: tuple
    gray_noise_prob: float
    jpeg_range: tuple
    kernel_range: tuple | None
    jpeg_prob: float
    resize_mode_list: tuple | None
    resize_mode_prob: tuple | None

    def sizes(self) -> range:
        """The kernel sizes drawn from."""
        lo, hi = self.kernel_range or (7, self.blur_kernel_size)
        return range(lo, hi + 1, 2)

    @classmethod
    def from_keys(cls, owner: str, n: int, values: dict) -> "DegradationOrder":
        """Order n from `values` ({flat key: value}, the keys of ORDER_KEYS' column n); each error
        names the flat key."""
        key = {field: keys[n - 1] for field, keys in ORDER_KEYS.items()}
        v = {field: values[key[field]] for field in ORDER_KEYS}
        size = int_arg(owner, key["blur_kernel_size"], v["blur_kernel_size"], 7)
        if size % 2 == 0:
            raise ValueError(f"{owner}: {key['blur_kernel_size']} must be odd, got {size}")
        kinds = check_kernel_list(owner, key["kernel_list"], v["kernel_list"])
        checked = dict(n=n, blur_kernel_size=size, kernel_list=kinds, kernel_prob=tuple(
            probabilities(owner, key["kernel_prob"], v["kernel_prob"], len(kinds))),
            resize_prob=tuple(probabilities(owner, key["resize_prob"], v["resize_prob"], 3)))
        for field, low, high in (("blur_sigma", 0.0, None), ("betag_range", 0.0, None),
                                 ("betap_range", 0.0, None), ("resize_range", 0.0, None),
                                 ("noise_range", 0.0, None), ("poisson_scale_range", 0.0, None),
                                 ("jpeg_range", 1, 100)):
            checked[field] = value_range(owner, key[field], v[field], low, high)
        lo, hi = checked["resize_range"]
        if lo <= 0 or lo > 1 or hi < 1:
            raise ValueError(f"{owner}: {key['resize_range']} must have 0 < low <= 1 <= high, "
                             f"got {v['resize_range']!r}")
        for field in ("sinc_prob", "gaussian_noise_prob", "gray_noise_prob", "jpeg_prob"):
            checked[field] = number(owner, key[field], v[field], 0.0, 1.0)
        checked["kernel_range"] = kernel_range(owner, key["kernel_range"], v["kernel_range"])
        checked["resize_mode_list"], checked["resize_mode_prob"] = resize_modes(
            owner, key["resize_mode_list"], v["resize_mode_list"], key["resize_mode_prob"],
            v["resize_mode_prob"])
        return cls(**checked)


def kernel_range(owner: str, name: str, value) -> tuple | None:
    """None, or a [low, high] pair of odd sizes (traiNNer-redux's kernel_range)."""
    if value is None:
        return None
    lo, hi = value_range(owner, name, value, 1)
    if lo != int(lo) or hi != int(hi) or int(lo) % 2 == 0 or int(hi) % 2 == 0:
        raise ValueError(f"{owner}: {name} must be two odd sizes [low, high], got {value!r}")
    return int(lo), int(hi)


def resize_modes(owner: str, name: str, modes, prob_name: str, probs):
    """(modes, their probabilities) or (None, None): traiNNer-redux's resize_mode_list (modes of
    F.interpolate) and resize_mode_prob (default: alike)."""
    if modes is None:
        if probs is not None:
            raise ValueError(f"{owner}: {prob_name} is given without {name}")
        return None, None
    items = sequence(modes)
    if not items:
        raise ValueError(f"{owner}: {name} must be a list of resize modes, got {modes!r}")
    known = [m for m in MODES if m != "lanczos3"]
    for m in items:
        if m not in known:
            raise ValueError(f"{owner}: {name}: unknown resize mode {m!r}{did_you_mean(m, known)} "
                             f"(modes: {', '.join(known)})")
    probs = [1.0 / len(items)] * len(items) if probs is None else probs
    return tuple(items), tuple(probabilities(owner, prob_name, probs, len(items)))


@dataclasses.dataclass(frozen=True)
class DegradationOptions:
    """The degradation's keys, named and defaulted as in BasicSR's train_realesrnet_x4plus.yml.
    Ranges are [low, high]; probability lists sum to 1; resize_prob is (up, down, keep); a range
    or a list may be any sequence (list, tuple, numpy array). After checking, the fields hold the
    checked values (tuples, floats), and `first` and `second` the two orders as DegradationOrder
    records (ORDER_KEYS maps the flat keys to their fields), which is what `degrade` reads."""
    # first-order blur
    blur_kernel_size: int = 21
    kernel_list: tuple = _ALL_KERNELS
    kernel_prob: tuple = _KERNEL_PROB
    blur_sigma: tuple = (0.2, 3.0)
    betag_range: tuple = (0.5, 4.0)
    betap_range: tuple = (1.0, 2.0)
    sinc_prob: float = 0.1
    # second-order blur
    blur_kernel_size2: int = 21
    kernel_list2: tuple = _ALL_KERNELS
    kernel_prob2: tuple = _KERNEL_PROB
    blur_sigma2: tuple = (0.2, 1.5)
    betag_range2: tuple = (0.5, 4.0)
    betap_range2: tuple = (1.0, 2.0)
    sinc_prob2: float = 0.1
    final_sinc_prob: float = 0.8
    # first-order resize, noise, JPEG
    resize_prob: tuple = (0.2, 0.7, 0.1)
    resize_range: tuple = (0.15, 1.5)
    gaussian_noise_prob: float = 0.5
    noise_range: tuple = (1.0, 30.0)
    poisson_scale_range: tuple = (0.05, 3.0)
    gray_noise_prob: float = 0.4
    jpeg_range: tuple = (30.0, 95.0)
    # second order
    second_blur_prob: float = 0.8
    resize_prob2: tuple = (0.3, 0.4, 0.3)
    resize_range2: tuple = (0.3, 1.2)
    gaussian_noise_prob2: float = 0.5
    noise_range2: tuple = (1.0, 25.0)
    poisson_scale_range2: tuple = (0.05, 2.5)
    gray_noise_prob2: float = 0.4
    jpeg_range2: tuple = (30.0, 95.0)
    # traiNNer-redux's keys: each default is Real-ESRGAN's pipeline and draws nothing
    blur_prob: float = 1.0  # the odds of the first-order blur
    kernel_range: tuple | None = None  # [low, high] odd kernel sizes; None: 7..blur_kernel_size
    kernel_range2: tuple | None = None
    jpeg_prob: float = 1.0  # the odds of each order's JPEG
    jpeg_prob2: float = 1.0
    resize_mode_list: tuple | None = None  # resize modes and their odds, per resize; None:
    resize_mode_prob: tuple | None = None  # area, bilinear, bicubic alike (Real-ESRGAN's)
    resize_mode_list2: tuple | None = None
    resize_mode_prob2: tuple | None = None
    resize_mode_list3: tuple | None = None  # the final resize's
    resize_mode_prob3: tuple | None = None
    final_kernel_range: tuple | None = None  # the final sinc's sizes; None: the first order's

    def __post_init__(self):
        own = "DegradationOptions"
        flat = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        first = DegradationOrder.from_keys(own, 1, flat)
        second = DegradationOrder.from_keys(own, 2, flat)
        for order in (first, second):
            for field, keys in ORDER_KEYS.items():
                object.__setattr__(self, keys[order.n - 1], getattr(order, field))
        for name in ("final_sinc_prob", "second_blur_prob", "blur_prob"):
            object.__setattr__(self, name, number(own, name, getattr(self, name), 0.0, 1.0))
        object.__setattr__(self, "final_kernel_range",
                           kernel_range(own, "final_kernel_range", self.final_kernel_range))
        modes, probs = resize_modes(own, "resize_mode_list3", self.resize_mode_list3,
                                    "resize_mode_prob3", self.resize_mode_prob3)
        object.__setattr__(self, "resize_mode_list3", modes)
        object.__setattr__(self, "resize_mode_prob3", probs)
        object.__setattr__(self, "first", first)
        object.__setattr__(self, "second", second)

    @classmethod
    def from_dict(cls, options: dict, owner: str = "DegradationOptions",
                  also=()) -> "DegradationOptions":
        """Build from a mapping; an unknown key is a ValueError with a did-you-mean among the
        degradation keys and the owner's own keywords `also`."""
        if not isinstance(options, dict):
            raise ValueError(f"{owner}: degradation options must be a mapping, got {options!r}")
        known = [f.name for f in dataclasses.fields(cls)]
        for key in options:
            if key not in known:
                raise ValueError(f"{owner}: unknown degradation option {key!r}"
                                 f"{did_you_mean(key, [*known, *also])}")
        return cls(**options)

    def check_size(self, h: int, w: int, scale: int, owner: str = "degrade"):
        """ValueError unless an (h, w) crop survives the smallest resizes with >= 1 pixel."""
        lo1, lo2 = self.first.resize_range[0], self.second.resize_range[0]
        if h % scale or w % scale:
            raise ValueError(f"{owner}: the HR crop {h}x{w} must be a multiple of scale={scale}")
        if min(int(h * lo1), int(w * lo1), int(h / scale * lo2), int(w / scale * lo2)) < 1:
            raise ValueError(f"{owner}: an HR crop of {h}x{w} at scale {scale} shrinks below one "
                             f"pixel with resize_range[0]={lo1}, resize_range2[0]={lo2}")


class _Clock:
    """Adds each stage's seconds to `times` (a dict) when one is given."""

    def __init__(self, times):
        self.times = times

    def __call__(self, stage, fn, *args, **kwargs):
        if self.times is None:
            return fn(*args, **kwargs)
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        self.times[stage] = self.times.get(stage, 0.0) + time.perf_counter() - start
        return out


def _blur_kernel(rng, o: DegradationOrder, trace: dict) -> np.ndarray:
    """Kernel size, then a sinc (sinc_prob) or a mixed kernel, drawn as BasicSR's dataset does."""
    sizes = o.sizes()
    k = sizes[int(rng.integers(len(sizes)))]
    trace[f"kernel{o.n}_size"] = k
    if rng.uniform() < o.sinc_prob:
        omega = rng.uniform(np.pi / 3, np.pi) if k < 13 else rng.uniform(np.pi / 5, np.pi)
        trace.update({f"kernel{o.n}": "sinc", f"omega{o.n}": omega})
        return circular_lowpass_kernel(omega, k)
    draws = {}
    kern = random_mixed_kernels(o.kernel_list, o.kernel_prob, k, o.blur_sigma, o.blur_sigma,
                                (-math.pi, math.pi), o.betag_range, o.betap_range, None, rng=rng,
                                trace=draws)
    trace.update({f"kernel{o.n}": draws["kernel"], f"sigma{o.n}_x": draws["sigma_x"],
                  f"sigma{o.n}_y": draws["sigma_y"], f"theta{o.n}": draws["theta"],
                  f"beta{o.n}": draws["beta"]})
    return kern


def _resize(img: np.ndarray, mode: str, size=None, scale_factor=None) -> np.ndarray:
    with no_grad():
        return F.interpolate(Tensor(img[None]), size=size, scale_factor=scale_factor,
                             mode=mode).data[0]


def _random_factor(rng, o: DegradationOrder, trace: dict) -> float:
    """Up (U(1, high)), down (U(low, 1)) or keep (1) with probabilities resize_prob."""
    lo, hi = o.resize_range
    way = pick(rng, ("up", "down", "keep"), o.resize_prob)
    factor = rng.uniform(1, hi) if way == "up" else rng.uniform(lo, 1) if way == "down" else 1.0
    trace.update({f"resize{o.n}": way, f"resize{o.n}_scale": factor})
    return factor


def _noise(rng, o: DegradationOrder, img: np.ndarray, trace: dict) -> np.ndarray:
    draws = {}
    if rng.uniform() < o.gaussian_noise_prob:
        out = random_add_gaussian_noise(img, o.noise_range, o.gray_noise_prob, rng=rng,
                                        trace=draws)
        kind, level = "gaussian", draws["sigma"]
    else:
        out = random_add_poisson_noise(img, o.poisson_scale_range, o.gray_noise_prob, rng=rng,
                                       trace=draws)
        kind, level = "poisson", draws["scale"]
    trace.update({f"noise{o.n}": kind, f"noise{o.n}_level": level,
                  f"noise{o.n}_gray": draws["gray"]})
    return out


def _coin(rng, p: float) -> bool:
    """True with probability p; a certain outcome spends no draw (so Real-ESRGAN's defaults, p = 1,
    leave every other draw as it was)."""
    return p >= 1 or (p > 0 and rng.uniform() < p)


def _jpeg(rng, o: DegradationOrder, img: np.ndarray, trace: dict, method: str) -> np.ndarray:
    if not _coin(rng, o.jpeg_prob):  # traiNNer-redux's jpeg_prob
        return img
    draws = {}
    out = random_add_jpg_compression(img, o.jpeg_range, rng=rng, trace=draws, method=method)
    trace[f"jpeg{o.n}_quality"] = draws["quality"]
    return out


def degrade(gt: np.ndarray, rng: np.random.Generator, opts=None, scale: int = 4,
            times: dict | None = None, trace: dict | None = None,
            jpeg: str = "diffjpeg") -> np.ndarray:
    """Real-ESRGAN's second-order degradation of one HR crop: float (C, H, W) in [0, 1], H and W
    multiples of `scale` -> LR (C, H / scale, W / scale) in gt's dtype, on 8-bit levels.

    opts: DegradationOptions, a dict of its keys, or None (BasicSR's defaults). All randomness comes
    from `rng`. `times`, when given, accumulates seconds per stage (kernels, filter, resize, noise,
    jpeg). `trace`, when given, receives the draws: every key of TRACE_KEYS (None where a stage
    did not draw it). Neither changes a draw. jpeg: "diffjpeg" (default, Real-ESRGAN's models'
    DiffJPEG) or "pillow" (libjpeg at integer qualities); see the module docstring."""
    o = (opts if isinstance(opts, DegradationOptions)
         else DegradationOptions.from_dict(opts or {}, "degrade"))
    scale = int_arg("degrade", "scale", scale)
    jpeg = choice("degrade", "jpeg", jpeg, JPEG_METHODS)
    gt = np.asarray(gt)
    if gt.ndim != 3 or gt.dtype not in (np.float32, np.float64):
        raise ValueError(f"degrade: gt must be a float32/float64 (C, H, W) array, got {gt.dtype} "
                         f"{gt.shape}")
    h, w = gt.shape[1:]
    o.check_size(h, w, scale)
    clock = _Clock(times)
    drawn = dict.fromkeys(TRACE_KEYS)  # recorded always (a few dict writes), handed out if asked

    def mode(modes, probs):
        if modes is None:  # Real-ESRGAN's: one of three alike
            return RESIZE_MODES[int(rng.integers(len(RESIZE_MODES)))]
        return pick(rng, modes, probs)

    def final_sinc(img):
        drawn["final_resize_mode"] = mode(o.resize_mode_list3, o.resize_mode_prob3)
        img = clock("resize", _resize, img, drawn["final_resize_mode"],
                    size=(h // scale, w // scale))
        if rng.uniform() < o.final_sinc_prob:
            lo, hi = o.final_kernel_range or (o.first.sizes()[0], o.first.sizes()[-1])
            sizes = range(lo, hi + 1, 2)
            k = sizes[int(rng.integers(len(sizes)))]
            omega = rng.uniform(np.pi / 3, np.pi)
            drawn.update(final_sinc_size=k, final_omega=omega)
            sinc = clock("kernels", circular_lowpass_kernel, omega, k)
            img = clock("filter", filter2d, img, sinc)
        return img

    # first order: blur, resize by a factor, noise, JPEG
    first, second = o.first, o.second
    drawn["kernel1"] = "none"
    out = gt
    if _coin(rng, o.blur_prob):  # traiNNer-redux's blur_prob; Real-ESRGAN always blurs
        out = clock("filter", filter2d, gt, clock("kernels", _blur_kernel, rng, first, drawn))
    factor = _random_factor(rng, first, drawn)
    resize_mode = mode(first.resize_mode_list, first.resize_mode_prob)
    if factor != 1.0:  # a factor of 1 is the identity in every mode
        drawn["resize1_mode"] = resize_mode
        out = clock("resize", _resize, out, resize_mode, scale_factor=factor)
    out = clock("noise", _noise, rng, first, out, drawn)
    out = clock("jpeg", _jpeg, rng, first, out, drawn, jpeg)
    # second order: maybe blur, resize to a size around the LR size, noise
    drawn["kernel2"] = "none"
    if rng.uniform() < o.second_blur_prob:
        out = clock("filter", filter2d, out, clock("kernels", _blur_kernel, rng, second, drawn))
    factor = _random_factor(rng, second, drawn)
    drawn["resize2_mode"] = mode(second.resize_mode_list, second.resize_mode_prob)
    out = clock("resize", _resize, out, drawn["resize2_mode"],
                size=(int(h / scale * factor), int(w / scale * factor)))
    out = clock("noise", _noise, rng, second, out, drawn)
    # [resize back + sinc] and JPEG in a random order (the other orders give twisted lines)
    if rng.uniform() < 0.5:
        drawn["final_order"] = "resize_sinc_then_jpeg"
        out = clock("jpeg", _jpeg, rng, second, final_sinc(out), drawn, jpeg)
    else:
        drawn["final_order"] = "jpeg_then_resize_sinc"
        out = final_sinc(clock("jpeg", _jpeg, rng, second, out, drawn, jpeg))
    if trace is not None:
        trace.update(drawn)
    return np.clip(np.round(out * 255), 0, 255) / out.dtype.type(255)


@DATASETS.register()
class RealESRGANDataset(_SRDataset):
    """HR images from a folder; (LR, HR) pairs synthesised per sample by Real-ESRGAN's degradation.

    `get(index, rng)` -> dict(lq=float32 (C, gt_size / scale, gt_size / scale), gt=float32
    (C, gt_size, gt_size), name=str[, gt_usm=float32 like gt]). Without rng: the generator
    default_rng(index), a fixed degradation per image. Every draw is per sample, where BasicSR
    draws the resize factor / mode and the noise type once per GPU batch (see the module docstring).

    Args: root (folder of images), scale (default 4), gt_size (default 256; a multiple of scale),
    crop_pad_size (default 400: the HR image is reflect-padded at the bottom/right or randomly
    cropped to this square before degrading; a multiple of scale, >= gt_size), use_flip (default
    True; BasicSR's name use_hflip is accepted too), use_rot (default False, as BasicSR's configs),
    color ("rgb" or "y"), cache (default True: decoded HR images kept as float32, 12 bytes per pixel
    in RGB; use False for large sets), bad_files ("error" or "skip"), gt_usm (default False: when
    True the LR is degraded from the USM-sharpened HR, as both BasicSR models do, and the sample
    also holds "gt_usm", the target of BasicSR's l1_gt_usm / percep_gt_usm / gan_gt_usm), jpeg
    ("diffjpeg", default: Real-ESRGAN's models' DiffJPEG; "pillow": libjpeg at integer qualities,
    bit-identical to BasicSR's cv2 path; see the module docstring), and every DegradationOptions
    key (BasicSR's names and defaults).
    """

    def __init__(self, root, scale: int = 4, gt_size: int = 256, crop_pad_size: int = 400,
                 use_flip: bool | None = None, use_rot: bool = False, color: str = "rgb",
                 cache: bool = True, bad_files: str = "error", gt_usm: bool = False,
                 jpeg: str = "diffjpeg", use_hflip: bool | None = None, **degradation):
        name = type(self).__name__
        if use_flip is not None and use_hflip is not None and use_flip != use_hflip:
            raise ValueError(f"{name}: use_flip={use_flip!r} and use_hflip={use_hflip!r} disagree "
                             f"(use_hflip is BasicSR's name for use_flip: give one)")
        use_flip = flag(name, "use_flip", next((v for v in (use_flip, use_hflip) if v is not None),
                                              True))
        gt_size = int_arg(name, "gt_size", gt_size)
        super().__init__(scale, gt_size, use_flip, flag(name, "use_rot", use_rot), color,
                         flag(name, "cache", cache), bad_files)
        self.crop_pad_size = int_arg(name, "crop_pad_size", crop_pad_size)
        if self.crop_pad_size % self.scale or self.crop_pad_size < gt_size:
            raise ValueError(f"{name}: crop_pad_size={crop_pad_size} must be a multiple of "
                             f"scale={scale} and >= gt_size={gt_size}")
        self.gt_usm = flag(name, "gt_usm", gt_usm)
        self.jpeg = choice(name, "jpeg", jpeg, JPEG_METHODS)
        self.opts = DegradationOptions.from_dict(degradation, name, _dataset_keywords())
        self.opts.check_size(self.crop_pad_size, self.crop_pad_size, self.scale, name)
        roots = folders(name, "root", root)
        self.root = roots[0] if len(roots) == 1 else roots
        items = self._scan([(p.name, p) for r in roots for p in list_images(r)])
        self.paths = [path for _, path in items]
        self.names = [n for n, _ in items]

    @classmethod
    def check_kwargs(cls, kwargs: dict) -> None:
        """The config checker's hook (Registry.check): the keys beyond the constructor's own
        keywords are degradation keys (**degradation), checked here as the constructor checks
        them (unknown keys with a did-you-mean, values by DegradationOptions)."""
        own = _dataset_keywords()
        if "jpeg" in kwargs:
            choice(cls.__name__, "jpeg", kwargs["jpeg"], JPEG_METHODS)
        DegradationOptions.from_dict({k: v for k, v in kwargs.items() if k not in own},
                                     cls.__name__, own)

    def image(self, index: int) -> np.ndarray:
        """The whole HR image `index`, float32 (C, H, W) (cached read-only when cache=True)."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for a dataset of {len(self)} images")
        if index in self._cache:
            return self._cache[index]
        img = _load(self.paths[index], self.color)
        if self.cache:
            img.flags.writeable = False
            self._cache[index] = img
        return img

    def pair(self, index: int):
        raise TypeError(f"{type(self).__name__} makes its LR images per sample: use "
                        f"get(index, rng)")

    def _crop_pad(self, img: np.ndarray, rng) -> np.ndarray:
        """Reflect-pad (OpenCV's BORDER_REFLECT_101) at the bottom/right up to crop_pad_size, then
        crop a random crop_pad_size square; a fresh contiguous array."""
        size = self.crop_pad_size
        h, w = img.shape[1:]
        if h < size or w < size:
            img = np.pad(img, ((0, 0), (0, max(0, size - h)), (0, max(0, size - w))),
                         mode="reflect")
            h, w = img.shape[1:]
        if h > size or w > size:
            top, left = int(rng.integers(0, h - size + 1)), int(rng.integers(0, w - size + 1))
            img = img[:, top:top + size, left:left + size]
        return np.ascontiguousarray(img, dtype=np.float32)

    def get(self, index: int, rng: np.random.Generator | None = None, times: dict | None = None,
            trace: dict | None = None) -> dict:
        """One synthesised sample (see the class docstring); `times` and `trace` as in `degrade`."""
        rng = np.random.default_rng(index) if rng is None else rng
        img = apply_flags(self.image(index), random_flags(rng, self.use_flip, self.use_rot))
        gt = self._crop_pad(img, rng)
        sharp = usm_sharp(gt) if self.gt_usm else None
        lq = degrade(gt if sharp is None else sharp, rng, self.opts, self.scale, times, trace,
                     self.jpeg)
        stack = gt if sharp is None else np.concatenate([gt, sharp])
        lq, stack = paired_random_crop(lq, stack, self.gt_size, self.scale, rng, self.names[index])
        c = gt.shape[0]
        out = {"lq": np.array(lq, np.float32), "gt": np.array(stack[:c], np.float32),
               "name": self.names[index]}
        if sharp is not None:
            out["gt_usm"] = np.array(stack[c:], np.float32)
        return out


def _dataset_keywords() -> tuple[str, ...]:
    """RealESRGANDataset's own keywords (its signature without self and **degradation)."""
    params = inspect.signature(RealESRGANDataset.__init__).parameters.values()
    return tuple(p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)[1:]
