"""PyTorch twins of RRDBNet's published layouts in the original ESRGAN repository's OWN module
structures (not srgrad's keys): the first code's flat Sequential (`model.0`, `model.1.sub.N.RDB1.
conv1.0`, ..., as spandrel's ESRGAN arch builds it, with its ESRGAN+ `plus` and pixel unshuffle)
and the later RRDBNet_arch.py (`conv_first`, `RRDB_trunk`, `trunk_conv`, `upconv1..`, `HRconv`,
as xinntao/ESRGAN, BSRGAN and RealSR publish it). Not registered: a layout test builds one, saves
its state_dict as a .pth and loads that into srgrad's RRDBNet."""
from __future__ import annotations

import torch
from torch import nn

from .rrdbnet import pad_to_multiple


def _conv(cin, cout, act=True):
    """The first ESRGAN code's conv_block: a Sequential (conv[, LeakyReLU]) -> keys `N.0.weight`."""
    layers = [nn.Conv2d(cin, cout, 3, 1, 1)]
    if act:
        layers.append(nn.LeakyReLU(0.2, inplace=True))
    return nn.Sequential(*layers)


class DenseBlock(nn.Module):
    """ResidualDenseBlock_5C; `seq`: convs wrapped as the first code's conv_block (conv1.0.weight)
    or bare as the later code's (conv1.weight)."""

    def __init__(self, nf, gc, seq=True, plus=False):
        super().__init__()
        self.seq = seq
        self.conv1x1 = nn.Conv2d(nf, gc, 1, bias=False) if plus else None
        for i in range(5):
            cin, cout = nf + i * gc, (gc if i < 4 else nf)
            setattr(self, f"conv{i + 1}", _conv(cin, cout, act=i < 4) if seq
                    else nn.Conv2d(cin, cout, 3, 1, 1))
        self.lrelu = nn.LeakyReLU(0.2, inplace=True)

    def _c(self, i, x):
        conv = getattr(self, f"conv{i}")
        return conv(x) if self.seq or i == 5 else self.lrelu(conv(x))

    def forward(self, x):
        x1 = self._c(1, x)
        x2 = self._c(2, torch.cat((x, x1), 1))
        if self.conv1x1 is not None:
            x2 = x2 + self.conv1x1(x)
        x3 = self._c(3, torch.cat((x, x1, x2), 1))
        x4 = self._c(4, torch.cat((x, x1, x2, x3), 1))
        if self.conv1x1 is not None:
            x4 = x4 + x2
        return self._c(5, torch.cat((x, x1, x2, x3, x4), 1)) * 0.2 + x


class RRDB(nn.Module):
    def __init__(self, nf, gc, seq=True, plus=False):
        super().__init__()
        self.RDB1, self.RDB2, self.RDB3 = (DenseBlock(nf, gc, seq, plus) for _ in range(3))

    def forward(self, x):
        return self.RDB3(self.RDB2(self.RDB1(x))) * 0.2 + x


class Shortcut(nn.Module):
    def __init__(self, sub):
        super().__init__()
        self.sub = sub

    def forward(self, x):
        return x + self.sub(x)


class ESRGANSequential(nn.Module):
    """The first layout: model.0 conv, model.1 Shortcut(sub.0..nb-1 RRDBs, sub.nb conv), then per x2
    stage (Upsample, conv, LeakyReLU), then conv, LeakyReLU, conv; `shuffle_factor` unshuffles the
    input first (spandrel's; sides padded, output cropped to the true scale)."""

    def __init__(self, in_nc=3, out_nc=3, nf=64, nb=23, gc=32, stages=2, plus=False,
                 shuffle_factor=1):
        super().__init__()
        self.shuffle, self.scale = shuffle_factor, 2 ** stages // shuffle_factor
        layers = [nn.Conv2d(in_nc * shuffle_factor ** 2, nf, 3, 1, 1),
                  Shortcut(nn.Sequential(*[RRDB(nf, gc, True, plus) for _ in range(nb)],
                                         nn.Conv2d(nf, nf, 3, 1, 1)))]
        for _ in range(stages):
            layers += [nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(nf, nf, 3, 1, 1),
                       nn.LeakyReLU(0.2, inplace=True)]
        layers += [nn.Conv2d(nf, nf, 3, 1, 1), nn.LeakyReLU(0.2, inplace=True),
                   nn.Conv2d(nf, out_nc, 3, 1, 1)]
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        h, w = x.shape[-2:]
        if self.shuffle > 1:
            x = nn.functional.pixel_unshuffle(pad_to_multiple(x, self.shuffle), self.shuffle)
        return self.model(x)[..., :h * self.scale, :w * self.scale]


class ESRGANTrunk(nn.Module):
    """The later layout (xinntao/ESRGAN RRDBNet_arch.py; BSRGAN's with sf: upconv1 only at x2)."""

    def __init__(self, in_nc=3, out_nc=3, nf=64, nb=23, gc=32, stages=2):
        super().__init__()
        self.conv_first = nn.Conv2d(in_nc, nf, 3, 1, 1)
        self.RRDB_trunk = nn.Sequential(*[RRDB(nf, gc, seq=False) for _ in range(nb)])
        self.trunk_conv = nn.Conv2d(nf, nf, 3, 1, 1)
        self.stages = stages
        for i in range(stages):
            setattr(self, f"upconv{i + 1}", nn.Conv2d(nf, nf, 3, 1, 1))
        self.HRconv = nn.Conv2d(nf, nf, 3, 1, 1)
        self.conv_last = nn.Conv2d(nf, out_nc, 3, 1, 1)
        self.lrelu = nn.LeakyReLU(0.2, inplace=True)

    def forward(self, x):
        fea = self.conv_first(x)
        fea = fea + self.trunk_conv(self.RRDB_trunk(fea))
        for i in range(self.stages):
            up = getattr(self, f"upconv{i + 1}")
            fea = self.lrelu(up(nn.functional.interpolate(fea, scale_factor=2, mode="nearest")))
        return self.conv_last(self.lrelu(self.HRconv(fea)))
