"""Shape ops: reshape, permute/transpose, flatten, getitem, cat, stack, pad."""
from __future__ import annotations

import numpy as np

from ..autograd import Function
from ..tensor import Tensor


class Reshape(Function):
    @staticmethod
    def forward(ctx, a, *, shape):
        ctx.shape = a.shape
        return a.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape)


class Permute(Function):
    @staticmethod
    def forward(ctx, a, *, dims):
        ctx.dims = dims
        return np.transpose(a, dims)

    @staticmethod
    def backward(ctx, g):  # apply the inverse permutation
        return np.transpose(g, np.argsort(ctx.dims))


class GetItem(Function):
    @staticmethod
    def forward(ctx, a, *, index):
        ctx.meta = (a.shape, a.dtype, index)
        return np.asarray(a[index])

    @staticmethod
    def backward(ctx, g):  # scatter g back; integer arrays may repeat an index, so add.at
        shape, dtype, index = ctx.meta
        out = np.zeros(shape, dtype)
        if _has_array(index):
            np.add.at(out, index, g)
        else:
            out[index] = g
        return out


def _has_array(index):
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, (np.ndarray, list)) for i in items)


class Cat(Function):
    @staticmethod
    def forward(ctx, *arrays, axis):
        ctx.meta = (axis, np.cumsum([a.shape[axis] for a in arrays])[:-1])
        return np.concatenate(arrays, axis=axis)

    @staticmethod
    def backward(ctx, g):  # split g at the original boundaries
        axis, bounds = ctx.meta
        return tuple(np.split(g, bounds, axis=axis))


class Stack(Function):
    @staticmethod
    def forward(ctx, *arrays, axis):
        ctx.axis = axis
        return np.stack(arrays, axis=axis)

    @staticmethod
    def backward(ctx, g):
        return tuple(np.moveaxis(g, ctx.axis, 0))


class Pad(Function):
    """Pad the trailing axes. `widths` is ((before, after), ...) per padded axis, innermost last."""

    @staticmethod
    def forward(ctx, a, *, widths, mode, value):
        full = [(0, 0)] * (a.ndim - len(widths)) + list(widths)
        ctx.meta = (a.shape, full, mode)
        if mode == "constant":
            return np.pad(a, full, mode="constant", constant_values=value)
        return np.pad(a, full, mode=_NUMPY_MODES[mode])

    @staticmethod
    def backward(ctx, g):  # constant: crop; reflect/replicate/circular: fold each copy back, axis by axis
        shape, full, mode = ctx.meta
        for ax, (lo, hi) in enumerate(full):
            if lo == 0 and hi == 0:
                continue
            n = shape[ax]
            src = _pad_source(n, lo, hi, mode)
            g = np.moveaxis(g, ax, 0)
            folded = np.array(g[lo:lo + n])
            if mode != "constant":
                for p in list(range(lo)) + list(range(lo + n, lo + n + hi)):
                    folded[src[p]] += g[p]
            g = np.moveaxis(folded, 0, ax)
        return np.ascontiguousarray(g)


_NUMPY_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad_source(n, lo, hi, mode):
    """Input index that each padded position copies (for the non-constant modes)."""
    pos = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(pos, 0, n - 1)
    if mode == "circular":
        return pos % n
    if mode == "reflect":
        if n == 1:
            return np.zeros_like(pos)
        period = 2 * (n - 1)
        pos = np.abs(pos) % period
        return np.where(pos >= n, period - pos, pos)
    return pos


def reshape(x, *shape):
    """View `x` with a new shape (one dimension may be -1)."""
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    try:
        np.empty(x.shape, dtype=np.bool_).reshape(shape)
    except ValueError:
        raise ValueError(f"reshape: cannot reshape a tensor of shape {x.shape} into {shape}") from None
    return Reshape.apply(x, shape=shape)


def permute(x, *dims):
    dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    if sorted(d % max(x.ndim, 1) for d in dims) != list(range(x.ndim)):
        raise ValueError(f"permute: {dims} is not a permutation of the {x.ndim} axes of shape {x.shape}")
    return Permute.apply(x, dims=tuple(d % x.ndim for d in dims))


def transpose(x, dim0=-2, dim1=-1):
    """Swap two axes (default: the last two)."""
    dims = list(range(x.ndim))
    dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
    return Permute.apply(x, dims=tuple(dims))


def flatten(x, start_dim=0, end_dim=-1):
    """Merge axes start_dim..end_dim into one, as torch.flatten."""
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = start_dim % x.ndim, end_dim % x.ndim
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = x.shape[:s] + (int(np.prod(x.shape[s:e + 1])),) + x.shape[e + 1:]
    return Reshape.apply(x, shape=shape)


def getitem(x, index):
    """numpy indexing (ints, slices, None, Ellipsis, integer or boolean arrays)."""
    if isinstance(index, Tensor):
        index = index.data
    elif isinstance(index, tuple):
        index = tuple(i.data if isinstance(i, Tensor) else i for i in index)
    elif isinstance(index, list):
        index = np.asarray(index)
    try:
        np.empty(x.shape, np.bool_)[index]
    except IndexError as e:
        raise IndexError(f"getitem: index {index!r} on a tensor of shape {x.shape}: {e}") from None
    return GetItem.apply(x, index=index)


def cat(tensors, axis=0):
    """Concatenate along an existing axis; every other axis must match."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected at least one tensor")
    ref = tensors[0].shape
    ax = axis % len(ref)
    for t in tensors[1:]:
        if len(t.shape) != len(ref) or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref)) if i != ax):
            raise ValueError(f"cat: shapes {ref} and {t.shape} differ outside axis {axis}")
    return Cat.apply(*tensors, axis=ax)


def stack(tensors, axis=0):
    """Stack equal-shaped tensors along a new axis."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected at least one tensor")
    for t in tensors[1:]:
        if t.shape != tensors[0].shape:
            raise ValueError(f"stack: shapes {tensors[0].shape} and {t.shape} differ")
    return Stack.apply(*tensors, axis=axis % (tensors[0].ndim + 1))


def pad(x, pad, mode="constant", value=0.0):
    """torch.nn.functional.pad: `pad` = (left, right, top, bottom, ...) from the last axis inwards.
    Modes: constant, reflect (no edge repeat), replicate (edge repeat), circular."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"pad: unknown mode {mode!r}; known: constant, reflect, replicate, circular")
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"pad: pad {pad} needs an even length of at most 2*{x.ndim}")
    widths = [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)][::-1]
    for k, (lo, hi) in enumerate(widths):
        n = x.shape[x.ndim - len(widths) + k]
        if lo < 0 or hi < 0:
            raise ValueError(f"pad: negative padding {pad} is not supported (torch crops there; "
                             f"slice the tensor instead)")
        if mode == "reflect" and (lo >= n or hi >= n):
            raise ValueError(f"pad: reflect padding {(lo, hi)} must be smaller than the axis size {n} "
                             f"(shape {x.shape})")
        if mode in ("replicate", "circular") and n == 0:
            raise ValueError(f"pad: {mode} padding of an empty axis (shape {x.shape})")
        if mode == "circular" and (lo > n or hi > n):
            raise ValueError(f"pad: circular padding {(lo, hi)} exceeds the axis size {n}")
    return Pad.apply(x, widths=tuple(widths), mode=mode, value=value)
