"""KAIR's basic blocks (cszn/KAIR models/basicblock.py, spandrel's dpir_basic_block.py) as the
U-Nets and plain stacks of its family use them (DRUNet, FBCNN, DnCNN), with KAIR's module
structure so the keys match: its `sequential` (one module stays itself, nested Sequentials are
flattened), the conv-act-conv residual block, the 2x down- and upsamplers, and the activation
letters of its `conv(mode=...)`."""
from __future__ import annotations

from framework import nn
from framework.check import choice

ACT_MODES = {"R": lambda: nn.ReLU(), "L": lambda: nn.LeakyReLU(0.2)}  # KAIR's conv() letters
DOWNSAMPLE_MODES = ("strideconv", "avgpool")
UPSAMPLE_MODES = ("convtranspose", "pixelshuffle", "upconv")


def sequential(*modules):
    """KAIR's `sequential`: one module stays itself (its keys unprefixed), several a Sequential
    with any Sequential among them flattened into it (its children renumbered)."""
    if len(modules) == 1:
        return modules[0]
    flat = []
    for m in modules:
        flat += list(m.children()) if isinstance(m, nn.Sequential) else [m]
    return nn.Sequential(*flat)


def check_samplers(name: str, downsample_mode: str, upsample_mode: str) -> None:
    """KAIR's down / upsampler names, checked; maxpool refused with the reason (as spandrel reads
    its files: avgpool)."""
    if downsample_mode == "maxpool":
        raise ValueError(f"{name}: downsample_mode 'maxpool' does not run (KAIR's maxpool "
                         f"downsampler's 3x3 conv is unpadded, so the skips' sizes differ); its "
                         f"files have avgpool's keys: use 'avgpool', as spandrel does")
    choice(name, "downsample_mode", downsample_mode, DOWNSAMPLE_MODES)
    choice(name, "upsample_mode", upsample_mode, UPSAMPLE_MODES)


def conv_act_conv(c: int, act_mode: str, bias: bool) -> nn.Sequential:
    """KAIR's conv(mode='C' + act + 'C') on c channels: 3x3 conv, activation, 3x3 conv (keys 0, 2)."""
    return nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=bias), ACT_MODES[act_mode](),
                         nn.Conv2d(c, c, 3, padding=1, bias=bias))


class ResBlock(nn.Module):
    """x + res(x), res = 3x3 conv, activation, 3x3 conv on c channels (KAIR's ResBlock, mode C?C;
    keys res.0, res.2)."""

    def __init__(self, c: int, act_mode: str, bias: bool = False):
        super().__init__()
        self.res = conv_act_conv(c, act_mode, bias)

    def forward(self, x):
        return x + self.res(x)


def down(cin: int, cout: int, mode: str, bias: bool = False) -> list:
    """KAIR's 2x downsampler as a list of modules: a 2x2 stride-2 conv (strideconv), or a 2x2
    average pool then a 3x3 conv (avgpool)."""
    if mode == "strideconv":
        return [nn.Conv2d(cin, cout, 2, stride=2, bias=bias)]
    return [nn.AvgPool2d(2, 2), nn.Conv2d(cin, cout, 3, padding=1, bias=bias)]


def up(cin: int, cout: int, mode: str, bias: bool = False) -> list:
    """KAIR's 2x upsampler as a list of modules: a 2x2 stride-2 transposed conv (convtranspose), a
    3x3 conv to 4x the features and a pixel shuffle (pixelshuffle), or nearest x2 then a 3x3 conv
    (upconv)."""
    if mode == "convtranspose":
        return [nn.ConvTranspose2d(cin, cout, 2, stride=2, bias=bias)]
    if mode == "pixelshuffle":
        return [nn.Conv2d(cin, 4 * cout, 3, padding=1, bias=bias), nn.PixelShuffle(2)]
    return [nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(cin, cout, 3, padding=1, bias=bias)]
