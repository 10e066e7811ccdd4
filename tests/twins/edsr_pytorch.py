"""PyTorch twins in the OWN module structures of EDSR-PyTorch (sanghyun-son/EDSR-PyTorch,
src/model/common.py + edsr.py) and the official RCAN repository (yulunzhang/RCAN, same common.py +
rcan.py), which also traiNNer-redux's RCAN and spandrel's follow: MeanShift convs (sub_mean /
add_mean), head, body.N.body.*, tail = (Upsampler, conv). Those repositories feed images in
[0, rgb_range]; these twins take [0, 1] and scale by rgb_range around the network, as spandrel's
RCAN does. `norm=False` drops the MeanShift pair (traiNNer's RCAN default; rgb_range is then 1),
`unshuffle_mod` puts a pixel unshuffle at head.0 (traiNNer's x1/x2 RCAN). Not registered: a layout
test builds one, saves its state_dict as a .pth and loads that into srgrad's EDSR / RCAN."""
from __future__ import annotations

import math

import torch
from torch import nn

from .rrdbnet import pad_to_multiple

DIV2K_MEAN = (0.4488, 0.4371, 0.4040)


def conv(cin, cout, k=3, bias=True):
    return nn.Conv2d(cin, cout, k, padding=k // 2, bias=bias)


class MeanShift(nn.Conv2d):
    def __init__(self, rgb_range, rgb_mean=DIV2K_MEAN, rgb_std=(1.0, 1.0, 1.0), sign=-1):
        super().__init__(3, 3, kernel_size=1)
        std = torch.Tensor(rgb_std)
        self.weight.data = torch.eye(3).view(3, 3, 1, 1) / std.view(3, 1, 1, 1)
        self.bias.data = sign * rgb_range * torch.Tensor(rgb_mean) / std
        for p in self.parameters():
            p.requires_grad = False


class ResBlock(nn.Module):
    def __init__(self, n_feats, res_scale=1.0):
        super().__init__()
        self.body = nn.Sequential(conv(n_feats, n_feats), nn.ReLU(True), conv(n_feats, n_feats))
        self.res_scale = res_scale

    def forward(self, x):
        return self.body(x).mul(self.res_scale) + x


class Upsampler(nn.Sequential):
    def __init__(self, scale, n_feats):
        m = []
        if scale & (scale - 1) == 0:
            for _ in range(int(math.log2(scale))):
                m += [conv(n_feats, 4 * n_feats), nn.PixelShuffle(2)]
        else:
            m += [conv(n_feats, 9 * n_feats), nn.PixelShuffle(3)]
        super().__init__(*m)


class _MeanShifted(nn.Module):
    """What EDSR and RCAN share: x * rgb_range -> sub_mean -> head -> body + skip -> tail ->
    add_mean -> / rgb_range (the output cropped after a padded unshuffle)."""

    def _shifts(self, rgb_range, rgb_mean, norm):
        self.rgb_range = rgb_range if norm else 1
        if norm:
            self.sub_mean = MeanShift(rgb_range, rgb_mean)
            self.add_mean = MeanShift(rgb_range, rgb_mean, sign=1)

    def forward(self, x):
        h, w = x.shape[-2:]
        if self.down > 1:
            x = pad_to_multiple(x, self.down)
        x = x * self.rgb_range
        if hasattr(self, "sub_mean"):
            x = self.sub_mean(x)
        x = self.head(x)
        x = self.tail(self.body(x) + x)
        if hasattr(self, "add_mean"):
            x = self.add_mean(x)
        return (x / self.rgb_range)[..., :h * self.scale, :w * self.scale]


class EDSRPyTorch(_MeanShifted):
    """EDSR-PyTorch's EDSR (edsr_baseline_x2: n_resblocks 16, n_feats 64, res_scale 1; edsr_x4:
    32, 256, 0.1)."""

    def __init__(self, scale=2, n_resblocks=16, n_feats=64, res_scale=1.0, rgb_range=255,
                 rgb_mean=DIV2K_MEAN, n_colors=3):
        super().__init__()
        self.scale, self.down = scale, 1
        self._shifts(rgb_range, rgb_mean, True)
        self.head = nn.Sequential(conv(n_colors, n_feats))
        self.body = nn.Sequential(*[ResBlock(n_feats, res_scale) for _ in range(n_resblocks)],
                                  conv(n_feats, n_feats))
        self.tail = nn.Sequential(Upsampler(scale, n_feats), conv(n_feats, n_colors))


class CALayer(nn.Module):
    def __init__(self, channel, reduction=16):
        super().__init__()
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.conv_du = nn.Sequential(nn.Conv2d(channel, channel // reduction, 1), nn.ReLU(True),
                                     nn.Conv2d(channel // reduction, channel, 1), nn.Sigmoid())

    def forward(self, x):
        return x * self.conv_du(self.avg_pool(x))


class RCAB(nn.Module):
    def __init__(self, n_feat, reduction):
        super().__init__()
        self.body = nn.Sequential(conv(n_feat, n_feat), nn.ReLU(True), conv(n_feat, n_feat),
                                  CALayer(n_feat, reduction))

    def forward(self, x):
        return self.body(x) + x  # the official RCAB ignores res_scale


class ResidualGroup(nn.Module):
    def __init__(self, n_feat, reduction, n_resblocks):
        super().__init__()
        self.body = nn.Sequential(*[RCAB(n_feat, reduction) for _ in range(n_resblocks)],
                                  conv(n_feat, n_feat))

    def forward(self, x):
        return self.body(x) + x


class RCANOfficial(_MeanShifted):
    """The official RCAN (RCAN_BIX4.pt: 10 groups of 20 RCABs, 64 features, reduction 16), with
    traiNNer-redux's norm and unshuffle_mod."""

    def __init__(self, scale=4, n_resgroups=10, n_resblocks=20, n_feats=64, reduction=16,
                 rgb_range=255, rgb_mean=DIV2K_MEAN, n_colors=3, norm=True, unshuffle_mod=False):
        super().__init__()
        self.scale, self.down = scale, (4 // scale if unshuffle_mod else 1)
        self._shifts(rgb_range, rgb_mean, norm)
        head = [conv(n_colors * self.down ** 2, n_feats)]
        self.head = nn.Sequential(*([nn.PixelUnshuffle(self.down)] if self.down > 1 else []), *head)
        self.body = nn.Sequential(*[ResidualGroup(n_feats, reduction, n_resblocks)
                                    for _ in range(n_resgroups)], conv(n_feats, n_feats))
        self.tail = nn.Sequential(Upsampler(scale * self.down, n_feats), conv(n_feats, n_colors))
