"""A model's card: the facts every caller needs about a registered model, stated once, beside it.

`card(spec) -> Card` for a spec `{"type": Name, **keywords}`: the constructor's defaults are filled
in, then Name's `card(spec)` staticmethod (in models/<name>.py, next to its `detect` rule) computes
the facts from the keywords alone, without building the model (no weight is allocated), as
spandrel's ImageModelDescriptor states them for the models it loads, and more:

    role           "SR" (upscales), "restoration" (same size: denoising, JPEG, x1 models),
                   "discriminator" (judges images: a logit per image or per pixel), "kernel
                   estimator" (KernelGAN's downscaler)
    in_channels    channels of the input image (1: Y or gray, 3: RGB, ...)
    out_channels   channels of the output (1 for a discriminator's logits)
    scale          output pixels per input pixel along each side (an int; KernelGAN's generator:
                   a Fraction, 1/2)
    size           SizeRequirements (spandrel's): the input the forward accepts (minimum side,
                   multiple of, square; srgrad's maximum)
    pads_to        the multiple the model pads its input to inside (a window, SAFMN's 8): a tile
                   of that multiple wastes nothing; pad_minimum the side below which it pads
                   (Real-CUGAN: 32)
    fixed_onnx     None when one ONNX graph serves every input size (export --dynamic), else why
                   the graph holds for the traced size only
    parameters     the trainable values (sum of p.size over model.parameters()), in closed form
    activation     an upper bound on the values of the largest array a forward creates (an op's
                   output; an op on a weight alone, a spectral norm, makes one no larger than that
                   weight, which `parameters` counts) per pixel of the input as the model pads it
                   (batch 1): `largest_activation(h, w)`, the memory budget's figure
    channel_keys   the keywords that set in_channels and out_channels (what an error asks to
                   change; () for a model fixed to RGB)
    key_extra_in   what the input keyword counts beyond the image's channels (DRUNet's in_nc
                   includes its noise-level map: in_nc = in_channels + 1)
    out_size       (h, w) -> the output's (H, W), or () for one value per image; None: (h s, w s)

Who reads it: inference (the channels a model is fed), srgrad-eval and -export (the channels of
the test input), the config schema (`color: y` needs a 1-channel model), detection's report, the hub,
`preflight` (a spec whose parameters or activations cannot fit in memory is refused in one line,
naming the keyword, before anything is allocated) and the tests (tests/models/test_cards.py checks
every model's card against the built model).

The counting helpers (`conv`, `linear`, `norm`) are what a model's card adds up.
"""
from __future__ import annotations

import inspect
import math
import os
from dataclasses import dataclass, field
from fractions import Fraction

from ._check import show
from .registry import MODELS

__all__ = ["Card", "SizeRequirements", "card", "image_card", "has_card", "full_spec", "preflight",
           "SpecTooLarge", "short_count", "conv", "linear", "norm", "ROLES", "memory_bytes"]

ROLES = ("SR", "restoration", "discriminator", "kernel estimator")


@dataclass(frozen=True)
class SizeRequirements:
    """spandrel's SizeRequirements: an input side must be >= minimum and a multiple of
    multiple_of; square: height == width; `maximum` (srgrad's): at most this (a VGG-style
    discriminator takes exactly its input_size)."""
    minimum: int = 1
    multiple_of: int = 1
    square: bool = False
    maximum: int | None = None

    def check(self, h: int, w: int) -> bool:
        return (min(h, w) >= self.minimum and h % self.multiple_of == 0
                and w % self.multiple_of == 0 and (not self.square or h == w)
                and (self.maximum is None or max(h, w) <= self.maximum))

    def __str__(self):
        if (self.minimum, self.multiple_of, self.square, self.maximum) == (1, 1, False, None):
            return "any size"
        if self.maximum is not None and self.maximum == self.minimum:
            return f"exactly {self.minimum} px" + (", square" if self.square else "")
        parts = [f"at least {self.minimum} px"] if self.minimum > 1 else []
        parts += [f"at most {self.maximum} px"] if self.maximum is not None else []
        parts += [f"a multiple of {self.multiple_of}"] if self.multiple_of > 1 else []
        return ", ".join(parts + (["square"] if self.square else []))


@dataclass(frozen=True)
class Card:
    """A model's facts (module docstring)."""
    role: str
    in_channels: int
    out_channels: int
    scale: int | Fraction
    parameters: int
    activation: int
    size: SizeRequirements = SizeRequirements()
    pads_to: int = 1
    pad_minimum: int = 1
    fixed_onnx: str | None = None
    channel_keys: tuple = ()
    key_extra_in: int = 0
    out_size: object = field(default=None, compare=False)

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"Card: role must be one of {ROLES}, got {self.role!r}")

    def output_size(self, h: int, w: int) -> tuple:
        """(H, W) of the output for an (h, w) input (() for one value per image)."""
        if self.out_size is not None:
            return tuple(self.out_size(h, w))
        return int(h * self.scale), int(w * self.scale)

    def padded(self, h: int, w: int) -> tuple[int, int]:
        """(h, w) as the model pads them internally: at least pad_minimum, a multiple of pads_to."""
        m = self.pads_to
        return tuple(-(-max(n, self.pad_minimum) // m) * m for n in (h, w))

    def largest_activation(self, h: int, w: int) -> int:
        """An upper bound on the values of the largest array a forward of one (h, w) image creates."""
        ph, pw = self.padded(h, w)
        return self.activation * ph * pw

    def summary(self) -> str:
        """One line for reports: role, scale, channels, parameters, size."""
        what = f"{self.role} x{self.scale}" if self.role in ("SR", "restoration") else self.role
        return (f"{what}, {self.in_channels} -> {self.out_channels} channels, "
                f"{short_count(self.parameters)} parameters, input {self.size}")


BASICSR_CHANNELS = ("num_in_ch", "num_out_ch")


def image_card(scale, in_channels: int, out_channels: int, parameters: int, activation: int,
               channel_keys: tuple = BASICSR_CHANNELS, **kw) -> Card:
    """The Card of a model from image to image: role "SR" when it upscales, else "restoration";
    channel_keys BasicSR's unless given."""
    return Card("SR" if scale > 1 else "restoration", in_channels, out_channels, scale,
                int(parameters), int(activation), channel_keys=tuple(channel_keys), **kw)


def short_count(n: int) -> str:
    """16700000 -> '16.7M' (reports)."""
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)


# -- counting helpers ---------------------------------------------------------------------------------
def conv(cin: int, cout: int, k=3, bias: bool = True, groups: int = 1) -> int:
    """Parameters of a Conv2d (or ConvTranspose2d) cin -> cout with a k or (kh, kw) kernel."""
    kh, kw = (k, k) if isinstance(k, int) else k
    return cout * (cin // groups) * kh * kw + (cout if bias else 0)


def linear(cin: int, cout: int, bias: bool = True) -> int:
    return cin * cout + (cout if bias else 0)


def norm(c: int) -> int:
    """A LayerNorm / GroupNorm / BatchNorm with an affine weight and bias over c channels."""
    return 2 * c


# -- the machinery ------------------------------------------------------------------------------------
def full_spec(spec: dict) -> dict:
    """`spec` with every constructor keyword it leaves out at its default (a required keyword it
    lacks stays out). KeyError for an unregistered type."""
    cls = MODELS.get(spec["type"])
    out = {"type": spec["type"]}
    for p in inspect.signature(cls).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in spec:
            out[p.name] = spec[p.name]
        elif p.default is not p.empty:
            out[p.name] = p.default
    out.update({k: v for k, v in spec.items() if k not in out})
    return out


def has_card(name: str) -> bool:
    return name in MODELS and callable(getattr(MODELS.get(name), "card", None))


def card(spec: dict) -> Card:
    """The Card of the model `spec` describes ({"type": Name, **keywords}); KeyError when Name is
    unregistered or has no card (a user's model: add a `card(spec)` staticmethod)."""
    if not isinstance(spec, dict) or "type" not in spec:
        raise ValueError(f"card: expected a model spec {{type: Name, ...}}, got {show(spec)}")
    if not has_card(spec["type"]):
        MODELS.get(spec["type"])  # the registry's error for an unknown name
        raise KeyError(f"model {spec['type']} has no card: give it a staticmethod card(spec) "
                       f"returning a framework.card.Card (docs/architecture.md, models/)")
    return MODELS.get(spec["type"]).card(full_spec(spec))


# what a card raises for keywords its model's constructor refuses (wrong types, zero widths...)
_INVALID = (KeyError, ValueError, TypeError, ArithmeticError, LookupError, AttributeError)


class SpecTooLarge(ValueError):
    """A spec whose weights or activations cannot fit in memory, refused before building it."""


def memory_bytes() -> int:
    """The machine's physical memory in bytes (0 when the system does not tell)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _g(n, digits: int = 4) -> str:
    """n in the `.{digits}g` format, also for an int beyond float's range (an inflated keyword's
    card: 2 ** 2000000 values), which float formatting would refuse with OverflowError."""
    try:
        return f"{n:.{digits}g}"
    except OverflowError:
        exp = int(math.log10(n))  # (log10 takes any int; its rounding is corrected below)
        lead = n // 10 ** (exp - digits + 1)
        while lead >= 10 ** digits:
            exp, lead = exp + 1, lead // 10
        while lead < 10 ** (digits - 1):
            exp, lead = exp - 1, n // 10 ** (exp - digits)
        return f"{lead / 10 ** (digits - 1):.{digits}g}e+{exp}"


def _gib(n: float) -> str:
    return f"{_g(n // 2 ** 30 if isinstance(n, int) else n / 2 ** 30, 3)} GiB"


# A model trains with its weights, their gradients and Adam's two moments: four float32 copies.
COPIES = 4


def _needs(c: Card) -> tuple[int, int]:
    """(bytes of the float32 weights times COPIES, bytes of the largest float32 activation of the
    smallest input the model runs)."""
    side = max(c.size.minimum, c.size.multiple_of)
    return 4 * COPIES * c.parameters, 4 * c.largest_activation(side, side)


def preflight(spec: dict, limit: int | None = None, memory: int | None = None) -> Card | None:
    """Refuse a spec too large to build, before anything is allocated: SpecTooLarge (one line,
    naming the keyword that makes it so) when its card's parameters exceed `limit` values (a
    weights file's budget), or when its float32 weights in training (COPIES of them: weights,
    gradients, Adam's moments) or the largest activation of its smallest input exceed `memory`
    bytes (default: the machine's physical memory). The Card when it fits; None when the
    model has no card or its keywords are not valid (its constructor then says why)."""
    memory = memory_bytes() if memory is None else memory
    try:
        c = card(spec)
        why = _too_large(c, limit, memory)
    except _INVALID:  # keywords the constructor refuses (it says why)
        return None
    if why is None:
        return c
    name = spec["type"]
    culprit = _culprit(spec, limit, memory)
    blame = f" ({culprit})" if culprit else ""
    raise SpecTooLarge(f"{name}{blame}: {why}: refused before building it")


def _too_large(c: Card, limit, memory) -> str | None:
    weights, act = _needs(c)
    if limit is not None and c.parameters > limit:
        return f"{_g(c.parameters)} parameters, more than the {_g(limit)} values its weights allow"
    if memory and weights > memory:
        return (f"{_g(c.parameters)} parameters need {_gib(weights)} to train as float32 (weights, "
                f"gradients, Adam's moments), more than this machine's {_gib(memory)} of memory")
    if memory and act > memory:
        return (f"its largest activation ({_g(c.activation)} values per input pixel) needs "
                f"{_gib(act)} even for its smallest input, more than this machine's "
                f"{_gib(memory)} of memory")
    return None


def _culprit(spec: dict, limit, memory) -> str:
    """The given keywords which, each put back to its default (a required number: to a small
    one), bring the spec within bounds, as `key=value` (the ones to change)."""
    defaults = full_spec({"type": spec["type"]})
    found = []
    for key, value in spec.items():
        if key == "type" or isinstance(value, bool) or defaults.get(key, None) == value:
            continue
        tries = [defaults[key]] if key in defaults else \
            [1, 4, 16, 64] if isinstance(value, (int, float)) else []
        for small in tries:
            try:
                fits = _too_large(card({**spec, key: small}), limit, memory) is None
            except _INVALID:
                continue
            if fits:
                found.append(f"{key}={show(value)}")
                break
    return ", ".join(found)


MODELS.preflight = preflight  # every MODELS.build refuses a spec too large for this machine first
