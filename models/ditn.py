"""DITN, the Deployment-friendly Inception Transformer Network (Liu et al., "Unfolding Once is
Enough: A Deployment-Friendly Transformer Unit for Super-Resolution", ACM MM 2023; yongliuy/DITN's
DITN_Real, as spandrel 0.4.2 and traiNNer-redux's `ditn_real` read it):

    sft = conv3x3(x)                                   (in_ch -> dim)
    UFONE groups, each: cut the features into patch_size x patch_size patches, ITL blocks on every
        patch (as a batch), stitch them back, SAL blocks on the whole image
    out = pixel_shuffle(conv3x3(conv_after_body(UFONE(sft)) + sft))      (dim -> 3 scale^2)

An ITL block (inception transformer layer) on (N, c, p, p), ISA its channel attention:

    x = x + ISA(conv1(tanh(x)))                  conv1, conv2: 1x1
    x = x + FFN(conv2(tanh(x)))
    ISA(x): q, k, v = chunks of qkv(x as (N, p p, c) tokens) (a Linear to 3c), each (N, c, p p);
            q, k L2-normalised over the pixels; out = softmax(temperature q k^T) v  (c x c attention)
            then project_out (1x1)
    FFN(x): x1, x2 = chunks of dwconv3x3(project_in(x)) (1x1 to 2 hidden, hidden = int(c f));
            project_out(gelu(x1) x2)

A SAL block (spatial attention layer): the same with SDA for ISA: a, x = chunks of proj_first(x)
(1x1 to 2c); a = 1x1(dw7x7 dilation 3(dw5x5(a))); scale * proj_last(x a) (`scale` per channel,
zero at init). `bias` is the 1x1 and depthwise convs' of the FFNs and ISA's project_out; every
other conv has a bias, and qkv always has one. `LayerNorm_type` is read and unused, as the
original's. The output always has 3 channels (the original's upsampler).

The input is padded at the bottom and right to a multiple of 8 (the original's check_image_size,
which reflects; srgrad reflects as far as the image allows, then replicates: spandrel's call API,
SizeRequirements(multiple_of=8), whose padding runs first) and to a multiple of patch_size; the
output is cropped back. The published DITN_Real x2, x3, x4: dim 60, 4 ITL and 4 SAL blocks in one
UFONE group, ffn_expansion_factor 2, no bias, patch_size 8 (spandrel's defaults).
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, linear
from framework.check import choice, flag, int_arg, number
from framework.detect import Assumed, NoMatch, count, need
from framework.registry import MODELS

from ._blocks import pad_to_requirement
from .mosr import _ratio

_PAD = 8  # the original's check_image_size: patch_sizes [8, 8], whatever patch_size is
_OUT = 3  # the original's upsampler always outputs RGB
_EPS = 1e-12  # torch.nn.functional.normalize's


def normalize_last(x):
    """torch.nn.functional.normalize(x, dim=-1): x / max(||x||_2, 1e-12) over the last axis."""
    norm = F.sqrt(F.sum(x * x, -1, keepdims=True))
    return x / F.clamp(norm, min=_EPS)


class FeedForward(nn.Module):
    """The gated depthwise FFN (module docstring) on (N, dim, H, W)."""

    def __init__(self, dim: int, hidden: int, bias: bool):
        super().__init__()
        self.project_in = nn.Conv2d(dim, hidden * 2, 1, bias=bias)
        self.dwconv = nn.Conv2d(hidden * 2, hidden * 2, 3, padding=1, groups=hidden * 2, bias=bias)
        self.project_out = nn.Conv2d(hidden, dim, 1, bias=bias)

    def forward(self, x):
        x1, x2 = F.chunk(self.dwconv(self.project_in(x)), 2, 1)
        return self.project_out(F.gelu(x1) * x2)


class ISA(nn.Module):
    """Channel self-attention over a patch (module docstring): (N, c, h, w) -> (N, c, h, w)."""

    def __init__(self, dim: int, bias: bool):
        super().__init__()
        self.temperature = nn.Parameter(np.ones((1, 1, 1), np.float32))
        self.qkv = nn.Linear(dim, dim * 3)
        self.project_out = nn.Conv2d(dim, dim, 1, bias=bias)

    def forward(self, x):
        b, c, h, w = x.shape
        qkv = F.transpose(self.qkv(F.transpose(F.reshape(x, (b, c, h * w)), 1, 2)), 1, 2)
        q, k, v = F.chunk(qkv, 3, 1)  # each (N, c, h w)
        attn = F.matmul(normalize_last(q), F.transpose(normalize_last(k), 1, 2)) * self.temperature
        out = F.matmul(F.softmax(attn, -1), v)
        return self.project_out(F.reshape(out, (b, c, h, w)))


class SDA(nn.Module):
    """The SAL's spatial attention (module docstring): (N, c, H, W) -> (N, c, H, W)."""

    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(np.zeros((1, dim, 1, 1), np.float32))
        self.DConvs = nn.Sequential(
            nn.Conv2d(dim, dim, 5, padding=2, groups=dim),
            nn.Conv2d(dim, dim, 7, padding=9, groups=dim, dilation=3),
            nn.Conv2d(dim, dim, 1))
        self.proj_first = nn.Sequential(nn.Conv2d(dim, dim * 2, 1))
        self.proj_last = nn.Sequential(nn.Conv2d(dim, dim, 1))

    def forward(self, x):
        a, x = F.chunk(self.proj_first(x), 2, 1)
        return self.proj_last(x * self.DConvs(a)) * self.scale


class ITL(nn.Module):
    """Inception transformer layer: ISA then the FFN, each on conv1x1(tanh(x)), residual."""

    def __init__(self, dim: int, hidden: int, bias: bool):
        super().__init__()
        self.attn = ISA(dim, bias)
        self.act = nn.Tanh()
        self.conv1 = nn.Conv2d(dim, dim, 1)
        self.conv2 = nn.Conv2d(dim, dim, 1)
        self.ffn = FeedForward(dim, hidden, bias)

    def forward(self, x):
        x = x + self.attn(self.conv1(self.act(x)))
        return x + self.ffn(self.conv2(self.act(x)))


class SAL(nn.Module):
    """Spatial attention layer: SDA then the FFN, each on conv1x1(tanh(x)), residual."""

    def __init__(self, dim: int, hidden: int, bias: bool):
        super().__init__()
        self.SDA = SDA(dim)
        self.ffn = FeedForward(dim, hidden, bias)
        self.act = nn.Tanh()
        self.conv1 = nn.Conv2d(dim, dim, 1)
        self.conv2 = nn.Conv2d(dim, dim, 1)

    def forward(self, x):
        x = x + self.SDA(self.conv1(self.act(x)))
        return x + self.ffn(self.conv2(self.act(x)))


class UFONE(nn.Module):
    """ITL blocks on each p x p patch (a batch of patches), then SAL blocks on the whole image.
    (N, c, H, W), H and W multiples of p."""

    def __init__(self, dim: int, hidden: int, bias: bool, itl: int, sal: int, patch_size: int):
        super().__init__()
        self.ITLs = nn.Sequential(*[ITL(dim, hidden, bias) for _ in range(itl)])
        self.SALs = nn.Sequential(*[SAL(dim, hidden, bias) for _ in range(sal)])
        self.patch_size = patch_size

    def forward(self, x):
        b, c, h, w = x.shape
        p = self.patch_size
        patches = F.permute(F.reshape(x, (b, c, h // p, p, w // p, p)), 0, 2, 4, 1, 3, 5)
        patches = self.ITLs(F.reshape(patches, (b * (h // p) * (w // p), c, p, p)))
        patches = F.permute(F.reshape(patches, (b, h // p, w // p, c, p, p)), 0, 3, 1, 4, 2, 5)
        return self.SALs(F.reshape(patches, (b, c, h, w)))


@MODELS.register()
class DITN(nn.Module):
    """DITN_Real: (N, inp_channels, h, w) in [0, 1] -> (N, 3, h scale, w scale), any h, w.

    Args (spandrel's names and defaults; `scale` is its `upscale`, traiNNer-redux's `scale`):
        inp_channels: image channels in, default 3 (the output has 3).
        dim: features, default 60.
        ITL_blocks, SAL_blocks: blocks of each UFONE group, default 4 and 4.
        UFONE_blocks: UFONE groups, default 1.
        ffn_expansion_factor: the FFNs' hidden = int(dim f), default 2.
        bias: the FFNs' convs and ISA's project_out have biases, default False.
        LayerNorm_type: "WithBias" (default) or "BiasFree"; unused, as in the original.
        patch_size: the side of ITL's patches, default 8.
        scale: upscaling factor, default 4 (any integer >= 1).
    """

    def __init__(self, inp_channels: int = 3, dim: int = 60, ITL_blocks: int = 4,  # noqa: N803
                 SAL_blocks: int = 4, UFONE_blocks: int = 1,  # noqa: N803
                 ffn_expansion_factor: float = 2, bias: bool = False,
                 LayerNorm_type: str = "WithBias", patch_size: int = 8, scale: int = 4):  # noqa: N803
        super().__init__()
        name = "DITN"
        inp_channels = int_arg(name, "inp_channels", inp_channels)
        dim = int_arg(name, "dim", dim)
        itl = int_arg(name, "ITL_blocks", ITL_blocks, 0)
        sal = int_arg(name, "SAL_blocks", SAL_blocks, 0)
        groups = int_arg(name, "UFONE_blocks", UFONE_blocks, 0)
        factor = number(name, "ffn_expansion_factor", ffn_expansion_factor, low=0, low_open=True)
        hidden = int(dim * factor)
        if hidden < 1:
            raise ValueError(f"{name}: ffn_expansion_factor {ffn_expansion_factor} leaves the FFN "
                             f"no hidden feature (int(dim * ffn_expansion_factor) = 0)")
        bias = flag(name, "bias", bias)
        choice(name, "LayerNorm_type", LayerNorm_type, ("WithBias", "BiasFree"))
        self.patch_size = int_arg(name, "patch_size", patch_size)
        self.scale = int_arg(name, "scale", scale)
        self.multiple = math.lcm(_PAD, self.patch_size)
        self.sft = nn.Conv2d(inp_channels, dim, 3, padding=1)
        self.UFONE = nn.Sequential(*[UFONE(dim, hidden, bias, itl, sal, self.patch_size)
                                     for _ in range(groups)])
        self.conv_after_body = nn.Conv2d(dim, dim, 3, padding=1)
        self.upsample = nn.Sequential(nn.Conv2d(dim, self.scale ** 2 * _OUT, 3, padding=1),
                                      nn.PixelShuffle(self.scale))

    def forward(self, image):
        if image.ndim != 4:
            raise ValueError(f"DITN: expected input (N, C, H, W), got shape {tuple(image.shape)}")
        sft = self.sft(pad_to_requirement(image, 0, self.multiple))
        out = self.upsample(self.conv_after_body(self.UFONE(sft)) + sft)
        return F.crop_to(out, image, self.scale)

    @staticmethod
    def card(spec: dict):
        """sft, per group its ITL blocks (ISA: temperature, qkv, project_out; two 1x1; the FFN)
        and SAL blocks (SDA: scale, 5x5 and dilated 7x7 depthwise, three 1x1; two 1x1; the FFN),
        conv_after_body, the upsampler's conv. The largest activation is the FFN's 2 hidden
        channels (or qkv's 3 dim) per pixel of the padded input."""
        c, i, s = spec["dim"], spec["inp_channels"], spec["scale"]
        hidden, b = int(c * spec["ffn_expansion_factor"]), bool(spec["bias"])
        ffn = conv(c, 2 * hidden, 1, b) + conv(2 * hidden, 2 * hidden, 3, b, 2 * hidden) \
            + conv(hidden, c, 1, b)
        itl = 1 + linear(c, 3 * c) + conv(c, c, 1, b) + 2 * conv(c, c, 1) + ffn
        sda = c + conv(c, c, 5, groups=c) + conv(c, c, 7, groups=c) + conv(c, 2 * c, 1) \
            + 2 * conv(c, c, 1)
        sal = sda + 2 * conv(c, c, 1) + ffn
        group = spec["ITL_blocks"] * itl + spec["SAL_blocks"] * sal
        params = conv(i, c) + spec["UFONE_blocks"] * group + conv(c, c) + conv(c, _OUT * s * s)
        return image_card(s, i, _OUT, params, max(2 * hidden, 3 * c, _OUT * s * s),
                          pads_to=math.lcm(_PAD, spec["patch_size"]),
                          channel_keys=("inp_channels",))

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: dim and inp_channels from sft, the UFONE groups and group 0's ITL and
        SAL blocks counted, ffn_expansion_factor from project_in (2 hidden rows; the smallest
        ratio giving that width), bias from ISA's project_out, scale from the upsampler (3
        scale^2 rows). patch_size has no weight: 8 (spandrel's, every published file's) unless
        given."""
        dim, inp = need(shapes, "sft.weight", 4)[:2]
        groups = count(shapes, "UFONE")
        if "UFONE.0.ITLs.0.attn.temperature" not in shapes:
            raise NoMatch("no UFONE group with an ITL block (UFONE.0.ITLs.0.attn.temperature)")
        rows = need(shapes, "UFONE.0.ITLs.0.ffn.project_in.weight", 4)[0]
        up = need(shapes, "upsample.0.weight", 4)[0]
        scale = math.isqrt(up // _OUT)
        if scale < 1 or _OUT * scale * scale != up:
            raise NoMatch(f"the upsampler's {up} outputs are not 3 x scale^2")
        return {"inp_channels": inp, "dim": dim,
                "ITL_blocks": count(shapes, "UFONE.0.ITLs", ".attn.temperature"),
                "SAL_blocks": count(shapes, "UFONE.0.SALs", ".SDA.scale"),
                "UFONE_blocks": groups, "ffn_expansion_factor": _ratio(rows // 2, dim),
                "bias": "UFONE.0.ITLs.0.attn.project_out.bias" in shapes,
                "patch_size": Assumed(8, "spandrel's, every published DITN's (no weight has it)",
                                      quiet=True),
                "scale": scale}
