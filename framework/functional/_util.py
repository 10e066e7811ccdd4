"""Helpers shared by the functional op families."""
from __future__ import annotations

import functools
import inspect

import numpy as np

from .._check import ArgumentTypeError, did_you_mean
from ..tensor import Tensor


def memory_order(a):
    """The axes of `a` from the slowest in memory to the fastest, where `a` is a permutation of a
    C-contiguous array (a channels-last image read as (N, C, H, W), say); else None. An element-wise
    op then works on a.transpose(order), a flat view, and its output keeps a's layout (as torch keeps
    channels_last): no copy in, none out, for the reader that permutes it back."""
    if a.flags.c_contiguous:
        return None  # axes of one element go first, in order: their strides mean nothing
    order = tuple(sorted(range(a.ndim), key=lambda i: (0, i) if a.shape[i] == 1 else (1, -a.strides[i])))
    return order if a.transpose(order).flags.c_contiguous else None


def unflat(flat, shape, order):
    """The flat result of an element-wise op on a.transpose(order) (memory_order) as an array of
    a's shape, laid out as a is."""
    if order is None:
        return flat.reshape(shape)
    return flat.reshape([shape[i] for i in order]).transpose(np.argsort(order))


def unbroadcast(g: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum `g` down to `shape`: the adjoint of numpy broadcasting `shape` up to `g.shape`."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g


def data_of(x) -> np.ndarray:
    return x.data if isinstance(x, Tensor) else np.asarray(x)


def check_broadcast(op: str, a, b) -> None:
    sa, sb = np.shape(data_of(a)), np.shape(data_of(b))
    if sa == sb or not sa or not sb:  # the common cases, without numpy's general rule
        return
    try:
        np.broadcast_shapes(sa, sb)
    except ValueError:
        raise ValueError(f"{op}: shapes {sa} and {sb} cannot be broadcast together") from None


def normalize_axis(axis, ndim: int, op: str):
    """None -> all axes; int or tuple -> sorted tuple of non-negative axes, checked against ndim."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise ValueError(f"{op}: axis {a} is out of range for a tensor with {ndim} dimensions")
        out.append(int(a) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis}")
    return tuple(sorted(out))


def expand_to(g: np.ndarray, shape: tuple, axes: tuple, keepdims: bool) -> np.ndarray:
    """Broadcast a reduced gradient back over the reduced `axes` of `shape`."""
    if not keepdims:
        g = np.expand_dims(g, axes)
    return np.broadcast_to(g, shape)


# torch's spelling <-> numpy's: a function declares one of each pair, the other is its alias
_SPELLINGS = (("axis", "dim"), ("keepdims", "keepdim"), ("ddof", "correction"))


def dims(fn):
    """Decorator: the one rule by which ops take both numpy's `axis=`/`keepdims=` (and `ddof=`) and
    torch's `dim=`/`keepdim=` (and `correction=`). `fn` declares one spelling of each pair (sum
    declares axis/keepdims, softmax dim, var correction); the other is accepted as an alias and
    renamed before `fn` runs. Both spellings at once, or a keyword `fn` does not take, is a
    TypeError naming the op ("sum: unexpected keyword argument 'keepdm'; did you mean 'keepdim'?").
    Positional arguments pass through as they are."""
    params = list(inspect.signature(fn).parameters)
    declared = frozenset(params)
    alias_of = {}  # alias -> the declared name
    for a, b in _SPELLINGS:
        if a in params:
            alias_of[b] = a
        elif b in params:
            alias_of[a] = b
    known = set(params) | set(alias_of)
    owner = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for key in [k for k in kwargs if k not in declared]:
            own = alias_of.get(key)
            if own is None:
                raise ArgumentTypeError(f"{owner}: unexpected keyword argument {key!r}"
                                        f"{did_you_mean(key, sorted(known))}")
            if own in kwargs or params.index(own) < len(args):
                raise ArgumentTypeError(f"{owner}: got both {own} and {key} (the same argument in "
                                        f"numpy's and torch's spelling); give one")
            kwargs[own] = kwargs.pop(key)
        return fn(*args, **kwargs)

    return wrapper
