"""PyTorch twin of DRUNet: spandrel 0.4.2's network_unet.py (KAIR's models/network_unet.py UNetRes)
and the parts of its dpir_basic_block.py (KAIR's models/basicblock.py) that build it, with the
original's module structure (KAIR's `sequential`, which unwraps a single module), keys and forward;
around it spandrel's descriptor call: the input padded to a multiple of 8 (its size requirement),
then the noise map (noise_level / 255 everywhere, at the padded size) appended as the last channel
(spandrel makes it for a batch of 1: here for the batch); an input of in_nc channels keeps its own."""
from __future__ import annotations

from collections import OrderedDict

import torch
import torch.nn as nn

from . import register
from ._spandrel import sized


def sequential(*args):
    if len(args) == 1:
        if isinstance(args[0], OrderedDict):
            raise NotImplementedError("sequential does not support OrderedDict input.")
        return args[0]
    modules = []
    for module in args:
        if isinstance(module, nn.Sequential):
            for submodule in module.children():
                modules.append(submodule)
        elif isinstance(module, nn.Module):
            modules.append(module)
    return nn.Sequential(*modules)


def conv(in_channels=64, out_channels=64, kernel_size=3, stride=1, padding=1, bias=True, mode="CBR",
         negative_slope=0.2):
    L = []  # noqa: N806
    for t in mode:
        if t == "C":
            L.append(nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, bias=bias))
        elif t == "T":
            L.append(nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding,
                                        bias=bias))
        elif t == "B":  # DnCNN's (tests/twins/dncnn.py)
            L.append(nn.BatchNorm2d(out_channels, momentum=0.9, eps=1e-04, affine=True))
        elif t == "R":
            L.append(nn.ReLU(inplace=True))
        elif t == "L":
            L.append(nn.LeakyReLU(negative_slope=negative_slope, inplace=True))
        elif t == "2":
            L.append(nn.PixelShuffle(upscale_factor=2))
        elif t == "U":
            L.append(nn.Upsample(scale_factor=2, mode="nearest"))
        elif t == "A":
            L.append(nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=0))
        else:
            raise NotImplementedError(t)
    return sequential(*L)


class ResBlock(nn.Module):
    def __init__(self, in_channels=64, out_channels=64, kernel_size=3, stride=1, padding=1, bias=True,
                 mode="CRC", negative_slope=0.2):
        super().__init__()
        assert in_channels == out_channels
        if mode[0] in ["R", "L"]:
            mode = mode[0].lower() + mode[1:]
        self.res = conv(in_channels, out_channels, kernel_size, stride, padding, bias, mode,
                        negative_slope)

    def forward(self, x):
        return x + self.res(x)


def upsample_pixelshuffle(in_channels=64, out_channels=3, kernel_size=3, stride=1, padding=1,
                          bias=True, mode="2R", negative_slope=0.2):
    return conv(in_channels, out_channels * (int(mode[0]) ** 2), kernel_size, stride, padding, bias,
                mode="C" + mode, negative_slope=negative_slope)


def upsample_upconv(in_channels=64, out_channels=3, kernel_size=3, stride=1, padding=1, bias=True,
                    mode="2R", negative_slope=0.2):
    mode = mode.replace(mode[0], "UC")
    return conv(in_channels, out_channels, kernel_size, stride, padding, bias, mode=mode,
                negative_slope=negative_slope)


def upsample_convtranspose(in_channels=64, out_channels=3, kernel_size=2, stride=2, padding=0,
                           bias=True, mode="2R", negative_slope=0.2):
    kernel_size = stride = int(mode[0])
    mode = mode.replace(mode[0], "T")
    return conv(in_channels, out_channels, kernel_size, stride, padding, bias, mode, negative_slope)


def downsample_strideconv(in_channels=64, out_channels=64, kernel_size=2, stride=2, padding=0,
                          bias=True, mode="2R", negative_slope=0.2):
    kernel_size = stride = int(mode[0])
    mode = mode.replace(mode[0], "C")
    return conv(in_channels, out_channels, kernel_size, stride, padding, bias, mode, negative_slope)


def downsample_avgpool(in_channels=64, out_channels=64, kernel_size=3, stride=1, padding=1,
                       bias=True, mode="2R", negative_slope=0.2):
    kernel_size_pool = stride_pool = int(mode[0])
    mode = mode.replace(mode[0], "AC")
    pool = conv(kernel_size=kernel_size_pool, stride=stride_pool, mode=mode[0],
                negative_slope=negative_slope)
    pool_tail = conv(in_channels, out_channels, kernel_size, stride, padding, bias, mode=mode[1:],
                     negative_slope=negative_slope)
    return sequential(pool, pool_tail)


class UNetRes(nn.Module):
    def __init__(self, *, in_nc=1, out_nc=1, nc=(64, 128, 256, 512), nb=4, act_mode="R",
                 downsample_mode="strideconv", upsample_mode="convtranspose"):
        super().__init__()
        self.m_head = conv(in_nc, nc[0], bias=False, mode="C")
        downsample_block = {"avgpool": downsample_avgpool,
                            "strideconv": downsample_strideconv}[downsample_mode]
        self.m_down1 = sequential(*[ResBlock(nc[0], nc[0], bias=False, mode="C" + act_mode + "C")
                                    for _ in range(nb)],
                                  downsample_block(nc[0], nc[1], bias=False, mode="2"))
        self.m_down2 = sequential(*[ResBlock(nc[1], nc[1], bias=False, mode="C" + act_mode + "C")
                                    for _ in range(nb)],
                                  downsample_block(nc[1], nc[2], bias=False, mode="2"))
        self.m_down3 = sequential(*[ResBlock(nc[2], nc[2], bias=False, mode="C" + act_mode + "C")
                                    for _ in range(nb)],
                                  downsample_block(nc[2], nc[3], bias=False, mode="2"))
        self.m_body = sequential(*[ResBlock(nc[3], nc[3], bias=False, mode="C" + act_mode + "C")
                                   for _ in range(nb)])
        upsample_block = {"upconv": upsample_upconv, "pixelshuffle": upsample_pixelshuffle,
                          "convtranspose": upsample_convtranspose}[upsample_mode]
        self.m_up3 = sequential(upsample_block(nc[3], nc[2], bias=False, mode="2"),
                                *[ResBlock(nc[2], nc[2], bias=False, mode="C" + act_mode + "C")
                                  for _ in range(nb)])
        self.m_up2 = sequential(upsample_block(nc[2], nc[1], bias=False, mode="2"),
                                *[ResBlock(nc[1], nc[1], bias=False, mode="C" + act_mode + "C")
                                  for _ in range(nb)])
        self.m_up1 = sequential(upsample_block(nc[1], nc[0], bias=False, mode="2"),
                                *[ResBlock(nc[0], nc[0], bias=False, mode="C" + act_mode + "C")
                                  for _ in range(nb)])
        self.m_tail = conv(nc[0], out_nc, bias=False, mode="C")

    def forward(self, x0):
        x1 = self.m_head(x0)
        x2 = self.m_down1(x1)
        x3 = self.m_down2(x2)
        x4 = self.m_down3(x3)
        x = self.m_body(x4)
        x = self.m_up3(x + x4)
        x = self.m_up2(x + x3)
        x = self.m_up1(x + x2)
        return self.m_tail(x + x1)


class NoiseMapCall(UNetRes):
    """spandrel's call_fn: the map appended to the (padded) image."""

    noise_level = 15.0

    def forward(self, image):
        if image.shape[1] == self.m_head.weight.shape[1]:
            return super().forward(image)
        n, _, h, w = image.shape
        noise_map = torch.zeros(n, 1, h, w).to(image) + self.noise_level / 255
        return super().forward(torch.cat([image, noise_map], dim=1))


@register
def DRUNet(in_nc=4, out_nc=3, nc=(64, 128, 256, 512), nb=4, act_mode="R",
           downsample_mode="strideconv", upsample_mode="convtranspose", noise_level=15.0, scale=1):
    assert scale == 1
    model = sized(NoiseMapCall, 0, 8, 1)(in_nc=in_nc, out_nc=out_nc, nc=list(nc), nb=nb,
                                         act_mode=act_mode, downsample_mode=downsample_mode,
                                         upsample_mode=upsample_mode)
    model.noise_level = noise_level
    return model
