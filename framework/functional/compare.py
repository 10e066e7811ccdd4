"""Comparisons and logic, element-wise and outside the graph (bool or int results, as torch's: no
gradient flows through them): eq ne lt le gt ge (the operators == != < <= > >=), the bitwise and
logical ops (& | ^ ~ on bool and int tensors), isfinite / isnan / isinf, any / all / nonzero /
count_nonzero (a mask's questions), masked_fill (through
where, so the gradient flows to the unmasked input and to a tensor value). Operands meet in
torch's promoted dtype (_promote.py), so 16777217 == float32(16777216) as in torch."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from ._promote import result_type
from ._util import check_broadcast, data_of, dims, normalize_axis


def _arrays(name, a, b):
    check_broadcast(name, a, b)
    dtype = result_type(a, b)
    return np.asarray(data_of(a), dtype), np.asarray(data_of(b), dtype)


def _comparison(ufunc, name, symbol):
    def op(input, other):
        return Tensor._wrap(ufunc(*_arrays(name, input, other)))
    op.__name__ = name
    op.__doc__ = (f"input {symbol} other element-wise (broadcasting, torch's promotion): a bool "
                  f"tensor outside the graph.")
    return op


eq = _comparison(np.equal, "eq", "==")
ne = _comparison(np.not_equal, "ne", "!=")
lt = _comparison(np.less, "lt", "<")
le = _comparison(np.less_equal, "le", "<=")
gt = _comparison(np.greater, "gt", ">")
ge = _comparison(np.greater_equal, "ge", ">=")


def _bitwise(ufunc, name, symbol):
    def op(input, other):
        x, y = _arrays(name, input, other)
        if x.dtype.kind == "f":
            raise TypeError(f"{name} ({symbol}) is only for bool and integer tensors, got "
                            f"{x.dtype}")
        return Tensor._wrap(ufunc(x, y))
    op.__name__ = name
    op.__doc__ = f"input {symbol} other element-wise on bool or int tensors (outside the graph)."
    return op


bitwise_and = _bitwise(np.bitwise_and, "bitwise_and", "&")
bitwise_or = _bitwise(np.bitwise_or, "bitwise_or", "|")
bitwise_xor = _bitwise(np.bitwise_xor, "bitwise_xor", "^")


def bitwise_not(input) -> Tensor:
    """~input: logical not of a bool tensor, two's-complement not of an int one."""
    x = data_of(input)
    if x.dtype.kind == "f":
        raise TypeError(f"bitwise_not (~) is only for bool and integer tensors, got {x.dtype}")
    return Tensor._wrap(np.invert(x))


def logical_not(input) -> Tensor:
    """A bool tensor: True where input is 0 (any dtype)."""
    return Tensor._wrap(np.logical_not(data_of(input)))


def _logical(ufunc, name):
    def op(input, other):
        check_broadcast(name, input, other)
        return Tensor._wrap(ufunc(data_of(input), data_of(other)))
    op.__name__ = name
    op.__doc__ = f"{name} of the truth values (nonzero is True): a bool tensor."
    return op


logical_and = _logical(np.logical_and, "logical_and")
logical_or = _logical(np.logical_or, "logical_or")
logical_xor = _logical(np.logical_xor, "logical_xor")


def isfinite(input) -> Tensor:
    """A bool tensor: True where input is neither inf nor nan (every element of an int tensor)."""
    return Tensor._wrap(np.isfinite(data_of(input)))


def isnan(input) -> Tensor:
    """A bool tensor: True where input is nan."""
    return Tensor._wrap(np.isnan(data_of(input)))


def isinf(input) -> Tensor:
    """A bool tensor: True where input is +inf or -inf."""
    return Tensor._wrap(np.isinf(data_of(input)))


def _truth(reduce, name):
    @dims
    def op(input, axis=None, keepdims=False):
        x = data_of(input)
        axes = normalize_axis(axis, x.ndim, name) if axis is not None else None
        return Tensor._wrap(np.asarray(reduce(x, axis=axes, keepdims=bool(keepdims))))
    op.__name__ = name
    op.__doc__ = (f"Whether {'any' if name == 'any' else 'every'} element (over `dim`, or all) is "
                  f"nonzero: a bool tensor (keepdim keeps the reduced axes).")
    return op


any = _truth(np.any, "any")  # noqa: A001 (torch's names)
all = _truth(np.all, "all")  # noqa: A001


def nonzero(input, *, as_tuple: bool = False):
    """The indices of the nonzero elements: an int64 tensor (count, ndim), or with as_tuple one
    int64 tensor per axis (numpy's nonzero; usable as an index)."""
    idx = np.nonzero(data_of(input))
    if as_tuple:
        return tuple(Tensor._wrap(i.astype(np.int64)) for i in idx)
    return Tensor._wrap(np.stack(idx, axis=-1).astype(np.int64).reshape(-1, len(idx)))


@dims
def count_nonzero(input, axis=None):
    """The number of nonzero elements (over `dim`, or all): int64."""
    x = data_of(input)
    axes = normalize_axis(axis, x.ndim, "count_nonzero") if axis is not None else None
    return Tensor._wrap(np.asarray(np.count_nonzero(x, axis=axes), np.int64))


def masked_fill(input, mask, value):
    """torch's masked_fill: `value` (a number, or a 0-d tensor that gets its gradient) where the
    bool `mask` (broadcast to input's shape) is True; input's dtype is kept."""
    from .elementwise import cast, where
    m = data_of(mask)
    if m.dtype != np.bool_:
        raise TypeError(f"masked_fill: the mask must be a bool tensor, got dtype {m.dtype}")
    if np.broadcast_shapes(m.shape, input.shape) != input.shape:
        raise ValueError(f"masked_fill: a mask of shape {m.shape} does not broadcast to the "
                         f"input's shape {input.shape}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise ValueError(f"masked_fill: only a 0-d value tensor is accepted, got shape "
                             f"{value.shape}")
        value = value if value.dtype == input.dtype else cast(value, input.dtype)
    else:
        value = np.asarray(value).astype(input.dtype)  # torch casts (an int tensor truncates)
    return where(m, value, input)
