"""PyTorch twin of HAT, written from XPixelGroup/HAT's hat/archs/hat_arch.py as spandrel 0.4.2 ships
it (neither is installed): the same modules, buffers, keys and forward (`scale` for `upscale`), the
overlapping keys / values through nn.Unfold as there. Around the original's forward it reflect-pads
to a multiple of the window (replicate when the image is smaller than the padding, as srgrad's
pad_to_multiple) and crops the output."""
from __future__ import annotations

import torch
import torch.nn.functional as tf
from torch import nn

from . import register
from .classic import Upsample
from .swinir import DropPath, Mlp, PatchEmbed, PatchUnEmbed, window_partition, window_reverse


class ChannelAttention(nn.Module):
    def __init__(self, num_feat, squeeze_factor=16):
        super().__init__()
        mid = int(num_feat // squeeze_factor)
        self.attention = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(num_feat, mid, 1, padding=0),
                                       nn.ReLU(inplace=True), nn.Conv2d(mid, num_feat, 1, padding=0),
                                       nn.Sigmoid())

    def forward(self, x):
        return x * self.attention(x)


class CAB(nn.Module):
    def __init__(self, num_feat, compress_ratio=3, squeeze_factor=30):
        super().__init__()
        mid = int(num_feat // compress_ratio)
        self.cab = nn.Sequential(nn.Conv2d(num_feat, mid, 3, 1, 1), nn.GELU(),
                                 nn.Conv2d(mid, num_feat, 3, 1, 1),
                                 ChannelAttention(num_feat, squeeze_factor))

    def forward(self, x):
        return self.cab(x)


class WindowAttention(nn.Module):
    def __init__(self, dim, window_size, num_heads, qkv_bias=True, qk_scale=None, attn_drop=0.0,
                 proj_drop=0.0):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
        self.scale = qk_scale or (dim // num_heads) ** -0.5
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * window_size[0] - 1) * (2 * window_size[1] - 1), num_heads))
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, rpi, mask=None):
        b_, n, c = x.shape
        qkv = self.qkv(x).reshape(b_, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * self.scale) @ k.transpose(-2, -1)
        nwin = self.window_size[0] * self.window_size[1]
        bias = self.relative_position_bias_table[rpi.view(-1)].view(nwin, nwin, -1)
        attn = attn + bias.permute(2, 0, 1).contiguous().unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            attn = attn.view(b_ // nw, nw, self.num_heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, n, n)
        attn = self.attn_drop(self.softmax(attn))
        x = (attn @ v).transpose(1, 2).reshape(b_, n, c)
        return self.proj_drop(self.proj(x))


class HAB(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size=7, shift_size=0,
                 compress_ratio=3, squeeze_factor=30, conv_scale=0.01, mlp_ratio=4.0, qkv_bias=True,
                 qk_scale=None, drop=0.0, attn_drop=0.0, drop_path=0.0):
        super().__init__()
        self.window_size, self.shift_size = window_size, shift_size
        if min(input_resolution) <= self.window_size:
            self.shift_size, self.window_size = 0, min(input_resolution)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, (self.window_size, self.window_size), num_heads, qkv_bias,
                                    qk_scale, attn_drop, drop)
        self.conv_scale = conv_scale
        self.conv_block = CAB(dim, compress_ratio, squeeze_factor)
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop)

    def forward(self, x, x_size, rpi_sa, attn_mask):
        h, w = x_size
        b, _, c = x.shape
        shortcut = x
        x = self.norm1(x).view(b, h, w, c)
        conv_x = self.conv_block(x.permute(0, 3, 1, 2))
        conv_x = conv_x.permute(0, 2, 3, 1).contiguous().view(b, h * w, c)
        if self.shift_size > 0:
            shifted = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
        else:
            shifted, attn_mask = x, None
        windows = window_partition(shifted, self.window_size).view(-1, self.window_size ** 2, c)
        out = self.attn(windows, rpi=rpi_sa, mask=attn_mask)
        shifted = window_reverse(out.view(-1, self.window_size, self.window_size, c),
                                 self.window_size, h, w)
        if self.shift_size > 0:
            attn_x = torch.roll(shifted, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        else:
            attn_x = shifted
        x = shortcut + self.drop_path(attn_x.view(b, h * w, c)) + conv_x * self.conv_scale
        return x + self.drop_path(self.mlp(self.norm2(x)))


class OCAB(nn.Module):
    def __init__(self, dim, window_size, overlap_ratio, num_heads, qkv_bias=True, qk_scale=None,
                 mlp_ratio=2.0):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
        self.scale = qk_scale or (dim // num_heads) ** -0.5
        self.overlap_win_size = int(window_size * overlap_ratio) + window_size
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.unfold = nn.Unfold(kernel_size=(self.overlap_win_size, self.overlap_win_size),
                                stride=window_size, padding=(self.overlap_win_size - window_size) // 2)
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((window_size + self.overlap_win_size - 1) ** 2, num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.softmax = nn.Softmax(dim=-1)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x, x_size, rpi):
        h, w = x_size
        b, _, c = x.shape
        ws, ow = self.window_size, self.overlap_win_size
        shortcut = x
        x = self.norm1(x).view(b, h, w, c)
        qkv = self.qkv(x).reshape(b, h, w, 3, c).permute(3, 0, 4, 1, 2)  # 3, b, c, h, w
        q = qkv[0].permute(0, 2, 3, 1)
        kv = torch.cat((qkv[1], qkv[2]), dim=1)
        q_windows = window_partition(q, ws).view(-1, ws * ws, c)
        kv_windows = self.unfold(kv)  # b, 2 c ow ow, nw: "b (nc ch owh oww) nw -> nc (b nw) (owh oww) ch"
        nw = kv_windows.shape[-1]
        kv_windows = kv_windows.view(b, 2, c, ow, ow, nw).permute(1, 0, 5, 3, 4, 2).reshape(
            2, b * nw, ow * ow, c)
        k_windows, v_windows = kv_windows[0], kv_windows[1]
        b_, nq, _ = q_windows.shape
        n = k_windows.shape[1]
        d = self.dim // self.num_heads
        q = q_windows.reshape(b_, nq, self.num_heads, d).permute(0, 2, 1, 3)
        k = k_windows.reshape(b_, n, self.num_heads, d).permute(0, 2, 1, 3)
        v = v_windows.reshape(b_, n, self.num_heads, d).permute(0, 2, 1, 3)
        attn = (q * self.scale) @ k.transpose(-2, -1)
        bias = self.relative_position_bias_table[rpi.view(-1)].view(ws * ws, ow * ow, -1)
        attn = self.softmax(attn + bias.permute(2, 0, 1).contiguous().unsqueeze(0))
        out = (attn @ v).transpose(1, 2).reshape(b_, nq, self.dim)
        x = window_reverse(out.view(-1, ws, ws, self.dim), ws, h, w).view(b, h * w, self.dim)
        x = self.proj(x) + shortcut
        return x + self.mlp(self.norm2(x))


class AttenBlocks(nn.Module):
    def __init__(self, dim, input_resolution, depth, num_heads, window_size, compress_ratio,
                 squeeze_factor, conv_scale, overlap_ratio, mlp_ratio, qkv_bias, qk_scale, drop,
                 attn_drop, drop_path):
        super().__init__()
        self.blocks = nn.ModuleList([
            HAB(dim, input_resolution, num_heads, window_size, 0 if i % 2 == 0 else window_size // 2,
                compress_ratio, squeeze_factor, conv_scale, mlp_ratio, qkv_bias, qk_scale, drop,
                attn_drop, drop_path[i]) for i in range(depth)])
        self.overlap_attn = OCAB(dim, window_size, overlap_ratio, num_heads, qkv_bias, qk_scale,
                                 mlp_ratio)

    def forward(self, x, x_size, params):
        for blk in self.blocks:
            x = blk(x, x_size, params["rpi_sa"], params["attn_mask"])
        return self.overlap_attn(x, x_size, params["rpi_oca"])


class RHAG(nn.Module):
    def __init__(self, dim, input_resolution, resi_connection, **kw):
        super().__init__()
        self.residual_group = AttenBlocks(dim, input_resolution, **kw)
        self.conv = nn.Conv2d(dim, dim, 3, 1, 1) if resi_connection == "1conv" else nn.Identity()
        self.patch_embed = PatchEmbed(dim, False)
        self.patch_unembed = PatchUnEmbed(dim)

    def forward(self, x, x_size, params):
        return self.patch_embed(self.conv(self.patch_unembed(
            self.residual_group(x, x_size, params), x_size))) + x


def _pair(v):
    return tuple(v) if isinstance(v, (list, tuple)) else (v, v)


@register
class HAT(nn.Module):
    def __init__(self, img_size=64, patch_size=1, in_chans=3, embed_dim=96, depths=(6, 6, 6, 6),
                 num_heads=(6, 6, 6, 6), window_size=7, compress_ratio=3, squeeze_factor=30,
                 conv_scale=0.01, overlap_ratio=0.5, mlp_ratio=4.0, qkv_bias=True, qk_scale=None,
                 drop_rate=0.0, attn_drop_rate=0.0, drop_path_rate=0.1, ape=False, patch_norm=True,
                 scale=2, img_range=1.0, upsampler="pixelshuffle", resi_connection="1conv",
                 num_feat=64):
        super().__init__()
        self.window_size, self.shift_size = window_size, window_size // 2
        self.overlap_ratio = overlap_ratio
        self.img_range, self.upscale, self.ape = img_range, scale, ape
        self.mean = (torch.Tensor((0.4488, 0.4371, 0.4040)).view(1, 3, 1, 1) if in_chans == 3
                     else torch.zeros(1, 1, 1, 1))
        self.register_buffer("relative_position_index_SA", self.calculate_rpi_sa())
        self.register_buffer("relative_position_index_OCA", self.calculate_rpi_oca())
        self.conv_first = nn.Conv2d(in_chans, embed_dim, 3, 1, 1)
        img, patch = _pair(img_size), _pair(patch_size)
        res = (img[0] // patch[0], img[1] // patch[1])
        self.patch_embed = PatchEmbed(embed_dim, patch_norm)
        self.patch_unembed = PatchUnEmbed(embed_dim)
        if ape:
            self.absolute_pos_embed = nn.Parameter(torch.zeros(1, res[0] * res[1], embed_dim))
            nn.init.trunc_normal_(self.absolute_pos_embed, std=0.02)
        self.pos_drop = nn.Dropout(drop_rate)
        dpr = torch.linspace(0, drop_path_rate, sum(depths), device="cpu").tolist()
        self.layers = nn.ModuleList([RHAG(
            embed_dim, res, resi_connection, depth=depth, num_heads=num_heads[i],
            window_size=window_size, compress_ratio=compress_ratio, squeeze_factor=squeeze_factor,
            conv_scale=conv_scale, overlap_ratio=overlap_ratio, mlp_ratio=mlp_ratio,
            qkv_bias=qkv_bias, qk_scale=qk_scale, drop=drop_rate, attn_drop=attn_drop_rate,
            drop_path=dpr[sum(depths[:i]):sum(depths[:i + 1])]) for i, depth in enumerate(depths)])
        self.norm = nn.LayerNorm(embed_dim)
        self.conv_after_body = (nn.Conv2d(embed_dim, embed_dim, 3, 1, 1) if resi_connection == "1conv"
                                else nn.Identity())
        self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, num_feat, 3, 1, 1),
                                                  nn.LeakyReLU(inplace=True))
        self.upsample = Upsample(scale, num_feat) if scale > 1 else nn.Sequential()
        self.conv_last = nn.Conv2d(num_feat, in_chans, 3, 1, 1)
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

    def calculate_rpi_sa(self):
        ws = self.window_size
        coords = torch.stack(torch.meshgrid([torch.arange(ws), torch.arange(ws)], indexing="ij"))
        flat = torch.flatten(coords, 1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += ws - 1
        rel[:, :, 1] += ws - 1
        rel[:, :, 0] *= 2 * ws - 1
        return rel.sum(-1)

    def calculate_rpi_oca(self):
        ws = self.window_size
        wse = ws + int(self.overlap_ratio * ws)
        ori = torch.flatten(torch.stack(torch.meshgrid([torch.arange(ws)] * 2, indexing="ij")), 1)
        ext = torch.flatten(torch.stack(torch.meshgrid([torch.arange(wse)] * 2, indexing="ij")), 1)
        rel = (ext[:, None, :] - ori[:, :, None]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += ws - wse + 1
        rel[:, :, 1] += ws - wse + 1
        rel[:, :, 0] *= ws + wse - 1
        return rel.sum(-1)

    def calculate_mask(self, x_size, dtype):
        h, w = x_size
        img_mask = torch.zeros((1, h, w, 1), dtype=dtype)
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

    def forward_features(self, x):
        x_size = (x.shape[2], x.shape[3])
        params = {"attn_mask": self.calculate_mask(x_size, x.dtype),
                  "rpi_sa": self.relative_position_index_SA,
                  "rpi_oca": self.relative_position_index_OCA}
        x = self.patch_embed(x)
        if self.ape:
            x = x + self.absolute_pos_embed
        x = self.pos_drop(x)
        for layer in self.layers:
            x = layer(x, x_size, params)
        return self.patch_unembed(self.norm(x), x_size)

    def forward(self, x):
        h, w = x.shape[2:]
        mean = self.mean.type_as(x)
        x = (x - mean) * self.img_range
        ph, pw = (-h) % self.window_size, (-w) % self.window_size
        mode = "reflect" if ph < h and pw < w else "replicate"
        x = tf.pad(x, (0, pw, 0, ph), mode=mode) if ph or pw else x
        x = self.conv_first(x)
        x = self.conv_after_body(self.forward_features(x)) + x
        x = self.conv_last(self.upsample(self.conv_before_upsample(x)))
        x = x / self.img_range + mean
        return x[:, :, :h * self.upscale, :w * self.upscale]

