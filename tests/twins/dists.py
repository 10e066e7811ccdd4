"""The DISTS package's DISTS (DISTS_pytorch 0.1, DISTS_pt.py) in plain torch, its torchvision VGG16
built from the same layout: the twin of framework/nn/dists.py (same module names and state_dict)."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from framework.nn.lpips import NETS
from tests.twins.lpips import _layer


class L2pooling(nn.Module):
    def __init__(self, filter_size=5, stride=2, channels=None):
        super().__init__()
        self.padding, self.stride, self.channels = (filter_size - 2) // 2, stride, channels
        a = np.hanning(filter_size)[1:-1]
        g = torch.Tensor(a[:, None] * a[None, :])
        g = g / torch.sum(g)
        self.register_buffer("filter", g[None, None, :, :].repeat((self.channels, 1, 1, 1)))

    def forward(self, x):
        out = F.conv2d(x ** 2, self.filter, stride=self.stride, padding=self.padding, groups=x.shape[1])
        return (out + 1e-12).sqrt()


class DISTS(nn.Module):
    def __init__(self):
        super().__init__()
        features = NETS["vgg"]["features"]
        bounds = [(0, 4), (4, 9), (9, 16), (16, 23), (23, 30)]
        pools = {4: 64, 9: 128, 16: 256, 23: 512}
        for s, (a, b) in enumerate(bounds, 1):
            stage = nn.Sequential()
            for i in range(a, b):
                stage.add_module(str(i), L2pooling(channels=pools[i]) if i in pools else _layer(features[i]))
            setattr(self, f"stage{s}", stage)
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, -1, 1, 1))
        self.chns = [3, 64, 128, 256, 512, 512]
        self.alpha = nn.Parameter(torch.randn(1, sum(self.chns), 1, 1) * 0.01 + 0.1)
        self.beta = nn.Parameter(torch.randn(1, sum(self.chns), 1, 1) * 0.01 + 0.1)

    def forward_once(self, x):
        h = (x - self.mean) / self.std
        feats = [x]
        for s in range(1, 6):
            h = getattr(self, f"stage{s}")(h)
            feats.append(h)
        return feats

    def forward(self, x, y):
        feats0, feats1 = self.forward_once(x), self.forward_once(y)
        dist1 = dist2 = 0
        c1 = c2 = 1e-6
        w_sum = self.alpha.sum() + self.beta.sum()
        alpha = torch.split(self.alpha / w_sum, self.chns, dim=1)
        beta = torch.split(self.beta / w_sum, self.chns, dim=1)
        for k in range(len(self.chns)):
            x_mean = feats0[k].mean([2, 3], keepdim=True)
            y_mean = feats1[k].mean([2, 3], keepdim=True)
            S1 = (2 * x_mean * y_mean + c1) / (x_mean ** 2 + y_mean ** 2 + c1)
            dist1 = dist1 + (alpha[k] * S1).sum(1, keepdim=True)
            x_var = ((feats0[k] - x_mean) ** 2).mean([2, 3], keepdim=True)
            y_var = ((feats1[k] - y_mean) ** 2).mean([2, 3], keepdim=True)
            xy_cov = (feats0[k] * feats1[k]).mean([2, 3], keepdim=True) - x_mean * y_mean
            S2 = (2 * xy_cov + c2) / (x_var + y_var + c2)
            dist2 = dist2 + (beta[k] * S2).sum(1, keepdim=True)
        return 1 - (dist1 + dist2).squeeze()


def files(model: DISTS, folder):
    """torchvision's VGG16 file (`features.<i>.*`) and the package's weights.pt (alpha, beta)."""
    sd = model.state_dict()
    backbone = {"features." + k.split(".", 1)[1]: v for k, v in sd.items()
                if k.startswith("stage") and not k.endswith("filter")}
    torch.save(backbone, folder / "vgg16.pth")
    torch.save({"alpha": sd["alpha"], "beta": sd["beta"]}, folder / "weights.pt")
    return str(folder / "vgg16.pth"), str(folder / "weights.pt")
