"""PyTorch twin of ZSSRNet (assafshocher/ZSSR's TensorFlow network, as a torch module with srgrad's
keys): MATLAB's bicubic upscaling written out from imresize.m's formula as two matrices, then 8
bias-free 3x3 convolutions with ReLUs between them, plus the upscaled input."""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from . import register


def matlab_upscale_matrix(n: int, scale: int) -> np.ndarray:
    """(n * scale, n) float64: imresize.m's cubic (a = -0.5) weights for an upscale by `scale`
    (u = x / scale + 0.5 (1 - 1 / scale) in 1-based pixels, 6 taps from floor(u - 2), mirrored
    borders), each row normalised."""
    def cubic(x):
        a = np.abs(x)
        return ((1.5 * a ** 3 - 2.5 * a ** 2 + 1) * (a <= 1)
                + (-0.5 * a ** 3 + 2.5 * a ** 2 - 4 * a + 2) * ((1 < a) & (a <= 2)))
    m = n * scale
    out = np.zeros((m, n))
    for x in range(1, m + 1):
        u = x / scale + 0.5 * (1 - 1 / scale)
        left = math.floor(u - 2)
        taps = [left + j for j in range(6)]
        w = cubic(u - np.array(taps, dtype=np.float64))
        for t, wt in zip(taps, w / w.sum()):
            i = t - 1  # 0-based, then MATLAB's symmetric padding
            i = -i - 1 if i < 0 else (2 * n - 1 - i if i >= n else i)
            out[x - 1, i] += wt
    return out


@register
class ZSSRNet(nn.Module):
    def __init__(self, scale, num_in_ch=3, num_out_ch=3, num_feat=64, num_layers=8,
                 init_variance=0.1):
        super().__init__()
        self.scale = scale
        chans = [num_in_ch] + [num_feat] * (num_layers - 1) + [num_out_ch]
        layers = []
        for i in range(num_layers):
            layers.append(nn.Conv2d(chans[i], chans[i + 1], 3, padding=1, bias=False))
            if i < num_layers - 1:
                layers.append(nn.ReLU())
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        h, w = x.shape[-2:]
        mh = torch.from_numpy(matlab_upscale_matrix(h, self.scale)).to(x.dtype)
        mw = torch.from_numpy(matlab_upscale_matrix(w, self.scale)).to(x.dtype)
        u = mh @ x @ mw.T
        return u + self.body(u)
