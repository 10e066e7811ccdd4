"""MoESR, "Mamba out Excitation Super-Resolution" (rewaifu/resselt's moesr, as spandrel 0.4.2 reads
it): MambaOut's gated CNN blocks with an inception depthwise conv, grouped in Blocks that each end in
a multi-scale gate (MSG) at half resolution, and a "universal" upsampler whose kind, scale and
widths are recorded in a uint8 buffer `upscale.MetaUpsample`.

    x  = reflect-pad the image to even sides; f = in_to_dim(x)      (conv3x3 in_ch -> dim)
    f  = blocks(f) + f;  out = upscale(f) cropped to (h scale, w scale)
    Blocks: n_block GatedCNNBlocks, then MSG: y = up(gated(down(f))) + f, where
            down = conv3x3 (dim -> dim / 4), pixel unshuffle 2, LeakyReLU 0.1;
            gated = 3 GatedCNNBlocks (expansion_msg); up = conv3x3 (dim -> 4 dim), shuffle 2, LReLU 0.1

A GatedCNNBlock on (N, dim, H, W), hidden = int(expansion dim):

    g, i, c = split(fc1(LayerNorm(x)), [hidden, hidden - dim, dim])     fc1: conv3x3 to 2 hidden
    c       = InceptionDWConv2d(c): its channels split [dim - 3 gc, gc, gc, gc], gc = int(dim / 8);
              the first kept, the others through depthwise 3x3, 1x11 and 11x1 convs
    out     = gamma * Mish(fc2(Mish(g) * cat(i, c))) + x                fc2: conv3x3 back to dim

LayerNorm over the channels (eps 1e-6). Upsamplers (MetaUpsample's index, in spandrel's order):
0 "conv" (one conv3x3; scale 1), 1 "pixelshuffledirect" (conv3x3 to out_ch scale^2, shuffle),
2 "pixelshuffle" (conv3x3 to upsample_dim, LeakyReLU 0.01, (conv3x3 to 4 upsample_dim, shuffle 2)
per x2 or (9 upsample_dim, shuffle 3) at x3, conv3x3 to out_ch), 3 "nearest+conv" (per x2: conv3x3,
nearest x2, LeakyReLU 0.2, or one x3 stage; conv3x3 and LeakyReLU 0.2; conv3x3 to out_ch),
4 "dysample" (DySample, 4 groups, its 1x1 end conv). Scale 1 is the plain conv whatever the kind.
MetaUpsample = [1 (the block's version), index, scale, dim, out_ch, upsample_dim, 4 (DySample's
groups)] as uint8: the original refuses a value above 255, and so does this model.

traiNNer-redux's own `moesr2` (its `metadata` and `gamma` keys, an ESA block) is another network:
spandrel 0.4.2 reads only this layout, and so does srgrad.
"""
from __future__ import annotations

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, norm
from framework.check import choice, int_arg, number
from framework.detect import NoMatch, indices, need
from framework.nn import init
from framework.registry import MODELS

from ._blocks import pad_to_requirement
from .mosr import _ratio
from .realplksr import DySample

KINDS = ("conv", "pixelshuffledirect", "pixelshuffle", "nearest+conv", "dysample")  # index order
_VERSION, _GROUPS = 1, 4  # MetaUpsample's version byte; DySample's groups (MoESR never changes it)
_BAND, _BRANCH = 11, 0.125  # the inception conv's band kernel and its branches' share of channels
_MSG_BLOCKS = 3


def _init(conv_layer):
    """The gated block's init: trunc_normal(0.02) weights, zero biases (the original's)."""
    init.trunc_normal_(conv_layer.weight, std=0.02)
    init.constant_(conv_layer.bias, 0.0)
    return conv_layer


class InceptionDWConv2d(nn.Module):
    """(N, C, H, W): channels [C - 3 gc, gc, gc, gc] kept / depthwise 3x3 / 1x11 / 11x1."""

    def __init__(self, channels: int):
        super().__init__()
        gc = int(channels * _BRANCH)
        self.dwconv_hw = _init(nn.Conv2d(gc, gc, 3, padding=1, groups=gc))
        self.dwconv_w = _init(nn.Conv2d(gc, gc, (1, _BAND), padding=(0, _BAND // 2), groups=gc))
        self.dwconv_h = _init(nn.Conv2d(gc, gc, (_BAND, 1), padding=(_BAND // 2, 0), groups=gc))
        self.split_indexes = [channels - 3 * gc, gc, gc, gc]

    def forward(self, x):
        x_id, x_hw, x_w, x_h = F.split(x, self.split_indexes, 1)
        return F.cat([x_id, self.dwconv_hw(x_hw), self.dwconv_w(x_w), self.dwconv_h(x_h)], 1)


class GatedCNNBlock(nn.Module):
    """MambaOut's gated block with the inception conv and a learned per-channel gamma (module
    docstring), (N, dim, H, W) -> same."""

    def __init__(self, dim: int, expansion_ratio: float):
        super().__init__()
        hidden = int(expansion_ratio * dim)
        self.gamma = nn.Parameter(np.ones((1, dim, 1, 1), np.float32))
        self.norm = nn.LayerNorm2d(dim)
        self.fc1 = _init(nn.Conv2d(dim, hidden * 2, 3, padding=1))
        self.act = nn.Mish()
        self.split_indices = [hidden, hidden - dim, dim]
        self.conv = InceptionDWConv2d(dim)
        self.fc2 = _init(nn.Conv2d(hidden, dim, 3, padding=1))

    def forward(self, x):
        g, i, c = F.split(self.fc1(self.norm(x)), self.split_indices, 1)
        y = self.act(self.fc2(self.act(g) * F.cat([i, self.conv(c)], 1)))
        return y * self.gamma + x


class MSG(nn.Module):
    """Multi-scale gate: up(gated(down(x))) + x, the gated blocks at half resolution."""

    def __init__(self, dim: int, expansion_msg: float):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(dim, dim // 4, 3, padding=1), nn.PixelUnshuffle(2),
                                  nn.LeakyReLU(0.1))
        self.gated = nn.Sequential(*[GatedCNNBlock(dim, expansion_msg) for _ in range(_MSG_BLOCKS)])
        self.up = nn.Sequential(nn.Conv2d(dim, dim * 4, 3, padding=1), nn.PixelShuffle(2),
                                nn.LeakyReLU(0.1))

    def forward(self, x):
        return self.up(self.gated(self.down(x))) + x


class Blocks(nn.Module):
    """n_block gated blocks, then the MSG."""

    def __init__(self, dim: int, n_block: int, expansion_factor: float, expansion_msg: float):
        super().__init__()
        self.blocks = nn.Sequential(*[GatedCNNBlock(dim, expansion_factor) for _ in range(n_block)])
        self.msg = MSG(dim, expansion_msg)

    def forward(self, x):
        return self.msg(self.blocks(x))


def _power_stages(owner: str, kind: str, scale: int) -> int:
    """The x2 stages of a pixelshuffle / nearest+conv upsampler (0: one x3 stage)."""
    if scale == 3:
        return 0
    if scale & (scale - 1):
        raise ValueError(f"{owner}: the {kind!r} upsampler supports scale 2^n and 3, got {scale}")
    return scale.bit_length() - 1


def uni_upsample_layers(owner: str, kind: str, scale: int, in_dim: int, out_dim: int,
                        mid_dim: int) -> list:
    """The layers of the universal upsampler (UniUpsample) for the five kinds MoESR and FDAT share,
    in the original's order (so its Sequential keys: 0, 1, ...)."""
    if scale == 1 or kind == "conv":
        return [nn.Conv2d(in_dim, out_dim, 3, padding=1)]
    if kind == "pixelshuffledirect":
        return [nn.Conv2d(in_dim, out_dim * scale ** 2, 3, padding=1), nn.PixelShuffle(scale)]
    n = _power_stages(owner, kind, scale) if kind in ("pixelshuffle", "nearest+conv") else None
    if kind == "pixelshuffle":
        m = [nn.Conv2d(in_dim, mid_dim, 3, padding=1), nn.LeakyReLU()]
        for f in [2] * n if n else [3]:
            m += [nn.Conv2d(mid_dim, f * f * mid_dim, 3, padding=1), nn.PixelShuffle(f)]
        return m + [nn.Conv2d(mid_dim, out_dim, 3, padding=1)]
    if kind == "nearest+conv":
        m = []
        for f in [2] * n if n else [3]:
            m += [nn.Conv2d(in_dim, in_dim, 3, padding=1), nn.Upsample(scale_factor=f),
                  nn.LeakyReLU(0.2)]
        return m + [nn.Conv2d(in_dim, in_dim, 3, padding=1), nn.LeakyReLU(0.2),
                    nn.Conv2d(in_dim, out_dim, 3, padding=1)]
    raise ValueError(f"{owner}: no upsampler layers for {kind!r}")


def meta_upsample(owner: str, version: int, index: int, scale: int, in_dim: int, out_dim: int,
                  mid_dim: int, group: int) -> np.ndarray:
    """The MetaUpsample buffer as the original writes it: 7 uint8 values. The original's
    torch.tensor(..., dtype=uint8) refuses a value above 255: so does this, naming it."""
    values = {"version": version, "upsampler index": index, "scale": scale, "dim": in_dim,
              "out_ch": out_dim, "upsample_dim": mid_dim, "groups": group}
    for name, v in values.items():
        if not 0 <= v <= 255:
            raise ValueError(f"{owner}: {name} {v} does not fit the MetaUpsample buffer (uint8, "
                             f"0 to 255), as in the original")
    return np.array(list(values.values()), np.uint8)


def read_meta(values, key: str, kinds: tuple, owner: str) -> dict:
    """MetaUpsample's seven values from a state_dict (`values(key)`: the array), checked:
    {version, kind, scale, in_dim, out_dim, mid_dim, group}; NoMatch naming a kind index the
    architecture does not have."""
    if values is None:
        raise NoMatch(f"{owner} reads its upsampler from the values of {key} (none given)")
    meta = np.asarray(values(key)).reshape(-1)
    if meta.size != 7:
        raise NoMatch(f"{key} holds {meta.size} values, not 7")
    v = [int(round(float(a))) for a in meta]
    if not 0 <= v[1] < len(kinds):
        raise NoMatch(f"{key} names upsampler index {v[1]}, which {owner} does not have (it has "
                      f"{len(kinds)}: {', '.join(kinds)})")
    return dict(zip(("version", "kind", "scale", "in_dim", "out_dim", "mid_dim", "group"),
                    [v[0], kinds[v[1]], *v[2:]]))


class UniUpsample(nn.Sequential):
    """MoESR's upsampler (module docstring) with its MetaUpsample buffer."""

    def __init__(self, kind: str, scale: int, in_dim: int, out_dim: int, mid_dim: int):
        owner = "MoESR"
        meta = meta_upsample(owner, _VERSION, KINDS.index(kind), scale, in_dim, out_dim, mid_dim,
                             _GROUPS)
        if kind == "dysample" and scale > 1:
            layers = [DySample(in_dim, out_dim, scale, _GROUPS, True)]
        else:
            layers = uni_upsample_layers(owner, kind, scale, in_dim, out_dim, mid_dim)
        super().__init__(*layers)
        self.register_buffer("MetaUpsample", meta)


@MODELS.register()
class MoESR(nn.Module):
    """MoESR: (N, in_ch, h, w) in [0, 1] -> (N, out_ch, h scale, w scale), any h, w >= 1 (padded
    to at least 2 and to even sides, spandrel's minimum then the original's reflection; the output
    cropped).

    Args (spandrel's names and defaults):
        in_ch, out_ch: image channels, default 3.
        scale: upscaling factor, default 4 (1 with upsampler "conv", as the original sets it).
        dim: features, default 64 (a multiple of 4 and >= 8: the MSG's quarter width, the
            inception conv's eighth).
        n_blocks: Blocks, default 9. n_block: gated blocks in each, default 4.
        expansion_factor: the blocks' hidden = int(expansion_factor dim) >= dim, default 2.65625.
        expansion_msg: the MSG's gated blocks' expansion, default 1.5.
        upsampler: one of KINDS, default "pixelshuffledirect".
        upsample_dim: the "pixelshuffle" upsampler's width, default 64 (recorded for every kind).
    """

    def __init__(self, in_ch: int = 3, out_ch: int = 3, scale: int = 4, dim: int = 64,
                 n_blocks: int = 9, n_block: int = 4, expansion_factor: float = 2.65625,
                 expansion_msg: float = 1.5, upsampler: str = "pixelshuffledirect",
                 upsample_dim: int = 64):
        super().__init__()
        name = "MoESR"
        in_ch, out_ch = int_arg(name, "in_ch", in_ch), int_arg(name, "out_ch", out_ch)
        upsampler = choice(name, "upsampler", upsampler, KINDS)
        scale = 1 if upsampler == "conv" else int_arg(name, "scale", scale)
        dim = int_arg(name, "dim", dim)
        if dim % 4 or dim < 8:
            raise ValueError(f"{name}: dim must be a multiple of 4 and at least 8 (the MSG works on "
                             f"dim / 4 channels, the inception conv's branches on int(dim / 8)), "
                             f"got {dim}")
        n_blocks, n_block = int_arg(name, "n_blocks", n_blocks, 0), int_arg(name, "n_block", n_block, 0)
        for key, ratio in (("expansion_factor", expansion_factor), ("expansion_msg", expansion_msg)):
            if int(number(name, key, ratio, low=0, low_open=True) * dim) < dim:
                raise ValueError(f"{name}: {key} {ratio} gives int({key} dim) = "
                                 f"{int(ratio * dim)} hidden channels, fewer than dim {dim} (the "
                                 f"gate splits off dim of them for the inception conv)")
        upsample_dim = int_arg(name, "upsample_dim", upsample_dim)
        if upsampler == "dysample" and scale > 1 and dim % _GROUPS:  # unreachable: dim % 4 == 0
            raise ValueError(f"{name}: DySample's {_GROUPS} groups need dim a multiple of {_GROUPS}")
        self.scale = scale
        self.in_to_dim = nn.Conv2d(in_ch, dim, 3, padding=1)
        self.blocks = nn.Sequential(*[Blocks(dim, n_block, expansion_factor, expansion_msg)
                                      for _ in range(n_blocks)])
        self.upscale = UniUpsample(upsampler, scale, dim, out_ch, upsample_dim)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"MoESR: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        f = self.in_to_dim(pad_to_requirement(x, 2, 2))
        return F.crop_to(self.upscale(self.blocks(f) + f), x, self.scale)

    @staticmethod
    def card(spec: dict):
        """in_to_dim; per Blocks n_block gated blocks (gamma, norm, fc1, the three depthwise
        branches, fc2) and the MSG (down, 3 gated blocks, up); the upsampler. The largest arrays
        per (padded) input pixel: fc1's 2 hidden, the MSG's 4 dim, or the upsampler's. One ONNX
        graph for every input size but with DySample."""
        c, s, i, o = spec["dim"], spec["scale"], spec["in_ch"], spec["out_ch"]
        kind, mid = spec["upsampler"], spec["upsample_dim"]
        s = 1 if kind == "conv" else s
        gc = int(c * _BRANCH)

        def gated(ratio):
            h = int(ratio * c)
            return (c + norm(c) + conv(c, 2 * h) + conv(gc, gc, 3, groups=gc)
                    + 2 * conv(gc, gc, (1, _BAND), groups=gc) + conv(h, c)), 2 * h

        block, act_block = gated(spec["expansion_factor"])
        msg, act_msg = gated(spec["expansion_msg"])
        blocks = (spec["n_block"] * block + conv(c, c // 4) + _MSG_BLOCKS * msg + conv(c, 4 * c))
        params = conv(i, c) + spec["n_blocks"] * blocks
        act = [act_block, act_msg // 4, 4 * c]
        up, up_act = upsampler_cost(kind, s, c, o, mid)
        fixed = ("DySample's sampling grid (the LR pixel centres) is computed for the input size"
                 if kind == "dysample" and s > 1 else None)
        return image_card(s, i, o, params + up, max(act + [up_act]), pads_to=2, pad_minimum=2,
                          channel_keys=("in_ch", "out_ch"), fixed_onnx=fixed)

    @staticmethod
    def detect(shapes: dict, known: dict, values=None) -> dict:
        """spandrel's rule: dim and in_ch from in_to_dim; n_blocks and n_block counted;
        expansion_factor and expansion_msg from the fc1 widths (hidden / dim: the smallest ratio
        giving that width); the upsampler kind, scale, out_ch and upsample_dim from the values of
        upscale.MetaUpsample (its dim must be in_to_dim's), as spandrel reads them. A kind index
        beyond the five is refused naming it."""
        dim, in_ch = need(shapes, "in_to_dim.weight", 4)[:2]
        need(shapes, "upscale.MetaUpsample")
        n_blocks = len(indices(shapes, "blocks", ".msg.down.0.weight"))
        n_block = len(indices(shapes, "blocks.0.blocks", ".fc1.weight"))
        if not n_blocks or not n_block:
            raise NoMatch("no blocks.0.msg or blocks.0.blocks.0 (MoESR's Blocks)")
        hidden = need(shapes, "blocks.0.blocks.0.fc1.weight", 4)[0] // 2
        hidden_msg = need(shapes, "blocks.0.msg.gated.0.fc1.weight", 4)[0] // 2
        meta = read_meta(values, "upscale.MetaUpsample", KINDS, "MoESR")
        if meta["in_dim"] != dim:
            raise NoMatch(f"upscale.MetaUpsample records dim {meta['in_dim']}, in_to_dim has {dim}")
        return {"in_ch": in_ch, "out_ch": meta["out_dim"], "scale": meta["scale"], "dim": dim,
                "n_blocks": n_blocks, "n_block": n_block,
                "expansion_factor": _ratio(hidden, dim), "expansion_msg": _ratio(hidden_msg, dim),
                "upsampler": meta["kind"], "upsample_dim": meta["mid_dim"]}


def upsampler_cost(kind: str, s: int, c: int, o: int, mid: int) -> tuple[int, int]:
    """(parameters, largest per-input-pixel activation) of a universal upsampler of `kind`."""
    if s == 1 or kind == "conv":
        return conv(c, o), o
    if kind == "pixelshuffledirect":
        return conv(c, o * s * s), o * s * s
    stages = [2] * (s.bit_length() - 1) if s != 3 else [3]
    if kind == "pixelshuffle":
        p = conv(c, mid) + sum(conv(mid, f * f * mid) for f in stages) + conv(mid, o)
        return p, mid * s * s
    if kind == "nearest+conv":
        return (len(stages) + 1) * conv(c, c) + conv(c, o), c * s * s
    off = 2 * _GROUPS * s * s  # dysample
    return conv(c, o, 1) + conv(c, off, 1) + conv(c, off, 1, bias=False), max(c * s * s, off)
