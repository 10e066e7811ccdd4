"""PyTorch twin of SPAN (hongyuanyu/SPAN's span_arch.py as spandrel 0.4.2 holds it, with
traiNNer-redux's num_blocks; srgrad's keywords: `scale` for `upscale`, `deploy` for the fused layout
of the NTIRE 2024 challenge code, whose Conv3XC keeps eval_conv alone)."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from . import register


class Conv3XC(nn.Module):
    def __init__(self, c_in, c_out, gain1=1, s=1, bias=True, deploy=False):
        super().__init__()
        self.deploy = deploy
        gain = gain1
        if not deploy:
            self.sk = nn.Conv2d(c_in, c_out, kernel_size=1, padding=0, stride=s, bias=bias)
            self.conv = nn.Sequential(
                nn.Conv2d(c_in, c_in * gain, kernel_size=1, padding=0, bias=bias),
                nn.Conv2d(c_in * gain, c_out * gain, kernel_size=3, stride=s, padding=0, bias=bias),
                nn.Conv2d(c_out * gain, c_out, kernel_size=1, padding=0, bias=bias),
            )
        self.eval_conv = nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, stride=s, bias=bias)
        if not deploy:
            self.eval_conv.weight.requires_grad = False
            self.eval_conv.bias.requires_grad = False
            self.update_params()

    def update_params(self):  # spandrel's, verbatim in substance
        w1 = self.conv[0].weight.data.clone().detach()
        b1 = self.conv[0].bias.data.clone().detach()
        w2 = self.conv[1].weight.data.clone().detach()
        b2 = self.conv[1].bias.data.clone().detach()
        w3 = self.conv[2].weight.data.clone().detach()
        b3 = self.conv[2].bias.data.clone().detach()
        w = F.conv2d(w1.flip(2, 3).permute(1, 0, 2, 3), w2, padding=2, stride=1).flip(2, 3).permute(1, 0, 2, 3)
        b = (w2 * b1.reshape(1, -1, 1, 1)).sum((1, 2, 3)) + b2
        weight_concat = F.conv2d(w.flip(2, 3).permute(1, 0, 2, 3), w3, padding=0, stride=1).flip(2, 3).permute(
            1, 0, 2, 3)
        bias_concat = (w3 * b.reshape(1, -1, 1, 1)).sum((1, 2, 3)) + b3
        sk_w = F.pad(self.sk.weight.data.clone().detach(), [1, 1, 1, 1])
        self.eval_conv.weight.data = (weight_concat + sk_w).contiguous()
        self.eval_conv.bias.data = (bias_concat + self.sk.bias.data.clone().detach()).contiguous()

    def forward(self, x):
        if self.deploy:
            return self.eval_conv(x)
        if self.training:
            x_pad = F.pad(x, (1, 1, 1, 1), "constant", 0)
            return self.conv(x_pad) + self.sk(x)
        self.update_params()
        return self.eval_conv(x)


class SPAB(nn.Module):
    def __init__(self, in_channels, deploy=False):
        super().__init__()
        self.c1_r = Conv3XC(in_channels, in_channels, gain1=2, s=1, deploy=deploy)
        self.c2_r = Conv3XC(in_channels, in_channels, gain1=2, s=1, deploy=deploy)
        self.c3_r = Conv3XC(in_channels, in_channels, gain1=2, s=1, deploy=deploy)
        self.act1 = nn.SiLU(inplace=True)
        self.act2 = nn.LeakyReLU(0.1, inplace=True)

    def forward(self, x):
        out1 = self.c1_r(x)
        out2 = self.c2_r(self.act1(out1))
        out3 = self.c3_r(self.act1(out2))
        sim_att = torch.sigmoid(out3) - 0.5
        return (out3 + x) * sim_att, out1, sim_att


@register
class SPAN(nn.Module):
    def __init__(self, num_in_ch=3, num_out_ch=3, feature_channels=48, num_blocks=6, scale=4, bias=True,
                 norm=True, img_range=255.0, rgb_mean=(0.4488, 0.4371, 0.4040), deploy=False):
        super().__init__()
        self.img_range = img_range
        mean = torch.tensor(rgb_mean, dtype=torch.float64)
        if num_in_ch == 1 and len(rgb_mean) == 3:  # srgrad's rule for one channel (the original needs 3)
            mean = mean.mean(0, keepdim=True)
        self.mean = mean.float().view(1, -1, 1, 1)
        self.num_blocks = num_blocks
        if not norm:
            self.register_buffer("no_norm", torch.zeros(1))
        else:
            self.no_norm = None
        self.conv_1 = Conv3XC(num_in_ch, feature_channels, gain1=2, s=1, deploy=deploy)
        for i in range(1, num_blocks + 1):
            setattr(self, f"block_{i}", SPAB(feature_channels, deploy=deploy))
        self.conv_cat = nn.Conv2d(feature_channels * 4, feature_channels, kernel_size=1, bias=True)
        self.conv_2 = Conv3XC(feature_channels, feature_channels, gain1=2, s=1, deploy=deploy)
        self.upsampler = nn.Sequential(
            nn.Conv2d(feature_channels, num_out_ch * scale ** 2, 3, padding=1), nn.PixelShuffle(scale))

    def forward(self, x):
        if self.no_norm is None:
            x = (x - self.mean.type_as(x)) * self.img_range
        out_feature = self.conv_1(x)
        out = out_b1 = last_mid = out_feature
        for i in range(1, self.num_blocks + 1):
            out, mid, _ = getattr(self, f"block_{i}")(out)
            if i == 1:
                out_b1 = out
            last_mid = mid
        out = self.conv_2(out)
        out = self.conv_cat(torch.cat([out_feature, out, out_b1, last_mid], 1))
        return self.upsampler(out)
