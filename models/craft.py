"""CRAFT (Li et al., "Feature Modulation Transformer: Cross-Refinement and Lightweight Transformer
for Super-Resolution", ICCV 2023; AVC2-UESTC/CRAFT-SR as spandrel 0.4.2 and traiNNer-redux's
`craft` read it): a lightweight SR transformer on (B, C, H, W) features. conv_first, residual
groups (RCRFG: a CRFB, a 3x3 conv, the group's skip), a channels-first LayerNorm (norm.body),
conv_after_body + long skip, one conv + pixel shuffle (upsample). Each CRFB step i:

- low: two SRWABs on the tokens (shift rectangle window attention: DAT's rectangle windows, half
  the channels in split (s0, s1) windows and half in (s1, s0), the dynamic position bias from the
  model's biases_h / biases_v and relative_position_index_h / _v buffers; the odd block rolls the
  windows by half a window, with no mask, as the original; get_v's depthwise conv of v added;
  proj; then a GELU MLP), each with its residuals;
- high: the HFERB (high-frequency enhancement residual block): a 3x3 conv + GELU on the first
  half of the channels, a 3x3 stride-1 max pool, 1x1 conv + GELU on the second, concatenated,
  last_fc, + the input;
- the HFB (hybrid fusion block): low + attn(norm1(low), high), where the queries come from high
  and the keys and values from the normalised low (1x1 then depthwise 3x3 convs, no biases), each
  head's channels attending to each other (L2-normalised along the pixels, a learnt temperature
  per head); then + ffn(norm2(.)) (a gated depthwise feed-forward, expansion 2.66, no biases).

The input is padded as spandrel's call API does (reflection then replication to a multiple of 16,
SizeRequirements(minimum=16, multiple_of=16)), then as the original's inference does: mirrored
(the last row repeated first) by (h // window_size + 1) window_size - h rows (a whole window when
h is a multiple already), and the output cropped. Published: CRAFT x2-x4 (embed 48, 4 groups of
2, 6 heads, split (4, 16), mlp_ratio 2, window 16).
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, linear, norm
from framework.check import choice, int_arg, int_list
from framework.detect import Assumed, NoMatch, count, need
from framework.registry import MODELS

from ._blocks import pad_to_requirement, swin_options, trunc_normal_linears
from .dat import (RectangleWindows, SpatialAttention, _image, _tokens, _v_image, check_window_buffers,
                  position_bias_parameters, ratio_of, window_offsets, window_split)
from .swin2sr import _l2_normalize
from .swinir import UpsampleOneStep

_MULTIPLE = 16  # spandrel's SizeRequirements(minimum=16, multiple_of=16)
_RGB_MEAN = (0.4488, 0.4371, 0.4040)
_FFN_EXPANSION = 2.66  # the HFB's feed-forward, fixed in the original


def _mirror(x, axis: int, ws: int):
    """The original's padding along `axis`: cat([x, flip(x)]) cut at the next whole window past
    the size n (a whole window more when n is a multiple), i.e. x, then its last p = (n // ws + 1)
    ws - n rows in reverse. The rows are taken from the end (a slice from -p): after spandrel's
    padding to 16, p is ws at every size when ws divides 16, one ONNX graph."""
    n = x.shape[axis]
    p = (n // ws + 1) * ws - n
    if p > n:  # the original's cat gives 2n < n + p rows and then fails
        raise ValueError(f"CRAFT: the input (after padding to 16) has {n} px along axis {axis}, "
                         f"fewer than the {p} its window_size {ws} mirrors in")
    index = (slice(None),) * axis + (slice(-p, None),)
    return F.cat([x, F.flip(F.getitem(x, index), (axis,))], axis)


class Mlp(nn.Module):
    """fc1, GELU, fc2 on tokens."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SRWAB(RectangleWindows):
    """Shift rectangle window attention block on (B, H*W, C); H, W multiples of both split sides.
    The keys of the original's order: norm1, qkv, proj, get_v, attns, norm2, mlp."""

    def __init__(self, dim, num_heads, split_size, shifted, mlp_ratio, qkv_bias, qk_scale):
        super().__init__()
        self.split_size = split_size
        self.shift_size = (split_size[0] // 2, split_size[1] // 2)
        self.shifted = shifted
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.get_v = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)
        self.attns = nn.ModuleList([SpatialAttention(dim // 2, i, split_size, num_heads // 2,
                                                     qk_scale=qk_scale, buffers=False)
                                    for i in range(2)])
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def masks(self, h, w, dtype):
        return None, None  # the original shifts without a mask

    def forward(self, x, h, w, buffers):
        qkv = self.qkv(self.norm1(x))
        y = self.windows(qkv, h, w, buffers) + _tokens(self.get_v(_v_image(qkv, h, w)))
        x = x + self.proj(y)
        return x + self.mlp(self.norm2(x))


class HFERB(nn.Module):
    """High-frequency enhancement residual block on (B, C, H, W)."""

    def __init__(self, dim: int):
        super().__init__()
        self.mid_dim = dim // 2
        self.act = nn.GELU()
        self.last_fc = nn.Conv2d(dim, dim, 1)
        self.fc = nn.Conv2d(self.mid_dim, self.mid_dim, 1)
        self.max_pool = nn.MaxPool2d(3, 1, 1)
        self.conv = nn.Conv2d(self.mid_dim, self.mid_dim, 3, padding=1)

    def forward(self, x):
        local, high = F.split(x, [self.mid_dim, x.shape[1] - self.mid_dim], 1)
        local = self.act(self.conv(local))
        high = self.act(self.fc(self.max_pool(high)))
        return x + self.last_fc(F.cat([local, high], 1))


class ChannelsFirstNorm(nn.Module):
    """The original's LayerNorm(dim, "WithBias") on (B, C, H, W): over the channels of each pixel,
    eps 1e-5, its weight and bias under `body`."""

    def __init__(self, dim: int):
        super().__init__()
        self.body = nn.LayerNorm2d(dim, eps=1e-5)

    def forward(self, x):
        return self.body(x)


class CrossAttention(nn.Module):
    """The HFB's attention: queries from `high`, keys and values from `low` (B, C, H, W); per head,
    its d channels (rows of H*W values, L2-normalised) attend to each other, times temperature."""

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.temperature = nn.Parameter(np.ones((num_heads, 1, 1), np.float32))
        self.q = nn.Conv2d(dim, dim, 1, bias=False)
        self.q_dwconv = nn.Conv2d(dim, dim, 3, padding=1, groups=dim, bias=False)
        self.kv = nn.Conv2d(dim, dim * 2, 1, bias=False)
        self.kv_dwconv = nn.Conv2d(dim * 2, dim * 2, 3, padding=1, groups=dim * 2, bias=False)
        self.project_out = nn.Conv2d(dim, dim, 1, bias=False)

    def forward(self, low, high):
        b, c, h, w = low.shape
        heads, d, n = self.num_heads, c // self.num_heads, h * w
        q = self.q_dwconv(self.q(high))
        k, v = F.chunk(self.kv_dwconv(self.kv(low)), 2, 1)
        # (B, heads d, H, W) -> (B, d, heads N): a head's channels as tokens, its pixels as features
        q, k = (_l2_normalize(F.reshape(t, (b, heads, d, n))) for t in (q, k))
        q, k, v = (F.reshape(F.permute(F.reshape(t, (b, heads, d, n)), (0, 2, 1, 3)), (b, d, heads * n))
                   for t in (q, k, v))
        y = F.attention(q, k, v, heads, F.reshape(self.temperature, (heads,)))
        y = F.permute(F.reshape(y, (b, d, heads, n)), (0, 2, 1, 3))
        return self.project_out(F.reshape(y, (b, c, h, w)))


class FeedForward(nn.Module):
    """project_in to 2 hidden, a depthwise 3x3, GELU(first half) * second half, project_out; no
    biases."""

    def __init__(self, dim: int, expansion: float):
        super().__init__()
        hidden = int(dim * expansion)
        self.project_in = nn.Conv2d(dim, hidden * 2, 1, bias=False)
        self.dwconv = nn.Conv2d(hidden * 2, hidden * 2, 3, padding=1, groups=hidden * 2, bias=False)
        self.project_out = nn.Conv2d(hidden, dim, 1, bias=False)

    def forward(self, x):
        x1, x2 = F.chunk(self.dwconv(self.project_in(x)), 2, 1)
        return self.project_out(F.gelu(x1) * x2)


class HFB(nn.Module):
    """Hybrid fusion block: low + attn(norm1(low), high), then + ffn(norm2(.))."""

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.norm1 = ChannelsFirstNorm(dim)
        self.attn = CrossAttention(dim, num_heads)
        self.norm2 = ChannelsFirstNorm(dim)
        self.ffn = FeedForward(dim, _FFN_EXPANSION)

    def forward(self, low, high):
        x = low + self.attn(self.norm1(low), high)
        return x + self.ffn(self.norm2(x))


class CRFB(nn.Module):
    """Cross-refinement fusion block: `depth` steps of (two SRWABs -> low, HFERB -> high, HFB)."""

    def __init__(self, dim, depth, num_heads, split_size, mlp_ratio, qkv_bias, qk_scale):
        super().__init__()
        self.depth = depth
        self.srwa_blocks = nn.ModuleList([SRWAB(dim, num_heads, split_size, i % 2 == 1, mlp_ratio,
                                                qkv_bias, qk_scale) for i in range(2 * depth)])
        self.hfer_blocks = nn.ModuleList([HFERB(dim) for _ in range(depth)])
        self.hf_blocks = nn.ModuleList([HFB(dim, num_heads) for _ in range(depth)])

    def forward(self, x, buffers):
        h, w = x.shape[2:]
        for i in range(self.depth):
            low = _tokens(x)
            for blk in self.srwa_blocks[2 * i:2 * i + 2]:
                low = blk(low, h, w, buffers)
            x = self.hf_blocks[i](_image(low, h, w), self.hfer_blocks[i](x))
        return x


class RCRFG(nn.Module):
    """A residual group: conv(residual_group(x)) + x."""

    def __init__(self, dim, depth, num_heads, split_size, mlp_ratio, qkv_bias, qk_scale):
        super().__init__()
        self.residual_group = CRFB(dim, depth, num_heads, split_size, mlp_ratio, qkv_bias, qk_scale)
        self.conv = nn.Conv2d(dim, dim, 3, padding=1)

    def forward(self, x, buffers):
        return self.conv(self.residual_group(x, buffers)) + x


@MODELS.register()
class CRAFT(nn.Module):
    """CRAFT: (N, in_chans, h, w) in [0, 1] -> (N, in_chans, h*scale, w*scale), any h, w.

    Args (the original's names and defaults; `scale` is its `upscale`):
        in_chans: image channels, default 3 (the output has as many).
        window_size: the padding's multiple, default 16 (every published file): a multiple of
            both split sides.
        embed_dim: features, default 48; even, its halves divisible by num_heads // 2.
        depths: CRFB steps per group, default (2, 2, 2, 2).
        num_heads: heads per group, default (6, 6, 6, 6): the HFB uses all (dividing
            embed_dim), an SRWAB half per half of the channels.
        split_size_0, split_size_1: the rectangle window (s0, s1), default (4, 16); each >= 2.
        mlp_ratio: the SRWAB MLP's hidden features / embed_dim, default 2.
        qkv_bias: biases on the qkv linears, default True. qk_scale: default None (head_dim^-0.5).
        scale: default 4 (any: one conv + pixel shuffle).
        img_range: images are multiplied by this after the mean shift, default 1.
        resi_connection: "1conv" (default) or "identity" (no conv_after_body).
    """

    def __init__(self, in_chans: int = 3, window_size: int = 16, embed_dim: int = 48,
                 depths=(2, 2, 2, 2), num_heads=(6, 6, 6, 6), split_size_0: int = 4,
                 split_size_1: int = 16, mlp_ratio: float = 2.0, qkv_bias: bool = True,
                 qk_scale=None, scale: int = 4, img_range: float = 1.0,
                 resi_connection: str = "1conv"):
        super().__init__()
        name = "CRAFT"
        in_chans = int_arg(name, "in_chans", in_chans)
        embed_dim = int_arg(name, "embed_dim", embed_dim, minimum=2)
        if embed_dim % 2:
            raise ValueError(f"{name}: embed_dim must be even (the windows and the HFERB split it "
                             f"in two halves), got {embed_dim}")
        o = swin_options(name, embed_dim, mlp_ratio, qkv_bias, qk_scale, 0.0, 0.0, 0.0, False,
                         True, img_range)
        split = (int_arg(name, "split_size_0", split_size_0, minimum=2),
                 int_arg(name, "split_size_1", split_size_1, minimum=2))
        self.window_size = int_arg(name, "window_size", window_size)
        if self.window_size % split[0] or self.window_size % split[1]:
            raise ValueError(f"{name}: window_size {window_size} must be a multiple of both split "
                             f"sides {split} (the padded image is cut into those windows)")
        depths = int_list(name, "depths", depths, minimum=0)
        num_heads = int_list(name, "num_heads", num_heads, length=len(depths))
        for d, heads in zip(depths, num_heads):
            if d and (heads < 2 or embed_dim % heads or (embed_dim // 2) % (heads // 2)):
                raise ValueError(f"{name}: num_heads {heads} must be at least 2, divide embed_dim "
                                 f"{embed_dim} and its half divide embed_dim / 2")
        self.scale = int_arg(name, "scale", scale)
        self.img_range = o.img_range
        resi_connection = choice(name, "resi_connection", resi_connection, ("1conv", "identity"))
        self.split_size = split
        self.mean = (np.float32(_RGB_MEAN) if in_chans == 3 else np.zeros(1, np.float32)).reshape(1, -1, 1, 1)
        # the original registers them in this order: index h, index v, offsets v, offsets h
        rpe_h, index_h = window_offsets(*split)
        rpe_v, index_v = window_offsets(*split[::-1])
        self.register_buffer("relative_position_index_h", index_h)
        self.register_buffer("relative_position_index_v", index_v)
        self.register_buffer("biases_v", rpe_v)
        self.register_buffer("biases_h", rpe_h)
        self.conv_first = nn.Conv2d(in_chans, embed_dim, 3, padding=1)
        self.layers = nn.ModuleList([RCRFG(embed_dim, d, num_heads[i], split, o.mlp_ratio,
                                           o.qkv_bias, o.qk_scale) for i, d in enumerate(depths)])
        self.norm = ChannelsFirstNorm(embed_dim)
        self.conv_after_body = (nn.Conv2d(embed_dim, embed_dim, 3, padding=1)
                                if resi_connection == "1conv" else nn.Identity())
        self.upsample = UpsampleOneStep(self.scale, embed_dim, in_chans)
        # the original's _init_weights: Linear weights ~ trunc_normal(std 0.02), biases 0;
        # LayerNorms ones / zeros; convolutions torch's default
        trunc_normal_linears(self)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"CRAFT: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        image = x
        x = pad_to_requirement(x, _MULTIPLE, _MULTIPLE)
        x = _mirror(_mirror(x, 2, self.window_size), 3, self.window_size)
        mean = self.mean.astype(x.dtype, copy=False)
        x = self.conv_first((x - mean) * self.img_range)
        buffers = ({"rpe_biases": self.biases_h, "index": self.relative_position_index_h},
                   {"rpe_biases": self.biases_v, "index": self.relative_position_index_v})
        y = x
        for layer in self.layers:
            y = layer(y, buffers)
        x = self.conv_after_body(self.norm(y)) + x
        x = self.upsample(x) / self.img_range + mean
        return F.crop_to(x, image, self.scale)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule, from shapes: in_chans, embed_dim from conv_first; per group its steps
        (depths: hf_blocks) and heads (the HFB's temperature); mlp_ratio from an SRWAB's fc1;
        qkv_bias, resi_connection ("identity" without conv_after_body) from which keys exist;
        scale from upsample.0 (in_chans scale^2 outputs). The split sides from the model's window
        buffers' shapes, which fix them, not their order: every published CRAFT file has the
        shorter first ((4, 16)), so that order is assumed and said, and a file with the other
        order is refused when loaded (CRAFT.load_state_dict compares the buffers). window_size
        (the padding's multiple) and img_range are not in the weights: 16 and 1, as every
        published file and spandrel."""
        need(shapes, "layers.0.residual_group.hf_blocks.0.attn.temperature")
        embed_dim, in_chans = need(shapes, "conv_first.weight", 4)[:2]
        layers = count(shapes, "layers", ".conv.weight")
        depths, heads, first = [], [], None
        given = known.get("num_heads") if isinstance(known.get("num_heads"), (list, tuple)) else ()
        for i in range(layers):
            prefix = f"layers.{i}.residual_group"
            d = count(shapes, f"{prefix}.hf_blocks", ".attn.temperature")
            depths.append(d)
            if d:
                heads.append(need(shapes, f"{prefix}.hf_blocks.0.attn.temperature", 3)[0])
                first = first or prefix
            else:
                heads.append(given[i] if i < len(given) else 6)
        if first is None:
            raise NoMatch("no CRAFT block")
        split = window_split(shapes, "", "relative_position_index_h", "biases_v")
        out = need(shapes, "upsample.0.weight", 4)[0]
        scale = math.isqrt(out // in_chans)
        if scale * scale * in_chans != out:
            raise NoMatch(f"upsample.0 has {out} outputs: not in_chans {in_chans} * scale^2")
        if split[0] != split[1]:
            split = Assumed(split, "the weights' shapes fix the window's sides, not their order; "
                                   "every published CRAFT file has the shorter first")
        srwa = f"{first}.srwa_blocks.0"
        if isinstance(split, Assumed):  # one Assumed per keyword: the two sides' values
            s0 = Assumed(split.value[0], split.why)
            s1 = Assumed(split.value[1], split.why)
        else:
            s0, s1 = split
        return {"split_size_0": s0, "split_size_1": s1,"in_chans": in_chans, "window_size": 16, "embed_dim": embed_dim,
                "depths": tuple(depths), "num_heads": tuple(heads),
                "mlp_ratio": ratio_of(need(shapes, f"{srwa}.mlp.fc1.weight", 2)[0], embed_dim),
                "qkv_bias": f"{srwa}.qkv.bias" in shapes, "scale": scale,
                "resi_connection": "1conv" if "conv_after_body.weight" in shapes else "identity"}

    def load_state_dict(self, state_dict, strict: bool = True):
        """As Module's, after checking the file's window buffers are this model's (DAT's rule:
        models/dat.py check_window_buffers)."""
        check_window_buffers(self, state_dict, "CRAFT", ("relative_position_index_h",
                                                         "relative_position_index_v", "biases_v",
                                                         "biases_h"), first="biases_h")
        return super().load_state_dict(state_dict, strict)

    @staticmethod
    def card(spec: dict):
        """conv_first, groups of CRFB steps (two SRWABs: norms, qkv, proj, get_v, the position-bias
        MLPs, the MLP; an HFERB: three convs; an HFB: two norms, the cross attention's convs and
        temperatures, the feed-forward) and a conv each, the norm, conv_after_body, upsample.
        Padded inside to a multiple of 16, then by one more window (window_size)."""
        c, s, hidden = spec["embed_dim"], spec["scale"], int(spec["embed_dim"] * spec["mlp_ratio"])
        half, f = c // 2, int(c * _FFN_EXPANSION)
        mlp = linear(c, hidden) + linear(hidden, c)
        hferb = conv(c, c, 1) + conv(half, half, 1) + conv(half, half, 3)
        hfb = (2 * norm(c) + conv(c, c, 1, False) + conv(c, c, 3, False, c) + conv(c, 2 * c, 1, False)
               + conv(2 * c, 2 * c, 3, False, 2 * c) + conv(c, c, 1, False) + conv(c, 2 * f, 1, False)
               + conv(2 * f, 2 * f, 3, False, 2 * f) + conv(f, c, 1, False))
        params = conv(spec["in_chans"], c) + norm(c) + conv(c, spec["in_chans"] * s * s)
        params += conv(c, c) if spec["resi_connection"] == "1conv" else 0
        for d, h in zip(spec["depths"], spec["num_heads"]):
            srwab = (2 * norm(c) + linear(c, 3 * c, spec["qkv_bias"]) + linear(c, c)
                     + conv(c, c, 3, groups=c) + position_bias_parameters(c, h) + mlp)
            params += d * (2 * srwab + hferb + hfb + h) + conv(c, c)
        s0, s1 = spec["split_size_0"], spec["split_size_1"]
        act = max([h // 2 * s0 * s1 for h in spec["num_heads"]] + [3 * c, hidden, 2 * f,
                                                                     spec["in_chans"] * s * s])
        # the mirror adds a window to each side of at least 16: at most ((16 + ws) / 16)^2 more
        act = -(-act * (_MULTIPLE + spec["window_size"]) ** 2 // _MULTIPLE ** 2)
        return image_card(s, spec["in_chans"], spec["in_chans"], params, act,
                          pads_to=_MULTIPLE, pad_minimum=_MULTIPLE, channel_keys=("in_chans",))
