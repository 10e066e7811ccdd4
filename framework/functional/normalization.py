"""Normalisation: batch_norm over (N, C, ...) with PyTorch's running-statistics rule, layer_norm
over the trailing axes (fused numba kernels: one pass per row each way), layer_norm2d over the
channels of (N, C, H, W) (layer_norm of the channels-last view), and group_norm (rows
(N groups, C / groups x ...) with layer_norm's moments and gradient rule, the per-channel scale and
shift in the same pass)."""
from __future__ import annotations

import math

import numpy as np

from .._check import float_array, int_arg, int_list, is_int, number
from .._jit import kernel, launch, prange
from .._simd import wide
from ..autograd import Function
from ._util import data_of
from .rows import SERIAL_ELEMS, layer_norm_stats2, layer_norm_value, like, row_grad_sums, row_moments

__all__ = ["batch_norm", "layer_norm", "layer_norm2d", "group_norm"]


class BatchNormFunction(Function):
    """x: (N, C, ...); weight, bias: (C,) or None; statistics over every axis but 1.

    training=True normalises with the batch mean and biased variance and, when `running` is given,
    updates the running arrays in place: r = (1 - momentum) r + momentum stat, with the UNBIASED
    variance for the running variance (as torch); `tracked` (a 0-d int64 array, or None) is then
    counted up by one, and momentum None means the cumulative average, 1 / tracked (nn.BatchNorm2d's
    num_batches_tracked and momentum=None). training=False normalises with `running`. Both arrays
    are the op's `state`: a captured step repeats their update at every replay."""

    state = ("running", "tracked")

    @staticmethod
    def forward(ctx, x, weight, bias, *, running, training, momentum, eps, tracked=None):
        axes = (0,) + tuple(range(2, x.ndim))
        shape = (1, -1) + (1,) * (x.ndim - 2)
        dt = x.dtype.type
        if training:  # float64 sums, as torch's CPU kernels (acc_type<float> is double)
            mean = x.mean(axis=axes, dtype=np.float64)
            centred = x - mean.astype(x.dtype).reshape(shape)
            # the float64 mean of the centred values corrects the float32 centring's rounding
            var = (np.square(centred).mean(axis=axes, dtype=np.float64)
                   - np.square(centred.mean(axis=axes, dtype=np.float64)))
            mean, var = mean.astype(x.dtype), var.astype(x.dtype)
            if running is not None:
                count = x.size // x.shape[1]
                rm, rv = running
                if tracked is not None:
                    tracked[...] += 1
                m = rm.dtype.type(1.0 / float(tracked) if momentum is None else momentum)
                rm[...] = (1 - m) * rm + m * mean.astype(rm.dtype)
                rv[...] = (1 - m) * rv + m * (var * (count / (count - 1))).astype(rv.dtype)
        else:
            mean, var = running[0].astype(x.dtype), running[1].astype(x.dtype)
        invstd = (1 / np.sqrt(var + dt(eps))).astype(x.dtype)
        ctx.meta, ctx.mean = (axes, shape, training), None
        if not training:  # one pass, numpy's values; x is saved, its xhat made again by backward
            out = _eval_pass(x, mean, invstd, weight, bias)
            if out is not None:
                ctx.save_for_backward(x, invstd, weight)
                ctx.mean = mean
                return out
        xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
        ctx.save_for_backward(xhat, invstd, weight)
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
        if ctx.mean is not None:  # _eval_pass's forward saved x: xhat as the other forward made it
            xhat = (xhat - ctx.mean.reshape(shape)) * invstd.reshape(shape)
        need_x, need_w, need_b = ctx.needs_input_grad
        gx = gw = gb = None
        if need_x:
            gh = g if weight is None else g * weight.reshape(shape)
            if training:
                acc = np.float64  # the sums in float64, as torch's CPU backward
                gh = gh - gh.mean(axis=axes, keepdims=True, dtype=acc).astype(gh.dtype) \
                    - xhat * (gh * xhat).mean(axis=axes, keepdims=True, dtype=acc).astype(gh.dtype)
            gx = gh * invstd.reshape(shape)
        if need_w:
            gw = (g * xhat).sum(axis=axes, dtype=np.float64).astype(xhat.dtype)
        if need_b:
            gb = g.sum(axis=axes, dtype=np.float64).astype(g.dtype)
        return gx, gw, gb


def _eval_pass(x, mean, invstd, weight, bias):
    """batch_norm's eval output ((x - mean) invstd) weight + bias, each step rounded as numpy's ops
    round it, in one pass, laid out as x: where x is (N, C, ...) C-contiguous, or channels last
    (N, ..., C) C-contiguous read as (N, C, ...); else None (numpy's passes)."""
    if (weight is not None and weight.dtype != x.dtype or bias is not None and bias.dtype != x.dtype
            or x.size == 0):
        return None
    C = x.shape[1]
    if x.flags.c_contiguous:
        xv, last = x.reshape(x.shape[0], C, -1), False
    elif x.ndim > 2 and np.moveaxis(x, 1, -1).flags.c_contiguous:
        xv, last = np.moveaxis(x, 1, -1).reshape(-1, C), True
    else:
        return None
    none = np.zeros(0, x.dtype)
    y = np.empty_like(xv)
    w = none if weight is None else np.ascontiguousarray(weight)
    b = none if bias is None else np.ascontiguousarray(bias)
    if last:
        launch(_bn_eval_last, x.size < SERIAL_ELEMS, xv, mean, invstd, w, b, y)
        return np.moveaxis(y.reshape(np.moveaxis(x, 1, -1).shape), -1, 1)
    launch(_bn_eval_planes, x.size < SERIAL_ELEMS, xv, mean, invstd, w, b, y)
    return y.reshape(x.shape)


@kernel(parallel=True)
def _bn_eval_planes(x, mean, invstd, w, b, y):
    """y[n, c] = ((x[n, c] - mean[c]) invstd[c]) w[c] + b[c] (w, b: empty for none) on (N, C, L)."""
    N, C = x.shape[0], x.shape[1]
    for r in prange(N * C):
        n, c = r // C, r % C
        xs, ys, m, s = x[n, c], y[n, c], mean[c], invstd[c]
        if w.shape[0] and b.shape[0]:
            wc, bc = w[c], b[c]
            for i in range(xs.shape[0]):
                ys[i] = (xs[i] - m) * s * wc + bc
        elif w.shape[0]:
            wc = w[c]
            for i in range(xs.shape[0]):
                ys[i] = (xs[i] - m) * s * wc
        elif b.shape[0]:
            bc = b[c]
            for i in range(xs.shape[0]):
                ys[i] = (xs[i] - m) * s + bc
        else:
            for i in range(xs.shape[0]):
                ys[i] = (xs[i] - m) * s


@kernel(parallel=True)
def _bn_eval_last(x, mean, invstd, w, b, y):
    """_bn_eval_planes on channels-last rows (M, C)."""
    M, C = x.shape
    for k in prange(-(-M // 64)):
        wide()
        for r in range(k * 64, min(M, k * 64 + 64)):
            xs, ys = x[r], y[r]
            if w.shape[0] and b.shape[0]:
                for c in range(C):
                    ys[c] = (xs[c] - mean[c]) * invstd[c] * w[c] + b[c]
            elif w.shape[0]:
                for c in range(C):
                    ys[c] = (xs[c] - mean[c]) * invstd[c] * w[c]
            elif b.shape[0]:
                for c in range(C):
                    ys[c] = (xs[c] - mean[c]) * invstd[c] + b[c]
            else:
                for c in range(C):
                    ys[c] = (xs[c] - mean[c]) * invstd[c]


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-5, *, num_batches_tracked=None):
    """torch.nn.functional.batch_norm. x: (N, C, ...) (e.g. (N, C, H, W)); running_mean,
    running_var, weight, bias: (C,) Tensors or None. training=False (default) normalises with the
    running statistics, which must then be given; training=True uses the batch statistics and updates
    the running ones in place (when given) with `momentum` (default 0.1). eps default 1e-5.

    srgrad's addition, for nn.BatchNorm2d: `num_batches_tracked`, a 0-d int64 Tensor the op counts
    up when it updates the running statistics (in the op, so that a captured step repeats it);
    with it, momentum=None means the cumulative average (momentum 1 / num_batches_tracked)."""
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
    tracked = None
    if num_batches_tracked is not None:
        tracked = data_of(num_batches_tracked)
        if not (isinstance(tracked, np.ndarray) and tracked.shape == () and tracked.dtype == np.int64):
            raise ValueError(f"batch_norm: num_batches_tracked must be a 0-d int64 Tensor, got "
                             f"{getattr(tracked, 'dtype', type(tracked).__name__)} of shape "
                             f"{np.shape(tracked)}")
    if momentum is None and (tracked is None or running is None):
        raise ValueError("batch_norm: momentum=None (the cumulative average) needs the running "
                         "statistics and num_batches_tracked")
    return BatchNormFunction.apply(x, weight, bias, running=running, training=bool(training),
                                   momentum=None if momentum is None else float(momentum),
                                   eps=float(eps), tracked=tracked if training else None)


# -- layer_norm ----------------------------------------------------------------------------------------

@kernel(parallel=True)
def _layer_norm_kernel(x, w, b, eps, y, mean, rstd):
    """Per row r of x (R, D): mean, rstd = 1 / sqrt(biased var + eps) (float64, saved:
    rows.layer_norm_stats2, sums in 16 float64 lanes), then y = (x - mean) rstd w + b. The row stays
    in cache across its three sweeps; rows 2t and 2t + 1 side by side."""
    R, D = x.shape
    for t in prange((R + 1) // 2):
        wide()
        r, u = 2 * t, min(2 * t + 1, R - 1)  # an odd last row: itself twice, stored once
        mr, rr, mu_, ru = layer_norm_stats2(x[r], x[u], eps)
        for k, m_, rs in ((r, mr, rr), (u, mu_, ru)):
            mean[k] = m_
            rstd[k] = rs
            m, s = like(m_, x[k, 0]), like(rs, x[k, 0])
            for j in range(D):
                y[k, j] = layer_norm_value(x[k, j], m, s, w[j], b[j])


@kernel(parallel=True)
def _layer_norm_grad_kernel(g, x, w, mean, rstd, chunk, need_x, gx, gw_part, gb_part):
    """Rows in chunks of `chunk` (fixed by the shape, so sums do not depend on the thread count):
    per chunk c, gw_part[c] = sum g xhat and gb_part[c] = sum g over its rows (float64, zero on
    entry); gx[r] = rstd (g w - mean(g w) - xhat mean(g w xhat)) when need_x."""
    R, D = x.shape
    for c in prange(gw_part.shape[0]):
        for r in range(c * chunk, min(R, (c + 1) * chunk)):
            mu, rs = mean[r], rstd[r]
            m, s = like(mu, x[r, 0]), like(rs, x[r, 0])
            for j in range(D):
                gw_part[c, j] += g[r, j] * ((x[r, j] - m) * s)
                gb_part[c, j] += g[r, j]
            if need_x:
                sg, sgx = row_grad_sums(g, x, w, r, mu)
                a, b = like(sg / D, x[r, 0]), like(sgx * rs / D, x[r, 0])
                for j in range(D):
                    gx[r, j] = s * (g[r, j] * w[j] - a - (x[r, j] - m) * s * b)


class LayerNormFunction(Function):
    """x (..., *normalized_shape) viewed as rows (R, D), D = prod(normalized_shape); weight, bias
    of normalized_shape or None."""

    @staticmethod
    def forward(ctx, x, weight, bias, *, normalized_shape, eps):
        size = int(np.prod(normalized_shape))
        rows = (x.size // size, size)
        x2 = np.ascontiguousarray(x).reshape(rows)
        w = np.ones(rows[1], x.dtype) if weight is None else weight.reshape(-1)
        b = np.zeros(rows[1], x.dtype) if bias is None else bias.reshape(-1)
        y = np.empty(rows, x.dtype)
        mean, rstd = np.empty(rows[0]), np.empty(rows[0])
        launch(_layer_norm_kernel, x.size < SERIAL_ELEMS, x2, w, b, float(eps), y, mean, rstd)
        ctx.save_for_backward(x2, w, mean, rstd)
        ctx.shapes = (x.shape, normalized_shape)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, g):
        # dL/dx = rstd (g w - mean(g w) - xhat mean(g w xhat)) per row; dL/dW = sum g xhat; dL/dB = sum g
        x2, w, mean, rstd = ctx.saved_tensors
        shape, wshape = ctx.shapes
        need_x, need_w, need_b = ctx.needs_input_grad
        R, D = x2.shape
        chunk = max(32, -(-R // 512))
        parts = -(-R // chunk)
        gx = np.empty(x2.shape if need_x else (1, 1), x2.dtype)  # the kernel writes it only if need_x
        gw_part, gb_part = np.zeros((parts, D)), np.zeros((parts, D))
        g2 = np.ascontiguousarray(g, dtype=x2.dtype).reshape(x2.shape)
        launch(_layer_norm_grad_kernel, x2.size < SERIAL_ELEMS, g2, x2, w, mean, rstd, chunk, need_x,
               gx, gw_part, gb_part)
        gw = gw_part.sum(axis=0).astype(x2.dtype).reshape(wshape) if need_w else None
        gb = gb_part.sum(axis=0).astype(x2.dtype).reshape(wshape) if need_b else None
        return (gx.reshape(shape) if need_x else None), gw, gb


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.layer_norm: normalise x (..., *normalized_shape) over its trailing
    normalized_shape axes (mean and biased variance per row, then (x - mean) / sqrt(var + eps)),
    then scale by weight and shift by bias, both of shape normalized_shape or None (default).
    normalized_shape: an int or a sequence of ints (e.g. C for x (B, L, C)); eps default 1e-5."""
    name = "layer_norm"
    xa = float_array(name, "input", x)
    shape = int_list(name, "normalized_shape", [normalized_shape] if is_int(normalized_shape)
                     else list(normalized_shape) if isinstance(normalized_shape, (tuple, list))
                     else normalized_shape)
    if not shape or xa.ndim < len(shape) or xa.shape[xa.ndim - len(shape):] != shape:
        raise ValueError(f"{name}: input of shape {xa.shape} does not end in normalized_shape "
                         f"{shape}")
    for arg, t in (("weight", weight), ("bias", bias)):
        if t is None:
            continue
        ta = float_array(name, arg, t)
        if ta.shape != shape:
            raise ValueError(f"{name}: {arg} must have shape normalized_shape {shape}, got {ta.shape}")
        if ta.dtype != xa.dtype:
            raise TypeError(f"{name}: {arg} dtype {ta.dtype} differs from input dtype {xa.dtype}")
    eps = number(name, "eps", eps, low=0)
    return LayerNormFunction.apply(x, weight, bias, normalized_shape=shape, eps=eps)


def layer_norm2d(x, weight=None, bias=None, eps=1e-6):
    """LayerNorm over the channels of x (N, C, H, W) at each pixel: (x - mean_c) / sqrt(var_c + eps)
    (biased variance), times weight (C,) plus bias (C,) (each optional). The "channels_first"
    LayerNorm of ConvNeXt, SAFMN and OmniSR (their LayerNorm2d; eps default 1e-6, theirs); torch
    writes it as layer_norm of x.permute(0, 2, 3, 1), which is how it is computed here."""
    from .shape import permute
    name = "layer_norm2d"
    xa = float_array(name, "input", x)
    if xa.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D input (N, C, H, W), got shape {xa.shape}")
    c = xa.shape[1]
    for arg, t in (("weight", weight), ("bias", bias)):
        if t is not None and float_array(name, arg, t).shape != (c,):
            raise ValueError(f"{name}: {arg} must have shape ({c},) for input {xa.shape}, got "
                             f"{float_array(name, arg, t).shape}")
    eps = number(name, "eps", eps, low=0)
    return permute(layer_norm(permute(x, 0, 2, 3, 1), (c,), weight, bias, eps), 0, 3, 1, 2)


@kernel(parallel=True)
def _group_norm_kernel(x, w, b, groups, eps, y, mean, rstd):
    """Per row r = (sample, group) of x (N groups, C/groups HW): mean and rstd as layer_norm's
    kernel, then y = (x - mean) rstd w[c] + b[c] with c the row's channels in turn (w, b (C,))."""
    R, D = x.shape
    cg = w.shape[0] // groups
    hw = D // cg
    for r in prange(R):
        s, _ = row_moments(x, r, 0.0)
        mu = s / D
        s1, q = row_moments(x, r, mu)
        rs = 1.0 / math.sqrt((q - s1 * s1 / D) / D + eps)
        mean[r] = mu
        rstd[r] = rs
        m, sc = like(mu, x[r, 0]), like(rs, x[r, 0])
        c0 = (r % groups) * cg
        for c in range(cg):
            wc, bc = w[c0 + c], b[c0 + c]
            xs, ys = x[r, c * hw:(c + 1) * hw], y[r, c * hw:(c + 1) * hw]
            for j in range(hw):
                ys[j] = (xs[j] - m) * sc * wc + bc


class GroupNormFunction(Function):
    """x (N, C, ...) as rows (N groups, C / groups x ...), each standardised and given its channels'
    scale and shift in one pass (_group_norm_kernel); weight, bias (C,) or None."""

    @staticmethod
    def forward(ctx, x, weight, bias, *, groups, eps):
        N, C = x.shape[:2]
        rows = np.ascontiguousarray(x).reshape(N * groups, -1)
        w = np.ones(C, x.dtype) if weight is None else weight
        b = np.zeros(C, x.dtype) if bias is None else bias
        y = np.empty(rows.shape, x.dtype)
        mean, rstd = np.empty(rows.shape[0]), np.empty(rows.shape[0])
        launch(_group_norm_kernel, x.size < SERIAL_ELEMS, rows, w, b, groups, float(eps), y, mean, rstd)
        ctx.save_for_backward(rows, weight, mean, rstd)
        ctx.shape = x.shape
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, g):
        # dL/dxhat = g w[c]; dL/dx: layer_norm's row rule on it; dL/dw = sum g xhat; dL/db = sum g
        rows, w, mean, rstd = ctx.saved_tensors
        shape, dt = ctx.shape, rows.dtype
        need_x, need_w, need_b = ctx.needs_input_grad
        axes = (0,) + tuple(range(2, len(shape)))
        per_channel = (shape[1],) + (1,) * (len(shape) - 2)
        g = np.asarray(g, dt)
        gx = None
        if need_x:
            gh = np.ascontiguousarray(g if w is None else g * w.reshape(per_channel)).reshape(rows.shape)
            R, D = rows.shape
            chunk = max(32, -(-R // 512))
            parts = -(-R // chunk)
            gx = np.empty(rows.shape, dt)
            launch(_layer_norm_grad_kernel, rows.size < SERIAL_ELEMS, gh, rows, np.ones(D, dt),
                   mean, rstd, chunk, True, gx, np.zeros((parts, D)), np.zeros((parts, D)))
            gx = gx.reshape(shape)
        gw = None
        if need_w:  # xhat recomputed as the forward formed it (in the input's dtype)
            xhat = ((rows - mean.astype(dt)[:, None]) * rstd.astype(dt)[:, None]).reshape(shape)
            gw = (g * xhat).sum(axis=axes, dtype=np.float64).astype(dt)
        gb = g.sum(axis=axes, dtype=np.float64).astype(dt) if need_b else None
        return gx, gw, gb


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.group_norm: x (N, C, ...) in num_groups groups of C / num_groups channels,
    each (sample, group) normalised by its mean and biased variance over its channels and positions,
    (x - mean) / sqrt(var + eps) (eps default 1e-5), then scaled by weight and shifted by bias, both
    (C,) or None (default)."""
    name = "group_norm"
    xa = float_array(name, "input", x)
    if xa.ndim < 2:
        raise ValueError(f"{name}: expected an input (N, C, ...), got shape {xa.shape}")
    C = xa.shape[1]
    groups = int_arg(name, "num_groups", num_groups)
    if C % groups:
        raise ValueError(f"{name}: num_groups={groups} does not divide the {C} channels of input "
                         f"{xa.shape}")
    for arg, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            ta = float_array(name, arg, t)
            if ta.shape != (C,):
                raise ValueError(f"{name}: {arg} must have shape ({C},), got {ta.shape}")
            if ta.dtype != xa.dtype:
                raise TypeError(f"{name}: {arg} dtype {ta.dtype} differs from input dtype {xa.dtype}")
    eps = number(name, "eps", eps, low=0)
    if xa.size == 0:
        raise ValueError(f"{name}: input of shape {xa.shape} has no element to normalise")
    return GroupNormFunction.apply(x, weight, bias, groups=groups, eps=eps)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """torch.nn.functional.instance_norm on x (N, C, H, W): each (sample, channel) plane
    normalised by its own mean and biased variance (group_norm with one channel per group), then
    weight / bias (C,). With use_input_stats=False the running statistics normalise instead
    (batch_norm's eval). Given running statistics are updated in place from the planes' statistics
    averaged over the batch (the variance unbiased): running = (1 - momentum) running + momentum
    stat."""
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, 0.0, eps)
    x = float_array("instance_norm", "input", input)
    if x.ndim != 4:
        raise ValueError(f"instance_norm: expects a 4-D (N, C, H, W) input, got shape {x.shape}")
    if (running_mean is None) != (running_var is None):
        raise ValueError("instance_norm: give both running_mean and running_var, or neither")
    if running_mean is not None:
        n = x.shape[2] * x.shape[3]
        var = x.var(axis=(2, 3)) * (n / max(n - 1, 1))
        for stats, value in ((running_mean, x.mean(axis=(2, 3))), (running_var, var)):
            data = data_of(stats)
            data[...] = (1 - momentum) * data + momentum * value.mean(axis=0)
    return group_norm(input, x.shape[1], weight, bias, eps)
