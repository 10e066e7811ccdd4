"""PyTorch twin of RGT, written from zhengchen1999/RGT's network as spandrel 0.4.2 ships it
(spandrel/architectures/RGT/__arch/rgt.py): the same modules, buffers, keys and forward (`scale`
for `upscale`; no gradient checkpointing). The rectangle-window attention, its position bias,
masks and the gated MLP are DAT's twin's (the original's WindowAttention, DynamicPosBias,
calculate_mask and MLP are DAT's Spatial_Attention, DynamicPosBias, calculate_mask and SGFN line
for line). Around the original's forward it pads a side below 16 px to 16 as spandrel's call API
does (reflect, then replicate), and crops the output."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as tf
from torch import nn

from . import register
from ._spandrel import pad_tensor
from .classic import Upsample
from .dat import SGFN, Adaptive_Spatial_Attention, Spatial_Attention, Tokens, _shifted
from .swinir import DropPath, _resi_conv


class L_SA(nn.Module):
    def __init__(self, dim, num_heads, split_size, shift_size, qkv_bias, qk_scale, drop, attn_drop,
                 idx, reso, rs_id):
        super().__init__()
        self.split_size, self.shift_size = split_size, shift_size
        self.idx, self.rs_id, self.patches_resolution = idx, rs_id, reso
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(drop)
        self.attns = nn.ModuleList([Spatial_Attention(dim // 2, i, split_size, num_heads // 2, attn_drop,
                                                      qk_scale) for i in range(2)])
        masks = self.calculate_mask(reso, reso) if _shifted(rs_id, idx) else (None, None)
        self.register_buffer("attn_mask_0", masks[0])
        self.register_buffer("attn_mask_1", masks[1])
        self.get_v = nn.Conv2d(dim, dim, 3, 1, 1, groups=dim)

    calculate_mask = Adaptive_Spatial_Attention.calculate_mask

    def forward(self, x, h, w):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, -1, 3, c).permute(2, 0, 1, 3)
        v = qkv[2].transpose(-2, -1).contiguous().view(b, c, h, w)
        m = max(self.split_size)
        pad_r, pad_b = (m - w % m) % m, (m - h % m) % m
        qkv = qkv.reshape(3 * b, h, w, c).permute(0, 3, 1, 2)
        qkv = tf.pad(qkv, (0, pad_r, 0, pad_b)).reshape(3, b, c, -1).transpose(-2, -1)
        hh, ww = h + pad_b, w + pad_r
        if _shifted(self.rs_id, self.idx):
            t0, t1 = self.shift_size
            qkv = qkv.view(3, b, hh, ww, c)
            qkv_0 = torch.roll(qkv[..., :c // 2], shifts=(-t0, -t1), dims=(2, 3)).view(3, b, -1, c // 2)
            qkv_1 = torch.roll(qkv[..., c // 2:], shifts=(-t1, -t0), dims=(2, 3)).view(3, b, -1, c // 2)
            if self.patches_resolution != hh or self.patches_resolution != ww:
                m0, m1 = self.calculate_mask(hh, ww)
            else:
                m0, m1 = self.attn_mask_0, self.attn_mask_1
            x1 = torch.roll(self.attns[0](qkv_0, hh, ww, mask=m0), shifts=(t0, t1), dims=(1, 2))
            x2 = torch.roll(self.attns[1](qkv_1, hh, ww, mask=m1), shifts=(t1, t0), dims=(1, 2))
        else:
            x1 = self.attns[0](qkv[:, :, :, :c // 2], hh, ww)
            x2 = self.attns[1](qkv[:, :, :, c // 2:], hh, ww)
        x1 = x1[:, :h, :w, :].reshape(b, n, c // 2)
        x2 = x2[:, :h, :w, :].reshape(b, n, c // 2)
        lcm = self.get_v(v).permute(0, 2, 3, 1).contiguous().view(b, n, c)
        return self.proj_drop(self.proj(torch.cat([x1, x2], dim=2) + lcm))


class RG_SA(nn.Module):
    def __init__(self, dim, num_heads, qkv_bias, qk_scale, attn_drop, proj_drop, c_ratio):
        super().__init__()
        self.num_heads = num_heads
        self.cr = int(dim * c_ratio)
        self.scale = qk_scale or (dim // num_heads * c_ratio) ** -0.5
        self.reduction1 = nn.Conv2d(dim, dim, kernel_size=4, stride=4, groups=dim)
        self.dwconv = nn.Conv2d(dim, dim, 3, 1, 1, groups=dim)
        self.conv = nn.Conv2d(dim, self.cr, 1, 1)
        self.norm_act = nn.Sequential(nn.LayerNorm(self.cr), nn.GELU())
        self.q = nn.Linear(dim, self.cr, bias=qkv_bias)
        self.k = nn.Linear(self.cr, self.cr, bias=qkv_bias)
        self.v = nn.Linear(self.cr, dim, bias=qkv_bias)
        self.cpe = nn.Conv2d(dim, dim, 3, 1, 1, groups=dim)
        self.proj = nn.Linear(dim, dim)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x, h, w):
        b, n, c = x.shape
        _x = x.permute(0, 2, 1).reshape(b, c, h, w).contiguous()
        if self.training:
            t = max(int(math.log(h // 4, 4)), int(math.log(w // 4, 4)))
        else:
            t = max(int(math.log(h // 16, 4)), int(math.log(w // 16, 4)), 2)
        s = 4 ** t
        for _ in range(t):
            _x = self.reduction1(_x)
        _x = self.conv(self.dwconv(_x)).reshape(b, self.cr, -1).permute(0, 2, 1).contiguous()
        _x = self.norm_act(_x)
        heads = self.num_heads
        q = self.q(x).reshape(b, n, heads, int(self.cr / heads)).permute(0, 2, 1, 3)
        k = self.k(_x).reshape(b, -1, heads, int(self.cr / heads)).permute(0, 2, 1, 3)
        v = self.v(_x).reshape(b, -1, heads, int(c / heads)).permute(0, 2, 1, 3)
        attn = self.attn_drop(((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1))
        v = v + self.cpe(v.transpose(1, 2).reshape(b, -1, c).transpose(1, 2).contiguous().view(
            b, c, h // s, w // s)).view(b, c, -1).view(b, heads, int(c / heads), -1).transpose(-1, -2)
        return self.proj_drop(self.proj((attn @ v).transpose(1, 2).reshape(b, n, c)))


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio, qkv_bias, qk_scale, drop, attn_drop, drop_path,
                 idx, rs_id, split_size, reso, c_ratio):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        if idx % 2 == 0:
            self.attn = L_SA(dim, num_heads, split_size, [split_size[0] // 2, split_size[1] // 2],
                             qkv_bias, qk_scale, drop, attn_drop, idx, reso, rs_id)
        else:
            self.attn = RG_SA(dim, num_heads, qkv_bias, qk_scale, attn_drop, drop, c_ratio)
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()
        self.mlp = SGFN(dim, int(dim * mlp_ratio), dim)
        self.norm2 = nn.LayerNorm(dim)
        self.gamma = nn.Parameter(1e-4 * torch.ones(dim))

    def forward(self, x, x_size):
        h, w = x_size
        res = x
        x = x + self.drop_path(self.attn(self.norm1(x), h, w))
        x = x + self.drop_path(self.mlp(self.norm2(x), h, w))
        return x + res * self.gamma


class ResidualGroup(nn.Module):
    def __init__(self, dim, depth, resi_connection, drop_paths, rs_id, **kw):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim, drop_path=drop_paths[i], idx=i, rs_id=rs_id, **kw)
                                     for i in range(depth)])
        self.conv = _resi_conv(dim, resi_connection)

    def forward(self, x, x_size):
        h, w = x_size
        res = x
        for blk in self.blocks:
            x = blk(x, x_size)
        x = self.conv(x.transpose(1, 2).reshape(x.shape[0], -1, h, w))
        return res + x.flatten(2).transpose(1, 2)


@register
class RGT(nn.Module):
    def __init__(self, img_size=64, in_chans=3, embed_dim=180, depth=(2, 2, 2, 2),
                 num_heads=(2, 2, 2, 2), mlp_ratio=4.0, qkv_bias=True, qk_scale=None, drop_rate=0.0,
                 attn_drop_rate=0.0, drop_path_rate=0.1, scale=2, img_range=1.0,
                 resi_connection="1conv", split_size=(8, 8), c_ratio=0.5):
        super().__init__()
        num_feat = 64
        self.img_range, self.upscale = img_range, scale
        mean = (0.4488, 0.4371, 0.4040) if in_chans == 3 else (0.0,)
        self.mean = torch.Tensor(mean).view(1, -1, 1, 1)
        self.conv_first = nn.Conv2d(in_chans, embed_dim, 3, 1, 1)
        self.before_RG = nn.Sequential(Tokens(), nn.LayerNorm(embed_dim))
        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, int(np.sum(depth)))]
        self.layers = nn.ModuleList([ResidualGroup(
            embed_dim, depth[i], resi_connection, dpr[sum(depth[:i]):sum(depth[:i + 1])], i,
            num_heads=num_heads[i], reso=img_size, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias,
            qk_scale=qk_scale, drop=drop_rate, attn_drop=attn_drop_rate, split_size=list(split_size),
            c_ratio=c_ratio) for i in range(len(depth))])
        self.norm = nn.LayerNorm(embed_dim)
        self.conv_after_body = _resi_conv(embed_dim, resi_connection)
        self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, num_feat, 3, 1, 1),
                                                  nn.LeakyReLU(inplace=True))
        self.upsample = Upsample(scale, num_feat)
        self.conv_last = nn.Conv2d(num_feat, in_chans, 3, 1, 1)

    def forward(self, x):
        h0, w0 = x.shape[2:]
        x, _ = pad_tensor(x, 16)  # spandrel's call API: SizeRequirements(minimum=16)
        h, w = x.shape[2:]
        mean = self.mean.type_as(x)
        x = self.conv_first((x - mean) * self.img_range)
        y = self.before_RG(x)
        for layer in self.layers:
            y = layer(y, (h, w))
        y = self.norm(y).transpose(1, 2).reshape(x.shape[0], -1, h, w)
        x = self.conv_after_body(y) + x
        x = self.conv_last(self.upsample(self.conv_before_upsample(x)))
        return (x / self.img_range + mean)[..., :h0 * self.upscale, :w0 * self.upscale]
