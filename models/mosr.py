"""MoSR, "Mamba Out Super-Resolution" (umzi2/MoSR, neosr's mosr_arch.py, as spandrel 0.4.2 and
traiNNer-redux's `mosr` / `mosr_t` read it): a convolutional network of MambaOut's gated CNN blocks.

    gblocks:  conv3x3 (in_ch -> dim), n_block GatedCNNBlocks, conv3x3 (dim -> 2 dim), Mish,
              conv3x3 (-> dim), Mish, conv1x1
    shortcut: ConvBlock (conv3x3, Mish, conv3x3, Mish) + conv1x1, from the image
    out = upsampler(gblocks(x) + shortcut(x) - 0.5)

A GatedCNNBlock on (N, dim, H, W), hidden = int(expansion_ratio dim), c = int(conv_ratio dim):

    g, i, k = split(fc1(LayerNorm(x)), [hidden, hidden - c, c])    fc1: conv3x3 to 2 hidden
    y = Mish(fc2(Mish(g) * cat(i, dwconv_kxk(k))))                 fc2: conv3x3 back to dim
    out = drop_path(y) + x - 0.5                                    (the original's - 0.5)

LayerNorm over the channels (eps 1e-6). Upsamplers: "ps" (conv3x3 to out_ch scale^2, pixel
shuffle), "gps" (geo-ensemble pixel shuffle: conv3x3 to 8 out_ch scale^2, the mean of the 8
groups, pixel shuffle) and "dys" (DySample with its end conv, 4 groups; the only one whose out_ch
may differ from in_ch); traiNNer-redux's names "pixelshuffle", "geoensemblepixelshuffle" and
"dysample" are the same. mosr: 24 blocks of 64; mosr_t: 5 of 48; expansion 1.5, conv ratio 1,
kernel 7. Any input size.
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.check import choice, int_arg, number
from framework.detect import NoMatch, indices, need
from framework.nn import init
from framework.registry import MODELS

from .realplksr import DySample

_UPSAMPLERS = ("ps", "gps", "dys")
_ALIASES = {"pixelshuffle": "ps", "geoensemblepixelshuffle": "gps", "dysample": "dys"}  # traiNNer
_GEO = 8  # GPS's ensemble: 8 predictions of every sub-pixel, averaged
_DYS_GROUPS = 4
_TAIL = 5  # gblocks after the blocks: conv, Mish, conv, Mish, conv1x1


class GatedCNNBlock(nn.Module):
    """MambaOut's gated CNN block (module docstring) on (N, dim, H, W)."""

    def __init__(self, dim: int, hidden: int, conv_channels: int, kernel_size: int, drop_path: float):
        super().__init__()
        self.norm = nn.LayerNorm2d(dim)
        self.fc1 = nn.Conv2d(dim, hidden * 2, 3, padding=1)
        self.act = nn.Mish()
        self.split_indices = [hidden, hidden - conv_channels, conv_channels]
        self.conv = nn.Conv2d(conv_channels, conv_channels, kernel_size, padding=kernel_size // 2,
                              groups=conv_channels)
        self.fc2 = nn.Conv2d(hidden, dim, 3, padding=1)
        self.drop_path = nn.DropPath(drop_path) if drop_path > 0 else nn.Identity()
        for conv in (self.fc1, self.conv, self.fc2):  # the original's: trunc_normal(0.02), bias 0
            init.trunc_normal_(conv.weight, std=0.02)
            init.constant_(conv.bias, 0.0)

    def forward(self, x):
        g, i, c = F.split(self.fc1(self.norm(x)), self.split_indices, 1)
        y = self.act(self.fc2(self.act(g) * F.cat([i, self.conv(c)], 1)))
        return self.drop_path(y) + (x - 0.5)


class ConvBlock(nn.Module):
    """(conv3x3, Mish, conv3x3, Mish) + conv1x1 (AST's ConvBlock): in_ch -> dim."""

    def __init__(self, in_ch: int, dim: int):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(in_ch, dim, 3, padding=1), nn.Mish(),
                                   nn.Conv2d(dim, dim, 3, padding=1), nn.Mish())
        self.conv11 = nn.Conv2d(in_ch, dim, 1)

    def forward(self, x):
        return self.block(x) + self.conv11(x)


class GPS(nn.Module):
    """Geo-ensemble pixel shuffle: conv3x3 to 8 out_ch scale^2, the mean over the 8, shuffle."""

    def __init__(self, dim: int, scale: int, out_ch: int):
        super().__init__()
        self.in_to_k = nn.Conv2d(dim, scale * scale * out_ch * _GEO, 3, padding=1)
        self.ps = nn.PixelShuffle(scale)

    def forward(self, x):
        # the original's reshape (N, 8, -1, H, W).mean(1) as a sum of the 8 channel slices, whose
        # graph holds for every input size (a reshape would fix H and W in ONNX)
        parts = F.split(self.in_to_k(x), self.in_to_k.out_channels // _GEO, 1)
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return self.ps(total / float(_GEO))


def upsampler_name(owner: str, upsampler) -> str:
    """spandrel's short name of an upsampler (traiNNer-redux's long names map to it)."""
    if isinstance(upsampler, str):
        upsampler = _ALIASES.get(upsampler, upsampler)
    return choice(owner, "upsampler", upsampler, _UPSAMPLERS + tuple(_ALIASES))


@MODELS.register()
class MoSR(nn.Module):
    """MoSR: (N, in_ch, h, w) in [0, 1] -> (N, out_ch, h*scale, w*scale), any h, w.

    Args (spandrel's names and defaults; `scale` is its `upscale`, traiNNer-redux's `scale`):
        in_ch: image channels, default 3. out_ch: output channels, default 3 (the "ps" and "gps"
            upsamplers output in_ch, as the original).
        scale: upscaling factor, default 4 (any integer >= 1).
        n_block: gated CNN blocks, default 24 (mosr_t: 5).
        dim: features, default 64 (mosr_t: 48).
        upsampler: "ps" (default), "gps" or "dys" (traiNNer-redux: "pixelshuffle",
            "geoensemblepixelshuffle", "dysample").
        drop_path: stochastic depth, rising linearly from 0 over the blocks, default 0.
        kernel_size: the depthwise conv's side (odd), default 7.
        expansion_ratio: hidden = int(expansion_ratio dim), default 1.5.
        conv_ratio: the depthwise conv's channels int(conv_ratio dim) (<= hidden), default 1.
    """

    def __init__(self, in_ch: int = 3, out_ch: int = 3, scale: int = 4, n_block: int = 24,
                 dim: int = 64, upsampler: str = "ps", drop_path: float = 0.0,
                 kernel_size: int = 7, expansion_ratio: float = 1.5, conv_ratio: float = 1.0):
        super().__init__()
        name = "MoSR"
        in_ch = int_arg(name, "in_ch", in_ch)
        out_ch = int_arg(name, "out_ch", out_ch)
        self.scale = int_arg(name, "scale", scale)
        n_block = int_arg(name, "n_block", n_block, 0)
        dim = int_arg(name, "dim", dim)
        self.upsampler_type = upsampler = upsampler_name(name, upsampler)
        drop_path = number(name, "drop_path", drop_path, 0.0, 1.0, high_open=True)
        kernel_size = int_arg(name, "kernel_size", kernel_size)
        if kernel_size % 2 == 0:
            raise ValueError(f"{name}: kernel_size must be odd (a same-size depthwise conv), got "
                             f"{kernel_size}")
        hidden = int(number(name, "expansion_ratio", expansion_ratio, low=0, low_open=True) * dim)
        channels = int(number(name, "conv_ratio", conv_ratio, low=0, low_open=True) * dim)
        if not 1 <= channels <= hidden:
            raise ValueError(f"{name}: conv_ratio {conv_ratio} gives the depthwise conv {channels} "
                             f"channels; it needs 1 to int(expansion_ratio dim) = {hidden}")
        if upsampler == "dys" and dim % _DYS_GROUPS:
            raise ValueError(f"{name}: the 'dys' upsampler's {_DYS_GROUPS} groups need dim a "
                             f"multiple of {_DYS_GROUPS}, got {dim}")
        if upsampler != "dys":
            out_ch = in_ch  # the original's rule
        self.out_ch = out_ch
        rates = np.linspace(0, drop_path, n_block).tolist() if n_block else []
        self.gblocks = nn.Sequential(
            nn.Conv2d(in_ch, dim, 3, padding=1),
            *[GatedCNNBlock(dim, hidden, channels, kernel_size, rates[i]) for i in range(n_block)],
            nn.Conv2d(dim, dim * 2, 3, padding=1), nn.Mish(), nn.Conv2d(dim * 2, dim, 3, padding=1),
            nn.Mish(), nn.Conv2d(dim, dim, 1))
        self.shortcut = ConvBlock(in_ch, dim)
        if upsampler == "ps":
            self.upsampler = nn.Sequential(nn.Conv2d(dim, out_ch * self.scale ** 2, 3, padding=1),
                                           nn.PixelShuffle(self.scale))
        elif upsampler == "gps":
            self.upsampler = GPS(dim, self.scale, out_ch)
        else:
            self.upsampler = DySample(dim, out_ch, self.scale, _DYS_GROUPS, True)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"MoSR: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        return self.upsampler(self.gblocks(x) + (self.shortcut(x) - 0.5))

    @staticmethod
    def card(spec: dict):
        """The facts of framework/card.py (h-cards' API): gblocks (first conv; per block the
        norm, fc1, the depthwise conv, fc2; the tail), the shortcut, the upsampler. The largest
        arrays: fc1's 2 hidden per pixel, the tail's 2 dim, or the upsampler's (GPS's 8
        predictions, DySample's dim features per output pixel). One ONNX graph for every input
        size but with DySample."""
        from framework.card import conv, image_card, norm  # noqa: PLC0415 (h-cards)
        c, s, n, i = spec["dim"], spec["scale"], spec["n_block"], spec["in_ch"]
        kind = _ALIASES.get(spec["upsampler"], spec["upsampler"])
        o = spec["out_ch"] if kind == "dys" else i
        hidden, k = int(spec["expansion_ratio"] * c), spec["kernel_size"]
        cc = int(spec["conv_ratio"] * c)
        block = norm(c) + conv(c, 2 * hidden) + conv(cc, cc, k, groups=cc) + conv(hidden, c)
        params = (conv(i, c) + n * block + conv(c, 2 * c) + conv(2 * c, c) + conv(c, c, 1)
                  + conv(i, c) + conv(c, c) + conv(i, c, 1))
        act = [2 * hidden, 2 * c]
        if kind == "ps":
            params += conv(c, o * s * s)
            act.append(o * s * s)
        elif kind == "gps":
            params += conv(c, _GEO * o * s * s)
            act.append(_GEO * o * s * s)
        else:
            off = 2 * _DYS_GROUPS * s * s
            params += conv(c, o, 1) + conv(c, off, 1) + conv(c, off, 1, bias=False)
            act += [c * s * s, off, o * s * s]
        fixed = ("DySample's sampling grid (the LR pixel centres) is computed for the input size"
                 if kind == "dys" else None)
        return image_card(s, i, o, params, max(act), channel_keys=("in_ch", "out_ch"),
                          fixed_onnx=fixed)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: dim, in_ch from gblocks.0; n_block from the blocks (gblocks.1 to n,
        each with a norm), the five tail entries after them; expansion_ratio from fc1 (2 hidden
        outputs) and conv_ratio from the depthwise conv's channels, each the smallest ratio
        giving that width (1.5 and 1 for every published file); kernel_size from that conv;
        the upsampler from its keys (DySample's init_pos, GPS's in_to_k, else the pixel
        shuffle's conv) and scale from its width; out_ch from DySample's end conv, else in_ch.
        drop_path has no weight: 0 unless given."""
        dim, in_ch = need(shapes, "gblocks.0.weight", 4)[:2]
        blocks = indices(shapes, "gblocks", ".norm.weight")
        if not blocks or blocks != list(range(1, len(blocks) + 1)):
            raise NoMatch(f"gblocks' gated blocks are not numbered 1..n: {blocks}")
        n = len(blocks)
        last = max(indices(shapes, "gblocks"))
        if last != n + _TAIL:
            raise NoMatch(f"gblocks ends at {last}, not {n + _TAIL} ({n} blocks and the tail)")
        need(shapes, f"gblocks.{n + 1}.weight", 4)
        hidden = need(shapes, "gblocks.1.fc1.weight", 4)[0] // 2
        cc, _, k, _ = need(shapes, "gblocks.1.conv.weight", 4)
        if "upsampler.init_pos" in shapes:
            upsampler = "dys"
            out_ch = need(shapes, "upsampler.end_conv.weight", 4)[0]
            rows, per = need(shapes, "upsampler.offset.weight", 4)[0], 2 * _DYS_GROUPS
        elif "upsampler.in_to_k.weight" in shapes:
            upsampler, out_ch = "gps", in_ch
            rows, per = need(shapes, "upsampler.in_to_k.weight", 4)[0], _GEO * in_ch
        else:
            upsampler, out_ch = "ps", in_ch
            rows, per = need(shapes, "upsampler.0.weight", 4)[0], in_ch
        scale = math.isqrt(rows // per)
        if scale < 1 or scale * scale * per != rows:
            raise NoMatch(f"the upsampler's {rows} outputs are not {per} x scale^2")
        return {"in_ch": in_ch, "out_ch": out_ch, "scale": scale, "n_block": n, "dim": dim,
                "upsampler": upsampler, "kernel_size": k,
                "expansion_ratio": _ratio(hidden, dim), "conv_ratio": _ratio(cc, dim)}


def _ratio(width: int, dim: int) -> float:
    """A ratio r with int(r dim) == width: width / dim, or the next float up when that rounds
    down (7 / 3 * 3 = 6.999...)."""
    r = width / dim
    return float(np.nextafter(r, np.inf)) if int(r * dim) < width else r
