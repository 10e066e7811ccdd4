"""torch's top-level predicates and comparisons on Tensors: is_tensor, is_floating_point, numel,
allclose, equal (plain bools and ints, outside the graph)."""
from __future__ import annotations

import numpy as np

from .tensor import Tensor

__all__ = ["is_tensor", "is_floating_point", "numel", "allclose", "equal"]


def is_tensor(obj) -> bool:
    """Whether `obj` is a Tensor (a Parameter is one)."""
    return isinstance(obj, Tensor)


def is_floating_point(input) -> bool:
    """Whether a Tensor holds floats."""
    return input.is_floating_point()


def numel(input) -> int:
    """The number of elements of a Tensor."""
    return input.numel()


def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """torch.allclose: |input - other| <= atol + rtol * |other| everywhere (broadcasting); two
    tensors of different dtypes are a TypeError, as in torch (cast one first)."""
    if isinstance(input, Tensor) and isinstance(other, Tensor) and input.dtype != other.dtype:
        raise TypeError(f"allclose: dtypes differ ({input.dtype} and {other.dtype}); cast one "
                        f"first, e.g. .double()")
    return bool(np.allclose(_values(input), _values(other), rtol=rtol, atol=atol,
                            equal_nan=equal_nan))


def equal(input, other) -> bool:
    """torch.equal: the same shape and the same values."""
    a, b = _values(input), _values(other)
    return a.shape == b.shape and bool(np.array_equal(a, b))


def _values(x) -> np.ndarray:
    return x.data if isinstance(x, Tensor) else np.asarray(x)
