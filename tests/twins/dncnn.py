"""PyTorch twin of DnCNN: spandrel 0.4.2's network_dncnn.py (KAIR's models/network_dncnn.py DnCNN,
with spandrel's `mode` for FDnCNN) built from the KAIR blocks of the DRUNet twin (its `conv`,
`sequential`), with the original's keys and forward; around it spandrel's descriptor call for
FDnCNN: the noise map (noise_level / 255 everywhere) appended as the last channel (spandrel makes it
for a batch of 1: here for the batch); an input of in_nc channels keeps its own."""
from __future__ import annotations

import torch
import torch.nn as nn

from . import register
from .drunet import conv, sequential


class KAIRDnCNN(nn.Module):
    def __init__(self, *, in_nc=1, out_nc=1, nc=64, nb=17, act_mode="BR", mode="DnCNN"):
        super().__init__()
        assert "R" in act_mode or "L" in act_mode
        self.mode = mode
        if mode == "DnCNN":
            assert in_nc == out_nc
        m_head = conv(in_nc, nc, mode="C" + act_mode[-1], bias=True)
        m_body = [conv(nc, nc, mode="C" + act_mode, bias=True) for _ in range(nb - 2)]
        m_tail = conv(nc, out_nc, mode="C", bias=True)
        self.model = sequential(m_head, *m_body, m_tail)

    def forward(self, x):
        if self.mode == "DnCNN":
            return x - self.model(x)
        return self.model(x)


@register
class DnCNN(KAIRDnCNN):
    def __init__(self, in_nc=1, out_nc=1, nc=64, nb=17, act_mode="BR", mode="DnCNN",
                 noise_level=15.0, scale=1):
        assert scale == 1
        super().__init__(in_nc=in_nc, out_nc=out_nc, nc=nc, nb=nb, act_mode=act_mode, mode=mode)
        self.noise_level = noise_level

    def forward(self, image):
        """spandrel's call_fn: FDnCNN gets the map appended (unless the input carries it)."""
        if self.mode == "FDnCNN" and image.shape[1] != self.model[0].weight.shape[1]:
            n, _, h, w = image.shape
            noise_map = torch.zeros(n, 1, h, w).to(image) + self.noise_level / 255
            image = torch.cat([image, noise_map], dim=1)
        return super().forward(image)
