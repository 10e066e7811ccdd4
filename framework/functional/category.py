"""Category grouping: ATD's adaptive category-based attention (AC-MSA) regroups tokens by a
permutation, attends inside fixed-size groups, and puts the results back.

    category_group(x, order, group_size)  x (B, N, C), order (B, N) a permutation of 0..N-1 per row
        -> (B * ng, gs, C): the rows x[b, order[b]], padded to ng * gs rows with the last pad rows
        mirrored (row N - 1 - j at N + j), cut into ng groups of gs = min(N, group_size) rows.
    category_ungroup(y, order)            y (B * ng, gs, C) -> (B, N, C): the first N rows of each
        batch item back at their places, out[b, order[b, i]] = y[b, i].

The original (ATD's AC_MSA: feature_shuffle, the flip-padding, reshape; then feature_shuffle with
the reverse index) is exactly this. Both are differentiable in x / y (gathers by a permutation:
the adjoint gathers by the inverse; the mirrored rows add their gradient to their source rows);
`order` gets none (argsort's integer indices). One Function each, so an exported graph computes gs,
ng and the padding from the input's shape (GatherElements / ScatterElements: dynamic).
"""
from __future__ import annotations

import numpy as np

from .._check import ArgumentTypeError, float_array, int_arg
from ..autograd import Function
from ._util import data_of


def _sizes(n: int, group_size: int) -> tuple[int, int, int]:
    """(gs, ng, pad) for n tokens: groups of min(n, group_size), the last one padded."""
    gs = min(n, group_size)
    ng = -(-n // gs)
    return gs, ng, ng * gs - n


def _rows(a: np.ndarray, order: np.ndarray) -> np.ndarray:
    return np.take_along_axis(a, order[:, :, None], axis=1)


def _place(rows: np.ndarray, order: np.ndarray) -> np.ndarray:
    out = np.empty_like(rows)
    np.put_along_axis(out, order[:, :, None], rows, axis=1)
    return out


class CategoryGroup(Function):
    @staticmethod
    def forward(ctx, x, order, *, group_size):
        b, n, c = x.shape
        gs, ng, pad = _sizes(n, group_size)
        ctx.meta = (order, n, gs, ng, pad)
        rows = _rows(x, order)
        if pad:
            rows = np.concatenate([rows, rows[:, n - pad:][:, ::-1]], axis=1)
        return np.ascontiguousarray(rows.reshape(b * ng, gs, c))

    @staticmethod
    def backward(ctx, g):
        order, n, gs, ng, pad = ctx.meta
        g = g.reshape(-1, ng * gs, g.shape[-1])
        rows = g[:, :n].copy()
        if pad:
            rows[:, n - pad:] += g[:, n:][:, ::-1]
        return _place(rows, order), None


class CategoryUngroup(Function):
    @staticmethod
    def forward(ctx, y, order):
        b, n = order.shape
        ctx.meta = (order, y.shape)
        rows = y.reshape(b, -1, y.shape[-1])[:, :n]
        return _place(np.ascontiguousarray(rows), order)

    @staticmethod
    def backward(ctx, g):
        order, shape = ctx.meta
        b, n = order.shape
        rows = _rows(g, order)
        out = np.zeros((b, shape[0] * shape[1] // b, shape[2]), g.dtype)
        out[:, :n] = rows
        return out.reshape(shape), None


def _order(owner: str, order, b: int, n: int) -> np.ndarray:
    o = data_of(order)
    if not isinstance(o, np.ndarray) or o.dtype.kind not in "iu":
        raise ArgumentTypeError(f"{owner}: order must be an integer tensor (argsort's indices), "
                                f"got {getattr(o, 'dtype', type(o).__name__)}")
    if o.shape != (b, n):
        raise ValueError(f"{owner}: order {o.shape} is not (B, N) = {(b, n)}")
    # numpy's take/put would wrap negative indices and repeat rows: a permutation is required
    if n and not (np.sort(o, axis=1) == np.arange(n)).all():
        raise ValueError(f"{owner}: each row of order must be a permutation of 0..{n - 1}")
    return o


def category_group(x, order, group_size: int):
    """x (B, N, C) float, order (B, N) a permutation per row -> (B * ng, gs, C), gs =
    min(N, group_size), ng = ceil(N / gs): x's rows in `order`, the last group padded with the
    mirrored last rows (module docstring). Differentiable in x."""
    shape = float_array("category_group", "x", x).shape
    if len(shape) != 3 or 0 in shape:
        raise ValueError(f"category_group: x must be (B, N, C) (non-empty), got {shape}")
    group_size = int_arg("category_group", "group_size", group_size)
    _order("category_group", order, *shape[:2])
    return CategoryGroup.apply(x, order, group_size=group_size)


def category_ungroup(y, order):
    """y (B * ng, gs, C) from category_group, order (B, N) the same permutation -> (B, N, C) with
    out[b, order[b, i]] = (the first N grouped rows of item b)[i]. Differentiable in y."""
    shape = float_array("category_ungroup", "y", y).shape
    o = data_of(order)
    if len(shape) != 3 or 0 in shape or getattr(o, "ndim", 0) != 2 or not o.shape[0] \
            or shape[0] % o.shape[0] or shape[0] // o.shape[0] * shape[1] < o.shape[1]:
        raise ValueError(f"category_ungroup: y {shape} is not (B * ng, gs, C) holding the N rows "
                         f"of order {getattr(o, 'shape', None)} (B, N)")
    _order("category_ungroup", order, *o.shape)
    return CategoryUngroup.apply(y, order)
