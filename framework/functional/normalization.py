"""Normalisation: batch_norm over (N, C, ...) with PyTorch's running-statistics rule."""
from __future__ import annotations

import numpy as np

from .._check import float_array
from ..autograd import Function
from ._util import data_of

__all__ = ["batch_norm"]


class BatchNorm(Function):
    """x: (N, C, ...); weight, bias: (C,) or None; statistics over every axis but 1.

    training=True normalises with the batch mean and biased variance and, when `running` is given,
    updates the running arrays in place: r = (1 - momentum) r + momentum stat, with the UNBIASED
    variance for the running variance (as torch). training=False normalises with `running`."""

    @staticmethod
    def forward(ctx, x, weight, bias, *, running, training, momentum, eps):
        axes = (0,) + tuple(range(2, x.ndim))
        shape = (1, -1) + (1,) * (x.ndim - 2)
        dt = x.dtype.type
        if training:
            mean = x.mean(axis=axes)
            var = ((x - mean.reshape(shape)) ** 2).mean(axis=axes)
            if running is not None:
                count = x.size // x.shape[1]
                rm, rv = running
                m = rm.dtype.type(momentum)
                rm[...] = (1 - m) * rm + m * mean.astype(rm.dtype)
                rv[...] = (1 - m) * rv + m * (var * (count / (count - 1))).astype(rv.dtype)
        else:
            mean, var = running[0].astype(x.dtype), running[1].astype(x.dtype)
        invstd = (1 / np.sqrt(var + dt(eps))).astype(x.dtype)
        xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
        ctx.save_for_backward(xhat, invstd, weight)
        ctx.meta = (axes, shape, training)
        out = xhat
        if weight is not None:
            out = out * weight.reshape(shape)
        if bias is not None:
            out = out + bias.reshape(shape)
        return out

    @staticmethod
    def backward(ctx, g):
        # train: dL/dx = invstd (gh - mean(gh) - xhat mean(gh xhat)), gh = g w;  eval: dL/dx = g w invstd
        xhat, invstd, weight = ctx.saved_tensors
        axes, shape, training = ctx.meta
        need_x, need_w, need_b = ctx.needs_input_grad
        gx = gw = gb = None
        if need_x:
            gh = g if weight is None else g * weight.reshape(shape)
            if training:
                gh = gh - gh.mean(axis=axes, keepdims=True) - xhat * (gh * xhat).mean(
                    axis=axes, keepdims=True)
            gx = gh * invstd.reshape(shape)
        if need_w:
            gw = (g * xhat).sum(axis=axes)
        if need_b:
            gb = g.sum(axis=axes)
        return gx, gw, gb


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-5):
    """torch.nn.functional.batch_norm. x: (N, C, ...) (e.g. (N, C, H, W)); running_mean,
    running_var, weight, bias: (C,) Tensors or None. training=False (default) normalises with the
    running statistics, which must then be given; training=True uses the batch statistics and updates
    the running ones in place (when given) with `momentum` (default 0.1). eps default 1e-5."""
    xs = float_array("batch_norm", "input", x).shape
    if len(xs) < 2:
        raise ValueError(f"batch_norm: input must be (N, C, ...) with at least 2 dimensions, got shape {xs}")
    c = xs[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is None:
            continue
        if float_array("batch_norm", name, t).shape != (c,):
            raise ValueError(f"batch_norm: {name} must have shape ({c},) for input of shape {xs}, "
                             f"got {np.shape(data_of(t))}")
    if (running_mean is None) != (running_var is None):
        raise ValueError("batch_norm: give both running_mean and running_var, or neither")
    running = None if running_mean is None else (data_of(running_mean), data_of(running_var))
    if training:
        count = int(np.prod(xs)) // c if c else 0
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got "
                             f"input of shape {xs}")
    elif running is None:
        raise ValueError("batch_norm: running_mean and running_var are required when training=False")
    if eps < 0:
        raise ValueError(f"batch_norm: eps must be non-negative, got {eps}")
    return BatchNorm.apply(x, weight, bias, running=running, training=bool(training),
                           momentum=float(momentum), eps=float(eps))
