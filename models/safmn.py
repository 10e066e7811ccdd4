"""SAFMN (Sun et al., "Spatially-Adaptive Feature Modulation for Efficient Image Super-Resolution",
ICCV 2023; github.com/sunny2109/SAFMN, as spandrel 0.4.2's SAFMN architecture reads it): a 3x3 conv
to `dim` features, n_blocks AttBlocks, a long skip, a 3x3 conv to 3 * scale^2 channels and a pixel
shuffle. Each AttBlock is

    x = x + SAFM(LayerNorm(x))     spatially-adaptive feature modulation
    x = x + CCM(LayerNorm(x))      convolutional channel mixer: 3x3 conv (dim -> dim ffn_scale),
                                   GELU, 1x1 conv back

SAFM splits the channels in 4; part i is max-pooled to 1/2^i of the size (adaptive max pooling),
filtered by a depthwise 3x3 conv and upsampled back (nearest), part 0 is filtered at full size; a
1x1 conv mixes the 4 parts, and GELU of that multiplies the input. LayerNorm is over the channels
(eps 1e-6). RGB in and out (3 channels, fixed by the original). Keys are the original's (to_feat,
feats.i.norm1 / safm.mfr.j / safm.aggr / norm2 / ccm.ccm.0 and .2, to_img.0).
"""
from __future__ import annotations

import framework.functional as F
from framework import nn
from framework.check import int_arg, number
from framework.registry import MODELS
from framework.card import conv, image_card, norm

from ._blocks import pad_to_requirement
from framework.detect import NoMatch, count, need

_LEVELS = 4  # SAFM's scales: full size, 1/2, 1/4, 1/8
_MULTIPLE = 2 ** (_LEVELS - 1)  # spandrel's size requirement: a multiple of 8


class SAFM(nn.Module):
    """Spatially-adaptive feature modulation of (N, dim, H, W), H and W >= 8 (multiples of 8: one
    ONNX graph for every size)."""

    def __init__(self, dim: int, n_levels: int = _LEVELS):
        super().__init__()
        self.n_levels = n_levels
        chunk = dim // n_levels
        self.mfr = nn.ModuleList([nn.Conv2d(chunk, chunk, 3, padding=1, groups=chunk)
                                  for _ in range(n_levels)])
        self.aggr = nn.Conv2d(dim, dim, 1)
        self.act = nn.GELU()

    def forward(self, x):
        h, w = x.shape[-2:]
        out = []
        for i, part in enumerate(F.chunk(x, self.n_levels, dim=1)):
            if i == 0:
                out.append(self.mfr[0](part))
                continue
            # the original upsamples to size (h, w): at sides that are multiples of 2^i (the
            # padding to 8 sees to it) that is nearest by the factor 2^i, one graph at any size;
            # other sides (SAFMN-BCIE's features at x4) to the size itself, as the original
            # (there the adaptive pool is a max pool of 2^i: a MaxPool node at every size, where
            # a map of 2^i, pooled to one value, would trace as a size-bound GlobalMaxPool)
            f = 2 ** i
            if h % f or w % f:
                s = self.mfr[i](F.adaptive_max_pool2d(part, (h // f, w // f)))
                out.append(F.interpolate(s, size=(h, w), mode="nearest"))
            else:
                s = self.mfr[i](F.max_pool2d(part, f, f))
                out.append(F.interpolate(s, scale_factor=f, mode="nearest"))
        return self.act(self.aggr(F.cat(out, axis=1))) * x


class CCM(nn.Module):
    """3x3 conv dim -> int(dim growth_rate), GELU, 1x1 conv back."""

    def __init__(self, dim: int, growth_rate: float = 2.0):
        super().__init__()
        hidden = int(dim * growth_rate)
        self.ccm = nn.Sequential(nn.Conv2d(dim, hidden, 3, padding=1), nn.GELU(), nn.Conv2d(hidden, dim, 1))

    def forward(self, x):
        return self.ccm(x)


class AttBlock(nn.Module):
    """x + SAFM(norm1(x)), then + CCM(norm2(.))."""

    def __init__(self, dim: int, ffn_scale: float = 2.0):
        super().__init__()
        self.norm1 = nn.LayerNorm2d(dim)
        self.norm2 = nn.LayerNorm2d(dim)
        self.safm = SAFM(dim)
        self.ccm = CCM(dim, ffn_scale)

    def forward(self, x):
        x = self.safm(self.norm1(x)) + x
        return self.ccm(self.norm2(x)) + x


@MODELS.register()
class SAFMN(nn.Module):
    """SAFMN: (N, 3, h, w) -> (N, 3, h*scale, w*scale), any h, w >= 1 (padded at the bottom and right
    to a multiple of 8 by reflection and the output cropped, as spandrel's size requirement; the
    original runs unpadded on sides of at least 8, where a side that is no multiple of 8 pools in
    overlapping windows).

    Args:
        dim: features (required, as the original; SAFMN: 36, SAFMN-L: 128, SAFMN for the NTIRE
            efficient-SR challenge: 16 with ffn_scale 2), a multiple of 4 (SAFM's 4 parts).
        n_blocks: AttBlocks, default 8.
        ffn_scale: CCM's hidden width over dim, default 2.0 (hidden = int(dim ffn_scale)).
        scale: the pixel-shuffle factor (the original's upscaling_factor), default 4; 1 restores
            at the same size.
    """

    def __init__(self, dim: int, n_blocks: int = 8, ffn_scale: float = 2.0, scale: int = 4):
        super().__init__()
        name = "SAFMN"
        dim = int_arg(name, "dim", dim)
        if dim % _LEVELS:
            raise ValueError(f"{name}: dim must be a multiple of {_LEVELS} (SAFM splits the features "
                             f"in {_LEVELS}), got {dim}")
        n_blocks = int_arg(name, "n_blocks", n_blocks, 0)
        ffn_scale = number(name, "ffn_scale", ffn_scale, low=0, low_open=True)
        if int(dim * ffn_scale) < 1:
            raise ValueError(f"{name}: ffn_scale {ffn_scale} leaves CCM no hidden channel at dim {dim}")
        self.scale = int_arg(name, "scale", scale)
        self.to_feat = nn.Conv2d(3, dim, 3, padding=1)
        self.feats = nn.Sequential(*[AttBlock(dim, ffn_scale) for _ in range(n_blocks)])
        self.to_img = nn.Sequential(nn.Conv2d(dim, 3 * self.scale ** 2, 3, padding=1),
                                    nn.PixelShuffle(self.scale))

    def forward(self, x):
        image = x
        x = self.to_feat(pad_to_requirement(x, 0, _MULTIPLE))
        x = self.feats(x) + x
        return F.crop_to(self.to_img(x), image, self.scale)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: dim from to_feat, n_blocks counted, ffn_scale = CCM's hidden width /
        dim (a value that gives that width back), scale = sqrt(to_img.0's outputs / 3)."""
        dim, first_in = need(shapes, "to_feat.weight", 4)[:2]
        if first_in != 3:
            raise NoMatch(f"to_feat takes {first_in} channels: SAFMN is RGB")
        for key in ("feats.0.norm1.weight", "feats.0.safm.mfr.3.weight", "feats.0.safm.aggr.weight",
                    "feats.0.norm2.weight", "feats.0.ccm.ccm.2.weight"):
            need(shapes, key)
        n_blocks = count(shapes, "feats", ".norm1.weight")
        hidden = need(shapes, "feats.0.ccm.ccm.0.weight", 4)[0]
        ffn_scale = hidden / dim
        if int(dim * ffn_scale) != hidden:  # the float lands a hair under: aim between two ints
            ffn_scale = (hidden + 0.5) / dim
        out = need(shapes, "to_img.0.weight", 4)[0]
        scale = round((out / 3) ** 0.5)
        if 3 * scale * scale != out:
            raise NoMatch(f"to_img.0 has {out} outputs: not 3 * scale^2")
        return {"dim": dim, "n_blocks": n_blocks, "ffn_scale": ffn_scale, "scale": scale}

    @staticmethod
    def card(spec: dict):
        """to_feat, n_blocks AttBlocks (two LayerNorms, SAFM's 4 depthwise 3x3 and its 1x1 aggr,
        CCM's 3x3 to int(dim ffn_scale) and 1x1 back), to_img. RGB only; the input is padded to
        a multiple of 8. Its pools are max pools of 2^i: one ONNX graph for every input
        size, whatever size it is traced at."""
        s, d, n = spec["scale"], spec["dim"], spec["n_blocks"]
        hidden, chunk = int(d * spec["ffn_scale"]), d // _LEVELS
        block = (2 * norm(d) + _LEVELS * conv(chunk, chunk, 3, groups=chunk) + conv(d, d, 1)
                 + conv(d, hidden) + conv(hidden, d, 1))
        return image_card(s, 3, 3, conv(3, d) + n * block + conv(d, 3 * s * s),
                          max(d, hidden, 3 * s * s), pads_to=_MULTIPLE, channel_keys=())
