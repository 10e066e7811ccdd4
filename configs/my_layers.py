"""An example user module: a custom differentiable layer, registered so that configs can use it.

`configs/custom_layer.yaml` says `imports: [my_layers]`; the trainer puts the config's folder on
sys.path and imports this module before building the model, so `ChannelScale` resolves by name.
Check the gradient once with `framework.gradcheck` (see README, "Custom layers").
"""
import numpy as np

from framework import Function, nn
from framework.registry import LAYERS


class ChannelScaleFn(Function):
    """y = x * w per channel: x (N, C, H, W), w (C,)."""

    @staticmethod
    def forward(ctx, x, w):                       # numpy in, numpy out
        ctx.save_for_backward(x, w)
        return x * w[None, :, None, None]

    @staticmethod
    def backward(ctx, g):                         # dL/dx = g*w ; dL/dw = sum(g*x)
        x, w = ctx.saved_tensors
        return g * w[None, :, None, None], (g * x).sum(axis=(0, 2, 3))


@LAYERS.register()
class ChannelScale(nn.Module):
    """A learnable per-channel scale, initialised to 1 (identity)."""

    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(np.ones(channels, np.float32))

    def forward(self, x):
        return ChannelScaleFn.apply(x, self.weight)
