"""PyTorch twin of DAT, written from zhengchen1999/DAT's network as spandrel 0.4.2 ships it (neither
is installed): the same modules, buffers, keys and forward (`scale` for `upscale`; einops'
Rearrange written as a module of its own; no gradient checkpointing)."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as tf
from torch import nn

from . import register
from .classic import Upsample
from .swinir import DropPath, UpsampleOneStep, _resi_conv


def img2windows(img, h_sp, w_sp):
    b, c, h, w = img.shape
    img = img.view(b, c, h // h_sp, h_sp, w // w_sp, w_sp)
    return img.permute(0, 2, 4, 3, 5, 1).contiguous().reshape(-1, h_sp * w_sp, c)


def windows2img(windows, h_sp, w_sp, h, w):
    b = int(windows.shape[0] / (h * w / h_sp / w_sp))
    img = windows.view(b, h // h_sp, w // w_sp, h_sp, w_sp, -1)
    return img.permute(0, 1, 3, 2, 4, 5).contiguous().view(b, h, w, -1)


class SpatialGate(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.conv = nn.Conv2d(dim, dim, 3, 1, 1, groups=dim)

    def forward(self, x, h, w):
        x1, x2 = x.chunk(2, dim=-1)
        b, _, c = x.shape
        x2 = self.conv(self.norm(x2).transpose(1, 2).contiguous().view(b, c // 2, h, w))
        return x1 * x2.flatten(2).transpose(-1, -2).contiguous()


class SGFN(nn.Module):
    def __init__(self, in_features, hidden_features, out_features, drop=0.0):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = nn.GELU()
        self.sg = SpatialGate(hidden_features // 2)
        self.fc2 = nn.Linear(hidden_features // 2, out_features)
        self.drop = nn.Dropout(drop)

    def forward(self, x, h, w):
        x = self.drop(self.act(self.fc1(x)))
        x = self.drop(self.sg(x, h, w))
        return self.drop(self.fc2(x))


class DynamicPosBias(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.pos_dim = dim // 4
        self.pos_proj = nn.Linear(2, self.pos_dim)
        for i, out in ((1, self.pos_dim), (2, self.pos_dim), (3, num_heads)):
            setattr(self, f"pos{i}", nn.Sequential(nn.LayerNorm(self.pos_dim), nn.ReLU(inplace=True),
                                                   nn.Linear(self.pos_dim, out)))

    def forward(self, biases):  # residual=False, as DAT builds it
        return self.pos3(self.pos2(self.pos1(self.pos_proj(biases))))


class Spatial_Attention(nn.Module):
    def __init__(self, dim, idx, split_size, num_heads, attn_drop=0.0, qk_scale=None):
        super().__init__()
        self.num_heads = num_heads
        self.scale = qk_scale or (dim // num_heads) ** -0.5
        self.H_sp, self.W_sp = split_size if idx == 0 else split_size[::-1]
        self.pos = DynamicPosBias(dim // 4, num_heads)
        bh = torch.arange(1 - self.H_sp, self.H_sp)
        bw = torch.arange(1 - self.W_sp, self.W_sp)
        biases = torch.stack(torch.meshgrid([bh, bw], indexing="ij")).flatten(1).transpose(0, 1)
        self.register_buffer("rpe_biases", biases.contiguous().float())
        coords = torch.stack(torch.meshgrid([torch.arange(self.H_sp), torch.arange(self.W_sp)],
                                            indexing="ij"))
        flat = torch.flatten(coords, 1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += self.H_sp - 1
        rel[:, :, 1] += self.W_sp - 1
        rel[:, :, 0] *= 2 * self.W_sp - 1
        self.register_buffer("relative_position_index", rel.sum(-1))
        self.attn_drop = nn.Dropout(attn_drop)

    def im2win(self, x, h, w):
        b, _, c = x.shape
        x = img2windows(x.transpose(-2, -1).contiguous().view(b, c, h, w), self.H_sp, self.W_sp)
        return x.reshape(-1, self.H_sp * self.W_sp, self.num_heads, c // self.num_heads).permute(
            0, 2, 1, 3).contiguous()

    def forward(self, qkv, h, w, mask=None):
        q, k, v = qkv[0], qkv[1], qkv[2]
        b, _, c = q.shape
        q, k, v = (self.im2win(t, h, w) for t in (q, k, v))
        attn = (q * self.scale) @ k.transpose(-2, -1)
        n = self.H_sp * self.W_sp
        pos = self.pos(self.rpe_biases)
        bias = pos[self.relative_position_index.view(-1)].view(n, n, -1).permute(2, 0, 1)
        attn = attn + bias.contiguous().unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            attn = attn.view(b, nw, self.num_heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, n, n)
        attn = self.attn_drop(tf.softmax(attn, dim=-1, dtype=attn.dtype))
        x = (attn @ v).transpose(1, 2).reshape(-1, n, c)
        return windows2img(x, self.H_sp, self.W_sp, h, w)


def _interactions(dim):
    dwconv = nn.Sequential(nn.Conv2d(dim, dim, 3, 1, 1, groups=dim), nn.BatchNorm2d(dim), nn.GELU())
    channel = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(dim, dim // 8, 1), nn.BatchNorm2d(dim // 8),
                            nn.GELU(), nn.Conv2d(dim // 8, dim, 1))
    spatial = nn.Sequential(nn.Conv2d(dim, dim // 16, 1), nn.BatchNorm2d(dim // 16), nn.GELU(),
                            nn.Conv2d(dim // 16, 1, 1))
    return dwconv, channel, spatial


def _shifted(rg_idx, b_idx):
    return (rg_idx % 2 == 0 and b_idx > 0 and (b_idx - 2) % 4 == 0) or (rg_idx % 2 != 0 and b_idx % 4 == 0)


class Adaptive_Spatial_Attention(nn.Module):
    def __init__(self, dim, num_heads, reso, split_size, shift_size, qkv_bias, qk_scale, drop,
                 attn_drop, rg_idx, b_idx):
        super().__init__()
        self.split_size, self.shift_size = split_size, shift_size
        self.rg_idx, self.b_idx, self.patches_resolution = rg_idx, b_idx, reso
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(drop)
        self.attns = nn.ModuleList([Spatial_Attention(dim // 2, i, split_size, num_heads // 2, attn_drop,
                                                      qk_scale) for i in range(2)])
        masks = self.calculate_mask(reso, reso) if _shifted(rg_idx, b_idx) else (None, None)
        self.register_buffer("attn_mask_0", masks[0])
        self.register_buffer("attn_mask_1", masks[1])
        self.dwconv, self.channel_interaction, self.spatial_interaction = _interactions(dim)

    def calculate_mask(self, h, w, dtype=None):
        s0, s1 = self.split_size
        t0, t1 = self.shift_size
        out = []
        for (a, sa), (c, sc) in (((s0, t0), (s1, t1)), ((s1, t1), (s0, t0))):
            img = torch.zeros((1, h, w, 1), dtype=dtype)
            cnt = 0
            for hs in (slice(0, -a), slice(-a, -sa), slice(-sa, None)):
                for ws in (slice(0, -c), slice(-c, -sc), slice(-sc, None)):
                    img[:, hs, ws, :] = cnt
                    cnt += 1
            img = img.view(1, h // a, a, w // c, c, 1).permute(0, 1, 3, 2, 4, 5).contiguous()
            win = img.view(-1, a * c)
            m = win.unsqueeze(1) - win.unsqueeze(2)
            out.append(m.masked_fill(m != 0, -100.0).masked_fill(m == 0, 0.0))
        return out

    def forward(self, x, h, w):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, -1, 3, c).permute(2, 0, 1, 3)
        v = qkv[2].transpose(-2, -1).contiguous().view(b, c, h, w)
        m = max(self.split_size)
        pad_r, pad_b = (m - w % m) % m, (m - h % m) % m
        qkv = qkv.reshape(3 * b, h, w, c).permute(0, 3, 1, 2)
        qkv = tf.pad(qkv, (0, pad_r, 0, pad_b)).reshape(3, b, c, -1).transpose(-2, -1)
        hh, ww = h + pad_b, w + pad_r
        if _shifted(self.rg_idx, self.b_idx):
            t0, t1 = self.shift_size
            qkv = qkv.view(3, b, hh, ww, c)
            qkv_0 = torch.roll(qkv[..., :c // 2], shifts=(-t0, -t1), dims=(2, 3)).view(3, b, -1, c // 2)
            qkv_1 = torch.roll(qkv[..., c // 2:], shifts=(-t1, -t0), dims=(2, 3)).view(3, b, -1, c // 2)
            if self.patches_resolution != hh or self.patches_resolution != ww:
                m0, m1 = self.calculate_mask(hh, ww, dtype=x.dtype)
            else:
                m0, m1 = self.attn_mask_0, self.attn_mask_1
            x1 = torch.roll(self.attns[0](qkv_0, hh, ww, mask=m0), shifts=(t0, t1), dims=(1, 2))
            x2 = torch.roll(self.attns[1](qkv_1, hh, ww, mask=m1), shifts=(t1, t0), dims=(1, 2))
        else:
            x1 = self.attns[0](qkv[:, :, :, :c // 2], hh, ww)
            x2 = self.attns[1](qkv[:, :, :, c // 2:], hh, ww)
        x1 = x1[:, :h, :w, :].reshape(b, n, c // 2)
        x2 = x2[:, :h, :w, :].reshape(b, n, c // 2)
        attened_x = torch.cat([x1, x2], dim=2)
        conv_x = self.dwconv(v)
        channel_map = self.channel_interaction(conv_x).permute(0, 2, 3, 1).contiguous().view(b, 1, c)
        spatial_map = self.spatial_interaction(attened_x.transpose(-2, -1).contiguous().view(b, c, h, w))
        attened_x = attened_x * torch.sigmoid(channel_map)
        conv_x = (torch.sigmoid(spatial_map) * conv_x).permute(0, 2, 3, 1).contiguous().view(b, n, c)
        return self.proj_drop(self.proj(attened_x + conv_x))


class Adaptive_Channel_Attention(nn.Module):
    def __init__(self, dim, num_heads, qkv_bias, attn_drop, proj_drop):
        super().__init__()
        self.num_heads = num_heads
        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        self.dwconv, self.channel_interaction, self.spatial_interaction = _interactions(dim)

    def forward(self, x, h, w):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = (t.transpose(-2, -1) for t in (qkv[0], qkv[1], qkv[2]))
        v_ = v.reshape(b, c, n).contiguous().view(b, c, h, w)
        q, k = tf.normalize(q, dim=-1), tf.normalize(k, dim=-1)
        attn = self.attn_drop(((q @ k.transpose(-2, -1)) * self.temperature).softmax(dim=-1))
        attened_x = (attn @ v).permute(0, 3, 1, 2).reshape(b, n, c)
        conv_x = self.dwconv(v_)
        channel_map = self.channel_interaction(attened_x.transpose(-2, -1).contiguous().view(b, c, h, w))
        spatial_map = self.spatial_interaction(conv_x).permute(0, 2, 3, 1).contiguous().view(b, n, 1)
        attened_x = attened_x * torch.sigmoid(spatial_map)
        conv_x = (conv_x * torch.sigmoid(channel_map)).permute(0, 2, 3, 1).contiguous().view(b, n, c)
        return self.proj_drop(self.proj(attened_x + conv_x))


class DATB(nn.Module):
    def __init__(self, dim, num_heads, reso, split_size, expansion_factor, qkv_bias, qk_scale, drop,
                 attn_drop, drop_path, rg_idx, b_idx):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        if b_idx % 2 == 0:
            shift = [split_size[0] // 2, split_size[1] // 2]
            self.attn = Adaptive_Spatial_Attention(dim, num_heads, reso, split_size, shift, qkv_bias,
                                                   qk_scale, drop, attn_drop, rg_idx, b_idx)
        else:
            self.attn = Adaptive_Channel_Attention(dim, num_heads, qkv_bias, attn_drop, drop)
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()
        self.ffn = SGFN(dim, int(dim * expansion_factor), dim)
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x, x_size):
        h, w = x_size
        x = x + self.drop_path(self.attn(self.norm1(x), h, w))
        return x + self.drop_path(self.ffn(self.norm2(x), h, w))


class ResidualGroup(nn.Module):
    def __init__(self, dim, depth, resi_connection, drop_paths, rg_idx, **kw):
        super().__init__()
        self.blocks = nn.ModuleList([DATB(dim, drop_path=drop_paths[i], rg_idx=rg_idx, b_idx=i, **kw)
                                     for i in range(depth)])
        self.conv = _resi_conv(dim, resi_connection)

    def forward(self, x, x_size):
        h, w = x_size
        res = x
        for blk in self.blocks:
            x = blk(x, x_size)
        x = self.conv(x.transpose(1, 2).reshape(x.shape[0], -1, h, w))
        return res + x.flatten(2).transpose(1, 2)


class Tokens(nn.Module):
    """einops' Rearrange('b c h w -> b (h w) c')."""

    def forward(self, x):
        return x.flatten(2).transpose(1, 2)


@register
class DAT(nn.Module):
    def __init__(self, img_size=64, in_chans=3, embed_dim=180, split_size=(2, 4), depth=(2, 2, 2, 2),
                 num_heads=(2, 2, 2, 2), expansion_factor=4.0, qkv_bias=True, qk_scale=None,
                 drop_rate=0.0, attn_drop_rate=0.0, drop_path_rate=0.1, scale=2, img_range=1.0,
                 resi_connection="1conv", upsampler="pixelshuffle"):
        super().__init__()
        num_feat = 64
        self.img_range, self.upsampler = img_range, upsampler
        mean = (0.4488, 0.4371, 0.4040) if in_chans == 3 else (0.0,)
        self.mean = torch.Tensor(mean).view(1, -1, 1, 1)
        self.conv_first = nn.Conv2d(in_chans, embed_dim, 3, 1, 1)
        self.before_RG = nn.Sequential(Tokens(), nn.LayerNorm(embed_dim))
        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, int(np.sum(depth)))]
        self.layers = nn.ModuleList([ResidualGroup(
            embed_dim, depth[i], resi_connection, dpr[sum(depth[:i]):sum(depth[:i + 1])], i,
            num_heads=num_heads[i], reso=img_size, split_size=list(split_size),
            expansion_factor=expansion_factor, qkv_bias=qkv_bias, qk_scale=qk_scale, drop=drop_rate,
            attn_drop=attn_drop_rate) for i in range(len(depth))])
        self.norm = nn.LayerNorm(embed_dim)
        self.conv_after_body = _resi_conv(embed_dim, resi_connection)
        if upsampler == "pixelshuffle":
            self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, num_feat, 3, 1, 1),
                                                      nn.LeakyReLU(inplace=True))
            self.upsample = Upsample(scale, num_feat)
            self.conv_last = nn.Conv2d(num_feat, in_chans, 3, 1, 1)
        else:
            self.upsample = UpsampleOneStep(scale, embed_dim, in_chans)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, (nn.LayerNorm, nn.BatchNorm2d)):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)

    def forward_features(self, x):
        h, w = x.shape[2:]
        x = self.before_RG(x)
        for layer in self.layers:
            x = layer(x, (h, w))
        return self.norm(x).transpose(1, 2).reshape(x.shape[0], -1, h, w)

    def forward(self, x):
        mean = self.mean.type_as(x)
        x = (x - mean) * self.img_range
        x = self.conv_first(x)
        x = self.conv_after_body(self.forward_features(x)) + x
        if self.upsampler == "pixelshuffle":
            x = self.conv_last(self.upsample(self.conv_before_upsample(x)))
        else:
            x = self.upsample(x)
        return x / self.img_range + mean
