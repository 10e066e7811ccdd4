"""PyTorch twin of RCAN (BasicSR rcan_arch.py; `scale` for `upscale`). The mean is a plain
attribute (no state_dict key), as BasicSR's; on 1 channel it is averaged, as srgrad's."""
from __future__ import annotations

from torch import nn

from . import register
from ._basicsr import make_layer
from .classic import Upsample, _channel_mean
from .rrdbnet import pad_to_multiple


class ChannelAttention(nn.Module):
    def __init__(self, num_feat, squeeze_factor=16):
        super().__init__()
        self.attention = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Conv2d(num_feat, num_feat // squeeze_factor, 1, padding=0),
            nn.ReLU(inplace=True), nn.Conv2d(num_feat // squeeze_factor, num_feat, 1, padding=0),
            nn.Sigmoid())

    def forward(self, x):
        return x * self.attention(x)


class RCAB(nn.Module):
    def __init__(self, num_feat, squeeze_factor=16, res_scale=1):
        super().__init__()
        self.res_scale = res_scale
        self.rcab = nn.Sequential(
            nn.Conv2d(num_feat, num_feat, 3, 1, 1), nn.ReLU(True),
            nn.Conv2d(num_feat, num_feat, 3, 1, 1), ChannelAttention(num_feat, squeeze_factor))

    def forward(self, x):
        return self.rcab(x) * self.res_scale + x


class ResidualGroup(nn.Module):
    def __init__(self, num_feat, num_block, squeeze_factor=16, res_scale=1):
        super().__init__()
        self.residual_group = make_layer(RCAB, num_block, num_feat=num_feat,
                                         squeeze_factor=squeeze_factor, res_scale=res_scale)
        self.conv = nn.Conv2d(num_feat, num_feat, 3, 1, 1)

    def forward(self, x):
        return self.conv(self.residual_group(x)) + x


@register
class RCAN(nn.Module):
    """BasicSR's RCAN with traiNNer-redux's unshuffle_mod (x1/x2: pad, shift, unshuffle by
    4 // scale, upsample x4, crop)."""

    def __init__(self, num_in_ch=3, num_out_ch=3, num_feat=64, num_group=10, num_block=16,
                 squeeze_factor=16, scale=4, res_scale=1, img_range=255.0,
                 rgb_mean=(0.4488, 0.4371, 0.4040), unshuffle_mod=False):
        super().__init__()
        self.img_range, self.scale = img_range, scale
        self.unshuffle = 4 // scale if unshuffle_mod else 1
        self.mean_in = _channel_mean(rgb_mean, num_in_ch)
        self.mean_out = _channel_mean(rgb_mean, num_out_ch)
        self.conv_first = nn.Conv2d(num_in_ch * self.unshuffle ** 2, num_feat, 3, 1, 1)
        self.body = make_layer(ResidualGroup, num_group, num_feat=num_feat, num_block=num_block,
                               squeeze_factor=squeeze_factor, res_scale=res_scale)
        self.conv_after_body = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.upsample = Upsample(scale * self.unshuffle, num_feat)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, 1, 1)

    def forward(self, x):
        h, w = x.shape[-2:]
        if self.unshuffle > 1:
            x = pad_to_multiple(x, self.unshuffle)
        x = (x - self.mean_in.type_as(x)) * self.img_range
        if self.unshuffle > 1:
            x = nn.functional.pixel_unshuffle(x, self.unshuffle)
        x = self.conv_first(x)
        res = self.conv_after_body(self.body(x))
        res += x
        x = self.conv_last(self.upsample(res))
        x = x / self.img_range + self.mean_out.type_as(x)
        return x[..., :h * self.scale, :w * self.scale]
