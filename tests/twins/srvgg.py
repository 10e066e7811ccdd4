"""PyTorch twin of SRVGGNetCompact (BasicSR / Real-ESRGAN srvgg_arch.py; `scale` for `upscale`)."""
from __future__ import annotations

from torch import nn
from torch.nn import functional as F

from . import register


@register
class SRVGGNetCompact(nn.Module):
    def __init__(self, num_in_ch=3, num_out_ch=3, num_feat=64, num_conv=16, scale=4, act_type="prelu",
                 init="torch"):  # srgrad's init option: the twin takes weights by copy
        super().__init__()
        self.scale = scale

        def act():
            return {"relu": lambda: nn.ReLU(inplace=True), "prelu": lambda: nn.PReLU(num_feat),
                    "leakyrelu": lambda: nn.LeakyReLU(0.1, inplace=True)}[act_type]()

        self.body = nn.ModuleList([nn.Conv2d(num_in_ch, num_feat, 3, 1, 1), act()])
        for _ in range(num_conv):
            self.body.extend([nn.Conv2d(num_feat, num_feat, 3, 1, 1), act()])
        self.body.append(nn.Conv2d(num_feat, num_out_ch * scale * scale, 3, 1, 1))
        self.upsampler = nn.PixelShuffle(scale)

    def forward(self, x):
        out = x
        for layer in self.body:
            out = layer(out)
        out = self.upsampler(out)
        out += F.interpolate(x, scale_factor=float(self.scale), mode="nearest")
        return out
