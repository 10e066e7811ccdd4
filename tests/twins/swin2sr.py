"""PyTorch twin of Swin2SR, written from mv-lab/swin2sr's network as spandrel 0.4.2 ships it
(neither is installed): the same modules, buffers, keys and forward (`scale` for `upscale`; the
pixelshuffle_hf training variant left out), with the original's reflect padding to a multiple of the
window (replicate when the image is smaller than the padding, as srgrad's pad_to_multiple)."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as tf
from torch import nn

from . import register
from .classic import Upsample
from .swinir import (DropPath, Mlp, PatchUnEmbed, UpsampleOneStep, _resi_conv, window_partition,
                     window_reverse)


class WindowAttention(nn.Module):
    def __init__(self, dim, window_size, num_heads, qkv_bias=True, attn_drop=0.0, proj_drop=0.0,
                 pretrained_window_size=(0, 0)):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((num_heads, 1, 1))))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 512, bias=True), nn.ReLU(inplace=True),
                                     nn.Linear(512, num_heads, bias=False))
        rh = torch.arange(-(window_size[0] - 1), window_size[0], dtype=torch.float32)
        rw = torch.arange(-(window_size[1] - 1), window_size[1], dtype=torch.float32)
        table = torch.stack(torch.meshgrid([rh, rw], indexing="ij")).permute(1, 2, 0).contiguous().unsqueeze(0)
        if pretrained_window_size[0] > 0:
            table[:, :, :, 0] /= pretrained_window_size[0] - 1
            table[:, :, :, 1] /= pretrained_window_size[1] - 1
        else:
            table[:, :, :, 0] /= window_size[0] - 1
            table[:, :, :, 1] /= window_size[1] - 1
        table *= 8
        table = torch.sign(table) * torch.log2(torch.abs(table) + 1.0) / np.log2(8)
        self.register_buffer("relative_coords_table", table)
        coords = torch.stack(torch.meshgrid([torch.arange(window_size[0]), torch.arange(window_size[1])],
                                            indexing="ij"))
        flat = torch.flatten(coords, 1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += window_size[0] - 1
        rel[:, :, 1] += window_size[1] - 1
        rel[:, :, 0] *= 2 * window_size[1] - 1
        self.register_buffer("relative_position_index", rel.sum(-1))
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        if qkv_bias:
            self.q_bias = nn.Parameter(torch.zeros(dim))
            self.v_bias = nn.Parameter(torch.zeros(dim))
        else:
            self.q_bias = self.v_bias = None
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, mask=None):
        b_, n, c = x.shape
        qkv_bias = None
        if self.q_bias is not None:
            qkv_bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias, requires_grad=False),
                                  self.v_bias))
        qkv = tf.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)
        qkv = qkv.reshape(b_, n, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = tf.normalize(q, dim=-1) @ tf.normalize(k, dim=-1).transpose(-2, -1)
        logit_scale = torch.clamp(self.logit_scale, max=torch.log(torch.tensor(1.0 / 0.01))).exp()
        attn = attn * logit_scale
        table = self.cpb_mlp(self.relative_coords_table).view(-1, self.num_heads)
        nwin = self.window_size[0] * self.window_size[1]
        bias = table[self.relative_position_index.view(-1)].view(nwin, nwin, -1)
        attn = attn + 16 * torch.sigmoid(bias.permute(2, 0, 1).contiguous()).unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            attn = attn.view(b_ // nw, nw, self.num_heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, n, n)
        attn = self.attn_drop(self.softmax(attn))
        x = (attn @ v).transpose(1, 2).reshape(b_, n, c)
        return self.proj_drop(self.proj(x))


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size=7, shift_size=0, mlp_ratio=4.0,
                 qkv_bias=True, drop=0.0, attn_drop=0.0, drop_path=0.0, pretrained_window_size=0):
        super().__init__()
        self.input_resolution, self.window_size, self.shift_size = input_resolution, window_size, shift_size
        if min(input_resolution) <= window_size:
            self.shift_size, self.window_size = 0, min(input_resolution)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, (self.window_size, self.window_size), num_heads, qkv_bias,
                                    attn_drop, drop, (pretrained_window_size, pretrained_window_size))
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop)
        # srgrad's departure (SwinIR's too): the mask of an img_size not a multiple of the window is
        # the padded grid's
        ws = self.window_size
        self.mask_resolution = tuple(-(-n // ws) * ws for n in input_resolution)
        self.register_buffer("attn_mask", self.calculate_mask(self.mask_resolution)
                             if self.shift_size > 0 else None)

    def calculate_mask(self, x_size):
        h, w = x_size
        img_mask = torch.zeros((1, h, w, 1))
        ws, s = self.window_size, self.shift_size
        slices = (slice(0, -ws), slice(-ws, -s), slice(-s, None))
        cnt = 0
        for hs in slices:
            for wsl in slices:
                img_mask[:, hs, wsl, :] = cnt
                cnt += 1
        mw = window_partition(img_mask, ws).view(-1, ws * ws)
        mask = mw.unsqueeze(1) - mw.unsqueeze(2)
        return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)

    def forward(self, x, x_size):
        h, w = x_size
        b, _, c = x.shape
        shortcut = x
        x = x.view(b, h, w, c)
        if self.shift_size > 0:
            x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
        windows = window_partition(x, self.window_size).view(-1, self.window_size ** 2, c)
        if self.mask_resolution == tuple(x_size):
            out = self.attn(windows, mask=self.attn_mask)
        else:
            out = self.attn(windows, mask=self.calculate_mask(x_size).to(x.device))
        x = window_reverse(out.view(-1, self.window_size, self.window_size, c), self.window_size, h, w)
        if self.shift_size > 0:
            x = torch.roll(x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        x = shortcut + self.drop_path(self.norm1(x.view(b, h * w, c)))
        return x + self.drop_path(self.norm2(self.mlp(x)))


class BasicLayer(nn.Module):
    def __init__(self, dim, input_resolution, depth, num_heads, window_size, mlp_ratio, qkv_bias,
                 drop, attn_drop, drop_path, pretrained_window_size):
        super().__init__()
        self.blocks = nn.ModuleList([SwinTransformerBlock(
            dim, input_resolution, num_heads, window_size, 0 if i % 2 == 0 else window_size // 2,
            mlp_ratio, qkv_bias, drop, attn_drop, drop_path[i], pretrained_window_size)
            for i in range(depth)])

    def forward(self, x, x_size):
        for blk in self.blocks:
            x = blk(x, x_size)
        return x


class PatchEmbed(nn.Module):
    def __init__(self, patch_size, in_chans, embed_dim, norm):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.norm = nn.LayerNorm(embed_dim) if norm else None

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        return self.norm(x) if self.norm is not None else x


class RSTB(nn.Module):
    def __init__(self, dim, input_resolution, depth, resi_connection, patch_size, **kw):
        super().__init__()
        self.residual_group = BasicLayer(dim, input_resolution, depth, **kw)
        self.conv = _resi_conv(dim, resi_connection)
        self.patch_embed = PatchEmbed(patch_size, dim, dim, False)
        self.patch_unembed = PatchUnEmbed(dim)

    def forward(self, x, x_size):
        return self.patch_embed(self.conv(self.patch_unembed(self.residual_group(x, x_size), x_size))) + x


def _pair(v):
    return tuple(v) if isinstance(v, (list, tuple)) else (v, v)


@register
class Swin2SR(nn.Module):
    def __init__(self, img_size=64, patch_size=1, in_chans=3, embed_dim=96, depths=(6, 6, 6, 6),
                 num_heads=(6, 6, 6, 6), window_size=7, mlp_ratio=4.0, qkv_bias=True, drop_rate=0.0,
                 attn_drop_rate=0.0, drop_path_rate=0.1, ape=False, patch_norm=True, scale=2,
                 img_range=1.0, upsampler="", resi_connection="1conv", pretrained_window_size=0):
        super().__init__()
        num_feat = 64
        self.img_range, self.upscale, self.upsampler, self.ape = img_range, scale, upsampler, ape
        self.window_size = window_size
        self.mean = (torch.Tensor((0.4488, 0.4371, 0.4040)).view(1, 3, 1, 1) if in_chans == 3
                     else torch.zeros(1, 1, 1, 1))
        self.conv_first = nn.Conv2d(in_chans, embed_dim, 3, 1, 1)
        img, patch = _pair(img_size), _pair(patch_size)
        res = (img[0] // patch[0], img[1] // patch[1])
        self.patch_embed = PatchEmbed(patch, embed_dim, embed_dim, patch_norm)
        self.patch_unembed = PatchUnEmbed(embed_dim)
        if ape:
            self.absolute_pos_embed = nn.Parameter(torch.zeros(1, res[0] * res[1], embed_dim))
            nn.init.trunc_normal_(self.absolute_pos_embed, std=0.02)
        self.pos_drop = nn.Dropout(drop_rate)
        dpr = torch.linspace(0, drop_path_rate, sum(depths), device="cpu").tolist()
        self.layers = nn.ModuleList([RSTB(
            embed_dim, res, depth, resi_connection, patch, num_heads=num_heads[i],
            window_size=window_size, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, drop=drop_rate,
            attn_drop=attn_drop_rate, drop_path=dpr[sum(depths[:i]):sum(depths[:i + 1])],
            pretrained_window_size=pretrained_window_size) for i, depth in enumerate(depths)])
        self.norm = nn.LayerNorm(embed_dim)
        self.conv_after_body = _resi_conv(embed_dim, resi_connection)
        if upsampler == "pixelshuffle":
            self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, num_feat, 3, 1, 1),
                                                      nn.LeakyReLU(inplace=True))
            self.upsample = Upsample(scale, num_feat)
            self.conv_last = nn.Conv2d(num_feat, in_chans, 3, 1, 1)
        elif upsampler == "pixelshuffle_aux":
            self.conv_bicubic = nn.Conv2d(in_chans, num_feat, 3, 1, 1)
            self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, num_feat, 3, 1, 1),
                                                      nn.LeakyReLU(inplace=True))
            self.conv_aux = nn.Conv2d(num_feat, in_chans, 3, 1, 1)
            self.conv_after_aux = nn.Sequential(nn.Conv2d(3, num_feat, 3, 1, 1), nn.LeakyReLU(inplace=True))
            self.upsample = Upsample(scale, num_feat)
            self.conv_last = nn.Conv2d(num_feat, in_chans, 3, 1, 1)
        elif upsampler == "pixelshuffledirect":
            self.upsample = UpsampleOneStep(scale, embed_dim, in_chans)
        elif upsampler == "nearest+conv":
            self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, num_feat, 3, 1, 1),
                                                      nn.LeakyReLU(inplace=True))
            self.conv_up1 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
            self.conv_up2 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
            self.conv_hr = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
            self.conv_last = nn.Conv2d(num_feat, in_chans, 3, 1, 1)
            self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)
        else:
            self.conv_last = nn.Conv2d(embed_dim, in_chans, 3, 1, 1)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.LayerNorm):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)

    def forward_features(self, x):
        x_size = (x.shape[2], x.shape[3])
        x = self.patch_embed(x)
        if self.ape:
            x = x + self.absolute_pos_embed
        x = self.pos_drop(x)
        for layer in self.layers:
            x = layer(x, x_size)
        return self.patch_unembed(self.norm(x), x_size)

    def forward(self, x):
        h, w = x.shape[2:]
        ph, pw = (-h) % self.window_size, (-w) % self.window_size
        mode = "reflect" if ph < h and pw < w else "replicate"
        x = tf.pad(x, (0, pw, 0, ph), mode=mode) if ph or pw else x
        mean = self.mean.type_as(x)
        x = (x - mean) * self.img_range
        s = self.upscale
        if self.upsampler == "pixelshuffle":
            x = self.conv_first(x)
            x = self.conv_after_body(self.forward_features(x)) + x
            x = self.conv_last(self.upsample(self.conv_before_upsample(x)))
        elif self.upsampler == "pixelshuffle_aux":
            bicubic = self.conv_bicubic(tf.interpolate(x, size=(h * s, w * s), mode="bicubic",
                                                       align_corners=False))
            x = self.conv_first(x)
            x = self.conv_after_body(self.forward_features(x)) + x
            aux = self.conv_aux(self.conv_before_upsample(x))
            x = self.conv_after_aux(aux)
            x = self.upsample(x)[:, :, :h * s, :w * s] + bicubic[:, :, :h * s, :w * s]
            x = self.conv_last(x)
        elif self.upsampler == "pixelshuffledirect":
            x = self.conv_first(x)
            x = self.upsample(self.conv_after_body(self.forward_features(x)) + x)
        elif self.upsampler == "nearest+conv":
            x = self.conv_first(x)
            x = self.conv_after_body(self.forward_features(x)) + x
            x = self.conv_before_upsample(x)
            x = self.lrelu(self.conv_up1(tf.interpolate(x, scale_factor=2, mode="nearest")))
            x = self.lrelu(self.conv_up2(tf.interpolate(x, scale_factor=2, mode="nearest")))
            x = self.conv_last(self.lrelu(self.conv_hr(x)))
        else:
            first = self.conv_first(x)
            x = x + self.conv_last(self.conv_after_body(self.forward_features(first)) + first)
        x = x / self.img_range + mean
        return x[:, :, :h * s, :w * s]
