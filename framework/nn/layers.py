"""Layers: thin Modules over framework.functional with torch.nn's names, attributes, parameter
shapes, default initialisation and repr, so state_dicts are interchangeable with PyTorch's.

Every layer is registered in LAYERS under its class name (YAML `type: Conv2d`)."""
from __future__ import annotations

import math

import numpy as np

from .. import functional as F
from ..registry import LAYERS
from ..tensor import Tensor
from . import init
from .module import Module, Parameter

__all__ = ["Conv2d", "ConvTranspose2d", "PixelShuffle", "PixelUnshuffle", "ReLU", "LeakyReLU", "PReLU",
           "Sigmoid", "Tanh", "GELU", "BatchNorm2d", "AvgPool2d", "MaxPool2d", "AdaptiveAvgPool2d",
           "Identity"]


def _pair(v, name, layer):
    """int -> (v, v); a 2-sequence -> tuple of ints."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v), int(v))
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(i, (int, np.integer)) for i in v):
        return (int(v[0]), int(v[1]))
    raise TypeError(f"{layer}: {name} must be an int or a pair of ints, got {v!r}")


def _check_4d(layer: str, x, channels=None):
    """ValueError naming the layer and both shapes unless x is (N, channels, H, W)."""
    shape = tuple(x.shape)
    expected = f"(N, {channels}, H, W)" if channels is not None else "(N, C, H, W)"
    if len(shape) != 4 or (channels is not None and shape[1] != channels):
        raise ValueError(f"{layer}: expected input of shape {expected}, got {shape}")


def _call(layer: str, fn, *args):
    """fn(*args), with a ValueError from the functional op's checks prefixed by the layer's name (the
    op's message already gives the shapes): "Conv2d(3, 4, kernel_size=(5, 5)): conv2d: kernel ..."."""
    try:
        return fn(*args)
    except ValueError as e:
        raise ValueError(f"{layer}: {e}") from None


class _ConvNd(Module):
    """What Conv2d and ConvTranspose2d share: arguments, parameters, default init, repr."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                 output_padding, groups, bias, padding_mode, dtype):
        super().__init__()
        name = type(self).__name__
        for arg, v in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name}: {arg} must be a positive int, got {v!r}")
        if in_channels % groups:
            raise ValueError(f"{name}: in_channels {in_channels} must be divisible by groups {groups}")
        if out_channels % groups:
            raise ValueError(f"{name}: out_channels {out_channels} must be divisible by groups {groups}")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"{name}: padding_mode must be one of 'zeros', 'reflect', 'replicate', "
                             f"'circular', got {padding_mode!r}")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair(kernel_size, "kernel_size", name)
        self.stride = _pair(stride, "stride", name)
        self.dilation = _pair(dilation, "dilation", name)
        for arg in ("kernel_size", "stride", "dilation"):
            if min(getattr(self, arg)) < 1:
                raise ValueError(f"{name}: {arg} must be positive, got {getattr(self, arg)}")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
            if padding == "same" and self.stride != (1, 1):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions "
                                 f"(stride {self.stride})")
            self.padding = padding
        else:
            self.padding = _pair(padding, "padding", name)
            if min(self.padding) < 0:
                raise ValueError(f"{name}: padding must be non-negative, got {self.padding}")
        self.transposed = transposed
        self.output_padding = _pair(output_padding, "output_padding", name)
        self.groups = int(groups)
        self.padding_mode = padding_mode
        wshape = ((in_channels, out_channels // groups) if transposed
                  else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(np.empty(wshape, dtype))
        if bias:
            self.bias = Parameter(np.empty(out_channels, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self, rng=None):
        """torch's default: weight U(+-1/sqrt(fan_in)) via kaiming_uniform_(a=sqrt(5)); bias
        U(+-1/sqrt(fan_in)), fan_in from the weight (dim 1 x kernel area, also when transposed)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), rng=rng)
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound, rng=rng)

    def _name(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size})"

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0, 0):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


@LAYERS.register()
class Conv2d(_ConvNd):
    """2-D cross-correlation. Input (N, in_channels, H, W) -> (N, out_channels, OH, OW).
    weight (out_channels, in_channels/groups, kh, kw), bias (out_channels,) unless bias=False.
    padding: int, pair, "same" or "valid"; padding_mode "zeros" (default), "reflect", "replicate" or
    "circular" (the last three pad with F.pad first, then convolve without padding, as torch)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", dtype=np.float32):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0,
                         groups, bias, padding_mode, dtype)

    def _pad_widths(self):
        """F.pad widths (left, right, top, bottom) for a non-zeros padding_mode."""
        if self.padding == "valid":
            return (0, 0, 0, 0)
        if self.padding == "same":  # torch puts the odd pixel of the total padding on the right/bottom
            widths = []
            for d, k in zip(self.dilation[::-1], self.kernel_size[::-1]):
                total = d * (k - 1)
                widths += [total // 2, total - total // 2]
            return tuple(widths)
        ph, pw = self.padding
        return (pw, pw, ph, ph)

    def forward(self, x):
        _check_4d(self._name(), x, self.in_channels)
        name = self._name()
        if self.padding_mode == "zeros":
            return _call(name, F.conv2d, x, self.weight, self.bias, self.stride, self.padding,
                         self.dilation, self.groups)
        widths = self._pad_widths()
        if any(widths):
            x = _call(name, F.pad, x, widths, self.padding_mode)
        return _call(name, F.conv2d, x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


@LAYERS.register()
class ConvTranspose2d(_ConvNd):
    """Transposed convolution (the adjoint of Conv2d in its input). Input (N, in_channels, H, W) ->
    (N, out_channels, (H-1) stride - 2 padding + dilation (k-1) + output_padding + 1, ...).
    weight (in_channels, out_channels/groups, kh, kw), bias (out_channels,). Only padding_mode "zeros".
    forward(x, output_size=None): output_size (H, W) picks output_padding, as torch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", dtype=np.float32):
        if padding_mode != "zeros":
            raise ValueError(f"ConvTranspose2d: only padding_mode 'zeros' is supported, got {padding_mode!r}")
        if isinstance(padding, str):
            raise ValueError(f"ConvTranspose2d: padding must be an int or a pair, got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True,
                         output_padding, groups, bias, padding_mode, dtype)

    def _output_padding(self, x, output_size):
        if output_size is None:
            return self.output_padding
        size = tuple(output_size)[-2:]
        if len(size) != 2:
            raise ValueError(f"{self._name()}: output_size must give (H, W), got {output_size!r}")
        pad = []
        for d in range(2):
            smallest = ((x.shape[d + 2] - 1) * self.stride[d] - 2 * self.padding[d]
                        + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            largest = smallest + self.stride[d] - 1
            if not smallest <= size[d] <= largest:
                raise ValueError(f"{self._name()}: requested output size {tuple(size)} is not reachable "
                                 f"from input {tuple(x.shape)}: dimension {d} must lie in "
                                 f"[{smallest}, {largest}]")
            pad.append(size[d] - smallest)
        return tuple(pad)

    def forward(self, x, output_size=None):
        _check_4d(self._name(), x, self.in_channels)
        return _call(self._name(), F.conv_transpose2d, x, self.weight, self.bias, self.stride, self.padding,
                     self._output_padding(x, output_size), self.groups, self.dilation)


@LAYERS.register()
class PixelShuffle(Module):
    """(N, C r^2, H, W) -> (N, C, H r, W r) with r = upscale_factor (torch's channel order)."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x):
        return _call(f"PixelShuffle({self.extra_repr()})", F.pixel_shuffle, x, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


@LAYERS.register()
class PixelUnshuffle(Module):
    """(N, C, H r, W r) -> (N, C r^2, H, W) with r = downscale_factor; PixelShuffle's inverse."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x):
        return _call(f"PixelUnshuffle({self.extra_repr()})", F.pixel_unshuffle, x, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class _Activation(Module):
    """inplace is accepted for torch compatibility (configs use it) but srgrad always computes out of
    place: an in-place op would overwrite an array that backward still needs."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


@LAYERS.register()
class ReLU(_Activation):
    """max(x, 0), any shape."""

    def forward(self, x):
        return F.relu(x)


@LAYERS.register()
class LeakyReLU(_Activation):
    """x if x > 0 else negative_slope x (default 0.01), any shape."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


@LAYERS.register()
class PReLU(Module):
    """x if x > 0 else weight x; weight (num_parameters,) filled with `init` (default 0.25), shared
    (num_parameters=1) or one per channel of (N, C, ...)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, dtype=np.float32):
        super().__init__()
        if not isinstance(num_parameters, (int, np.integer)) or num_parameters < 1:
            raise ValueError(f"PReLU: num_parameters must be a positive int, got {num_parameters!r}")
        self.num_parameters = int(num_parameters)
        self.init = init
        self.weight = Parameter(np.full(self.num_parameters, init, dtype))

    def forward(self, x):
        if self.num_parameters > 1 and (x.ndim < 2 or x.shape[1] != self.num_parameters):
            raise ValueError(f"PReLU(num_parameters={self.num_parameters}): expected input of shape "
                             f"(N, {self.num_parameters}, ...), got {tuple(x.shape)}")
        return F.prelu(x, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


@LAYERS.register()
class Sigmoid(Module):
    def forward(self, x):
        return F.sigmoid(x)


@LAYERS.register()
class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)


@LAYERS.register()
class GELU(Module):
    """x Phi(x); approximate "none" (exact erf, default) or "tanh"."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


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
        if not isinstance(num_features, (int, np.integer)) or num_features < 1:
            raise ValueError(f"BatchNorm2d: num_features must be a positive int, got {num_features!r}")
        self.num_features, self.eps, self.momentum = int(num_features), eps, momentum
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
        _check_4d(f"BatchNorm2d({self.num_features})", x, self.num_features)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.data[...] += 1
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.data)
        # torch: eval without running statistics falls back to batch statistics
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return F.batch_norm(x, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


@LAYERS.register()
class AvgPool2d(Module):
    """Average pooling of (N, C, H, W); stride defaults to kernel_size; see F.avg_pool2d."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, x):
        name = f"AvgPool2d({self.extra_repr()})"
        _check_4d(name, x)
        return _call(name, F.avg_pool2d, x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                     self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


@LAYERS.register()
class MaxPool2d(Module):
    """Max pooling of (N, C, H, W); stride defaults to kernel_size; see F.max_pool2d.
    return_indices=True is not supported."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        if return_indices:
            raise ValueError("MaxPool2d: return_indices=True is not supported")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x):
        name = f"MaxPool2d(kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding})"
        _check_4d(name, x)
        return _call(name, F.max_pool2d, x, self.kernel_size, self.stride, self.padding, self.dilation,
                     self.ceil_mode)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


@LAYERS.register()
class AdaptiveAvgPool2d(Module):
    """(N, C, H, W) -> (N, C, *output_size): the mean of each of output_size adaptive windows."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        name = f"AdaptiveAvgPool2d({self.extra_repr()})"
        _check_4d(name, x)
        return _call(name, F.adaptive_avg_pool2d, x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


@LAYERS.register()
class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments, as torch."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x
