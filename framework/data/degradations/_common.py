"""What the degradation families share: argument checks that name the owner and the argument (each
wraps framework._check), and `pick`, the one weighted draw."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..._check import int_arg, number

__all__ = ["sequence", "value_range", "probabilities", "pick"]


def _odd_size(owner: str, name: str, value) -> int:
    k = int_arg(owner, name, value)
    if k % 2 == 0:
        raise ValueError(f"{owner}: {name} must be odd (the kernel has a centre), got {value!r}")
    return k


def sequence(value) -> list | None:
    """The entries of a list, tuple, 1-D numpy array or other sequence (not a string) as a list;
    None for anything else."""
    if isinstance(value, np.ndarray):
        return value.tolist() if value.ndim == 1 else None
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return None


def value_range(owner: str, name: str, value, low=None, high=None) -> tuple[float, float]:
    """A [low, high] pair of numbers (any sequence of two) with low <= high, each within the
    given bounds."""
    items = sequence(value)
    if items is None or len(items) != 2:
        raise ValueError(f"{owner}: {name} must be a [low, high] pair, got {value!r}")
    lo, hi = (number(owner, name, v, low, high) for v in items)
    if lo > hi:
        raise ValueError(f"{owner}: {name} must have low <= high, got {value!r}")
    return lo, hi


def probabilities(owner: str, name: str, value, length: int | None = None) -> np.ndarray:
    """Probabilities in [0, 1] summing to 1 (to 1e-6), from any sequence of numbers (list, tuple,
    numpy array), as an array; `length` entries if given."""
    items = sequence(value)
    if not items or (length is not None and len(items) != length):
        count = f"{length} " if length is not None else ""
        raise ValueError(f"{owner}: {name} must be a list of {count}probabilities, got {value!r}")
    p = np.array([number(owner, name, v, 0.0, 1.0) for v in items])
    if abs(p.sum() - 1.0) > 1e-6:
        raise ValueError(f"{owner}: {name} must sum to 1, got {value!r} (sum {p.sum():.6g})")
    return p


def pick(rng: np.random.Generator, items, probs):
    """One of `items` drawn with probabilities `probs` (one uniform draw: inverse CDF)."""
    cdf = np.cumsum(probs)
    return items[min(int(np.searchsorted(cdf / cdf[-1], rng.random(), side="right")),
                     len(items) - 1)]


def _image(owner: str, img) -> np.ndarray:
    """A float32/float64 image (C, H, W) (or (..., H, W) where noted)."""
    arr = np.asarray(img)
    if arr.dtype not in (np.float32, np.float64) or arr.ndim < 2:
        raise ValueError(f"{owner}: img must be a float32 or float64 array (C, H, W), got "
                         f"{arr.dtype} array of shape {arr.shape}")
    return arr


def _chw(owner: str, img) -> np.ndarray:
    arr = _image(owner, img)
    if arr.ndim != 3:
        raise ValueError(f"{owner}: img must be (C, H, W), got shape {arr.shape}")
    return arr
