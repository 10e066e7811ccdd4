"""PyTorch twin of MoSR, written from spandrel 0.4.2's spandrel/architectures/MoSR/__arch/mosr_arch.py
(umzi2/MoSR's neosr mosr_arch.py): the same modules, keys, init and forward (`scale` for `upscale`;
traiNNer-redux's long upsampler names accepted as srgrad's model does). DySample is the RealPLKSR
twin's (spandrel's shared __arch_helpers/dysample.py)."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.init import trunc_normal_

from . import register
from .plksr import DySample, LayerNorm  # spandrel's channel LayerNorm (eps 1e-6), as MoSR's
from .swinir import DropPath

_ALIASES = {"pixelshuffle": "ps", "geoensemblepixelshuffle": "gps", "dysample": "dys"}


class GPS(nn.Module):
    def __init__(self, dim, scale, out_ch=3, kernel_size=3):
        super().__init__()
        self.in_to_k = nn.Conv2d(dim, scale * scale * out_ch * 8, kernel_size, 1, kernel_size // 2)
        self.ps = nn.PixelShuffle(scale)

    def forward(self, x):
        x = self.in_to_k(x)
        x = x.reshape(x.shape[0], 8, -1, x.shape[-2], x.shape[-1]).mean(dim=1)
        return self.ps(x)


class ConvBlock(nn.Module):
    def __init__(self, in_channel, out_channel, strides=1):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(in_channel, out_channel, 3, strides, 1), nn.Mish(),
                                   nn.Conv2d(out_channel, out_channel, 3, strides, 1), nn.Mish())
        self.conv11 = nn.Conv2d(in_channel, out_channel, 1, strides, 0)

    def forward(self, x):
        return self.block(x) + self.conv11(x)


class GatedCNNBlock(nn.Module):
    def __init__(self, dim, expansion_ratio=8 / 3, conv_ratio=1.0, kernel_size=7, drop_path=0.5):
        super().__init__()
        self.norm = LayerNorm(dim)
        hidden = int(expansion_ratio * dim)
        self.fc1 = nn.Conv2d(dim, hidden * 2, 3, 1, 1)
        self.act = nn.Mish()
        conv_channels = int(conv_ratio * dim)
        self.split_indices = [hidden, hidden - conv_channels, conv_channels]
        self.conv = nn.Conv2d(conv_channels, conv_channels, kernel_size, 1, kernel_size // 2,
                              groups=conv_channels)
        self.fc2 = nn.Conv2d(hidden, dim, 3, 1, 1)
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 or not self.training else nn.Identity()
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        shortcut = x
        g, i, c = torch.split(self.fc1(self.norm(x)), self.split_indices, dim=1)
        x = self.act(self.fc2(self.act(g) * torch.cat((i, self.conv(c)), dim=1)))
        return self.drop_path(x) + (shortcut - 0.5)


@register
class MoSR(nn.Module):
    def __init__(self, in_ch=3, out_ch=3, scale=4, n_block=24, dim=64, upsampler="ps",
                 drop_path=0.0, kernel_size=7, expansion_ratio=1.5, conv_ratio=1.0):
        super().__init__()
        upsampler = _ALIASES.get(upsampler, upsampler)
        if upsampler in ["ps", "gps"]:
            out_ch = in_ch
        dp_rates = [x.item() for x in torch.linspace(0, drop_path, n_block)]
        self.gblocks = nn.Sequential(
            *[nn.Conv2d(in_ch, dim, 3, 1, 1)]
            + [GatedCNNBlock(dim=dim, expansion_ratio=expansion_ratio, kernel_size=kernel_size,
                             conv_ratio=conv_ratio, drop_path=dp_rates[index]) for index in range(n_block)]
            + [nn.Conv2d(dim, dim * 2, 3, 1, 1), nn.Mish(), nn.Conv2d(dim * 2, dim, 3, 1, 1), nn.Mish(),
               nn.Conv2d(dim, dim, 1, 1)])
        self.shortcut = ConvBlock(in_ch, dim)
        if upsampler == "ps":
            self.upsampler = nn.Sequential(nn.Conv2d(dim, out_ch * (scale ** 2), 3, 1, 1),
                                           nn.PixelShuffle(scale))
        elif upsampler == "gps":
            self.upsampler = GPS(dim, scale, out_ch)
        else:
            self.upsampler = DySample(dim, out_ch, scale)

    def forward(self, x):
        x = self.gblocks(x) + (self.shortcut(x) - 0.5)
        return self.upsampler(x)
