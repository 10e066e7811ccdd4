"""PyTorch twin of FBCNN: spandrel 0.4.2's FBCNN.py (jiaxi-jiang/FBCNN's models/network_fbcnn.py)
built from the KAIR blocks of the DRUNet twin (conv, sequential, ResBlock, the down / upsamplers),
with the original's QFAttention, module structure, keys and forward (the replication padding to a
multiple of 8 inside it, the (image, qf) pair); the registered twin returns the image, as
spandrel's descriptor call (`model(image)[0]`), with the quality_factor keyword given as the
original's qf_input = 1 - QF / 100; `forward_qf` returns the original's pair."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from . import register
from .drunet import (ResBlock, conv, downsample_avgpool, downsample_strideconv, sequential,
                     upsample_convtranspose, upsample_pixelshuffle, upsample_upconv)


class QFAttention(nn.Module):
    def __init__(self, in_channels=64, out_channels=64, kernel_size=3, stride=1, padding=1, bias=True,
                 mode="CRC", negative_slope=0.2):
        super().__init__()
        assert in_channels == out_channels
        if mode[0] in ["R", "L"]:
            mode = mode[0].lower() + mode[1:]
        self.res = conv(in_channels, out_channels, kernel_size, stride, padding, bias, mode,
                        negative_slope)

    def forward(self, x, gamma, beta):
        gamma = gamma.unsqueeze(-1).unsqueeze(-1)
        beta = beta.unsqueeze(-1).unsqueeze(-1)
        res = gamma * self.res(x) + beta
        return x + res


class OriginalFBCNN(nn.Module):
    def __init__(self, *, in_nc=3, out_nc=3, nc=(64, 128, 256, 512), nb=4, act_mode="R",
                 downsample_mode="strideconv", upsample_mode="convtranspose"):
        super().__init__()
        self.m_head = conv(in_nc, nc[0], bias=True, mode="C")
        self.nb = nb
        self.nc = nc
        downsample_block = {"avgpool": downsample_avgpool,
                            "strideconv": downsample_strideconv}[downsample_mode]

        def blocks(c, block=ResBlock):
            return [block(c, c, bias=True, mode="C" + act_mode + "C") for _ in range(nb)]
        self.m_down1 = sequential(*blocks(nc[0]), downsample_block(nc[0], nc[1], bias=True, mode="2"))
        self.m_down2 = sequential(*blocks(nc[1]), downsample_block(nc[1], nc[2], bias=True, mode="2"))
        self.m_down3 = sequential(*blocks(nc[2]), downsample_block(nc[2], nc[3], bias=True, mode="2"))
        self.m_body_encoder = sequential(*blocks(nc[3]))
        self.m_body_decoder = sequential(*blocks(nc[3]))
        upsample_block = {"upconv": upsample_upconv, "pixelshuffle": upsample_pixelshuffle,
                          "convtranspose": upsample_convtranspose}[upsample_mode]
        self.m_up3 = nn.ModuleList([upsample_block(nc[3], nc[2], bias=True, mode="2"),
                                    *blocks(nc[2], QFAttention)])
        self.m_up2 = nn.ModuleList([upsample_block(nc[2], nc[1], bias=True, mode="2"),
                                    *blocks(nc[1], QFAttention)])
        self.m_up1 = nn.ModuleList([upsample_block(nc[1], nc[0], bias=True, mode="2"),
                                    *blocks(nc[0], QFAttention)])
        self.m_tail = conv(nc[0], out_nc, bias=True, mode="C")
        self.qf_pred = sequential(*blocks(nc[3]), nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(),
                                  nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                  nn.Linear(512, 1), nn.Sigmoid())
        self.qf_embed = sequential(nn.Linear(1, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                   nn.Linear(512, 512), nn.ReLU())
        self.to_gamma_3 = sequential(nn.Linear(512, nc[2]), nn.Sigmoid())
        self.to_beta_3 = sequential(nn.Linear(512, nc[2]), nn.Tanh())
        self.to_gamma_2 = sequential(nn.Linear(512, nc[1]), nn.Sigmoid())
        self.to_beta_2 = sequential(nn.Linear(512, nc[1]), nn.Tanh())
        self.to_gamma_1 = sequential(nn.Linear(512, nc[0]), nn.Sigmoid())
        self.to_beta_1 = sequential(nn.Linear(512, nc[0]), nn.Tanh())

    def forward(self, x, qf_input=None):
        h, w = x.size()[-2:]
        padding_bottom = int(np.ceil(h / 8) * 8 - h)
        padding_right = int(np.ceil(w / 8) * 8 - w)
        x = nn.ReplicationPad2d((0, padding_right, 0, padding_bottom))(x)
        x1 = self.m_head(x)
        x2 = self.m_down1(x1)
        x3 = self.m_down2(x2)
        x4 = self.m_down3(x3)
        x = self.m_body_encoder(x4)
        qf = self.qf_pred(x)
        x = self.m_body_decoder(x)
        qf_embedding = self.qf_embed(qf_input) if qf_input is not None else self.qf_embed(qf)
        gamma_3, beta_3 = self.to_gamma_3(qf_embedding), self.to_beta_3(qf_embedding)
        gamma_2, beta_2 = self.to_gamma_2(qf_embedding), self.to_beta_2(qf_embedding)
        gamma_1, beta_1 = self.to_gamma_1(qf_embedding), self.to_beta_1(qf_embedding)
        x = x + x4
        x = self.m_up3[0](x)
        for i in range(self.nb):
            x = self.m_up3[i + 1](x, gamma_3, beta_3)
        x = x + x3
        x = self.m_up2[0](x)
        for i in range(self.nb):
            x = self.m_up2[i + 1](x, gamma_2, beta_2)
        x = x + x2
        x = self.m_up1[0](x)
        for i in range(self.nb):
            x = self.m_up1[i + 1](x, gamma_1, beta_1)
        x = x + x1
        x = self.m_tail(x)
        return x[..., :h, :w], qf


@register
class FBCNN(OriginalFBCNN):
    def __init__(self, in_nc=3, out_nc=3, nc=(64, 128, 256, 512), nb=4, act_mode="R",
                 downsample_mode="strideconv", upsample_mode="convtranspose", quality_factor=None,
                 scale=1):
        assert scale == 1
        super().__init__(in_nc=in_nc, out_nc=out_nc, nc=list(nc), nb=nb, act_mode=act_mode,
                         downsample_mode=downsample_mode, upsample_mode=upsample_mode)
        self.quality_factor = quality_factor

    def forward_qf(self, x, qf_input=None):
        if qf_input is None and self.quality_factor is not None:
            qf_input = torch.tensor([[1 - self.quality_factor / 100]], dtype=x.dtype)
        return super().forward(x, qf_input)

    def forward(self, x, qf_input=None):
        return self.forward_qf(x, qf_input)[0]
