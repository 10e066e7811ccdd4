"""KernelGAN's networks (Bell-Kligler, Shocher, Irani, "Blind Super-Resolution Kernel Estimation
using an Internal-GAN", NeurIPS 2019; sefibk/KernelGAN's networks.py), with its parameter names:

- KernelGANGenerator: a deep *linear* downscaler, convolutions 7, 5, 3, 1, 1, 1 (G_structure) with
  64 channels, no biases, no padding, the last with stride 1 / scale_factor, run on each colour
  plane alone. Being linear it is one correlation with one kernel, the product of its layers
  (13x13 for 7, 5, 3: `kernel()`, KernelGAN's calc_curr_k); `forward` runs that kernel, the same
  map as running the layers one by one (to float rounding) at a fraction of the cost, and the
  gradients reach every layer through `kernel()`.
- KernelGANDiscriminator: a fully convolutional patch discriminator: a spectrally normalised 7x7
  convolution (D_kernel_size), then D_n_layers - 2 blocks of [spectrally normalised 1x1
  convolution, BatchNorm, ReLU], then a spectrally normalised 1x1 convolution to one channel and a
  sigmoid: one real/fake value per 7x7 patch.

Initialisation as KernelGAN's: the generator's weights xavier_normal with gain 0.1; the
discriminator's convolutions keep torch's default (KernelGAN's weights_init_D writes to the
spectral norm's derived `weight`, which the next forward overwrites: its weight_orig stays at the
default), its biases 0, the BatchNorm weights N(1, 0.02) and biases 0.
Registered in MODELS (as BasicSR registers discriminators); they do not upscale, so they take no
`scale` and have no `detect` rule. framework/engine/zeroshot/kernelgan.py trains them.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

import framework.functional as F
from framework import nn
from framework.check import int_arg, int_list, number
from framework.nn import init
from framework.registry import MODELS
from framework.card import Card, SizeRequirements, conv, norm

__all__ = ["KernelGANGenerator", "KernelGANDiscriminator"]


@MODELS.register()
class KernelGANGenerator(nn.Module):
    """(N, C, H, W) -> (N, C, h, w): every plane correlated with `kernel()` and subsampled by
    1 / scale_factor, valid positions only (h = (H - k) // stride + 1, k the kernel size).

    Args:
        G_structure: the layers' kernel sizes, default [7, 5, 3, 1, 1, 1] (the kernel is
            sum - len + 1 = 13 pixels wide).
        G_chan: channels of the hidden layers, default 64.
        scale_factor: the downscaling factor, default 0.5 (stride 2).
    """

    def __init__(self, G_structure=(7, 5, 3, 1, 1, 1), G_chan: int = 64,
                 scale_factor: float = 0.5):
        super().__init__()
        name = "KernelGANGenerator"
        struct = int_list(name, "G_structure", G_structure)
        if len(struct) < 2:
            raise ValueError(f"{name}: G_structure needs at least two layers, got {G_structure!r}")
        chan = int_arg(name, "G_chan", G_chan)
        sf = number(name, "scale_factor", scale_factor, 0.0, 1.0, low_open=True)
        self.stride = round(1 / sf)
        if abs(self.stride * sf - 1) > 1e-9:
            raise ValueError(f"{name}: scale_factor must be 1/s for an integer s, got {sf!r}")
        self.kernel_size = sum(struct) - len(struct) + 1
        self.first_layer = nn.Conv2d(1, chan, struct[0], bias=False)
        self.feature_block = nn.Sequential(*[nn.Conv2d(chan, chan, k, bias=False)
                                             for k in struct[1:-1]])
        self.final_layer = nn.Conv2d(chan, 1, struct[-1], stride=self.stride, bias=False)
        for p in self.parameters():
            init.xavier_normal_(p, 0.1)

    @staticmethod
    def card(spec: dict) -> Card:
        """Convolutions without biases 1 -> G_chan -> ... -> 1, run on each plane alone (so any
        channel count; the card says 1): the output keeps the valid positions of one k x k
        correlation, subsampled by the stride. Its kernel is computed on a (2k - 1)^2 delta with
        G_chan channels whatever the input size: per pixel of an input of at least k x k, at most
        G_chan (2k - 1)^2 / k^2 values."""
        struct, chan = list(spec["G_structure"]), spec["G_chan"]
        stride = round(1 / spec["scale_factor"])
        k = sum(struct) - len(struct) + 1
        params = conv(1, chan, struct[0], bias=False) + sum(
            conv(chan, chan, n, bias=False) for n in struct[1:-1]) + conv(chan, 1, struct[-1], bias=False)
        return Card("kernel estimator", 1, 1, Fraction(1, stride), params,
                    -(-chan * (2 * k - 1) ** 2 // (k * k)) + 1, SizeRequirements(k),
                    out_size=lambda h, w: ((h - k) // stride + 1, (w - k) // stride + 1))

    def layers(self):
        return [self.first_layer, *self.feature_block, self.final_layer]

    def kernel(self):
        """The (k, k) correlation kernel the generator applies (KernelGAN's calc_curr_k: a delta
        through the layers, flipped), a Tensor differentiable in every layer's weight."""
        k = self.kernel_size
        delta = np.zeros((1, 1, 2 * k - 1, 2 * k - 1), self.first_layer.weight.data.dtype)
        delta[0, 0, k - 1, k - 1] = 1.0
        out = delta
        for layer in self.layers():  # stride 1 here: the kernel at every position
            out = F.conv2d(out, layer.weight)
        return F.getitem(out, (0, 0, slice(None, None, -1), slice(None, None, -1)))

    def forward(self, x):
        n, c, h, w = x.shape
        planes = F.reshape(x, n * c, 1, h, w)  # KernelGAN's swap_axis: each plane alone
        kern = F.reshape(self.kernel(), 1, 1, self.kernel_size, self.kernel_size)
        y = F.conv2d(planes, kern, stride=self.stride)
        return F.reshape(y, n, c, *y.shape[-2:])


@MODELS.register()
class KernelGANDiscriminator(nn.Module):
    """(N, C, S, S) -> (N, 1, S - D_kernel_size + 1, S - D_kernel_size + 1) in (0, 1).

    Args:
        D_chan: channels, default 64.
        D_kernel_size: the first convolution's size (the patch judged), default 7.
        D_n_layers: depth, default 7 (first, D_n_layers - 2 blocks, final).
        num_in_ch: image channels, default 3.
    """

    def __init__(self, D_chan: int = 64, D_kernel_size: int = 7, D_n_layers: int = 7,
                 num_in_ch: int = 3):
        super().__init__()
        name = "KernelGANDiscriminator"
        chan = int_arg(name, "D_chan", D_chan)
        size = int_arg(name, "D_kernel_size", D_kernel_size)
        depth = int_arg(name, "D_n_layers", D_n_layers, 2)
        cin = int_arg(name, "num_in_ch", num_in_ch)
        self.first_layer = nn.utils.spectral_norm(nn.Conv2d(cin, chan, size, bias=True))
        block = []
        for _ in range(1, depth - 1):
            block += [nn.utils.spectral_norm(nn.Conv2d(chan, chan, 1, bias=True)),
                      nn.BatchNorm2d(chan), nn.ReLU()]
        self.feature_block = nn.Sequential(*block)
        self.final_layer = nn.Sequential(nn.utils.spectral_norm(nn.Conv2d(chan, 1, 1, bias=True)),
                                         nn.Sigmoid())
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                init.normal_(m.weight, 1.0, 0.02)
                init.zeros_(m.bias)
        self.forward_shave = size - 1

    @staticmethod
    def card(spec: dict) -> Card:
        """A D_kernel_size conv, D_n_layers - 2 blocks of a 1x1 conv and a BatchNorm, a 1x1 conv to
        one channel (spectral norm: weight_orig is the parameter): one value per valid patch."""
        c, chan, size, depth = (spec[k] for k in ("num_in_ch", "D_chan", "D_kernel_size",
                                                 "D_n_layers"))
        params = conv(c, chan, size) + (depth - 2) * (conv(chan, chan, 1) + norm(chan)) + conv(chan, 1, 1)
        return Card("discriminator", c, 1, 1, params, max(chan, c), SizeRequirements(size),
                    channel_keys=("num_in_ch",),
                    out_size=lambda h, w: (h - size + 1, w - size + 1))

    def forward(self, x):
        return self.final_layer(self.feature_block(self.first_layer(x)))
