"""torch's type promotion for srgrad's dtypes (bool, uint8, int8..int64, float32, float64): the one
rule by which every binary op (+ - * / // % ** comparisons, maximum, where, ...) picks its result
dtype. It differs from numpy's in three ways a PyTorch user relies on:
- a float beats any int: int64 + float32 is float32 (numpy: float64);
- a Python number (or numpy scalar, or 0-d array) only decides the category: `x * 2.5` keeps a
  float32 x float32, `int_tensor * 2.5` is float32 (the default float dtype), `bool_tensor + 1`
  is int64;
- a 0-d tensor counts less than a tensor with dimensions of the same category: float32 (3,) +
  float64 () is float32, but int64 (3,) + float64 () is float64.
(c10's ResultTypeState: dimResult, zeroResult, wrappedResult, combined by combine_categories.)"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor

_DEFAULT = {"b": np.dtype(np.bool_), "i": np.dtype(np.int64), "u": np.dtype(np.int64),
            "f": np.dtype(np.float32)}  # a Python number's dtype by kind (float: the default dtype)


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch.promote_types: a float beats an int or a bool; otherwise numpy's lattice (uint8 +
    int8 -> int16, float32 + float64 -> float64)."""
    if a == b:
        return a
    fa, fb = a.kind == "f", b.kind == "f"
    if fa != fb:
        return a if fa else b
    return np.promote_types(a, b)


def can_cast(src: np.dtype, dst: np.dtype) -> bool:
    """torch.can_cast, the rule of in-place ops (`x += y` writes a `src` result into a `dst`
    tensor): no float into an int or bool, no non-bool into a bool; narrowing an int is allowed."""
    if src.kind == "f" and dst.kind != "f":
        return False
    return dst.kind != "b" or src.kind == "b"


def _combine(higher, lower):
    """c10's combine_categories: `higher` (from operands that count more) wins unless `lower` is
    of a higher category (float over int over bool)."""
    if higher is None:
        return lower
    if lower is None or higher.kind == "f":
        return higher
    if higher.kind == "b" or lower.kind == "f":
        return promote_types(higher, lower)
    return higher


def _merge(slot, dtype):
    return dtype if slot is None else promote_types(slot, dtype)


def result_type(*operands) -> np.dtype:
    """torch.result_type over Tensors, numpy arrays (as tensors of their dtype), Python and numpy
    scalars and 0-d arrays (as numbers: only their kind counts)."""
    dim = zero = wrapped = None
    for x in operands:
        if isinstance(x, Tensor):
            x = x.data
            if x.ndim:
                dim = _merge(dim, x.dtype)
            else:
                zero = _merge(zero, x.dtype)
            continue
        if not isinstance(x, np.ndarray) or x.ndim == 0:
            kind = np.asarray(x).dtype.kind
            if kind not in _DEFAULT:
                raise TypeError(f"unsupported operand {x!r} (a number, bool or Tensor is expected)")
            wrapped = _merge(wrapped, _DEFAULT[kind])
        else:
            dim = _merge(dim, x.dtype)
    return _combine(dim, _combine(zero, wrapped))


def array_of(x, dtype: np.dtype) -> np.ndarray:
    """A non-Tensor operand as an array of `dtype` (a Python list goes through np.asarray)."""
    return np.asarray(x, dtype)
