"""Blocks several architectures share, with BasicSR's names (basicsr/archs/arch_util.py), so their
state_dict keys match BasicSR's: the pixel-shuffle upsampler and the residual block without BN."""
from __future__ import annotations

from framework import nn
from framework._check import int_arg


def upsampler_scale(model: str, scale) -> int:
    """`scale` checked for the pixel-shuffle upsampler: a power of two (x2 stages) or 3."""
    scale = int_arg(model, "scale", scale)
    if not (scale == 3 or (scale >= 2 and scale & (scale - 1) == 0)):
        raise ValueError(f"{model}: scale x{scale} is not supported by the pixel-shuffle upsampler "
                         f"(supported: x2, x3, x4 and other powers of two)")
    return scale


class PixelShuffleUpsampler(nn.Sequential):
    """BasicSR's `Upsample` on (N, num_feat, H, W): one (conv 4F, shuffle 2) stage per factor 2 for
    scale = 2^n, one (conv 9F, shuffle 3) stage for scale 3 (keys `0.weight`, `2.weight`, ...)."""

    def __init__(self, scale: int, num_feat: int, model: str = "PixelShuffleUpsampler"):
        scale = upsampler_scale(model, scale)
        layers = []
        if scale == 3:
            layers += [nn.Conv2d(num_feat, 9 * num_feat, 3, padding=1), nn.PixelShuffle(3)]
        else:
            for _ in range(scale.bit_length() - 1):
                layers += [nn.Conv2d(num_feat, 4 * num_feat, 3, padding=1), nn.PixelShuffle(2)]
        super().__init__(*layers)


class ResidualBlockNoBN(nn.Module):
    """x + res_scale * extra(conv2(relu(conv1(x)))), 3x3 convs keeping (N, num_feat, H, W).
    `extra` is an optional custom layer (EDSR's `block:`); without it there is no such attribute, so
    the state_dict keys stay BasicSR's (conv1.*, conv2.*)."""

    def __init__(self, num_feat: int = 64, res_scale: float = 1.0, extra=None):
        super().__init__()
        self.res_scale = res_scale
        self.conv1 = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv2 = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.relu = nn.ReLU()
        if extra is not None:
            self.extra = extra

    def forward(self, x):
        out = self.conv2(self.relu(self.conv1(x)))
        if "extra" in self._modules:
            out = self.extra(out)
        if self.res_scale != 1:  # x * 1.0 is exact: skip the multiply in the common case
            out = out * self.res_scale
        return x + out
