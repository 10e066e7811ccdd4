"""Activation layers: ReLU, LeakyReLU, PReLU, Sigmoid, Tanh, GELU, SiLU, Mish, Softmax, LogSoftmax
over framework.functional."""
from __future__ import annotations

import numpy as np

from .. import functional as F
from .._check import choice, int_arg
from ..registry import LAYERS
from .module import Module, Parameter

__all__ = ["ReLU", "LeakyReLU", "PReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Mish", "Softmax",
           "LogSoftmax"]


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
        self.num_parameters = int_arg("PReLU", "num_parameters", num_parameters)
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
        self.approximate = choice("GELU", "approximate", approximate, ("none", "tanh"))

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


@LAYERS.register()
class SiLU(_Activation):
    """x sigmoid(x) (the swish), any shape."""

    def forward(self, x):
        return F.silu(x)


@LAYERS.register()
class Mish(_Activation):
    """x tanh(softplus(x)), any shape."""

    def forward(self, x):
        return F.mish(x)


class _SoftmaxLayer(Module):
    """dim is required (torch's dim=None picks a legacy implicit axis, deprecated): checked here so
    a config without it fails when the model is built."""

    def __init__(self, dim=None):
        super().__init__()
        name = type(self).__name__
        if dim is None:
            raise ValueError(f"{name}: dim must be given (torch's implicit choice of dim is deprecated)")
        self.dim = int_arg(name, "dim", dim, minimum=None)

    def extra_repr(self):
        return f"dim={self.dim}"


@LAYERS.register()
class Softmax(_SoftmaxLayer):
    """exp(x) / sum(exp(x)) along dim (negative counts from the end), any shape."""

    def forward(self, x):
        return F.softmax(x, self.dim)


@LAYERS.register()
class LogSoftmax(_SoftmaxLayer):
    """x - log(sum(exp(x))) along dim, any shape."""

    def forward(self, x):
        return F.log_softmax(x, self.dim)
