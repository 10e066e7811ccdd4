"""argsort: the int64 order that sorts a tensor along one axis, torch.argsort / torch.sort's
indices, with torch's CPU order among equal keys.

torch.sort(stable=False) on a CPU tensor runs libstdc++'s std::sort (an introsort: median-of-three
quicksort with an unguarded partition, a heapsort below a depth of 2 floor(log2 n), an insertion
sort of runs of 16) on (key, index) pairs compared by key alone, so equal keys come out in an order that
depends on the whole row. ATD's adaptive category attention sorts tokens by their category with it,
and which tokens share an attention group follows that order: `stable=False` reproduces it exactly
(the introsort below, step for step), so a model matches torch on a CPU. `stable=True` keeps equal
keys in input order (numpy's stable sort; ONNX TopK's order). NaN keys sort last (torch's rule).
No gradient: indices are integers.
"""
from __future__ import annotations

import numpy as np

from .._check import ArgumentTypeError, flag
from .._jit import kernel
from ..autograd import Function
from ._util import data_of, normalize_axis

_THRESHOLD = 16  # libstdc++'s _S_threshold: runs this short are left to the final insertion sort


@kernel
def _less(a, b, descending):
    """torch's KeyValueCompAsc / KeyValueCompDesc on keys: NaN is the largest."""
    if descending:
        return (a != a and b == b) or a > b
    return (a == a and b != b) or a < b


@kernel
def _swap(k, v, i, j):
    t = k[i]
    k[i] = k[j]
    k[j] = t
    u = v[i]
    v[i] = v[j]
    v[j] = u


@kernel
def _adjust_heap(k, v, first, hole, length, key, val, descending):
    """std::__adjust_heap then std::__push_heap on the range starting at `first`."""
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if _less(k[first + child], k[first + child - 1], descending):
            child -= 1
        k[first + hole] = k[first + child]
        v[first + hole] = v[first + child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        k[first + hole] = k[first + child - 1]
        v[first + hole] = v[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and _less(k[first + parent], key, descending):
        k[first + hole] = k[first + parent]
        v[first + hole] = v[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    k[first + hole] = key
    v[first + hole] = val


@kernel
def _heap_sort(k, v, first, last, descending):
    """std::__partial_sort(first, last, last): make_heap, then pop every element."""
    length = last - first
    if length >= 2:
        parent = (length - 2) // 2
        while True:
            _adjust_heap(k, v, first, parent, length, k[first + parent], v[first + parent],
                         descending)
            if parent == 0:
                break
            parent -= 1
    end = last
    while end - first > 1:
        end -= 1
        key, val = k[end], v[end]
        k[end] = k[first]
        v[end] = v[first]
        _adjust_heap(k, v, first, 0, end - first, key, val, descending)


@kernel
def _median_to_first(k, v, result, a, b, c, descending):
    if _less(k[a], k[b], descending):
        if _less(k[b], k[c], descending):
            _swap(k, v, result, b)
        elif _less(k[a], k[c], descending):
            _swap(k, v, result, c)
        else:
            _swap(k, v, result, a)
    elif _less(k[a], k[c], descending):
        _swap(k, v, result, a)
    elif _less(k[b], k[c], descending):
        _swap(k, v, result, c)
    else:
        _swap(k, v, result, b)


@kernel
def _partition(k, v, first, last, descending):
    """std::__unguarded_partition_pivot: the median of three to `first`, then partition."""
    mid = first + (last - first) // 2
    _median_to_first(k, v, first, first + 1, mid, last - 1, descending)
    lo, hi = first + 1, last
    while True:
        while _less(k[lo], k[first], descending):
            lo += 1
        hi -= 1
        while _less(k[first], k[hi], descending):
            hi -= 1
        if not lo < hi:
            return lo
        _swap(k, v, lo, hi)
        lo += 1


@kernel
def _linear_insert(k, v, i, descending):
    key, val = k[i], v[i]
    j = i - 1
    while _less(key, k[j], descending):
        k[j + 1] = k[j]
        v[j + 1] = v[j]
        j -= 1
    k[j + 1] = key
    v[j + 1] = val


@kernel
def _introsort(k, v, descending):
    """std::sort on the pairs (k[i], v[i]) compared by k, in place."""
    n = k.shape[0]
    if n < 2:
        return
    depth = 0
    while (1 << (depth + 1)) <= n:
        depth += 1
    # the recursion on the right part as an explicit stack of (first, last, depth limit)
    stack = np.empty((2 * 64 + 2, 3), np.int64)
    top = 0
    stack[0, 0], stack[0, 1], stack[0, 2] = 0, n, 2 * depth
    top = 1
    while top > 0:
        top -= 1
        first, last, limit = stack[top, 0], stack[top, 1], stack[top, 2]
        while last - first > _THRESHOLD:
            if limit == 0:
                _heap_sort(k, v, first, last, descending)
                break
            limit -= 1
            cut = _partition(k, v, first, last, descending)
            stack[top, 0], stack[top, 1], stack[top, 2] = cut, last, limit
            top += 1
            last = cut
    # std::__final_insertion_sort: guarded on the first 16, unguarded after (a smaller key sits
    # in the first 16 by then)
    head = min(n, _THRESHOLD)
    for i in range(1, head):
        if _less(k[i], k[0], descending):
            key, val = k[i], v[i]
            for j in range(i, 0, -1):
                k[j] = k[j - 1]
                v[j] = v[j - 1]
            k[0] = key
            v[0] = val
        else:
            _linear_insert(k, v, i, descending)
    for i in range(head, n):
        _linear_insert(k, v, i, descending)


@kernel
def _introsort_rows(keys, out, descending):
    """Each row of keys (R, n) sorted by _introsort; out (R, n) receives the original indices."""
    rows, n = keys.shape
    k = np.empty(n, keys.dtype)
    for r in range(rows):
        for i in range(n):
            k[i] = keys[r, i]
            out[r, i] = i
        _introsort(k, out[r], descending)


class ArgSort(Function):
    """Indices that sort `a` along `axis` (int64, no gradient): a Function so that traced graphs
    see it (ONNX TopK)."""

    @staticmethod
    def forward(ctx, a, *, axis, descending, stable):
        moved = np.moveaxis(a, axis, -1)
        if stable:
            keys = -moved if descending and moved.dtype.kind in "iu" else moved
            if descending and moved.dtype.kind == "f":  # NaN first, then largest first, ties kept
                keys = np.where(np.isnan(moved), -np.inf, -moved)
                order = np.argsort(keys, axis=-1, kind="stable")
                nan_first = np.argsort(~np.isnan(np.take_along_axis(moved, order, -1)), -1,
                                       kind="stable")
                order = np.take_along_axis(order, nan_first, -1)
            else:
                order = np.argsort(keys, axis=-1, kind="stable")
            return np.ascontiguousarray(np.moveaxis(order.astype(np.int64), -1, axis))
        rows = np.ascontiguousarray(moved.reshape(-1, moved.shape[-1]))
        if rows.dtype.kind == "b":
            rows = rows.astype(np.int64)
        # the identity, not np.empty: a dry run that records kernel calls without running them
        # (engine/run/precompile.py) still hands the model a permutation (category_group checks)
        out = np.tile(np.arange(rows.shape[1], dtype=np.int64), (rows.shape[0], 1))
        _introsort_rows(rows, out, descending)
        return np.ascontiguousarray(np.moveaxis(out.reshape(moved.shape), -1, axis))

    @staticmethod
    def backward(ctx, g):
        return None


def argsort(x, dim: int = -1, descending: bool = False, stable: bool = False):
    """torch.argsort(x, dim, descending, stable): int64 indices that sort `x` along `dim`.
    stable=False gives torch's CPU order among equal keys (libstdc++'s introsort, module
    docstring); stable=True keeps them in input order. No gradient."""
    a = data_of(x)
    if not isinstance(a, np.ndarray) or a.dtype.kind not in "biuf":
        raise ArgumentTypeError(f"argsort: x must be a numeric tensor, got "
                                f"{getattr(a, 'dtype', type(a).__name__)}")
    if a.ndim == 0:
        raise ValueError("argsort: x must have at least one dimension, got a scalar")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise ArgumentTypeError(f"argsort: dim must be an int, got {dim!r}")
    axis = normalize_axis(int(dim), a.ndim, "argsort")[0]
    return ArgSort.apply(x, axis=axis, descending=flag("argsort", "descending", descending),
                         stable=flag("argsort", "stable", stable))
