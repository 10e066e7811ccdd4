"""dropout (each element kept with probability 1 - p), dropout2d (each channel of each sample kept
whole) and drop_path (stochastic depth: each sample of the batch kept whole with probability 1 - p,
as timm's and BasicSR's drop_path), kept values scaled by 1 / (1 - p) so the expectation is
unchanged.

Masks come from a numpy Generator: `generator` when given, else framework.random's global one, so a
run that reseeds it repeats its masks exactly. Both ops are the identity (the input itself, nothing
recorded) when not training or at p = 0. The mask is kept as bools (a byte per element) and the
scale applied in place: one product each way.
"""
from __future__ import annotations

import numpy as np

from .. import random
from .._check import float_array, flag, number
from ..autograd import Function

__all__ = ["dropout", "dropout2d", "drop_path"]


class DropoutFunction(Function):
    """y = x * keep * scale; keep (bool) broadcasts over x: x's shape for dropout, (N, 1, ...) for
    drop_path."""

    uncapturable = "its mask is drawn afresh each step, outside the op (dropout, drop path)"

    @staticmethod
    def forward(ctx, x, *, keep, scale):
        ctx.mask = (keep, x.dtype.type(scale))
        y = np.multiply(x, keep)
        y *= ctx.mask[1]
        return y

    @staticmethod
    def backward(ctx, g):  # dL/dx = g keep scale (the forward's mask)
        keep, scale = ctx.mask
        gx = np.multiply(g, keep)
        gx *= scale
        return gx


def _masked(owner, x, p, training, generator, mask_shape, scale_by_keep=True):
    """x itself when not training or p = 0, else x times a fresh keep-mask of mask_shape."""
    p = number(owner, "drop_prob" if owner == "drop_path" else "p", p, 0.0, 1.0)
    gen = random.generator_or_default(owner, generator)
    if not flag(owner, "training", training) or p == 0.0:
        return x
    # float32 draws: the same mask whatever x's dtype; P(u >= p) = 1 - p on float32's 2^-24 grid
    keep = gen.random(mask_shape, dtype=np.float32) >= np.float32(p)
    scale = 1.0 / (1.0 - p) if scale_by_keep and p < 1.0 else 1.0
    return DropoutFunction.apply(x, keep=keep, scale=scale)


def dropout(x, p=0.5, training=True, inplace=False, *, generator=None):
    """torch.nn.functional.dropout: zero each element of x (any shape) with probability p (default
    0.5) and scale the rest by 1 / (1 - p) when training (default True); else return x itself.
    inplace is accepted for torch compatibility; srgrad computes out of place (backward keeps the
    input). generator: a numpy Generator for the mask (default: framework.random's global one)."""
    a = float_array("dropout", "input", x)
    flag("dropout", "inplace", inplace)
    return _masked("dropout", x, p, training, generator, a.shape)


def dropout2d(x, p=0.5, training=True, inplace=False, *, generator=None):
    """torch.nn.functional.dropout2d on x (N, C, H, W): zero each whole channel of each sample with
    probability p (default 0.5) and scale the rest by 1 / (1 - p) when training (default True); else
    x itself. inplace, generator: as dropout."""
    a = float_array("dropout2d", "input", x)
    if a.ndim != 4:
        raise ValueError(f"dropout2d: expected a 4-D input (N, C, H, W), got shape {a.shape}")
    flag("dropout2d", "inplace", inplace)
    return _masked("dropout2d", x, p, training, generator, a.shape[:2] + (1, 1))


def drop_path(x, drop_prob=0.0, training=False, scale_by_keep=True, *, generator=None):
    """Stochastic depth (timm's / BasicSR's drop_path): x (N, ...) -> x with each whole sample zeroed
    with probability drop_prob (default 0) and the kept ones scaled by 1 / (1 - drop_prob) (unless
    scale_by_keep=False), when training (default False, as timm); else x itself. generator: a numpy
    Generator for the mask (default: framework.random's global one)."""
    a = float_array("drop_path", "input", x)
    if a.ndim < 1:
        raise ValueError("drop_path: input must have a batch dimension (N, ...), got a scalar")
    flag("drop_path", "scale_by_keep", scale_by_keep)
    return _masked("drop_path", x, drop_prob, training, generator, (a.shape[0],) + (1,) * (a.ndim - 1),
                   scale_by_keep)
