"""PyTorch twins of KernelGAN's networks, as sefibk/KernelGAN's networks.py builds and runs them: the
generator layer by layer on each colour plane (its swap_axis), the discriminator with torch's
spectral_norm, BatchNorm2d and the sigmoid; the same parameter names as srgrad's."""
from __future__ import annotations

from torch import nn

from . import register


@register
class KernelGANGenerator(nn.Module):
    def __init__(self, G_structure=(7, 5, 3, 1, 1, 1), G_chan=64, scale_factor=0.5):
        super().__init__()
        struct = list(G_structure)
        self.first_layer = nn.Conv2d(1, G_chan, struct[0], bias=False)
        self.feature_block = nn.Sequential(*[nn.Conv2d(G_chan, G_chan, k, bias=False)
                                             for k in struct[1:-1]])
        self.final_layer = nn.Conv2d(G_chan, 1, struct[-1], stride=int(1 / scale_factor),
                                     bias=False)

    def forward(self, x):
        x = x.transpose(0, 1)  # a "batch" of single planes
        return self.final_layer(self.feature_block(self.first_layer(x))).transpose(0, 1)


@register
class KernelGANDiscriminator(nn.Module):
    def __init__(self, D_chan=64, D_kernel_size=7, D_n_layers=7, num_in_ch=3):
        super().__init__()
        sn = nn.utils.spectral_norm
        self.first_layer = sn(nn.Conv2d(num_in_ch, D_chan, D_kernel_size, bias=True))
        block = []
        for _ in range(1, D_n_layers - 1):
            block += [sn(nn.Conv2d(D_chan, D_chan, 1, bias=True)), nn.BatchNorm2d(D_chan),
                      nn.ReLU(True)]
        self.feature_block = nn.Sequential(*block)
        self.final_layer = nn.Sequential(sn(nn.Conv2d(D_chan, 1, 1, bias=True)), nn.Sigmoid())

    def forward(self, x):
        return self.final_layer(self.feature_block(self.first_layer(x)))
