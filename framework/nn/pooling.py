"""Pooling layers: AvgPool2d, MaxPool2d, AdaptiveAvgPool2d, AdaptiveMaxPool2d over
framework.functional's pools."""
from __future__ import annotations

from .. import functional as F
from ..registry import LAYERS
from ._util import call, check_4d
from .module import Module

__all__ = ["AvgPool2d", "MaxPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d"]


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
        check_4d(name, x)
        return call(name, F.avg_pool2d, x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
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
        check_4d(name, x)
        return call(name, F.max_pool2d, x, self.kernel_size, self.stride, self.padding, self.dilation,
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
        check_4d(name, x)
        return call(name, F.adaptive_avg_pool2d, x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


@LAYERS.register()
class AdaptiveMaxPool2d(Module):
    """(N, C, H, W) -> (N, C, *output_size): the max of each of output_size adaptive windows (and
    the flat h * W + w argmax with return_indices=True); see F.adaptive_max_pool2d."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x):
        name = f"AdaptiveMaxPool2d({self.extra_repr()})"
        check_4d(name, x)
        return call(name, F.adaptive_max_pool2d, x, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"
