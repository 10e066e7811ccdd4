"""FDAT, "Fast Dual Aggregation Transformer" (stinkybread/fdat, as spandrel 0.4.2 and traiNNer-redux's
`fdat_tiny`, `fdat_light`, `fdat_medium`, `fdat_large`, `fdat_xl` read it): a simplified DAT whose
residual groups alternate spatial-window and channel attention blocks on tokens (B, H W, C).

    s = conv_first(x)                     conv3x3 (or, unshuffle_mod at x1 / x2: pixel unshuffle by
                                          4 / scale, then conv3x3, the rest at x4)
    out = upsampler(conv_after(groups(s)) + s), cropped to (h scale, w scale)
    group:  tokens through depth_per_group x len(pattern) blocks, then conv3x3 (no bias) + input
    block:  n = LayerNorm(x)
            a = attention(n): "spatial": windows of window_size^2 tokens (the map zero-padded to a
                multiple), per head softmax(d^-0.5 q k^T + bias) v with a learned (heads, ws^2,
                ws^2) `bias`; "channel": per head the channels attend to each other, q and k
                L2-normalised over the tokens, times a learned temperature `temp`
            c = GELU(depthwise conv3x3(n))  (no bias)
            spatial block: a * sigmoid(cg(c)) + c     cg: global mean, 1x1 (dim -> dim / r), GELU,
                                                          1x1 back (no biases)
            channel block: a + c * sigmoid(sg(a))     sg: 1x1 conv dim -> 1 (no bias)
            x = x + drop_path(that); x = x + drop_path(fc2(smix(GELU(fc1(LayerNorm(x))))))
                (fc1, fc2 linears without bias; smix a depthwise 3x3 conv on the hidden image)

The upsampler is UniUpsampleV3 with its uint8 buffer `upsampler.MetaUpsample` = [3 (version),
kind index, scale, in_dim, out_ch, mid_dim, 4]; kinds (index order): conv, pixelshuffledirect,
pixelshuffle, nearest+conv, dysample (a conv3x3 to mid_dim and LeakyReLU first when mid_dim differs
from embed_dim), transpose+conv (x2: ConvTranspose 4/2/1; x3: 3/3/0; x4: two, GELU between; then a
conv3x3), lda (a conv3x3 to mid_dim and LeakyReLU when it differs, LDA-AQU (models/lda_aqu.py),
conv3x3 to out_ch), pa_up (per x2 or one x3: nearest upsampling, conv3x3 to mid_dim, pixel attention
x sigmoid(conv1x1(x)), LeakyReLU 0.2, conv3x3, LeakyReLU 0.2; then conv3x3 to out_ch: at x2^n its
buffer records mid_dim as in_dim, as the original's). A buffer naming an index beyond the eight is
refused naming it.
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, linear, norm
from framework.check import choice, int_arg, number
from framework.detect import NoMatch, indices, need
from framework.nn import init
from framework.registry import MODELS

from ._blocks import pad_to_requirement
from .dat import _image, _tokens
from .lda_aqu import LDA_AQU
from .moesr import _power_stages, meta_upsample, read_meta, uni_upsample_layers, upsampler_cost
from .mosr import _ratio
from .realplksr import DySample
from .swin2sr import _l2_normalize

KINDS = ("conv", "pixelshuffledirect", "pixelshuffle", "nearest+conv", "dysample",
         "transpose+conv", "lda", "pa_up")  # SampleMods3's order: the MetaUpsample index
_PATTERN = ("spatial", "channel")
_VERSION, _GROUPS = 3, 4
_SIZES = {96: "tiny", 108: "light", 120: "medium", 180: "large"}  # spandrel's tags (xl: 6 groups)


class FastSpatialWindowAttention(nn.Module):
    """Window attention with a learned per-head (ws^2, ws^2) bias on tokens (B, H W, C)."""

    def __init__(self, dim: int, window_size: int, num_heads: int, qkv_bias: bool = False):
        super().__init__()
        self.ws, self.nh = window_size, num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.bias = nn.Parameter(np.zeros((num_heads, window_size ** 2, window_size ** 2), np.float32))
        init.trunc_normal_(self.bias, std=0.02)
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, h, w):
        b, _, c = x.shape
        ws = self.ws
        img = F.reshape(x, (b, h, w, c))
        padded = F.pad_to_multiple(img, ws, mode="constant", axes=(1, 2))
        hp, wp = padded.shape[1], padded.shape[2]
        y = F.window_attention(self.qkv(F.window_partition(padded, ws)), self.nh, self.scale, self.bias)
        y = F.window_reverse(self.proj(y), ws, hp, wp)
        # the padding cropped against the input's shape (one graph for every size)
        y = F.crop_to(F.permute(y, (0, 3, 1, 2)), F.permute(img, (0, 3, 1, 2)))
        return _tokens(y)


def channel_attention(qkv, heads: int, temperature):
    """Per head, its d channels attend to each other over the N tokens: qkv (B, N, 3C) = [q|k|v],
    q and k L2-normalised over the tokens, softmax(temperature q k^T) v -> (B, N, C)."""
    b, n, c3 = qkv.shape
    c, d = c3 // 3, c3 // 3 // heads
    q, k, v = (F.permute(F.reshape(t, (b, n, heads, d)), (0, 3, 2, 1))  # (B, d, heads, N)
               for t in F.chunk(F.reshape(qkv, (b, n, 3 * heads, d)), 3, 2))
    q, k = _l2_normalize(q), _l2_normalize(k)
    q, k, v = (F.reshape(t, (b, d, heads * n)) for t in (q, k, v))
    y = F.reshape(F.attention(q, k, v, heads, F.reshape(temperature, (heads,))), (b, d, heads, n))
    return F.reshape(F.permute(y, (0, 3, 2, 1)), (b, n, c))


class FastChannelAttention(nn.Module):
    """Channel attention (channel_attention) with a learned per-head temperature `temp`."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = False):
        super().__init__()
        self.nh = num_heads
        self.temp = nn.Parameter(np.ones((num_heads, 1, 1), np.float32))
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, h, w):
        return self.proj(channel_attention(self.qkv(x), self.nh, self.temp))


class SimplifiedAIM(nn.Module):
    """The interaction of the attention and conv branches (module docstring)."""

    def __init__(self, dim: int, reduction_ratio: int):
        super().__init__()
        self.sg = nn.Sequential(nn.Conv2d(dim, 1, 1, bias=False), nn.Sigmoid())
        self.cg = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(dim, dim // reduction_ratio, 1, bias=False),
                                nn.GELU(), nn.Conv2d(dim // reduction_ratio, dim, 1, bias=False),
                                nn.Sigmoid())

    def forward(self, attn_feat, conv_feat, spatial_modulates_channel: bool, h, w):
        b, n, c = attn_feat.shape
        if spatial_modulates_channel:
            return attn_feat + conv_feat * F.reshape(self.sg(_image(attn_feat, h, w)), (b, n, 1))
        return attn_feat * F.reshape(self.cg(_image(conv_feat, h, w)), (b, 1, c)) + conv_feat


class SimplifiedFFN(nn.Module):
    """fc2(smix(GELU(fc1(x)))) on tokens; smix a depthwise 3x3 conv on the hidden image."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden, False), nn.GELU(), nn.Linear(hidden, dim, False)
        self.smix = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False)

    def forward(self, x, h, w):
        return self.fc2(_tokens(self.smix(_image(self.act(self.fc1(x)), h, w))))


class SimplifiedDATBlock(nn.Module):
    """One spatial or channel block (module docstring) on tokens (B, H W, C)."""

    def __init__(self, dim, heads, ws, hidden, reduction, btype, drop_path):
        super().__init__()
        self.btype = btype
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = (FastSpatialWindowAttention(dim, ws, heads) if btype == "spatial"
                     else FastChannelAttention(dim, heads))
        self.conv = nn.Sequential(nn.Conv2d(dim, dim, 3, padding=1, groups=dim, bias=False), nn.GELU())
        self.inter = SimplifiedAIM(dim, reduction)
        self.dp = nn.DropPath(drop_path) if drop_path > 0.0 else nn.Identity()
        self.ffn = SimplifiedFFN(dim, hidden)

    def forward(self, x, h, w):
        n1 = self.n1(x)
        c = _tokens(self.conv(_image(n1, h, w)))
        x = x + self.dp(self.inter(self.attn(n1, h, w), c, self.btype != "spatial", h, w))
        return x + self.dp(self.ffn(self.n2(x), h, w))


class SimplifiedResidualGroup(nn.Module):
    """The blocks on the tokens of (B, C, H, W), then conv3x3 (no bias), plus the input."""

    def __init__(self, dim, depth, heads, ws, hidden, reduction, pattern, rates):
        super().__init__()
        self.blocks = nn.ModuleList([SimplifiedDATBlock(dim, heads, ws, hidden, reduction,
                                                        pattern[i % len(pattern)], rates[i])
                                     for i in range(depth)])
        self.conv = nn.Conv2d(dim, dim, 3, padding=1, bias=False)

    def forward(self, x):
        h, w = x.shape[2], x.shape[3]
        t = _tokens(x)
        for block in self.blocks:
            t = block(t, h, w)
        return self.conv(_image(t, h, w)) + x


class PA(nn.Module):
    """Pixel attention: x * sigmoid(conv1x1(x))."""

    def __init__(self, dim: int):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(dim, dim, 1), nn.Sigmoid())

    def forward(self, x):
        return x * self.conv(x)


class UniUpsampleV3(nn.Sequential):
    """FDAT's upsampler (module docstring) with its MetaUpsample buffer."""

    def __init__(self, kind: str, scale: int, in_dim: int, out_dim: int, mid_dim: int):
        owner = "FDAT"
        m, meta_in = [], in_dim
        if scale == 1 or kind in ("conv", "pixelshuffledirect", "pixelshuffle", "nearest+conv"):
            m = uni_upsample_layers(owner, kind, scale, in_dim, out_dim, mid_dim)
        elif kind in ("dysample", "lda"):
            if mid_dim != in_dim:
                m += [nn.Conv2d(in_dim, mid_dim, 3, padding=1), nn.LeakyReLU()]
            if kind == "lda":
                if mid_dim % 8:
                    raise ValueError(f"{owner}: the 'lda' upsampler needs mid_dim a multiple of 8 "
                                     f"(LDA-AQU's queries are a quarter of it, in 2 groups), got "
                                     f"{mid_dim}")
                m += [LDA_AQU(mid_dim, scale), nn.Conv2d(mid_dim, out_dim, 3, padding=1)]
            elif mid_dim <= _GROUPS or mid_dim % _GROUPS:
                raise ValueError(f"{owner}: DySample's {_GROUPS} groups need mid_dim a multiple of "
                                 f"{_GROUPS} above {_GROUPS}, got {mid_dim}")
            else:
                m.append(DySample(mid_dim, out_dim, scale, _GROUPS, True))
        elif kind == "transpose+conv":
            if scale not in (2, 3, 4):
                raise ValueError(f"{owner}: the 'transpose+conv' upsampler supports scale 2, 3, 4, "
                                 f"got {scale}")
            if scale == 4:
                m += [nn.ConvTranspose2d(in_dim, in_dim, 4, 2, 1), nn.GELU(),
                      nn.ConvTranspose2d(in_dim, out_dim, 4, 2, 1)]
            else:
                m.append(nn.ConvTranspose2d(in_dim, out_dim, *((4, 2, 1) if scale == 2 else (3, 3, 0))))
            m.append(nn.Conv2d(out_dim, out_dim, 3, padding=1))
        else:  # pa_up
            n = _power_stages(owner, kind, scale)
            for f in [2] * n if n else [3]:
                m += [nn.Upsample(scale_factor=f), nn.Conv2d(in_dim, mid_dim, 3, padding=1), PA(mid_dim),
                      nn.LeakyReLU(0.2), nn.Conv2d(mid_dim, mid_dim, 3, padding=1), nn.LeakyReLU(0.2)]
                in_dim = mid_dim
            meta_in = mid_dim if n else meta_in  # the original's x2^n loop reassigns in_dim and
            # records that; its x3 branch does not
            m.append(nn.Conv2d(mid_dim, out_dim, 3, padding=1))
        super().__init__(*m)
        self.register_buffer("MetaUpsample", meta_upsample(
            owner, _VERSION, KINDS.index(kind), scale, meta_in, out_dim, mid_dim, _GROUPS))


def _pattern(owner: str, pattern) -> tuple:
    if pattern is None:
        return _PATTERN
    if (not isinstance(pattern, (list, tuple)) or not pattern
            or any(p not in _PATTERN for p in pattern)):
        raise ValueError(f"{owner}: group_block_pattern must be a non-empty list of 'spatial' and "
                         f"'channel', got {pattern!r}")
    return tuple(pattern)


def _uses_unshuffle(unshuffle_mod: bool, scale: int) -> bool:
    return bool(unshuffle_mod) and scale < 3


@MODELS.register()
class FDAT(nn.Module):
    """FDAT: (N, num_in_ch, h, w) -> (N, num_out_ch, h scale, w scale), any h, w.

    Args (spandrel's names and defaults; traiNNer-redux's presets in PRESETS of
    framework/engine/config/redux_archs.py):
        num_in_ch, num_out_ch: channels, default 3. scale: default 4.
        embed_dim: default 120 (tiny 96, light 108, medium 120, large / xl 180).
        num_groups: residual groups, default 4 (tiny 2, light 3, xl 6).
        depth_per_group: repeats of the block pattern in a group, default 3 (tiny / light 2,
            large 4, xl 6).
        num_heads: default 4 (tiny 3, large / xl 6); a divisor of embed_dim.
        window_size: the spatial windows' side, default 8.
        ffn_expansion_ratio: the FFN's hidden = int(embed_dim ratio), default 2.0 (tiny 1.5).
        aim_reduction_ratio: the channel gate's dim / r, default 8.
        group_block_pattern: the blocks' kinds in a group, default ["spatial", "channel"].
        drop_path_rate: stochastic depth, rising linearly over all blocks to this, default 0.1.
        mid_dim: the upsampler's width (pixelshuffle, dysample, pa_up), default 64.
        upsampler_type: one of KINDS, default "transpose+conv".
        img_range: accepted and unused, as the original.
        unshuffle_mod: at x1 / x2, pixel-unshuffle the input by 4 / scale and run at x4.
    """

    def __init__(self, num_in_ch: int = 3, num_out_ch: int = 3, scale: int = 4,
                 embed_dim: int = 120, num_groups: int = 4, depth_per_group: int = 3,
                 num_heads: int = 4, window_size: int = 8, ffn_expansion_ratio: float = 2.0,
                 aim_reduction_ratio: int = 8, group_block_pattern=None,
                 drop_path_rate: float = 0.1, mid_dim: int = 64,
                 upsampler_type: str = "transpose+conv", img_range: float = 1.0,
                 unshuffle_mod: bool = False):
        super().__init__()
        name = "FDAT"
        num_in_ch, num_out_ch = int_arg(name, "num_in_ch", num_in_ch), int_arg(name, "num_out_ch", num_out_ch)
        self.upscale = scale = int_arg(name, "scale", scale)
        dim = int_arg(name, "embed_dim", embed_dim)
        num_groups = int_arg(name, "num_groups", num_groups, 0)
        depth = int_arg(name, "depth_per_group", depth_per_group)
        heads = int_arg(name, "num_heads", num_heads)
        if dim % heads:
            raise ValueError(f"{name}: embed_dim {dim} is not a multiple of num_heads {heads}")
        ws = int_arg(name, "window_size", window_size)
        hidden = int(number(name, "ffn_expansion_ratio", ffn_expansion_ratio, low=0, low_open=True) * dim)
        reduction = int_arg(name, "aim_reduction_ratio", aim_reduction_ratio)
        if hidden < 1 or dim // reduction < 1:
            raise ValueError(f"{name}: ffn_expansion_ratio {ffn_expansion_ratio} and "
                             f"aim_reduction_ratio {reduction} must leave the FFN and the channel "
                             f"gate at least one channel of embed_dim {dim}")
        pattern = _pattern(name, group_block_pattern)
        drop = number(name, "drop_path_rate", drop_path_rate, 0.0, 1.0, high_open=True)
        mid_dim = int_arg(name, "mid_dim", mid_dim)
        kind = choice(name, "upsampler_type", upsampler_type, KINDS)
        number(name, "img_range", img_range, low=0, low_open=True)
        self.pad = 1
        if _uses_unshuffle(unshuffle_mod, scale):
            if kind == "conv":
                raise ValueError(f"{name}: unshuffle_mod with the 'conv' upsampler would give an "
                                 f"output {4 // scale} times smaller than x{scale}")
            self.pad = u = 4 // scale
            self.conv_first = nn.Sequential(nn.PixelUnshuffle(u), nn.Conv2d(num_in_ch * u * u, dim, 3, padding=1))
            scale = 4
        else:
            self.conv_first = nn.Conv2d(num_in_ch, dim, 3, padding=1)
        blocks = depth * len(pattern)
        rates = np.linspace(0, drop, num_groups * blocks).tolist() if num_groups else []
        self.groups = nn.Sequential(*[
            SimplifiedResidualGroup(dim, blocks, heads, ws, hidden, reduction, pattern,
                                    rates[i * blocks:(i + 1) * blocks]) for i in range(num_groups)])
        self.conv_after = nn.Conv2d(dim, dim, 3, padding=1, bias=False)
        self.upsampler = UniUpsampleV3(kind, scale, dim, num_out_ch, mid_dim)
        self._init_weights()

    def _init_weights(self):
        """The original's: Linear and Conv2d weights trunc_normal(0.02), biases 0; LayerNorms 1 / 0
        (their default); the attention biases trunc_normal(0.02); transposed convs torch's."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)) and not isinstance(m, nn.ConvTranspose2d):
                init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    init.constant_(m.bias, 0.0)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"FDAT: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        s = self.conv_first(pad_to_requirement(x, 1, self.pad))
        return F.crop_to(self.upsampler(self.conv_after(self.groups(s)) + s), x, self.upscale)

    @staticmethod
    def card(spec: dict):
        """conv_first, the groups (per block two LayerNorms, the attention's qkv, proj and bias or
        temperature, the depthwise conv, both gates, the FFN), conv_after, the upsampler. The
        largest arrays per input pixel: the qkv's 3 dim, the FFN's hidden, a window's attention
        weights (heads ws^2) or the upsampler's. DySample and the window partition fix the ONNX
        graph to one size."""
        s, i, o, c = spec["scale"], spec["num_in_ch"], spec["num_out_ch"], spec["embed_dim"]
        heads, ws, kind = spec["num_heads"], spec["window_size"], spec["upsampler_type"]
        hidden, r = int(c * spec["ffn_expansion_ratio"]), c // spec["aim_reduction_ratio"]
        pattern = _pattern("FDAT", spec["group_block_pattern"])
        unshuffle = _uses_unshuffle(spec["unshuffle_mod"], s)
        u = 4 // s if unshuffle else 1
        first = conv(i * u * u, c)
        common = (2 * norm(c) + linear(c, 3 * c, False) + linear(c, c) + conv(c, c, 3, False, c)
                  + conv(c, 1, 1, False) + conv(c, r, 1, False) + conv(r, c, 1, False)
                  + linear(c, hidden, False) + linear(hidden, c, False) + conv(hidden, hidden, 3, False, hidden))
        per = {"spatial": common + heads * ws ** 4, "channel": common + heads}
        group = spec["depth_per_group"] * sum(per[p] for p in pattern) + conv(c, c, 3, False)
        up_s = 4 if unshuffle else s
        if kind in ("transpose+conv", "pa_up", "dysample", "lda") and up_s > 1:
            mid = spec["mid_dim"]
            if kind == "lda":  # LDA-AQU: the projections, the offset branch, norms, the table
                hd = mid // 4
                up = ((conv(c, mid) if mid != c else 0) + 2 * conv(mid, hd, 1, False) + 9 * hd
                      + conv(hd // 2, hd // 2, 3, False, hd // 2) + norm(hd // 2)
                      + conv(hd // 2, 18) + norm(mid) + conv(mid, o))
            elif kind == "transpose+conv":
                up = (conv(c, c, 4) + conv(c, o, 4) if up_s == 4 else conv(c, o, 4 if up_s == 2 else 3)) + conv(o, o)
            elif kind == "pa_up":
                stages = [2] * (up_s.bit_length() - 1) if up_s != 3 else [3]
                up = sum(conv(c if k == 0 else mid, mid) + conv(mid, mid, 1) + conv(mid, mid)
                         for k in range(len(stages))) + conv(mid, o)
            else:
                up = (conv(c, mid) if mid != c else 0) + upsampler_cost("dysample", up_s, mid, o, mid)[0]
            up_act = max(c, mid) * up_s * up_s * (9 if kind == "lda" else 1)  # lda: 9 taps
        else:
            up, up_act = upsampler_cost(kind, up_s, c, o, spec["mid_dim"])
        params = first + spec["num_groups"] * group + conv(c, c, 3, False) + up
        act = max(3 * c, hidden, heads * ws * ws, up_act / (u * u))
        fixed = (f"{'DySample' if kind == 'dysample' else 'LDA-AQU'}'s sampling grid is computed "
                 f"for the input size" if kind in ("dysample", "lda") and up_s > 1 else None)
        return image_card(spec["scale"], i, o, params, math.ceil(act), pads_to=math.lcm(u, ws),
                          fixed_onnx=fixed)

    @staticmethod
    def detect(shapes: dict, known: dict, values=None) -> dict:
        """spandrel's rule: the upsampler's kind, num_out_ch, mid_dim and scale from the values of
        upsampler.MetaUpsample (an unknown kind index refused naming it); with
        conv_first.1 (unshuffle_mod) num_in_ch = num_out_ch (spandrel's rule: the keys give only
        num_in_ch (4 / scale)^2) and scale 4 / sqrt(its inputs / num_in_ch); embed_dim from
        conv_first; num_groups counted; the block pattern from group 0's blocks (an attention
        `bias`: spatial, a `temp`: channel; its shortest repeat) and depth_per_group from it;
        num_heads and window_size from an attention bias (or a temperature); the FFN ratio from
        fc1 (the smallest ratio giving its width); aim_reduction_ratio = embed_dim // the gate's
        width. drop_path_rate (training only) keeps its default."""
        meta = read_meta(values, "upsampler.MetaUpsample", KINDS, "FDAT")
        out = meta["out_dim"]
        if "conv_first.1.weight" in shapes:
            dim, cin = need(shapes, "conv_first.1.weight", 4)[:2]
            u = math.isqrt(cin // out) if cin % out == 0 else 0
            if u not in (2, 4) or u * u * out != cin:
                raise NoMatch(f"conv_first.1 takes {cin} channels: not {out} x (4 / scale)^2 for "
                              f"x1 or x2")
            in_ch, scale, unshuffle = out, 4 // u, True
        else:
            dim, in_ch = need(shapes, "conv_first.weight", 4)[:2]
            scale, unshuffle = meta["scale"], False
        n_groups = len(indices(shapes, "groups", ".conv.weight"))
        blocks = indices(shapes, "groups.0.blocks", ".n1.weight")
        if not n_groups or not blocks or blocks != list(range(len(blocks))):
            raise NoMatch("no groups.0.blocks.0 (FDAT's residual groups)")
        kinds = []
        for b in blocks:
            p = f"groups.0.blocks.{b}.attn."
            kinds.append("spatial" if p + "bias" in shapes else "channel" if p + "temp" in shapes else None)
        if None in kinds:
            raise NoMatch(f"group 0's block {kinds.index(None)} has neither an attention bias nor a temp")
        period = next(p for p in range(1, len(kinds) + 1)
                      if len(kinds) % p == 0 and kinds == kinds[:p] * (len(kinds) // p))
        pattern = kinds[:period]
        spatial = [b for b, k in zip(blocks, kinds) if k == "spatial"]
        if spatial:
            heads, _, n = need(shapes, f"groups.0.blocks.{spatial[0]}.attn.bias", 3)
            ws = math.isqrt(n)
            if ws * ws != n:
                raise NoMatch(f"the attention bias has {n} rows: not window_size^2")
        else:
            heads, ws = need(shapes, "groups.0.blocks.0.attn.temp", 3)[0], 8
        hidden = need(shapes, "groups.0.blocks.0.ffn.fc1.weight", 2)[0]
        gate = need(shapes, "groups.0.blocks.0.inter.cg.1.weight", 4)[0]
        reduction = dim // gate
        if reduction < 1 or dim // reduction != gate:
            raise NoMatch(f"the channel gate has {gate} channels: no integer ratio of {dim} gives it")
        if meta["in_dim"] != dim and not (meta["kind"] == "pa_up" and meta["in_dim"] == meta["mid_dim"]):
            raise NoMatch(f"upsampler.MetaUpsample records in_dim {meta['in_dim']}, conv_first "
                          f"gives {dim}")
        spec = {"num_in_ch": in_ch, "num_out_ch": out, "scale": scale, "embed_dim": dim,
                "num_groups": n_groups, "depth_per_group": len(kinds) // len(pattern),
                "num_heads": heads, "window_size": ws,
                "ffn_expansion_ratio": _ratio(hidden, dim), "aim_reduction_ratio": reduction,
                "mid_dim": meta["mid_dim"], "upsampler_type": meta["kind"],
                "unshuffle_mod": unshuffle}
        if tuple(pattern) != _PATTERN:
            spec["group_block_pattern"] = pattern
        return spec
