"""PyTorch twin of MM-RealSR's generator, written from spandrel 0.4.2's
spandrel/architectures/MMRealSR/__arch/mmrealsr_arch.py (TencentARC/MM-RealSR's MMRRDBNet_test):
the same modules, keys, init and forward (de_net's scores, overridden by custom_degrees with
zeros_like(...).fill_ as there), with spandrel's call around it (pad to 16 px, the image only).
The RRDBs are the RRDBNet twin's (BasicSR's, as the original imports them)."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from . import register
from ._basicsr import default_init_weights as _conv_init
from ._spandrel import sized
from .rrdbnet import RRDB


@torch.no_grad()
def default_init_weights(modules, scale=1.0):
    """BasicSR's: kaiming normal x scale on every Conv2d (the shared twin helper) and Linear."""
    _conv_init(modules, scale)
    for module in modules:
        for m in module.modules():
            if isinstance(m, nn.Linear):
                nn.init.kaiming_normal_(m.weight)
                m.weight.mul_(scale)
                m.bias.fill_(0)


class ResidualBlockNoBN(nn.Module):
    def __init__(self, num_feat=64):
        super().__init__()
        self.conv1 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv2 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.relu = nn.ReLU(inplace=True)
        default_init_weights([self.conv1, self.conv2], 0.1)

    def forward(self, x):
        return x + self.conv2(self.relu(self.conv1(x)))


class AffineModulate(nn.Module):
    def __init__(self, num_feat=64):
        super().__init__()
        d, h = 512, (512 + num_feat * 2) // 2
        self.fc = nn.Sequential(nn.Linear(d, h), nn.ReLU(True), nn.Linear(h, h), nn.ReLU(True),
                                nn.Linear(h, num_feat * 2))
        default_init_weights([self.fc], 0.1)

    def forward(self, x, d):
        d = self.fc(d)
        gamma, beta = torch.chunk(d.view(d.size(0), d.size(1), 1, 1), chunks=2, dim=1)
        return (1 + gamma) * x + beta


class DEResNet(nn.Module):
    def __init__(self, num_in_ch, num_degradation, actv, num_feats, num_blocks, downscales):
        super().__init__()
        n = len(num_feats)
        self.conv_first = nn.ModuleList(nn.Conv2d(num_in_ch, num_feats[0], 3, 1, 1)
                                        for _ in range(num_degradation))
        self.body = nn.ModuleList()
        for _ in range(num_degradation):
            body = []
            for s in range(n):
                body += [ResidualBlockNoBN(num_feats[s]) for _ in range(num_blocks[s])]
                if downscales[s] == 1:
                    if s < n - 1 and num_feats[s] != num_feats[s + 1]:
                        body.append(nn.Conv2d(num_feats[s], num_feats[s + 1], 3, 1, 1))
                else:
                    body.append(nn.Conv2d(num_feats[s], num_feats[min(s + 1, n - 1)], 3, 2, 1))
            self.body.append(nn.Sequential(*body))
        act = {"sigmoid": nn.Sigmoid, "tanh": nn.Tanh}[actv]
        self.fc_degree = nn.ModuleList(nn.Sequential(
            nn.Linear(num_feats[-1], 512), nn.ReLU(inplace=True), nn.Linear(512, 1), act())
            for _ in range(num_degradation))
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        default_init_weights([self.conv_first, self.body, self.fc_degree], 0.1)

    def forward(self, x):
        degrees = []
        for i in range(len(self.fc_degree)):
            feat = self.avg_pool(self.body[i](self.conv_first[i](x))).squeeze(-1).squeeze(-1)
            degrees.append(self.fc_degree[i](feat).squeeze(-1))
        return degrees


class MMRRDBNet(nn.Module):
    def __init__(self, num_in_ch=3, num_out_ch=3, scale=4, num_feat=64, num_block=23,
                 num_grow_ch=32, num_degradation=2, degradation_degree_actv="sigmoid",
                 num_feats=(64, 128, 256, 512), num_blocks=(2, 2, 2, 2), downscales=(2, 2, 2, 1),
                 custom_degrees=None):
        super().__init__()
        assert scale == 4
        self.conv_first = nn.Conv2d(num_in_ch, num_feat, 3, 1, 1)
        self.body = nn.ModuleList()
        self.am_list = nn.ModuleList()
        for _ in range(num_block):
            self.body.append(RRDB(num_feat, num_grow_ch=num_grow_ch))
            self.am_list.append(AffineModulate(num_feat))
        self.conv_body = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_up1 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_up2 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_hr = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, 1, 1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)
        self.num_degradation = num_degradation
        self.custom_degrees = tuple(custom_degrees or (None,) * num_degradation)
        self.de_net = DEResNet(num_in_ch, num_degradation, degradation_degree_actv,
                               list(num_feats), list(num_blocks), list(downscales))
        self.dd_embed = nn.Sequential(nn.Linear(num_degradation, 512), nn.ReLU(True))
        default_init_weights([self.dd_embed], 0.1)

    def forward(self, x):
        feat = self.conv_first(x)
        feat_res = feat
        degrees = self.de_net(x)
        new = [degrees[i] if self.custom_degrees[i] is None else
               torch.zeros_like(degrees[i]).fill_(self.custom_degrees[i])
               for i in range(self.num_degradation)]
        d_embedding = self.dd_embed(torch.stack(new, dim=1))
        for i in range(len(self.body)):
            feat = self.am_list[i](self.body[i](feat), d_embedding)
        feat = feat_res + self.conv_body(feat)
        feat = self.lrelu(self.conv_up1(F.interpolate(feat, scale_factor=2, mode="nearest")))
        feat = self.lrelu(self.conv_up2(F.interpolate(feat, scale_factor=2, mode="nearest")))
        return self.conv_last(self.lrelu(self.conv_hr(feat)))


@register
def MMRealSR(**kw):  # noqa: N802 (the srgrad model's name)
    return sized(MMRRDBNet, 16, 1, 4)(**kw)
