"""PyTorch twin of DRCT, written from ming053l/DRCT's drct/archs/DRCT_arch.py as spandrel 0.4.2
ships it (spandrel/architectures/DRCT/__arch/drct_arch.py): the same RDG (swin1..5 on the growing
concatenation, adjust1..5, LeakyReLU 0.2, pe / pue), keys, buffers and forward (`scale` for
`upscale`, pixelshuffle only). The Swin blocks are the SwinIR twin's (BasicSR's block, which the
original copies). Around the original's forward it pads at the bottom and right to a multiple of the
window as spandrel's call API does (reflect, then replicate), and crops the output."""
from __future__ import annotations

import torch
from torch import nn

from . import register
from ._spandrel import pad_tensor
from .classic import Upsample
from .swinir import PatchEmbed, PatchUnEmbed, SwinIR, SwinTransformerBlock, _pair


class RDG(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size, mlp_ratio, qkv_bias, qk_scale,
                 drop, attn_drop, drop_path, gc):
        super().__init__()
        for k in range(5):
            width = dim + k * gc
            setattr(self, f"swin{k + 1}", SwinTransformerBlock(
                width, input_resolution, num_heads - (width % num_heads), window_size,
                window_size // 2 if k % 2 else 0, 1 if k >= 3 else mlp_ratio, qkv_bias, qk_scale,
                drop, attn_drop, drop_path[0] if isinstance(drop_path, list) else drop_path))
            setattr(self, f"adjust{k + 1}", nn.Conv2d(width, dim if k == 4 else gc, 1))
        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)
        self.pe = PatchEmbed(dim, False)
        self.pue = PatchUnEmbed(-1)  # the original's view(B, -1, H, W)

    def forward(self, x, xsize):
        x1 = self.pe(self.lrelu(self.adjust1(self.pue(self.swin1(x, xsize), xsize))))
        x2 = self.pe(self.lrelu(self.adjust2(self.pue(self.swin2(torch.cat((x, x1), -1), xsize), xsize))))
        x3 = self.pe(self.lrelu(self.adjust3(self.pue(self.swin3(torch.cat((x, x1, x2), -1), xsize),
                                                      xsize))))
        x4 = self.pe(self.lrelu(self.adjust4(self.pue(
            self.swin4(torch.cat((x, x1, x2, x3), -1), xsize), xsize))))
        x5 = self.pe(self.adjust5(self.pue(self.swin5(torch.cat((x, x1, x2, x3, x4), -1), xsize),
                                           xsize)))
        return x5 * 0.2 + x


@register
class DRCT(nn.Module):
    def __init__(self, img_size=64, patch_size=1, in_chans=3, embed_dim=180, depths=(6,) * 6,
                 num_heads=(6,) * 6, window_size=16, mlp_ratio=2.0, qkv_bias=True, qk_scale=None,
                 drop_rate=0.0, attn_drop_rate=0.0, drop_path_rate=0.1, ape=False, patch_norm=True,
                 scale=2, img_range=1.0, upsampler="pixelshuffle", resi_connection="1conv", gc=32):
        super().__init__()
        num_feat = 64
        self.window_size, self.img_range, self.upscale, self.ape = window_size, img_range, scale, ape
        self.mean = (torch.Tensor((0.4488, 0.4371, 0.4040)).view(1, 3, 1, 1) if in_chans == 3
                     else torch.zeros(1, 1, 1, 1))
        self.conv_first = nn.Conv2d(in_chans, embed_dim, 3, 1, 1)
        img, patch = _pair(img_size), _pair(patch_size)
        res = (img[0] // patch[0], img[1] // patch[1])
        self.patch_embed = PatchEmbed(embed_dim, patch_norm)
        self.patch_unembed = PatchUnEmbed(embed_dim)
        if ape:
            self.absolute_pos_embed = nn.Parameter(torch.zeros(1, res[0] * res[1], embed_dim))
            nn.init.trunc_normal_(self.absolute_pos_embed, std=0.02)
        self.pos_drop = nn.Dropout(p=drop_rate)
        dpr = [v.item() for v in torch.linspace(0, drop_path_rate, sum(depths))]
        self.layers = nn.ModuleList([RDG(
            embed_dim, res, num_heads[i], window_size, mlp_ratio, qkv_bias, qk_scale, drop_rate,
            attn_drop_rate, dpr[sum(depths[:i]):sum(depths[:i + 1])], gc) for i in range(len(depths))])
        self.norm = nn.LayerNorm(embed_dim)
        self.conv_after_body = (nn.Conv2d(embed_dim, embed_dim, 3, 1, 1) if resi_connection == "1conv"
                                else nn.Identity())
        self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, num_feat, 3, 1, 1),
                                                  nn.LeakyReLU(inplace=True))
        self.upsample = Upsample(scale, num_feat)
        self.conv_last = nn.Conv2d(num_feat, in_chans, 3, 1, 1)
        self.apply(self._init_weights)

    # the original's, line for line SwinIR's (BasicSR's)
    _init_weights = staticmethod(SwinIR._init_weights)
    forward_features = SwinIR.forward_features

    def forward(self, x):
        h, w = x.shape[-2:]
        x, _ = pad_tensor(x, 0, self.window_size)
        mean = self.mean.type_as(x)
        x = (x - mean) * self.img_range
        x = self.conv_first(x)
        x = self.conv_after_body(self.forward_features(x)) + x
        x = self.conv_last(self.upsample(self.conv_before_upsample(x)))
        x = x / self.img_range + mean
        return x[..., : h * self.upscale, : w * self.upscale]
