"""PyTorch twin of SAFMN: spandrel 0.4.2's safmn.py (sunny2109/SAFMN), with the original's module
structure, keys and forward, and spandrel's call-API size requirement (a multiple of 8) around it,
as srgrad's model applies it inside its forward. srgrad's `scale` is the original's
upscaling_factor."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import register
from ._spandrel import sized


class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-6, data_format="channels_first"):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps
        self.data_format = data_format
        self.normalized_shape = (normalized_shape,)

    def forward(self, x):
        if self.data_format == "channels_last":
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class CCM(nn.Module):
    def __init__(self, dim, growth_rate=2.0):
        super().__init__()
        hidden_dim = int(dim * growth_rate)
        self.ccm = nn.Sequential(nn.Conv2d(dim, hidden_dim, 3, 1, 1), nn.GELU(),
                                 nn.Conv2d(hidden_dim, dim, 1, 1, 0))

    def forward(self, x):
        return self.ccm(x)


class SAFM(nn.Module):
    def __init__(self, dim, n_levels=4):
        super().__init__()
        self.n_levels = n_levels
        chunk_dim = dim // n_levels
        self.mfr = nn.ModuleList([nn.Conv2d(chunk_dim, chunk_dim, 3, 1, 1, groups=chunk_dim)
                                  for _ in range(self.n_levels)])
        self.aggr = nn.Conv2d(dim, dim, 1, 1, 0)
        self.act = nn.GELU()

    def forward(self, x):
        h, w = x.size()[-2:]
        xc = x.chunk(self.n_levels, dim=1)
        out = []
        for i in range(self.n_levels):
            if i > 0:
                p_size = (h // 2**i, w // 2**i)
                s = F.adaptive_max_pool2d(xc[i], p_size)
                s = self.mfr[i](s)
                s = F.interpolate(s, size=(h, w), mode="nearest")
            else:
                s = self.mfr[i](xc[i])
            out.append(s)
        out = self.aggr(torch.cat(out, dim=1))
        return self.act(out) * x


class AttBlock(nn.Module):
    def __init__(self, dim, ffn_scale=2.0):
        super().__init__()
        self.norm1 = LayerNorm(dim)
        self.norm2 = LayerNorm(dim)
        self.safm = SAFM(dim)
        self.ccm = CCM(dim, ffn_scale)

    def forward(self, x):
        x = self.safm(self.norm1(x)) + x
        return self.ccm(self.norm2(x)) + x


class SAFMNNet(nn.Module):
    def __init__(self, *, dim, n_blocks=8, ffn_scale=2.0, upscaling_factor=4):
        super().__init__()
        self.to_feat = nn.Conv2d(3, dim, 3, 1, 1)
        self.feats = nn.Sequential(*[AttBlock(dim, ffn_scale) for _ in range(n_blocks)])
        self.to_img = nn.Sequential(nn.Conv2d(dim, 3 * upscaling_factor**2, 3, 1, 1),
                                    nn.PixelShuffle(upscaling_factor))

    def forward(self, x):
        x = self.to_feat(x)
        x = self.feats(x) + x
        return self.to_img(x)


@register
def SAFMN(dim, n_blocks=8, ffn_scale=2.0, scale=4):
    return sized(SAFMNNet, 0, 8, scale)(dim=dim, n_blocks=n_blocks, ffn_scale=ffn_scale,
                                        upscaling_factor=scale)
