"""A linear's rows read through a layer norm and a row permutation, and written through one onto a
residual (inference graphs under autocast("bf16") on AMX: _gemm_bf16.matmul_rows).

A transformer block moves whole token rows between its linears: SwinIR's `norm1 -> reshape -> roll
-> window_partition -> qkv` and `proj -> window_reverse -> roll -> reshape -> x + ...`. Each move
is a copy of every activation, and the layer norm one more pass, where the linear reads and writes
rows anyway. So:

- the input side: a Linear whose input is P(v) or P(layer_norm(v)), with P a chain of ops that only
  move whole rows (MOVES, each the only reader of its input, none a graph output) and the norm over
  the last axis only, reads v's rows through the gather src = P applied to row numbers, normalised
  as it rounds them (layer_norm's statistics and values, rows.layer_norm_stats2);
- the output side: a Linear whose output only Q(.) reads, Q such a chain that is a bijection of the
  rows, read only by an Add with an operand r of the Add's shape made before the Linear, stores
  its row m at dst[m] = where Q puts it, with r added there (the residual add in the store).

The chains are found by running them on a probe (row i, column c holds i K + c, exact in float64):
what comes out says where every row went and that rows moved whole, so no op's semantics is
written twice here. Each value is the one the dropped ops computed (the same norm values rounded
the same way, the same sum per row, the bias then the residual added as np.add would): the eager
bits, tests/framework/test_capture.py.
"""
from __future__ import annotations

import numpy as np

from .. import precision
from ..autograd import Context
from ..functional import _gemm_bf16
from ..functional.attention import WindowPartitionFunction
from ..functional.elementwise import Add
from ..functional.linear import LinearFunction
from ..functional.normalization import LayerNormFunction
from ..functional.shape import Permute, Reshape, RollFunction
from ._kinds import _FIXED, _SLOT

MOVES = (Reshape, Permute, RollFunction, WindowPartitionFunction)  # ops whose output is a rearrangement


def _probe(chain, ops, shape):
    """Where the chain's ops send the rows of a (..., K) value: (src, out shape) with output row i =
    input row src[i], or None if they do not move whole rows."""
    K = shape[-1]
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    v = (np.arange(rows, dtype=np.float64)[:, None] * K + np.arange(K)).reshape(shape)
    for j in chain:
        forward, spec, kwargs, needs, _ = ops[j]
        v = np.asarray(forward(Context(needs), v, *(a for _, a in spec[1:]), **kwargs))
    if v.ndim < 1 or v.shape[-1] != K or v.size != rows * K:
        return None
    out = v.reshape(-1, K)
    src = out[:, 0] // K
    if not np.array_equal(out, src[:, None] * K + np.arange(K)):
        return None
    return src.astype(np.int64), v.shape


def _moves_rows(op, cls):
    """Whether op only rearranges its one array argument (the rest fixed)."""
    _, spec, _, _, _ = op
    return cls in MOVES and spec and spec[0][0] == _SLOT and all(kind == _FIXED for kind, _ in spec[1:])


def fuse_rows(ops, classes, graph):
    """(new entries by op index, renamed slots, dropped op indices): every Linear that reads or
    writes its rows through such chains as one matmul_rows (module docstring), for
    _lower._rewritten; nothing outside autocast("bf16") on AMX."""
    if not precision.bf16_active(np.float32) or not precision.support().amx_bf16:
        return {}, {}, set()
    meta, outputs = graph.slot_meta, set(graph.outputs.values())
    at = {op[4]: k for k, op in enumerate(ops)}
    readers = {}
    for k, (_, spec, _, _, _) in enumerate(ops):
        for kind, v in spec:
            if kind == _SLOT:
                readers.setdefault(v, []).append(k)

    def only_reader(v):  # the op that alone reads slot v (not a graph output), else None
        r = readers.get(v, [])
        return r[0] if len(r) == 1 and v not in outputs else None

    new, renamed, drop = {}, {}, set()
    for k, cls in enumerate(classes):
        forward, spec, kwargs, needs, first = ops[k]
        if cls is not LinearFunction or kwargs or len(spec) != 3 or spec[0][0] != _SLOT \
                or spec[1][0] != _FIXED or spec[2][0] != _FIXED:
            continue
        w, bias = spec[1][1], spec[2][1]
        x = spec[0][1]
        if np.dtype(meta[x][1]) != np.float32 or w.dtype != np.float32 \
                or (bias is not None and bias.dtype != np.float32):
            continue
        K = w.shape[1]
        chain, v = [], x  # the input side: moves back from x, then a layer norm
        while (j := at.get(v)) is not None and only_reader(v) == (chain[0] if chain else k) \
                and j not in drop and _moves_rows(ops[j], classes[j]):
            chain.insert(0, j)
            v = ops[j][1][0][1]
        norm, j = None, at.get(v)
        if j is not None and classes[j] is LayerNormFunction and j not in drop \
                and only_reader(v) == (chain[0] if chain else k) and _norm_over_last(ops[j], K, meta):
            _, lspec, lkw, _, _ = ops[j]
            lw = np.ones(K, np.float32) if lspec[1][1] is None else np.ascontiguousarray(lspec[1][1]).reshape(K)
            lb = np.zeros(K, np.float32) if lspec[2][1] is None else np.ascontiguousarray(lspec[2][1]).reshape(K)
            norm, ln = (lw, lb, float(lkw["eps"])), j
            v = lspec[0][1]
        source = None
        if chain:
            source = _probe(chain, ops, tuple(meta[v][0]))
            if source is None or tuple(source[1]) != tuple(meta[x][0]):
                chain, source = [], None
                if norm is not None and at.get(x) != ln:  # the norm alone is not x's producer
                    norm = None
        if not chain:
            v = x if norm is None else v
        out_chain, o, add = [], first, None  # the output side: moves forward, then an Add
        while (r := only_reader(o)) is not None and r not in drop:
            if _moves_rows(ops[r], classes[r]):
                out_chain.append(r)
                o = ops[r][4]
                continue
            if classes[r] is Add and not ops[r][2] and len(ops[r][1]) == 2 and out_chain:
                add = r
            break
        dst, residual = None, None
        if add is not None:
            (ka, a), (kb, b_) = ops[add][1]
            other = (kb, b_) if (ka, a) == (_SLOT, o) else (ka, a)
            moved = _probe(out_chain, ops, tuple(meta[first][0]))
            if moved is not None and other[0] in (_SLOT, _FIXED) and (other[0] == _FIXED or other[1] < first) \
                    and _same_meta(other, meta[ops[add][4]], meta) \
                    and np.array_equal(np.sort(moved[0]), np.arange(moved[0].size)):
                dst = np.empty_like(moved[0])
                dst[moved[0]] = np.arange(moved[0].size)
                residual = other
        if not chain and norm is None and dst is None:
            continue
        rows = int(np.prod(meta[v][0][:-1], dtype=np.int64))
        src = source[0] if chain else np.arange(rows, dtype=np.int64)
        shape = tuple(meta[ops[add][4]][0]) if dst is not None else tuple(meta[first][0])
        args = ((_SLOT, v), (_FIXED, w), (_FIXED, bias)) + ((residual,) if dst is not None else ())
        new[k] = (_rows_forward(src, norm, dst, shape), args, {}, needs, first)
        drop.update(chain)
        if norm is not None:
            drop.add(ln)
        if dst is not None:
            drop.update(out_chain + [add])
            renamed[ops[add][4]] = first
            meta[first] = meta[ops[add][4]]
    return new, renamed, drop


def _norm_over_last(op, K, meta):
    """Whether a LayerNormFunction op normalises over its input's last axis only, float32."""
    _, spec, kwargs, _, _ = op
    shape, dtype = meta[spec[0][1]] if spec[0][0] == _SLOT else (None, None)
    return spec[0][0] == _SLOT and tuple(kwargs.get("normalized_shape", ())) == (K,) and shape[-1] == K \
        and np.dtype(dtype) == np.float32 and all(kind == _FIXED for kind, _ in spec[1:]) \
        and all(a is None or np.asarray(a).dtype == np.float32 for _, a in spec[1:])


def _same_meta(arg, want, meta):
    kind, v = arg
    shape, dtype = (meta[v][0], meta[v][1]) if kind == _SLOT else (np.shape(v), np.asarray(v).dtype)
    return tuple(shape) == tuple(want[0]) and np.dtype(dtype) == np.dtype(want[1])


def _rows_forward(src, norm, dst, shape):
    """The fused op: matmul_rows of v's rows (v: the chain's or the norm's input) through src, norm
    and dst, plus the residual (the Add's other operand) where dst is given; out: the dropped last
    op's shape."""
    def rows(ctx, v, w, b, *residual):
        K = w.shape[1]
        x2 = np.ascontiguousarray(v).reshape(-1, K)
        res = np.ascontiguousarray(residual[0]).reshape(-1, w.shape[0]) if residual else None
        return _gemm_bf16.matmul_rows(x2, w.T, b, src=src, dst=dst, norm=norm, residual=res).reshape(shape)
    return rows
