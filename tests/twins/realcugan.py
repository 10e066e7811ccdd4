"""PyTorch twin of Real-CUGAN: spandrel 0.4.2's upcunet_v3.py (bilibili's UpCunet2x, UpCunet3x,
UpCunet4x, UpCunet2x_fast; no tiling), with the original's module structure, keys and forward.
`RealCUGAN(...)` builds the class spandrel picks from (scale, fast), with spandrel's call-API size
requirement around its forward (pad bottom/right to 32 pixels, 40 and a multiple of 4 for fast,
crop back), as srgrad's model does inside its own forward."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from . import register
from ._spandrel import sized


class SEBlock(nn.Module):
    def __init__(self, in_channels, reduction=8, bias=False):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, in_channels // reduction, 1, 1, 0, bias=bias)
        self.conv2 = nn.Conv2d(in_channels // reduction, in_channels, 1, 1, 0, bias=bias)

    def forward(self, x):
        x0 = torch.mean(x, dim=(2, 3), keepdim=True)
        x0 = torch.sigmoid(self.conv2(F.relu(self.conv1(x0))))
        return torch.mul(x, x0)


class UNetConv(nn.Module):
    def __init__(self, in_channels, mid_channels, out_channels, se):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, 3, 1, 0), nn.LeakyReLU(0.1, inplace=True),
            nn.Conv2d(mid_channels, out_channels, 3, 1, 0), nn.LeakyReLU(0.1, inplace=True))
        self.seblock = SEBlock(out_channels, reduction=8, bias=True) if se else None

    def forward(self, x):
        z = self.conv(x)
        return z if self.seblock is None else self.seblock(z)


def _init(module):
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")


class UNet1(nn.Module):
    def __init__(self, in_channels, out_channels, deconv, x3=False):
        super().__init__()
        self.conv1 = UNetConv(in_channels, 32, 64, se=False)
        self.conv1_down = nn.Conv2d(64, 64, 2, 2, 0)
        self.conv2 = UNetConv(64, 128, 64, se=True)
        self.conv2_up = nn.ConvTranspose2d(64, 64, 2, 2, 0)
        self.conv3 = nn.Conv2d(64, 64, 3, 1, 0)
        if deconv:
            self.conv_bottom = (nn.ConvTranspose2d(64, out_channels, 5, 3, 2) if x3
                                else nn.ConvTranspose2d(64, out_channels, 4, 2, 3))
        else:
            self.conv_bottom = nn.Conv2d(64, out_channels, 3, 1, 0)
        _init(self)

    def forward(self, x):
        x1 = self.conv1(x)
        x2 = self.conv1_down(x1)
        x1 = F.pad(x1, (-4, -4, -4, -4))
        x2 = F.leaky_relu(x2, 0.1, inplace=True)
        x2 = self.conv2(x2)
        x2 = self.conv2_up(x2)
        x2 = F.leaky_relu(x2, 0.1, inplace=True)
        x3 = self.conv3(x1 + x2)
        x3 = F.leaky_relu(x3, 0.1, inplace=True)
        return self.conv_bottom(x3)


class UNet2(nn.Module):
    def __init__(self, in_channels, out_channels, deconv):
        super().__init__()
        self.conv1 = UNetConv(in_channels, 32, 64, se=False)
        self.conv1_down = nn.Conv2d(64, 64, 2, 2, 0)
        self.conv2 = UNetConv(64, 64, 128, se=True)
        self.conv2_down = nn.Conv2d(128, 128, 2, 2, 0)
        self.conv3 = UNetConv(128, 256, 128, se=True)
        self.conv3_up = nn.ConvTranspose2d(128, 128, 2, 2, 0)
        self.conv4 = UNetConv(128, 64, 64, se=True)
        self.conv4_up = nn.ConvTranspose2d(64, 64, 2, 2, 0)
        self.conv5 = nn.Conv2d(64, 64, 3, 1, 0)
        if deconv:
            self.conv_bottom = nn.ConvTranspose2d(64, out_channels, 4, 2, 3)
        else:
            self.conv_bottom = nn.Conv2d(64, out_channels, 3, 1, 0)
        _init(self)

    def forward(self, x, alpha: float = 1):
        x1 = self.conv1(x)
        x2 = self.conv1_down(x1)
        x1 = F.pad(x1, (-16, -16, -16, -16))
        x2 = F.leaky_relu(x2, 0.1, inplace=True)
        x2 = self.conv2(x2)
        x3 = self.conv2_down(x2)
        x2 = F.pad(x2, (-4, -4, -4, -4))
        x3 = F.leaky_relu(x3, 0.1, inplace=True)
        x3 = self.conv3(x3)
        x3 = self.conv3_up(x3)
        x3 = F.leaky_relu(x3, 0.1, inplace=True)
        x4 = self.conv4(x2 + x3)
        x4 = x4 * alpha
        x4 = self.conv4_up(x4)
        x4 = F.leaky_relu(x4, 0.1, inplace=True)
        x5 = self.conv5(x1 + x4)
        x5 = F.leaky_relu(x5, 0.1, inplace=True)
        return self.conv_bottom(x5)


class _Pro(nn.Module):
    def __init__(self, pro):
        super().__init__()
        if pro:
            self.register_buffer("pro", torch.zeros(1))
        else:
            self.pro = None

    @property
    def is_pro(self):
        return self.pro is not None


class UpCunet2x(_Pro):
    def __init__(self, *, in_channels=3, out_channels=3, pro=False, x3=False):
        super().__init__(pro)
        self.x3 = x3
        self.unet1 = UNet1(in_channels, out_channels, deconv=True, x3=x3)
        self.unet2 = UNet2(in_channels, out_channels, deconv=False)

    def forward(self, x, alpha: float = 1):
        _, _, h0, w0 = x.shape
        if self.is_pro:
            x = x * 0.7 + 0.15
        m, b, s = (4, 14, 3) if self.x3 else (2, 18, 2)
        ph = ((h0 - 1) // m + 1) * m
        pw = ((w0 - 1) // m + 1) * m
        x = F.pad(x, (b, b + pw - w0, b, b + ph - h0), "reflect")
        x = self.unet1.forward(x)
        x0 = self.unet2.forward(x, alpha)
        x = F.pad(x, (-20, -20, -20, -20))
        x = torch.add(x0, x)
        if w0 != pw or h0 != ph:
            x = x[:, :, : h0 * s, : w0 * s]
        if self.is_pro:
            x = (x - 0.15) / 0.7
        return x


class UpCunet4x(_Pro):
    def __init__(self, *, in_channels=3, out_channels=3, pro=False):
        super().__init__(pro)
        self.unet1 = UNet1(in_channels, 64, deconv=True)
        self.unet2 = UNet2(64, 64, deconv=False)
        self.ps = nn.PixelShuffle(2)
        self.conv_final = nn.Conv2d(64, 4 * out_channels, 3, 1, padding=0, bias=True)

    def forward(self, x, alpha: float = 1):
        _, _, h0, w0 = x.shape
        if self.is_pro:
            x = x * 0.7 + 0.15
        x00 = x
        ph = ((h0 - 1) // 2 + 1) * 2
        pw = ((w0 - 1) // 2 + 1) * 2
        x = F.pad(x, (19, 19 + pw - w0, 19, 19 + ph - h0), "reflect")
        x = self.unet1.forward(x)
        x0 = self.unet2.forward(x, alpha)
        x1 = F.pad(x, (-20, -20, -20, -20))
        x = torch.add(x0, x1)
        x = self.conv_final(x)
        x = F.pad(x, (-1, -1, -1, -1))
        x = self.ps(x)
        if w0 != pw or h0 != ph:
            x = x[:, :, : h0 * 4, : w0 * 4]
        x += F.interpolate(x00, scale_factor=4, mode="nearest")
        if self.is_pro:
            x = (x - 0.15) / 0.7
        return x


class UpCunet2x_fast(nn.Module):
    def __init__(self, *, in_channels=3, out_channels=3):
        super().__init__()
        self.unet1 = UNet1(4 * in_channels, 64, deconv=True)
        self.unet2 = UNet2(64, 64, deconv=False)
        self.ps = nn.PixelShuffle(2)
        self.conv_final = nn.Conv2d(64, 4 * out_channels, 3, 1, padding=0, bias=True)
        self.inv = nn.PixelUnshuffle(2)

    def forward(self, x, alpha: float = 1):  # alpha: the wrapper's signature; unused, as the original
        _, _, h0, w0 = x.shape
        x00 = x
        ph = ((h0 - 1) // 2 + 1) * 2
        pw = ((w0 - 1) // 2 + 1) * 2
        x = F.pad(x, (38, 38 + pw - w0, 38, 38 + ph - h0), "reflect")
        x = self.inv(x)
        x = self.unet1.forward(x)
        x0 = self.unet2.forward(x)
        x1 = F.pad(x, (-20, -20, -20, -20))
        x = torch.add(x0, x1)
        x = self.conv_final(x)
        x = F.pad(x, (-1, -1, -1, -1))
        x = self.ps(x)
        if w0 != pw or h0 != ph:
            x = x[:, :, : h0 * 2, : w0 * 2]
        x += F.interpolate(x00, scale_factor=2, mode="nearest")
        return x


@register
def RealCUGAN(in_channels=3, out_channels=3, scale=2, pro=False, fast=False):
    """The network spandrel builds for these hyperparameters (its keys are the original's)."""
    if fast:
        return sized(UpCunet2x_fast, 40, 4, 2)(in_channels=in_channels, out_channels=out_channels)
    if scale == 4:
        return sized(UpCunet4x, 32, 1, 4)(in_channels=in_channels, out_channels=out_channels, pro=pro)
    return sized(UpCunet2x, 32, 1, scale)(in_channels=in_channels, out_channels=out_channels, pro=pro,
                                          x3=scale == 3)
