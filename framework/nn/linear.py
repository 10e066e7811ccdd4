"""Linear layers: Identity and Linear (torch's arguments, (out, in) weight, default init and repr)."""
from __future__ import annotations

import math

import numpy as np

from .. import functional as F
from .._check import flag, int_arg
from ..registry import LAYERS
from . import init
from .module import Module, Parameter

__all__ = ["Identity", "Linear"]


@LAYERS.register()
class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments, as torch."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


@LAYERS.register()
class Linear(Module):
    """y = x W^T + b: (..., in_features) -> (..., out_features). weight (out_features, in_features),
    bias (out_features,) unless bias=False; both U(+-1/sqrt(in_features)) by default, as torch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=np.float32):
        super().__init__()
        self.in_features = int_arg("Linear", "in_features", in_features)
        self.out_features = int_arg("Linear", "out_features", out_features)
        self.weight = Parameter(np.empty((self.out_features, self.in_features), dtype))
        if flag("Linear", "bias", bias):
            self.bias = Parameter(np.empty(self.out_features, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self, rng=None):
        """torch's default: weight via kaiming_uniform_(a=sqrt(5)), i.e. U(+-1/sqrt(in_features)); bias
        U(+-1/sqrt(in_features))."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), rng=rng)
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features)
            init.uniform_(self.bias, -bound, bound, rng=rng)

    def forward(self, x):
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"{self._name()}: expected input of shape (..., {self.in_features}), got "
                             f"{tuple(x.shape)}")
        return F.linear(x, self.weight, self.bias)

    def _name(self):
        return f"Linear({self.in_features}, {self.out_features})"

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")
