"""PyTorch twins of PLKSR and RealPLKSR (dslisleedh/PLKSR's plksr_arch.py, neosr's and traiNNer-redux's
realplksr_arch.py with DySample, as spandrel 0.4.2 holds them; srgrad's keywords: `scale` for
`upscaling_factor`, traiNNer-redux's `in_ch`, `out_ch`, `upsampler` for RealPLKSR)."""
from __future__ import annotations

from functools import partial

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.init import trunc_normal_

from . import register


def _mixer(dim, a, b, act):
    m = nn.Sequential(nn.Conv2d(dim, dim * 2, a, 1, a // 2), act, nn.Conv2d(dim * 2, dim, b, 1, b // 2))
    trunc_normal_(m[-1].weight, std=0.02)
    return m


class PLKConv2d(nn.Module):
    def __init__(self, dim, kernel_size, with_idt=False):
        super().__init__()
        self.with_idt = with_idt
        self.conv = nn.Conv2d(dim, dim, kernel_size, 1, kernel_size // 2)
        trunc_normal_(self.conv.weight, std=0.02)
        self.idx = dim

    def forward(self, x):
        if self.training:
            x1, x2 = torch.split(x, [self.idx, x.size(1) - self.idx], dim=1)
            x1 = self.conv(x1) + x1 if self.with_idt else self.conv(x1)
            return torch.cat([x1, x2], dim=1)
        if self.with_idt:
            x[:, :self.idx] = x[:, :self.idx] + self.conv(x[:, :self.idx])
        else:
            x[:, :self.idx] = self.conv(x[:, :self.idx])
        return x


class RectSparsePLKConv2d(nn.Module):
    def __init__(self, dim, kernel_size):
        super().__init__()
        self.idx = dim
        m, n = kernel_size, kernel_size // 3
        self.mn_conv = nn.Conv2d(dim, dim, (m, n), 1, (m // 2, n // 2))
        self.nm_conv = nn.Conv2d(dim, dim, (n, m), 1, (n // 2, m // 2))
        self.nn_conv = nn.Conv2d(dim, dim, (n, n), 1, (n // 2, n // 2))
        for c in (self.mn_conv, self.nm_conv, self.nn_conv):
            trunc_normal_(c.weight, std=0.02)

    def forward(self, x):
        if self.training:
            x1, x2 = x[:, :self.idx], x[:, self.idx:]
            x1 = self.mn_conv(x1) + self.nm_conv(x1) + self.nn_conv(x1)
            return torch.cat([x1, x2], dim=1)
        x[:, :self.idx] = self.mn_conv(x[:, :self.idx]) + self.nm_conv(x[:, :self.idx]) + self.nn_conv(
            x[:, :self.idx])
        return x


class SparsePLKConv2d(nn.Module):
    def __init__(self, dim, max_kernel_size, sub_kernel_sizes, dilations, use_max_kernel, with_idt):
        super().__init__()
        self.max_kernel_size = max_kernel_size
        for k, d in zip(sub_kernel_sizes, dilations):
            self.max_kernel_size = max(self.max_kernel_size, (k - 1) * d + 1)
        self.with_idt = with_idt
        convs = [nn.Conv2d(dim, dim, k, 1, (k // 2) * d, dilation=d) for k, d in zip(sub_kernel_sizes, dilations)]
        if use_max_kernel:
            convs.append(nn.Conv2d(dim, dim, self.max_kernel_size, 1, self.max_kernel_size // 2))
        self.convs = nn.ModuleList(convs)
        for m in self.convs:
            trunc_normal_(m.weight, std=0.02)
        self.idx = dim

    def forward(self, x):
        x1, x2 = torch.split(x, [self.idx, x.size(1) - self.idx], dim=1)
        out = x1 if self.with_idt else 0.0
        for conv in self.convs:
            out = out + conv(x1)
        return torch.cat([out, x2], dim=1)


class EA(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(dim, dim, 3, 1, 1), nn.Sigmoid())
        trunc_normal_(self.f[0].weight, std=0.02)

    def forward(self, x):
        return x * self.f(x)


class PLKBlock(nn.Module):
    def __init__(self, dim, ccm_type, max_kernel_size, split_ratio, lk_type, use_max_kernel, sparse_kernels,
                 sparse_dilations, with_idt, use_ea):
        super().__init__()
        kernels = {"CCM": (3, 1), "ICCM": (1, 3), "DCCM": (3, 3)}[ccm_type]
        self.channe_mixer = _mixer(dim, *kernels, nn.GELU())
        pdim = int(dim * split_ratio)
        if lk_type == "PLK":
            self.lk = PLKConv2d(pdim, max_kernel_size, with_idt)
        elif lk_type == "SparsePLK":
            self.lk = SparsePLKConv2d(pdim, max_kernel_size, sparse_kernels, sparse_dilations, use_max_kernel,
                                      with_idt)
        else:
            self.lk = RectSparsePLKConv2d(pdim, max_kernel_size)
        self.attn = EA(dim) if use_ea else nn.Identity()
        self.refine = nn.Conv2d(dim, dim, 1, 1, 0)
        trunc_normal_(self.refine.weight, std=0.02)

    def forward(self, x):
        return self.refine(self.attn(self.lk(self.channe_mixer(x)))) + x


@register
class PLKSR(nn.Module):
    def __init__(self, dim=64, n_blocks=28, scale=4, ccm_type="CCM", kernel_size=17, split_ratio=0.25,
                 lk_type="PLK", use_max_kernel=False, sparse_kernels=(5, 5, 5, 5), sparse_dilations=(1, 2, 3, 4),
                 with_idt=False, use_ea=True):
        super().__init__()
        self.feats = nn.Sequential(*[nn.Conv2d(3, dim, 3, 1, 1)] + [
            PLKBlock(dim, ccm_type, kernel_size, split_ratio, lk_type, use_max_kernel, sparse_kernels,
                     sparse_dilations, with_idt, use_ea) for _ in range(n_blocks)
        ] + [nn.Conv2d(dim, 3 * scale ** 2, 3, 1, 1)])
        trunc_normal_(self.feats[0].weight, std=0.02)
        trunc_normal_(self.feats[-1].weight, std=0.02)
        self.to_img = nn.PixelShuffle(scale)
        self.repeat_op = partial(torch.repeat_interleave, repeats=scale ** 2, dim=1)

    def forward(self, x):
        return self.to_img(self.feats(x) + self.repeat_op(x))


# -- RealPLKSR ------------------------------------------------------------------------------------------
class LayerNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class RealPLKBlock(nn.Module):
    def __init__(self, dim, kernel_size, split_ratio, use_ea=True, norm_groups=4, use_layer_norm=False):
        super().__init__()
        self.layer_norm = LayerNorm(dim) if use_layer_norm else nn.Identity()
        self.channel_mixer = _mixer(dim, 3, 3, nn.Mish())
        self.lk = PLKConv2d(int(dim * split_ratio), kernel_size)
        self.attn = EA(dim) if use_ea else nn.Identity()
        self.refine = nn.Conv2d(dim, dim, 1, 1, 0)
        trunc_normal_(self.refine.weight, std=0.02)
        if not use_layer_norm:
            self.norm = nn.GroupNorm(norm_groups, dim)
            nn.init.constant_(self.norm.bias, 0)
            nn.init.constant_(self.norm.weight, 1.0)
        else:
            self.norm = nn.Identity()

    def forward(self, x):
        x_skip = x
        x = self.layer_norm(x)
        x = self.channel_mixer(x)
        x = self.lk(x)
        x = self.attn(x)
        x = self.refine(x)
        x = self.norm(x)
        return x + x_skip


class DySample(nn.Module):
    def __init__(self, in_channels, out_ch, scale=2, groups=4, end_convolution=True):
        super().__init__()
        assert in_channels >= groups and in_channels % groups == 0
        out_channels = 2 * groups * scale ** 2
        self.scale, self.groups, self.end_convolution = scale, groups, end_convolution
        if end_convolution:
            self.end_conv = nn.Conv2d(in_channels, out_ch, kernel_size=1)
        self.offset = nn.Conv2d(in_channels, out_channels, 1)
        self.scope = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        nn.init.trunc_normal_(self.offset.weight, std=0.02)
        nn.init.constant_(self.scope.weight, val=0)
        self.register_buffer("init_pos", self._init_pos())

    def _init_pos(self):
        h = torch.arange((-self.scale + 1) / 2, (self.scale - 1) / 2 + 1) / self.scale
        return (torch.stack(torch.meshgrid([h, h], indexing="ij")).transpose(1, 2)
                .repeat(1, self.groups, 1).reshape(1, -1, 1, 1))

    def forward(self, x):
        offset = self.offset(x) * self.scope(x).sigmoid() * 0.5 + self.init_pos
        B, _, H, W = offset.shape
        offset = offset.view(B, 2, -1, H, W)
        coords_h = torch.arange(H) + 0.5
        coords_w = torch.arange(W) + 0.5
        coords = (torch.stack(torch.meshgrid([coords_w, coords_h], indexing="ij")).transpose(1, 2)
                  .unsqueeze(1).unsqueeze(0).type(x.dtype))
        normalizer = torch.tensor([W, H], dtype=x.dtype).view(1, 2, 1, 1, 1)
        coords = 2 * (coords + offset) / normalizer - 1
        coords = (F.pixel_shuffle(coords.reshape(B, -1, H, W), self.scale)
                  .view(B, 2, -1, self.scale * H, self.scale * W).permute(0, 2, 3, 4, 1).contiguous().flatten(0, 1))
        output = F.grid_sample(x.reshape(B * self.groups, -1, H, W), coords, mode="bilinear",
                               align_corners=False, padding_mode="border").view(B, -1, self.scale * H, self.scale * W)
        return self.end_conv(output) if self.end_convolution else output


@register
class RealPLKSR(nn.Module):
    def __init__(self, in_ch=3, out_ch=3, dim=64, n_blocks=28, scale=4, kernel_size=17, split_ratio=0.25,
                 use_ea=True, norm_groups=4, dropout=0.0, upsampler="pixelshuffle", layer_norm=False):
        super().__init__()
        self.feats = nn.Sequential(*[nn.Conv2d(in_ch, dim, 3, 1, 1)] + [
            RealPLKBlock(dim, kernel_size, split_ratio, use_ea, norm_groups, layer_norm) for _ in range(n_blocks)
        ] + [nn.Dropout2d(dropout)] + [nn.Conv2d(dim, out_ch * scale ** 2, 3, 1, 1)])
        trunc_normal_(self.feats[0].weight, std=0.02)
        trunc_normal_(self.feats[-1].weight, std=0.02)
        self.repeat_op = partial(torch.repeat_interleave, repeats=scale ** 2, dim=1)
        if upsampler == "dysample":
            groups = out_ch if scale % 2 != 0 else 4
            self.to_img = DySample(in_ch * scale ** 2, out_ch, scale, groups=groups, end_convolution=scale != 1)
        else:
            self.to_img = nn.PixelShuffle(scale)

    def forward(self, x):
        return self.to_img(self.feats(x) + self.repeat_op(x))
