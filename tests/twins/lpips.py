"""The lpips package's LPIPS (0.1.4, lpips/lpips.py and pretrained_networks.py) in plain torch, its
torchvision backbone built from the same `features` layout: the twin of framework/nn/lpips.py. The
module names are the package's, so one state_dict serves both."""
from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from framework.nn.lpips import NETS


def _layer(spec):
    if spec[0] == "conv":
        _, cin, cout, k, s, p = spec
        return nn.Conv2d(cin, cout, k, stride=s, padding=p)
    if spec[0] == "relu":
        return nn.ReLU(inplace=False)
    return nn.MaxPool2d(kernel_size=spec[1], stride=spec[2])


class Backbone(nn.Module):
    def __init__(self, net):
        super().__init__()
        spec = NETS[net]
        self.n = len(spec["slices"])
        for s, (a, b) in enumerate(spec["slices"], 1):
            setattr(self, f"slice{s}", nn.Sequential(OrderedDict((str(i), _layer(spec["features"][i]))
                                                                 for i in range(a, b))))

    def forward(self, x):
        outs = []
        for s in range(1, self.n + 1):
            x = getattr(self, f"slice{s}")(x)
            outs.append(x)
        return outs


class NetLinLayer(nn.Module):
    def __init__(self, chn_in):
        super().__init__()
        self.model = nn.Sequential(nn.Dropout(), nn.Conv2d(chn_in, 1, 1, stride=1, padding=0, bias=False))

    def forward(self, x):
        return self.model(x)


class ScalingLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("shift", torch.Tensor([-.030, -.088, -.188])[None, :, None, None])
        self.register_buffer("scale", torch.Tensor([.458, .448, .450])[None, :, None, None])

    def forward(self, x):
        return (x - self.shift) / self.scale


def normalize_tensor(x, eps=1e-10):
    return x / (torch.sqrt(torch.sum(x ** 2, dim=1, keepdim=True)) + eps)


class LPIPS(nn.Module):
    def __init__(self, net="alex", spatial=False):
        super().__init__()
        self.scaling_layer = ScalingLayer()
        self.net = Backbone(net)
        self.spatial = spatial
        for k, c in enumerate(NETS[net]["channels"]):
            setattr(self, f"lin{k}", NetLinLayer(c))
        self.L = len(NETS[net]["channels"])
        self.eval()

    def forward(self, in0, in1, normalize=False):
        if normalize:
            in0, in1 = 2 * in0 - 1, 2 * in1 - 1
        outs0, outs1 = self.net(self.scaling_layer(in0)), self.net(self.scaling_layer(in1))
        val = 0
        for k in range(self.L):
            diff = (normalize_tensor(outs0[k]) - normalize_tensor(outs1[k])) ** 2
            r = getattr(self, f"lin{k}")(diff)
            if self.spatial:
                r = nn.Upsample(size=in0.shape[2:], mode="bilinear", align_corners=False)(r)
            else:
                r = r.mean([2, 3], keepdim=True)
            val = val + r
        return val


def files(model: LPIPS, folder):
    """The model's weights as the two files srgrad reads: torchvision's backbone layout
    (`features.<i>.*`) and the lpips package's linear-layer file (`lin<k>.model.1.weight`)."""
    sd = model.state_dict()
    backbone = {"features." + k.split(".", 2)[2]: v for k, v in sd.items() if k.startswith("net.")}
    lin = {k: v for k, v in sd.items() if k.startswith("lin")}
    torch.save(backbone, folder / "backbone.pth")
    torch.save(lin, folder / "lin.pth")
    return str(folder / "backbone.pth"), str(folder / "lin.pth")
