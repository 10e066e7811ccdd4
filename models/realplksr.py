"""RealPLKSR (neosr's real-world PLKSR, with traiNNer-redux's LayerNorm and DySample options; the
keywords of traiNNer-redux's `realplksr`, the layout spandrel 0.4.2 reads): PLKSR's partial large
kernel and element-wise attention (models/plksr.py) in blocks

    x + norm(refine(attn(lk(channel_mixer(layer_norm(x))))))

with channel_mixer DCCM (3x3 -> Mish -> 3x3), norm a GroupNorm(norm_groups) unless layer_norm (then a
LayerNorm over the channels before the mixer instead, eps 1e-6), a Dropout2d before the last conv,
and the upsampler either a pixel shuffle or DySample (Liu et al., "Learning to Upsample by Learning
to Sample", ICCV 2023): per output sub-pixel a learnt offset, offset(x) * sigmoid(scope(x)) / 2 +
the sub-pixel's own position, where the features are sampled bilinearly (grid_sample, border
padding) in `groups` channel groups, then a 1x1 conv to the output channels (when scale > 1).
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.check import choice, flag, int_arg, number
from framework.nn import init
from framework.detect import NoMatch, Unknown, indices, need
from framework.registry import MODELS
from framework.card import conv, image_card, norm

from .plksr import EA, PLKConv2d, channel_mixer, check_odd_kernel, partial_channels, read_split_ratio, \
    repeat_channels, trunc_normal

_UPSAMPLERS = ("pixelshuffle", "dysample")


class LayerNorm(nn.Module):
    """Layer normalisation over the channels of (N, C, H, W): per pixel (x - mean) / sqrt(var + eps)
    * weight + bias, weight and bias (C,)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(np.ones(dim, np.float32))
        self.bias = nn.Parameter(np.zeros(dim, np.float32))
        self.eps = eps

    def forward(self, x):
        y = F.layer_norm(F.permute(x, (0, 2, 3, 1)), x.shape[1], self.weight, self.bias, self.eps)
        return F.permute(y, (0, 3, 1, 2))


def _init_pos(scale: int, groups: int) -> np.ndarray:
    """DySample's init_pos (1, 2 groups scale^2, 1, 1): for sub-pixel (a, b) of every group, its
    offset from the LR pixel's centre, x = h[b] then y = h[a], h = ((1 - s) / 2 + k) / s."""
    h = np.arange((1 - scale) / 2, (scale - 1) / 2 + 1, dtype=np.float32) / np.float32(scale)
    pos = np.empty((2, groups, scale, scale), np.float32)
    pos[0] = h[None, None, :]
    pos[1] = h[None, :, None]
    return pos.reshape(1, -1, 1, 1)


class DySample(nn.Module):
    """(N, in_channels, H, W) -> (N, out_ch, H scale, W scale) (module docstring); without
    end_convolution the output keeps in_channels."""

    def __init__(self, in_channels: int, out_ch: int, scale: int, groups: int, end_convolution: bool):
        super().__init__()
        if in_channels < groups or in_channels % groups:
            raise ValueError(f"DySample: {in_channels} channels cannot form {groups} groups")
        self.scale, self.groups = scale, groups
        if end_convolution:
            self.end_conv = nn.Conv2d(in_channels, out_ch, 1)
        self.offset = trunc_normal(nn.Conv2d(in_channels, 2 * groups * scale ** 2, 1))
        self.scope = nn.Conv2d(in_channels, 2 * groups * scale ** 2, 1, bias=False)
        init.constant_(self.scope.weight, 0.0)
        self.register_buffer("init_pos", _init_pos(scale, groups))

    def forward(self, x):
        B, C, H, W = x.shape
        s, g = self.scale, self.groups
        dt = x.dtype
        offset = self.offset(x) * F.sigmoid(self.scope(x)) * 0.5 + self.init_pos.data.astype(dt)
        centres = np.stack(np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5, indexing="xy"))
        centres = centres.astype(dt).reshape(1, 2, 1, H, W)  # (x, y) of every LR pixel centre
        size = np.array([W, H], dt).reshape(1, 2, 1, 1, 1)
        coords = 2 * (F.reshape(offset, (B, 2, -1, H, W)) + centres) / size - 1
        coords = F.pixel_shuffle(F.reshape(coords, (B, -1, H, W)), s)  # (B, 2 g, sH, sW)
        coords = F.permute(F.reshape(coords, (B, 2, g, s * H, s * W)), (0, 2, 3, 4, 1))
        out = F.grid_sample(F.reshape(x, (B * g, C // g, H, W)), F.reshape(coords, (B * g, s * H, s * W, 2)),
                            mode="bilinear", padding_mode="border", align_corners=False)
        out = F.reshape(out, (B, C, s * H, s * W))
        return self.end_conv(out) if "end_conv" in self._modules else out


class RealPLKBlock(nn.Module):
    """x + norm(refine(attn(lk(channel_mixer(layer_norm(x)))))) on (N, dim, H, W)."""

    def __init__(self, dim, kernel_size, pdim, use_ea, norm_groups, use_layer_norm):
        super().__init__()
        self.layer_norm = LayerNorm(dim) if use_layer_norm else nn.Identity()
        self.channel_mixer = channel_mixer(dim, (3, 3), nn.Mish())
        self.lk = PLKConv2d(pdim, kernel_size)
        self.attn = EA(dim) if use_ea else nn.Identity()
        self.refine = trunc_normal(nn.Conv2d(dim, dim, 1))
        self.norm = nn.Identity() if use_layer_norm else nn.GroupNorm(norm_groups, dim)

    def forward(self, x):
        y = self.refine(self.attn(self.lk(self.channel_mixer(self.layer_norm(x)))))
        return self.norm(y) + x


@MODELS.register()
class RealPLKSR(nn.Module):
    """RealPLKSR: (N, in_ch, h, w) -> (N, out_ch, h*scale, w*scale) (module docstring).

    Args:
        in_ch, out_ch: image channels, default 3; equal (the input is repeated scale^2 times and
            added before the upsampler).
        dim: features, default 64. n_blocks: blocks, default 28 (traiNNer-redux's realplksr_tiny:
            12). kernel_size: the partial large kernel, odd, default 17 (tiny: 13). split_ratio:
            the share of channels it sees, default 0.25. use_ea: element-wise attention, default
            True (tiny: False).
        norm_groups: the GroupNorm's groups, default 4 (unused with layer_norm).
        dropout: Dropout2d's p before the last conv (train() only), default 0.
        scale: upscaling factor, any int >= 1 (the original's upscaling_factor), default 4.
        upsampler: "pixelshuffle" (default) or "dysample" (traiNNer-redux's keyword; spandrel's
            `dysample=True`).
        layer_norm: LayerNorm before each block's mixer instead of the GroupNorm after it. Default
            False, the paper's and spandrel's; traiNNer-redux's `realplksr` factory defaults it to
            True, so its configs that leave it out mean True.
    """

    def __init__(self, in_ch: int = 3, out_ch: int = 3, dim: int = 64, n_blocks: int = 28, scale: int = 4,
                 kernel_size: int = 17, split_ratio: float = 0.25, use_ea: bool = True, norm_groups: int = 4,
                 dropout: float = 0.0, upsampler: str = "pixelshuffle", layer_norm: bool = False):
        super().__init__()
        name = "RealPLKSR"
        in_ch, out_ch = int_arg(name, "in_ch", in_ch), int_arg(name, "out_ch", out_ch)
        if in_ch != out_ch:
            raise ValueError(f"{name}: the input is added to the output (repeated scale^2 times), so "
                             f"in_ch == out_ch is needed, got {in_ch} and {out_ch}")
        dim = int_arg(name, "dim", dim)
        n_blocks = int_arg(name, "n_blocks", n_blocks, 0)
        self.scale = int_arg(name, "scale", scale)
        kernel_size = check_odd_kernel(name, kernel_size)
        pdim = partial_channels(name, dim, split_ratio)
        norm_groups = int_arg(name, "norm_groups", norm_groups)
        layer_norm = flag(name, "layer_norm", layer_norm)
        if not layer_norm and dim % norm_groups:
            raise ValueError(f"{name}: norm_groups={norm_groups} does not divide dim={dim}")
        dropout = number(name, "dropout", dropout, 0.0, 1.0)
        self.upsampler = choice(name, "upsampler", upsampler, _UPSAMPLERS)
        blocks = [RealPLKBlock(dim, kernel_size, pdim, flag(name, "use_ea", use_ea), norm_groups, layer_norm)
                  for _ in range(n_blocks)]
        s = self.scale
        self.feats = nn.Sequential(trunc_normal(nn.Conv2d(in_ch, dim, 3, padding=1)), *blocks,
                                   nn.Dropout2d(dropout),
                                   trunc_normal(nn.Conv2d(dim, out_ch * s ** 2, 3, padding=1)))
        if self.upsampler == "dysample":
            self.to_img = DySample(in_ch * s ** 2, out_ch, s, out_ch if s % 2 else 4, s != 1)
        else:
            self.to_img = nn.PixelShuffle(s)

    def forward(self, x):
        return self.to_img(self.feats(x) + repeat_channels(x, self.scale ** 2))

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """dim and in_ch from feats.0; n_blocks from the length of feats (first conv, blocks, the
        dropout, which has no key, last conv); scale from the last conv (in_ch scale^2 outputs);
        kernel_size and split_ratio from lk.conv; use_ea from attn.f.0; layer_norm from the
        blocks' LayerNorm; the upsampler from DySample's init_pos buffer. Not in the weights:
        norm_groups (a GroupNorm's weights do not depend on it; it changes the output): 4, the
        default of neosr's and traiNNer-redux's realplksr, which every published file uses, as
        spandrel. dropout: no weight, train() only: the default 0 unless given."""
        dim, in_ch = need(shapes, "feats.0.weight", 4)[:2]
        b = "feats.1"
        need(shapes, f"{b}.channel_mixer.0.weight", 4)
        pdim, _, k, _ = need(shapes, f"{b}.lk.conv.weight", 4)
        total = max(indices(shapes, "feats")) + 1
        last = need(shapes, f"feats.{total - 1}.weight", 4)[0]
        scale = math.isqrt(last // in_ch)
        if in_ch * scale * scale != last:
            raise NoMatch(f"the last conv's {last} outputs are not in_ch ({in_ch}) x scale^2")
        layer_norm = f"{b}.layer_norm.weight" in shapes
        spec = {"in_ch": in_ch, "out_ch": in_ch, "dim": dim, "n_blocks": total - 3, "scale": scale,
                "kernel_size": k, "split_ratio": read_split_ratio(pdim, dim),
                "use_ea": f"{b}.attn.f.0.weight" in shapes, "layer_norm": layer_norm,
                "upsampler": "dysample" if "to_img.init_pos" in shapes else "pixelshuffle"}
        if not layer_norm and "norm_groups" not in known and dim % 4:
            spec["norm_groups"] = Unknown(1, f"dim {dim} is not a multiple of the usual 4 GroupNorm "
                                             f"groups, and the weights do not tell", None)
        return spec

    @staticmethod
    def card(spec: dict):
        """feats.0, n_blocks blocks (the DCCM mixer, the large kernel on int(dim split_ratio)
        channels, EA, refine, a GroupNorm or a LayerNorm), the last conv to in_ch scale^2, and
        DySample's convs when it upsamples with it (its groups sample in_ch s^2 features at the
        HR size)."""
        s, c, d, k = spec["scale"], spec["in_ch"], spec["dim"], spec["kernel_size"]
        p = int(d * spec["split_ratio"])
        block = (conv(d, 2 * d) + conv(2 * d, d) + conv(p, p, k) + conv(d, d, 1) + norm(d)
                 + (conv(d, d) if spec["use_ea"] else 0))
        params = conv(c, d) + spec["n_blocks"] * block + conv(d, c * s * s)
        act = max(2 * d, c * s * s)
        if spec["upsampler"] == "dysample":
            groups, feats = (c if s % 2 else 4), c * s * s
            params += (conv(feats, c, 1) if s != 1 else 0) + conv(feats, 2 * groups * s * s, 1) \
                + conv(feats, 2 * groups * s * s, 1, bias=False)
            act = max(act, feats * s * s, 2 * groups * s * s)
        return image_card(s, c, spec["out_ch"], params, act, channel_keys=("in_ch", "out_ch"))
