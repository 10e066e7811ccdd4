"""Normalisation layers: BatchNorm2d (torch's state_dict keys and running-statistics rule),
LayerNorm, LayerNorm2d (over the channels of an image), GroupNorm and InstanceNorm2d."""
from __future__ import annotations

import numpy as np

from .. import functional as F
from .._check import flag, int_arg, int_list, is_int, number
from ..registry import LAYERS
from ..tensor import Tensor
from ._util import check_4d
from .module import Module, Parameter

__all__ = ["BatchNorm2d", "LayerNorm", "LayerNorm2d", "GroupNorm", "InstanceNorm2d"]


@LAYERS.register()
class BatchNorm2d(Module):
    """Batch normalisation of (N, num_features, H, W) over N, H, W.

    Parameters weight (ones) and bias (zeros, unless bias=False) when affine; buffers running_mean (zeros), running_var
    (ones) and num_batches_tracked (int64 scalar) when track_running_stats: the keys of torch's
    state_dict. Training updates the running statistics with `momentum` (default 0.1; None means a
    cumulative average over num_batches_tracked); eval normalises with them."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum=0.1, affine: bool = True,
                 track_running_stats: bool = True, dtype=np.float32, *, bias: bool = True):
        super().__init__()
        self.num_features = int_arg("BatchNorm2d", "num_features", num_features)
        self.eps, self.momentum = eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(np.ones(num_features, dtype))
            if bias:
                self.bias = Parameter(np.zeros(num_features, dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(num_features, dtype)))
            self.register_buffer("running_var", Tensor(np.ones(num_features, dtype)))
            self.register_buffer("num_batches_tracked", Tensor(np.array(0, np.int64)))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.data[...] = 0
            self.running_var.data[...] = 1
            self.num_batches_tracked.data[...] = 0

    def forward(self, x):
        check_4d(f"BatchNorm2d({self.num_features})", x, self.num_features)
        # torch: eval without running statistics falls back to batch statistics
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        # the op counts num_batches_tracked (and takes 1 / it for momentum None) when it updates
        # the statistics: in the op, so that a captured step repeats it
        counting = self.training and self.track_running_stats
        momentum = self.momentum if counting or self.momentum is not None else 0.0
        return F.batch_norm(x, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch, momentum, self.eps,
                            num_batches_tracked=self.num_batches_tracked if counting else None)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


@LAYERS.register()
class LayerNorm(Module):
    """Normalise each x (..., *normalized_shape) over its trailing normalized_shape axes (an int or
    a sequence of ints), then scale by weight (ones) and shift by bias (zeros): both of shape
    normalized_shape, present when elementwise_affine (default True; bias also needs bias=True).
    eps default 1e-5. torch's state_dict keys."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, dtype=np.float32):
        super().__init__()
        shape = [normalized_shape] if is_int(normalized_shape) else normalized_shape
        self.normalized_shape = int_list("LayerNorm", "normalized_shape",
                                         list(shape) if isinstance(shape, tuple) else shape)
        if not self.normalized_shape:
            raise ValueError("LayerNorm: normalized_shape must hold at least one size, got ()")
        self.eps = number("LayerNorm", "eps", eps, low=0)
        self.elementwise_affine = flag("LayerNorm", "elementwise_affine", elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype))
        else:
            self.register_parameter("weight", None)
        if self.elementwise_affine and flag("LayerNorm", "bias", bias):
            self.bias = Parameter(np.zeros(self.normalized_shape, dtype))
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        n = len(self.normalized_shape)
        if tuple(x.shape[max(x.ndim - n, 0):]) != self.normalized_shape or x.ndim < n:
            raise ValueError(f"LayerNorm({self.normalized_shape}): expected input of shape "
                             f"(..., {', '.join(map(str, self.normalized_shape))}), got {tuple(x.shape)}")
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


@LAYERS.register()
class LayerNorm2d(Module):
    """LayerNorm over the channels of (N, num_channels, H, W) at each pixel (the "channels_first"
    LayerNorm of ConvNeXt, SAFMN, OmniSR): weight (ones) and bias (zeros) of (num_channels,), eps
    default 1e-6 (theirs); see F.layer_norm2d."""

    def __init__(self, num_channels: int, eps: float = 1e-6, dtype=np.float32):
        super().__init__()
        self.num_channels = int_arg("LayerNorm2d", "num_channels", num_channels)
        self.eps = number("LayerNorm2d", "eps", eps, low=0)
        self.weight = Parameter(np.ones(self.num_channels, dtype))
        self.bias = Parameter(np.zeros(self.num_channels, dtype))

    def forward(self, x):
        check_4d(f"LayerNorm2d({self.num_channels})", x, self.num_channels)
        return F.layer_norm2d(x, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_channels}, eps={self.eps}"


@LAYERS.register()
class GroupNorm(Module):
    """Normalise x (N, num_channels, ...) over each of num_groups groups of channels (and every
    position), then scale by weight (ones) and shift by bias (zeros), both (num_channels,), present
    when affine (default True; bias also needs bias=True, keyword-only as torch's). eps default
    1e-5. torch's state_dict keys."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 dtype=np.float32, *, bias: bool = True):
        super().__init__()
        self.num_groups = int_arg("GroupNorm", "num_groups", num_groups)
        self.num_channels = int_arg("GroupNorm", "num_channels", num_channels)
        if self.num_channels % self.num_groups:
            raise ValueError(f"GroupNorm: num_channels must be divisible by num_groups, got "
                             f"{self.num_channels} and {self.num_groups}")
        self.eps = number("GroupNorm", "eps", eps, low=0)
        self.affine = flag("GroupNorm", "affine", affine)
        if self.affine:
            self.weight = Parameter(np.ones(self.num_channels, dtype))
        else:
            self.register_parameter("weight", None)
        if self.affine and flag("GroupNorm", "bias", bias):
            self.bias = Parameter(np.zeros(self.num_channels, dtype))
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm({self.num_groups}, {self.num_channels}): expected input of "
                             f"shape (N, {self.num_channels}, ...), got {tuple(x.shape)}")
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


@LAYERS.register()
class InstanceNorm2d(Module):
    """torch's InstanceNorm2d: each (sample, channel) plane of x (N, num_features, H, W) (or an
    unbatched (C, H, W)) normalised by its own mean and biased variance, (x - mean) /
    sqrt(var + eps) (group_norm with one channel per group). affine (default False) adds weight
    (ones) and bias (zeros); track_running_stats (default False) keeps running_mean / running_var /
    num_batches_tracked as BatchNorm2d (the per-plane statistics averaged over the batch, the
    variance unbiased; num_batches_tracked is never counted, as in torch) and normalises with them
    in eval. torch's defaults and state_dict keys."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum=0.1, affine: bool = False,
                 track_running_stats: bool = False, dtype=np.float32):
        super().__init__()
        self.num_features = int_arg("InstanceNorm2d", "num_features", num_features)
        self.eps = number("InstanceNorm2d", "eps", eps, low=0)
        self.momentum = None if momentum is None else number("InstanceNorm2d", "momentum", momentum)
        self.affine = flag("InstanceNorm2d", "affine", affine)
        self.track_running_stats = flag("InstanceNorm2d", "track_running_stats",
                                        track_running_stats)
        for name, fill in (("weight", np.ones), ("bias", np.zeros)):
            if self.affine:
                setattr(self, name, Parameter(fill(num_features, dtype)))
            else:
                self.register_parameter(name, None)
        stats = (("running_mean", np.zeros(num_features, dtype)),
                 ("running_var", np.ones(num_features, dtype)),
                 ("num_batches_tracked", np.array(0, np.int64)))
        for name, value in stats:
            self.register_buffer(name, Tensor(value) if self.track_running_stats else None)

    def forward(self, x):
        if x.ndim == 3:  # unbatched (C, H, W), as torch
            return self.forward(x.unsqueeze(0)).squeeze(0)
        check_4d(f"InstanceNorm2d({self.num_features})", x, self.num_features)
        # torch's InstanceNorm: momentum None means 0 (no update); num_batches_tracked stays 0
        track = self.track_running_stats
        return F.instance_norm(x, self.running_mean if track else None,
                               self.running_var if track else None, self.weight, self.bias,
                               self.training or not track,
                               0.0 if self.momentum is None else self.momentum, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")
