"""SCUNet (Zhang et al., "Practical Blind Denoising via Swin-Conv-UNet and Data Synthesis", MIR 2023;
github.com/cszn/SCUNet models/network_scunet.py, as spandrel 0.4.2's SCUNet architecture reads it):
a blind denoiser at scale 1. A 3x3 conv (m_head) to `dim` features, three levels of ConvTransBlocks
then a 2x2 stride-2 conv doubling the features, ConvTransBlocks at the bottom (m_body), three levels
back (a 2x2 stride-2 transposed conv, the level's skip added before it, ConvTransBlocks) and a 3x3
conv (m_tail) back to in_nc; no biases in those convs. config gives the blocks of the seven stages
(down1-3, body, up3-1).

A ConvTransBlock on C channels: a 1x1 conv (conv1_1), split into a conv half (a residual 3x3 -
ReLU - 3x3, conv_block) and a Swin half (trans_block: x + WMSA(LN(x)), x + MLP(LN(x)), MLP 4x with
GELU), concatenated, a 1x1 conv (conv1_2) and a residual. WMSA is windowed multi-head attention
(window 8, heads of 32 channels, both fixed by the original) with a relative-position bias held as
(heads, 15, 15); every other block (odd indices) runs on windows shifted by 4, the wrapped-around
tokens kept apart by a mask (the original fills -inf, srgrad's shifted-window attention adds -100:
exp(-100) of the kept weights, below float64's resolution of them). A block whose input_resolution
(the training size at its level) is at most the window does not shift.

The input is padded as spandrel runs it: to at least 40 pixels (its size requirement: reflection,
then replication), then to a multiple of 64 by reflection (the original's check_image_size); the
output is cropped back. Published models: scunet_color_15/25/50, scunet_color_real_psnr/gan
(in_nc 3), scunet_gray_15/25/50 (in_nc 1), all dim 64, config [4] * 7. Keys are the original's.
"""
from __future__ import annotations

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, linear, norm
from framework.check import int_arg, int_list, number
from framework.detect import Assumed, NoMatch, count, indices, need
from framework.functional.attention import relative_position_index, shift_mask
from framework.nn import init
from framework.registry import MODELS

from ._blocks import kair_unet, pad_to_requirement

WINDOW, HEAD_DIM = 8, 32  # the original's constants
_MINIMUM, _MULTIPLE = 40, 64  # spandrel's size requirement; the original's check_image_size


class WMSA(nn.Module):
    """Windowed multi-head self-attention on (B, H, W, C), H and W multiples of the window; "SW"
    on windows shifted by half a window."""

    def __init__(self, input_dim: int, output_dim: int, head_dim: int, window_size: int, type: str):
        super().__init__()
        self.head_dim, self.window_size, self.type = head_dim, window_size, type
        self.scale = head_dim ** -0.5
        self.n_heads = input_dim // head_dim
        self.relative_position_params = nn.Parameter(
            np.zeros((self.n_heads, 2 * window_size - 1, 2 * window_size - 1), np.float32))
        self.embedding_layer = nn.Linear(input_dim, 3 * input_dim)
        self.linear = nn.Linear(input_dim, output_dim)
        init.trunc_normal_(self.relative_position_params, std=0.02)
        self._index = relative_position_index(window_size, window_size).reshape(-1)

    def bias(self):
        """(heads, N, N) of the table for each token pair of a window (N = window^2)."""
        n, heads = self.window_size ** 2, self.n_heads
        table = F.permute(F.reshape(self.relative_position_params, (heads, -1)), (1, 0))
        return F.permute(F.reshape(F.getitem(table, self._index), (n, n, heads)), (2, 0, 1))

    def forward(self, x):
        b, h, w, c = x.shape
        ws, shift = self.window_size, self.window_size // 2
        if self.type != "W":
            x = F.roll(x, (-shift, -shift), (1, 2))
        mask = shift_mask(h, w, ws, shift, np.dtype(x.dtype)) if self.type != "W" else None
        y = F.window_attention(self.embedding_layer(F.window_partition(x, ws)), self.n_heads,
                               self.scale, self.bias(), mask)
        y = F.window_reverse(self.linear(y), ws, h, w)
        return F.roll(y, (shift, shift), (1, 2)) if self.type != "W" else y


class Block(nn.Module):
    """The Swin half on (B, H, W, C): x + WMSA(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, input_dim, output_dim, head_dim, window_size, drop_path, type, input_resolution):
        super().__init__()
        self.type = "W" if input_resolution <= window_size else type
        self.ln1 = nn.LayerNorm(input_dim)
        self.msa = WMSA(input_dim, input_dim, head_dim, window_size, self.type)
        self.drop_path = nn.DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.ln2 = nn.LayerNorm(input_dim)
        self.mlp = nn.Sequential(nn.Linear(input_dim, 4 * input_dim), nn.GELU(),
                                 nn.Linear(4 * input_dim, output_dim))

    def forward(self, x):
        x = x + self.drop_path(self.msa(self.ln1(x)))
        return x + self.drop_path(self.mlp(self.ln2(x)))


class ConvTransBlock(nn.Module):
    """(N, conv_dim + trans_dim, H, W) -> the same (the module docstring)."""

    def __init__(self, conv_dim, trans_dim, head_dim, window_size, drop_path, type, input_resolution):
        super().__init__()
        self.conv_dim, self.trans_dim = conv_dim, trans_dim
        c = conv_dim + trans_dim
        self.trans_block = Block(trans_dim, trans_dim, head_dim, window_size, drop_path, type,
                                 input_resolution)
        self.conv1_1 = nn.Conv2d(c, c, 1)
        self.conv1_2 = nn.Conv2d(c, c, 1)
        self.conv_block = nn.Sequential(nn.Conv2d(conv_dim, conv_dim, 3, padding=1, bias=False),
                                        nn.ReLU(), nn.Conv2d(conv_dim, conv_dim, 3, padding=1, bias=False))

    def forward(self, x):
        conv_x, trans_x = F.split(self.conv1_1(x), [self.conv_dim, self.trans_dim], dim=1)
        conv_x = self.conv_block(conv_x) + conv_x
        trans_x = F.permute(self.trans_block(F.permute(trans_x, (0, 2, 3, 1))), (0, 3, 1, 2))
        return x + self.conv1_2(F.cat([conv_x, trans_x], axis=1))


@MODELS.register()
class SCUNet(nn.Module):
    """SCUNet: (N, in_nc, H, W) -> the same shape, any H, W >= 1.

    Args:
        in_nc: image channels in and out, default 3 (gray models: 1).
        config: ConvTransBlocks of down1, down2, down3, body, up3, up2, up1: 7 ints >= 0,
            default [4, 4, 4, 4, 4, 4, 4].
        dim: features of the first level, default 64, a multiple of 64 (its level's Swin half,
            dim / 2, is made of 32-channel heads).
        drop_path_rate: stochastic depth rising linearly over the blocks to this, default 0.
        input_resolution: the training size (default 256): a level at which it is at most the
            window (8) does not shift its windows.
        scale: 1 (a restoration network: srgrad's configs and commands pass their scale).
    """

    def __init__(self, in_nc: int = 3, config=(4, 4, 4, 4, 4, 4, 4), dim: int = 64,
                 drop_path_rate: float = 0.0, input_resolution: int = 256, scale: int = 1):
        super().__init__()
        name = "SCUNet"
        in_nc = int_arg(name, "in_nc", in_nc)
        config = int_list(name, "config", config, length=7, minimum=0)
        dim = int_arg(name, "dim", dim)
        if dim % (2 * HEAD_DIM):
            raise ValueError(f"{name}: dim must be a multiple of {2 * HEAD_DIM} (the first level's "
                             f"Swin half, dim / 2, is made of {HEAD_DIM}-channel heads), got {dim}")
        rate = number(name, "drop_path_rate", drop_path_rate, 0.0, 1.0, high_open=True)
        res = int_arg(name, "input_resolution", input_resolution)
        if int_arg(name, "scale", scale) != 1:
            raise ValueError(f"{name}: scale must be 1 (a restoration network: the output has the "
                             f"input's size), got {scale}")
        self.scale = 1
        rates = iter(np.linspace(0, rate, sum(config)).tolist() if sum(config) else [])

        def blocks(n, half, level):
            return [ConvTransBlock(half, half, HEAD_DIM, WINDOW, next(rates), "SW" if i % 2 else "W",
                                   res // 2 ** level) for i in range(n)]
        d = dim
        self.m_head = nn.Sequential(nn.Conv2d(in_nc, d, 3, padding=1, bias=False))
        self.m_down1 = nn.Sequential(*blocks(config[0], d // 2, 0), nn.Conv2d(d, 2 * d, 2, 2, bias=False))
        self.m_down2 = nn.Sequential(*blocks(config[1], d, 1), nn.Conv2d(2 * d, 4 * d, 2, 2, bias=False))
        self.m_down3 = nn.Sequential(*blocks(config[2], 2 * d, 2), nn.Conv2d(4 * d, 8 * d, 2, 2, bias=False))
        self.m_body = nn.Sequential(*blocks(config[3], 4 * d, 3))
        self.m_up3 = nn.Sequential(nn.ConvTranspose2d(8 * d, 4 * d, 2, 2, bias=False), *blocks(config[4], 2 * d, 2))
        self.m_up2 = nn.Sequential(nn.ConvTranspose2d(4 * d, 2 * d, 2, 2, bias=False), *blocks(config[5], d, 1))
        self.m_up1 = nn.Sequential(nn.ConvTranspose2d(2 * d, d, 2, 2, bias=False), *blocks(config[6], d // 2, 0))
        self.m_tail = nn.Sequential(nn.Conv2d(d, in_nc, 3, padding=1, bias=False))

    def forward(self, image):
        x0 = F.pad_to_multiple(pad_to_requirement(image, _MINIMUM), _MULTIPLE, mode="reflect")
        return F.crop_to(kair_unet(self, x0), image)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: dim and in_nc from m_head.0, each stage's blocks counted (the down
        stages' blocks before their conv, the up stages' after their transposed conv).
        input_resolution is the original's 256 (spandrel's; it decides a shift only below 72)."""
        dim, in_nc = need(shapes, "m_head.0.weight", 4)[:2]
        need(shapes, "m_tail.0.weight", 4)
        config = []
        for stage in ("m_down1", "m_down2", "m_down3", "m_body"):
            n = count(shapes, stage, ".conv1_1.weight")
            if stage != "m_body":
                need(shapes, f"{stage}.{n}.weight", 4)  # the stride-2 conv after the blocks
            config.append(n)
        for stage in ("m_up3", "m_up2", "m_up1"):
            need(shapes, f"{stage}.0.weight", 4)
            found = indices(shapes, stage, ".conv1_1.weight")
            if found != list(range(1, len(found) + 1)):
                raise NoMatch(f"{stage}'s blocks are not numbered 1..{len(found)}: {found}")
            config.append(len(found))
        return {"in_nc": in_nc, "config": config, "dim": dim,
                "input_resolution": Assumed(256, "the original's training size", quiet=True),
                "scale": 1}

    @staticmethod
    def card(spec: dict):
        """m_head, m_tail, the down convs (2x2, d 2^i -> d 2^(i+1)) and the transposed up convs,
        no biases; a ConvTransBlock of C = 2 h channels: conv1_1, conv1_2, conv_block's two bias-free
        3x3 on h, the Swin half on h (two LayerNorms, qkv, the (heads, 15, 15) table, the output
        linear, the 4x MLP). The input is padded to 40, then to a multiple of 64; the largest
        activation per padded pixel is the MLP's hidden layer, 4 (d / 2) at the first level."""
        c, cfg, d = spec["in_nc"], list(spec["config"]), spec["dim"]

        def block(h):
            t = h  # the Swin half's channels
            swin = (2 * norm(t) + linear(t, 3 * t) + t // HEAD_DIM * (2 * WINDOW - 1) ** 2
                    + linear(t, t) + linear(t, 4 * t) + linear(4 * t, t))
            return 2 * conv(2 * h, 2 * h, 1) + 2 * conv(h, h, 3, bias=False) + swin
        halves = [d // 2, d, 2 * d, 4 * d, 2 * d, d, d // 2]
        total = conv(c, d, 3, bias=False) + conv(d, c, 3, bias=False)
        total += sum(n * block(h) for n, h in zip(cfg, halves))
        total += 2 * sum(conv(d * 2 ** i, d * 2 ** (i + 1), 2, bias=False) for i in range(3))
        return image_card(1, c, c, total, max(2 * d, c), pads_to=_MULTIPLE, pad_minimum=_MINIMUM,
                          channel_keys=("in_nc",),
                          fixed_onnx="the window partition and the shifted windows' mask are "
                                     "computed for the input size")
