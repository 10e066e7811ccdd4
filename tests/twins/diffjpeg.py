"""PyTorch twin of BasicSR's DiffJPEG (basicsr/utils/diffjpeg.py, which Real-ESRGAN's models run
with differentiable=False): the same steps with the same torch ops, tables and constants, written
without importing basicsr. One deliberate difference: every step keeps the input's dtype (the
original's quantisers call `.float()`), so a float64 twin is an exact reference.

    jpeg = DiffJPEG(differentiable=True).to(torch.float64)
    out = jpeg(x, quality)      # x (B, 3, H, W) in [0, 1]; quality a number or a (B,) tensor
"""
from __future__ import annotations

import itertools

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

# the standard luminance table, transposed as in DiffJPEG; the chroma table padded with 99
Y_TABLE = np.array([[16, 11, 10, 16, 24, 40, 51, 61], [12, 12, 14, 19, 26, 58, 60, 55],
                    [14, 13, 16, 24, 40, 57, 69, 56], [14, 17, 22, 29, 51, 87, 80, 62],
                    [18, 22, 37, 56, 68, 109, 103, 77], [24, 35, 55, 64, 81, 104, 113, 92],
                    [49, 64, 78, 87, 103, 121, 120, 101], [72, 92, 95, 98, 112, 100, 103, 99]],
                   np.float32).T
C_TABLE = np.full((8, 8), 99, np.float32)
C_TABLE[:4, :4] = np.array([[17, 18, 24, 47], [18, 21, 26, 66], [24, 26, 56, 99],
                            [47, 66, 99, 99]]).T


def diff_round(x):
    """DiffJPEG's differentiable rounding: round(x) + (x - round(x))^3."""
    return torch.round(x) + (x - torch.round(x)) ** 3


def quality_to_factor(quality):
    """5000 / q / 100 below 50, (200 - 2 q) / 100 from 50 on."""
    return (5000. / quality if quality < 50 else 200. - quality * 2) / 100.


def _table(table, factor):
    if isinstance(factor, (int, float)):
        return table * factor
    b = factor.size(0)
    return table.expand(b, 1, 8, 8) * factor.view(b, 1, 1, 1)


class _Compress(nn.Module):
    """RGB -> YCbCr (+128 chroma) -> 2x2 average of Cb, Cr -> 8x8 blocks -> DCT -> quantise."""

    def __init__(self, rounding):
        super().__init__()
        self.rounding = rounding
        self.matrix = nn.Parameter(torch.from_numpy(np.array(
            [[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]],
            np.float32).T))
        self.shift = nn.Parameter(torch.tensor([0., 128., 128.]))
        dct = np.zeros((8, 8, 8, 8), np.float32)
        for x, y, u, v in itertools.product(range(8), repeat=4):
            dct[x, y, u, v] = (np.cos((2 * x + 1) * u * np.pi / 16)
                               * np.cos((2 * y + 1) * v * np.pi / 16))
        alpha = np.array([1. / np.sqrt(2)] + [1] * 7)
        self.dct = nn.Parameter(torch.from_numpy(dct).float())
        self.scale = nn.Parameter(torch.from_numpy(np.outer(alpha, alpha) * 0.25).float())
        self.y_table = nn.Parameter(torch.from_numpy(Y_TABLE))
        self.c_table = nn.Parameter(torch.from_numpy(C_TABLE))

    def forward(self, image, factor):
        image = (image * 255).permute(0, 2, 3, 1)
        ycc = torch.tensordot(image, self.matrix, dims=1) + self.shift
        ycc = ycc.view(image.shape).permute(0, 3, 1, 2).clone()
        planes = {"y": ycc[:, 0]}
        for k, c in (("cb", 1), ("cr", 2)):
            planes[k] = F.avg_pool2d(ycc[:, c].unsqueeze(1), kernel_size=2, stride=(2, 2),
                                     count_include_pad=False).squeeze(1)
        out = []
        for k in ("y", "cb", "cr"):
            plane = planes[k]
            b, h = plane.shape[:2]
            blocks = plane.view(b, h // 8, 8, -1, 8).permute(0, 1, 3, 2, 4).contiguous()
            blocks = blocks.view(b, -1, 8, 8) - 128
            coef = self.scale * torch.tensordot(blocks, self.dct, dims=2)
            table = self.y_table if k == "y" else self.c_table
            out.append(self.rounding(coef / _table(table, factor)))
        return out


class _Decompress(nn.Module):
    """Dequantise -> IDCT -> merge blocks -> repeat Cb, Cr 2x2 -> YCbCr -> RGB, clamp to [0, 1]."""

    def __init__(self):
        super().__init__()
        alpha = np.array([1. / np.sqrt(2)] + [1] * 7)
        self.alpha = nn.Parameter(torch.from_numpy(np.outer(alpha, alpha)).float())
        idct = np.zeros((8, 8, 8, 8), np.float32)
        for x, y, u, v in itertools.product(range(8), repeat=4):
            idct[x, y, u, v] = (np.cos((2 * u + 1) * x * np.pi / 16)
                                * np.cos((2 * v + 1) * y * np.pi / 16))
        self.idct = nn.Parameter(torch.from_numpy(idct).float())
        self.matrix = nn.Parameter(torch.from_numpy(np.array(
            [[1., 0., 1.402], [1, -0.344136, -0.714136], [1, 1.772, 0]], np.float32).T))
        self.shift = nn.Parameter(torch.tensor([0, -128., -128.]))
        self.y_table = nn.Parameter(torch.from_numpy(Y_TABLE))
        self.c_table = nn.Parameter(torch.from_numpy(C_TABLE))

    def forward(self, y, cb, cr, imgh, imgw, factor):
        planes = []
        for k, coef in (("y", y), ("cb", cb), ("cr", cr)):
            table = self.y_table if k == "y" else self.c_table
            h, w = (imgh, imgw) if k == "y" else (int(imgh / 2), int(imgw / 2))
            blocks = coef * _table(table, factor) * self.alpha
            blocks = 0.25 * torch.tensordot(blocks, self.idct, dims=2) + 128
            b = blocks.shape[0]
            plane = blocks.view(b, h // 8, w // 8, 8, 8).permute(0, 1, 3, 2, 4).contiguous()
            planes.append(plane.view(b, h, w))
        y, cb, cr = planes
        up = [c.unsqueeze(-1).repeat(1, 1, 2, 2).view(-1, c.shape[1] * 2, c.shape[2] * 2)
              for c in (cb, cr)]
        ycc = torch.stack([y, *up], dim=3)
        rgb = torch.tensordot(ycc + self.shift, self.matrix, dims=1)
        rgb = rgb.view(ycc.shape).permute(0, 3, 1, 2)
        rgb = torch.min(255 * torch.ones_like(rgb), torch.max(torch.zeros_like(rgb), rgb))
        return rgb / 255


class DiffJPEG(nn.Module):
    """x (B, 3, H, W) in [0, 1], quality a number or a (B,) tensor -> the decoded JPEG, same shape.
    Zero-pads to a multiple of 16 (bottom/right) and crops back, as BasicSR's."""

    def __init__(self, differentiable=True):
        super().__init__()
        rounding = diff_round if differentiable else torch.round
        self.compress = _Compress(rounding)
        self.decompress = _Decompress()

    def forward(self, x, quality):
        if isinstance(quality, (int, float)):
            factor = quality_to_factor(quality)
        else:  # the original writes the factors into `quality` itself; a copy here
            factor = torch.stack([torch.as_tensor(quality_to_factor(q)) for q in quality])
            factor = factor.to(x.dtype)
        h, w = x.shape[-2:]
        x = F.pad(x, (0, -w % 16, 0, -h % 16), mode="constant", value=0)
        y, cb, cr = self.compress(x, factor)
        out = self.decompress(y, cb, cr, x.shape[-2], x.shape[-1], factor)
        return out[:, :, :h, :w]
