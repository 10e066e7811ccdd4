"""PyTorch twins of the classic models: SRCNN, FSRCNN, ESPCN, VDSR, EDSR, UpsampleNet."""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from . import register


def _bicubic(scale):
    return nn.Upsample(scale_factor=scale, mode="bicubic", align_corners=False)


@register
class SRCNN(nn.Module):
    def __init__(self, scale, num_in_ch=3, num_out_ch=3, num_feat=(64, 32), kernel_size=(9, 5, 5),
                 upsample=True):
        super().__init__()
        (f1, f2), (k1, k2, k3) = num_feat, kernel_size
        self.upsample = _bicubic(scale) if upsample else nn.Identity()
        self.conv1 = nn.Conv2d(num_in_ch, f1, k1, padding=k1 // 2)
        self.conv2 = nn.Conv2d(f1, f2, k2, padding=k2 // 2)
        self.conv3 = nn.Conv2d(f2, num_out_ch, k3, padding=k3 // 2)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.upsample(x)
        return self.conv3(self.relu(self.conv2(self.relu(self.conv1(x)))))


@register
class FSRCNN(nn.Module):
    def __init__(self, scale, num_in_ch=3, num_out_ch=3, d=56, s=12, m=4):
        super().__init__()
        self.first_part = nn.Sequential(nn.Conv2d(num_in_ch, d, 5, padding=2), nn.PReLU(d))
        mid = [nn.Conv2d(d, s, 1), nn.PReLU(s)]
        for _ in range(m):
            mid += [nn.Conv2d(s, s, 3, padding=1), nn.PReLU(s)]
        mid += [nn.Conv2d(s, d, 1), nn.PReLU(d)]
        self.mid_part = nn.Sequential(*mid)
        self.last_part = nn.ConvTranspose2d(d, num_out_ch, 9, stride=scale, padding=4,
                                            output_padding=scale - 1)

    def forward(self, x):
        return self.last_part(self.mid_part(self.first_part(x)))


@register
class ESPCN(nn.Module):
    def __init__(self, scale, num_in_ch=3, num_out_ch=3, num_feat=(64, 32)):
        super().__init__()
        f1, f2 = num_feat
        self.first_part = nn.Sequential(nn.Conv2d(num_in_ch, f1, 5, padding=2), nn.Tanh(),
                                        nn.Conv2d(f1, f2, 3, padding=1), nn.Tanh())
        self.last_part = nn.Sequential(nn.Conv2d(f2, num_out_ch * scale ** 2, 3, padding=1),
                                       nn.PixelShuffle(scale))

    def forward(self, x):
        return self.last_part(self.first_part(x))


@register
class VDSR(nn.Module):
    def __init__(self, scale, num_in_ch=3, num_out_ch=3, num_feat=64, num_layers=20):
        super().__init__()
        self.upsample = _bicubic(scale)
        layers = [nn.Conv2d(num_in_ch, num_feat, 3, padding=1), nn.ReLU()]
        for _ in range(num_layers - 2):
            layers += [nn.Conv2d(num_feat, num_feat, 3, padding=1), nn.ReLU()]
        layers.append(nn.Conv2d(num_feat, num_out_ch, 3, padding=1))
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        x = self.upsample(x)
        return x + self.body(x)


class ResidualBlockNoBN(nn.Module):
    def __init__(self, num_feat=64, res_scale=1.0, extra=None):
        super().__init__()
        self.res_scale = res_scale
        self.conv1 = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv2 = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.relu = nn.ReLU()
        if extra is not None:
            self.extra = extra

    def forward(self, x):
        out = self.conv2(self.relu(self.conv1(x)))
        if hasattr(self, "extra"):
            out = self.extra(out)
        return x + out * self.res_scale


class Upsample(nn.Sequential):
    def __init__(self, scale, num_feat):
        layers = []
        if scale & (scale - 1) == 0:
            for _ in range(int(math.log2(scale))):
                layers += [nn.Conv2d(num_feat, 4 * num_feat, 3, padding=1), nn.PixelShuffle(2)]
        else:
            layers += [nn.Conv2d(num_feat, 9 * num_feat, 3, padding=1), nn.PixelShuffle(3)]
        super().__init__(*layers)


@register
class EDSR(nn.Module):
    """`block`: None, or a callable returning a fresh torch module (srgrad's layer specs have no torch
    meaning)."""

    def __init__(self, scale, num_in_ch=3, num_out_ch=3, num_feat=64, num_block=16, res_scale=1.0,
                 img_range=255.0, rgb_mean=(0.4488, 0.4371, 0.4040), block=None):
        super().__init__()
        self.img_range = img_range
        self.mean_in = _channel_mean(rgb_mean, num_in_ch)
        self.mean_out = _channel_mean(rgb_mean, num_out_ch)
        self.conv_first = nn.Conv2d(num_in_ch, num_feat, 3, padding=1)
        self.body = nn.Sequential(*[ResidualBlockNoBN(num_feat, res_scale, block() if block else None)
                                    for _ in range(num_block)])
        self.conv_after_body = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.upsample = Upsample(scale, num_feat)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, padding=1)

    def forward(self, x):
        x = (x - self.mean_in.to(x.dtype)) * self.img_range
        x = self.conv_first(x)
        res = self.conv_after_body(self.body(x)) + x
        x = self.conv_last(self.upsample(res))
        return x / self.img_range + self.mean_out.to(x.dtype)


def _channel_mean(rgb_mean, channels):
    # As srgrad's EDSR: rounded to float32 first, so both see the same constant.
    mean = np.asarray(rgb_mean, dtype=np.float64)
    if mean.size != channels:
        mean = mean.mean(keepdims=True)
    return torch.from_numpy(mean.astype(np.float32).reshape(1, channels, 1, 1))


@register
class UpsampleNet(nn.Module):
    def __init__(self, scale, num_in_ch=3, num_out_ch=3, num_feat=32, num_conv=2, num_refine=2,
                 mode="bicubic", residual=True):
        super().__init__()
        self.residual = residual
        head = []
        for i in range(num_conv):
            head += [nn.Conv2d(num_in_ch if i == 0 else num_feat, num_feat, 3, padding=1), nn.ReLU()]
        self.head = nn.Sequential(*head)
        align = False if mode in ("bilinear", "bicubic") else None
        self.upsample = nn.Upsample(scale_factor=scale, mode=mode, align_corners=align)
        tail = []
        for _ in range(num_refine - 1):
            tail += [nn.Conv2d(num_feat, num_feat, 3, padding=1), nn.ReLU()]
        tail.append(nn.Conv2d(num_feat, num_out_ch, 3, padding=1))
        self.tail = nn.Sequential(*tail)

    def forward(self, x):
        out = self.tail(self.upsample(self.head(x)))
        if self.residual:
            out = out + self.upsample(x)
        return out
