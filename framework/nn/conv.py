"""Convolution layers: Conv2d and ConvTranspose2d over F.conv2d / F.conv_transpose2d, with torch's
arguments, parameter shapes, default initialisation and repr."""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import functional as F
from .._check import choice, int_arg, int_pair
from ..registry import LAYERS
from . import init
from ._util import call, check_4d
from .module import Module, Parameter

__all__ = ["Conv2d", "ConvTranspose2d", "conv_act", "run_fused"]


class _ConvNd(Module):
    """What Conv2d and ConvTranspose2d share: arguments, parameters, default init, repr."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                 output_padding, groups, bias, padding_mode, dtype):
        super().__init__()
        name = type(self).__name__
        for arg, v in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            int_arg(name, arg, v)
        if in_channels % groups:
            raise ValueError(f"{name}: in_channels {in_channels} must be divisible by groups {groups}")
        if out_channels % groups:
            raise ValueError(f"{name}: out_channels {out_channels} must be divisible by groups {groups}")
        choice(name, "padding_mode", padding_mode, ("zeros", "reflect", "replicate", "circular"))
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = int_pair(name, "kernel_size", kernel_size, 1)
        self.stride = int_pair(name, "stride", stride, 1)
        self.dilation = int_pair(name, "dilation", dilation, 1)
        # checked now (a YAML typo fails at construction), with the one rule F.conv2d applies
        F.conv_padding(name, padding, self.kernel_size, self.dilation, self.stride)
        self.padding = padding if isinstance(padding, str) else int_pair(name, "padding", padding, 0)
        self.transposed = transposed
        self.output_padding = int_pair(name, "output_padding", output_padding, 0)
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
        (top, bottom), (left, right) = F.conv_padding(self._name(), self.padding, self.kernel_size,
                                                      self.dilation, self.stride)
        return (left, right, top, bottom)

    def forward(self, x, relu_slope=None):
        """relu_slope (srgrad's extension): leaky_relu of the output (0: relu) fused into the conv."""
        check_4d(self._name(), x, self.in_channels)
        name = self._name()
        padding = self.padding
        if self.padding_mode != "zeros":
            widths = self._pad_widths()
            if any(widths):
                x = call(name, F.pad, x, widths, self.padding_mode)
            padding = 0
        conv = F.conv2d if relu_slope is None else functools.partial(F.conv2d, relu_slope=relu_slope)
        return call(name, conv, x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


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
        check_4d(self._name(), x, self.in_channels)
        return call(self._name(), F.conv_transpose2d, x, self.weight, self.bias, self.stride, self.padding,
                     self._output_padding(x, output_size), self.groups, self.dilation)


def _slope(act):
    """The fusable slope of an activation module (ReLU: 0, LeakyReLU: its slope if >= 0), or None."""
    from .activation import LeakyReLU, ReLU
    if act._forward_pre_hooks or act._forward_hooks:  # the hooks must see the activation run
        return None
    if type(act) is ReLU:
        return 0.0
    if type(act) is LeakyReLU and act.negative_slope >= 0:
        return float(act.negative_slope)
    return None


def conv_act(conv, act, x):
    """act(conv(x)), with the activation fused into the convolution's output when conv is a Conv2d
    and act a ReLU or a LeakyReLU of slope >= 0 (one output array instead of two; the same values).
    The model's modules, and so its state_dict keys, stay as they are."""
    slope = _slope(act) if type(conv) is Conv2d else None
    return act(conv(x)) if slope is None else conv(x, relu_slope=slope)


def run_fused(layers, x):
    """x through `layers` in order (a Sequential's modules), each Conv2d followed by a fusable
    activation run as one conv_act: the Sequential's forward with the activations fused."""
    layers, i = list(layers), 0
    while i < len(layers):
        if i + 1 < len(layers) and type(layers[i]) is Conv2d and _slope(layers[i + 1]) is not None:
            x = conv_act(layers[i], layers[i + 1], x)
            i += 2
        else:
            x = layers[i](x)
            i += 1
    return x
