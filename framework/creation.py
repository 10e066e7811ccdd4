"""Tensor factories with torch's names, signatures and dtype rules: zeros, ones, empty, full, the
`*_like` forms, rand / randn / randint (and their `_like`), arange, linspace, eye, as_tensor.

Every factory takes torch's keywords `dtype=`, `device=` (only the CPU: "cpu", a framework.device
or torch.device of type cpu) and `requires_grad=`. The default dtype is float32 (torch's default);
`arange` and `full` infer it from their numbers as torch does (ints -> int64, bool -> bool, a float
-> float32); randint gives int64. Sizes are given as torch takes them: `zeros(2, 3)` or
`zeros((2, 3))`. The random factories draw from framework.random's global generator, so
`framework.manual_seed(s)` repeats them, as torch.manual_seed does; `generator=` takes a numpy
Generator instead.
"""
from __future__ import annotations

import math

import numpy as np

from . import random as _random
from ._check import ArgumentTypeError, is_int, is_number
from .tensor import Tensor, _as_array, check_device, check_dtype

__all__ = ["zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
           "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "arange",
           "linspace", "eye", "as_tensor"]

_DEFAULT = np.dtype(np.float32)


def _size(owner: str, size) -> tuple:
    """torch's size argument: `2, 3` or `(2, 3)` (a list works too); each a non-negative int."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if not all(is_int(s) and s >= 0 for s in size):
        raise ArgumentTypeError(f"{owner}: size must be non-negative ints, got {size!r}")
    return tuple(int(s) for s in size)


def _make(owner: str, arr: np.ndarray, dtype, device, requires_grad) -> Tensor:
    check_device(owner, device)
    dtype = _DEFAULT if dtype is None else check_dtype(owner, dtype)
    return Tensor(arr.astype(dtype, copy=False), requires_grad=requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros, shape `size` (float32 unless `dtype`)."""
    return _make("zeros", np.zeros(_size("zeros", size)), dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones, shape `size` (float32 unless `dtype`)."""
    return _make("ones", np.ones(_size("ones", size)), dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """torch.empty: a tensor of shape `size` to be filled. Zeros here (torch leaves the memory
    uninitialised): the same values on every run."""
    return _make("empty", np.zeros(_size("empty", size)), dtype, device, requires_grad)


def _fill_dtype(owner: str, value, dtype):
    """torch's dtype of a tensor filled with `value`: bool -> bool, int -> int64, float -> float32."""
    if dtype is not None:
        return dtype
    if isinstance(value, (bool, np.bool_)):
        return np.bool_
    if is_int(value):
        return np.int64
    if is_number(value):
        return _DEFAULT
    raise ArgumentTypeError(f"{owner}: fill_value must be a number or a bool, got {value!r}")


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of shape `size` (a tuple) holding `fill_value`; dtype from the value as torch
    (bool, int64, or float32) unless `dtype`."""
    dtype = _fill_dtype("full", fill_value, dtype)
    return _make("full", np.full(_size("full", (size,)), fill_value), dtype, device,
                 requires_grad)


def _like(owner: str, input):
    if not isinstance(input, Tensor):
        raise ArgumentTypeError(f"{owner}: input must be a Tensor, got {type(input).__name__}")
    return input.shape, input.dtype


def zeros_like(input, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """zeros of input's shape and dtype (or `dtype`)."""
    shape, own = _like("zeros_like", input)
    return _make("zeros_like", np.zeros(shape), own if dtype is None else dtype, device, requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """ones of input's shape and dtype (or `dtype`)."""
    shape, own = _like("ones_like", input)
    return _make("ones_like", np.ones(shape), own if dtype is None else dtype, device, requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """empty (zeros here) of input's shape and dtype (or `dtype`)."""
    shape, own = _like("empty_like", input)
    return _make("empty_like", np.zeros(shape), own if dtype is None else dtype, device, requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """`fill_value` in input's shape and dtype (or `dtype`)."""
    shape, own = _like("full_like", input)
    _fill_dtype("full_like", fill_value, None)  # a number or a bool
    return _make("full_like", np.full(shape, fill_value), own if dtype is None else dtype, device, requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1), shape `size`, from the global generator (or `generator`)."""
    shape = _size("rand", size)
    draws = _random.generator_or_default("rand", generator).random(shape)
    return _make("rand", draws, dtype, device, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False,
          rng=None) -> Tensor:
    """Standard normal samples, shape `size`, from the global generator (or `generator`; `rng` is
    its older name here)."""
    shape = _size("randn", size)
    draws = _random.generator_or_default(
        "randn", generator if generator is not None else rng).standard_normal(shape)
    return _make("randn", draws, dtype, device, requires_grad)


def randint(*args, size=None, generator=None, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """torch.randint(high, size) or randint(low, high, size): ints uniform in [low, high) (low
    default 0), int64 unless `dtype`."""
    if size is None and args:
        args, size = args[:-1], args[-1]
    if len(args) not in (1, 2) or size is None:
        raise ArgumentTypeError("randint: expected randint(high, size) or randint(low, high, size)")
    low, high = (0, args[0]) if len(args) == 1 else args
    if not (is_int(low) and is_int(high)) or low >= high:
        raise ValueError(f"randint: low and high must be ints with low < high, got {low!r}, "
                         f"{high!r}")
    shape = _size("randint", (size,))
    draws = _random.generator_or_default("randint", generator).integers(
        low, high, shape, dtype=np.int64)
    return _make("randint", draws, np.int64 if dtype is None else dtype, device, requires_grad)


def rand_like(input, *, generator=None, dtype=None, device=None,
              requires_grad: bool = False) -> Tensor:
    shape, own = _like("rand_like", input)
    return rand(shape, generator=generator, dtype=own if dtype is None else dtype, device=device,
                requires_grad=requires_grad)


def randn_like(input, *, generator=None, dtype=None, device=None,
               requires_grad: bool = False) -> Tensor:
    shape, own = _like("randn_like", input)
    return randn(shape, generator=generator, dtype=own if dtype is None else dtype, device=device,
                 requires_grad=requires_grad)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, device=None) -> Tensor:
    """torch.randint_like(input, high) or (input, low, high): input's shape and dtype."""
    shape, own = _like("randint_like", input)
    low, high = (0, low) if high is None else (low, high)
    return randint(low, high, shape, generator=generator, dtype=own if dtype is None else dtype, device=device)


def arange(start, end=None, step=1, *, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """torch.arange(end), (start, end) or (start, end, step): ceil((end - start) / step) values
    start + i * step (computed in float64, then cast); int64 when every number is an int, else
    float32, unless `dtype`."""
    if end is None:
        start, end = 0, start
    numbers = (start, end, step)
    if not all(is_number(v) for v in numbers):
        raise ArgumentTypeError(f"arange: start, end and step must be numbers, got {numbers!r}")
    if step == 0 or not all(math.isfinite(v) for v in numbers):
        raise ValueError(f"arange: step must be nonzero and every number finite, got {numbers!r}")
    if (end - start) * step < 0:
        raise ValueError(f"arange: step {step} goes away from end {end} (start {start})")
    count = math.ceil((end - start) / step)
    ints = all(is_int(v) for v in numbers)
    values = (start + np.arange(count, dtype=np.int64) * step if ints
              else start + np.arange(count, dtype=np.float64) * step)
    return _make("arange", values, np.int64 if dtype is None and ints else dtype, device, requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """`steps` values evenly spaced from start to end inclusive (float32 unless `dtype`)."""
    if not (is_number(start) and is_number(end)) or not is_int(steps) or steps < 0:
        raise ArgumentTypeError(f"linspace: expected numbers start, end and an int steps >= 0, "
                                f"got {start!r}, {end!r}, {steps!r}")
    return _make("linspace", np.linspace(start, end, int(steps)), dtype, device, requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The n x m identity (m = n by default), float32 unless `dtype`."""
    m = n if m is None else m
    if not (is_int(n) and is_int(m)) or n < 0 or m < 0:
        raise ArgumentTypeError(f"eye: n and m must be non-negative ints, got {n!r}, {m!r}")
    return _make("eye", np.eye(n, m), dtype, device, requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """torch.as_tensor: a Tensor itself when it already has the dtype, a numpy array's memory
    shared when its dtype is kept (float32, float64, ints, bool); otherwise a new Tensor with
    torch.tensor's dtype rule."""
    check_device("as_tensor", device)
    if isinstance(data, Tensor) and (dtype is None or np.dtype(dtype) == data.dtype):
        return data
    return Tensor(_as_array(data, dtype))
