"""matmul with numpy's rules (1-D operands, batched broadcasting)."""
from __future__ import annotations

import numpy as np

from ..autograd import Function
from ._util import unbroadcast


class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.matmul(a, b)

    @staticmethod
    def backward(ctx, g):  # dL/dA = g B^T, dL/dB = A^T g (1-D operands promoted, then squeezed)
        a, b = ctx.saved_tensors
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        g2 = g.reshape(batch + (a2.shape[-2], b2.shape[-1]))
        na, nb = ctx.needs_input_grad
        ga = gb = None
        if na:
            ga = unbroadcast(np.matmul(g2, np.swapaxes(b2, -1, -2)), a2.shape).reshape(a.shape)
        if nb:
            gb = unbroadcast(np.matmul(np.swapaxes(a2, -1, -2), g2), b2.shape).reshape(b.shape)
        return ga, gb


def matmul(a, b):
    """Matrix product with numpy semantics: (…, n, k) @ (…, k, m) -> (…, n, m)."""
    sa, sb = a.shape, b.shape
    if len(sa) == 0 or len(sb) == 0:
        raise ValueError(f"matmul: operands must have at least 1 dimension, got {sa} and {sb}")
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        raise ValueError(f"matmul: shapes {sa} and {sb} do not align ({ka} != {kb})")
    try:
        np.broadcast_shapes(sa[:-2], sb[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch shapes of {sa} and {sb} cannot be broadcast") from None
    return MatMul.apply(a, b)
