"""PyTorch twin of MSRResNet (BasicSR srresnet_arch.py; `scale` for `upscale`), BasicSR's init."""
from __future__ import annotations

from torch import nn
from torch.nn import functional as F

from . import register
from ._basicsr import default_init_weights, make_layer


class ResidualBlockNoBN(nn.Module):
    """arch_util's block with pytorch_init=False: kaiming normal x 0.1."""

    def __init__(self, num_feat=64):
        super().__init__()
        self.conv1 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv2 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.relu = nn.ReLU(inplace=True)
        default_init_weights([self.conv1, self.conv2], 0.1)

    def forward(self, x):
        return x + self.conv2(self.relu(self.conv1(x)))


@register
class MSRResNet(nn.Module):
    def __init__(self, num_in_ch=3, num_out_ch=3, num_feat=64, num_block=16, scale=4):
        super().__init__()
        self.scale = scale
        self.conv_first = nn.Conv2d(num_in_ch, num_feat, 3, 1, 1)
        self.body = make_layer(ResidualBlockNoBN, num_block, num_feat=num_feat)
        if scale in (2, 3):
            self.upconv1 = nn.Conv2d(num_feat, num_feat * scale * scale, 3, 1, 1)
            self.pixel_shuffle = nn.PixelShuffle(scale)
        else:
            self.upconv1 = nn.Conv2d(num_feat, num_feat * 4, 3, 1, 1)
            self.upconv2 = nn.Conv2d(num_feat, num_feat * 4, 3, 1, 1)
            self.pixel_shuffle = nn.PixelShuffle(2)
        self.conv_hr = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, 1, 1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        default_init_weights([self.conv_first, self.upconv1, self.conv_hr, self.conv_last], 0.1)
        if scale == 4:
            default_init_weights(self.upconv2, 0.1)

    def forward(self, x):
        out = self.body(self.lrelu(self.conv_first(x)))
        out = self.lrelu(self.pixel_shuffle(self.upconv1(out)))
        if self.scale == 4:
            out = self.lrelu(self.pixel_shuffle(self.upconv2(out)))
        out = self.conv_last(self.lrelu(self.conv_hr(out)))
        out += F.interpolate(x, scale_factor=self.scale, mode="bilinear", align_corners=False)
        return out
