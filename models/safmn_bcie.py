"""SAFMN-BCIE (sunny2109/SAFMN's SAFMN_BCIE, its model for blind compressed-image enhancement, as
spandrel 0.4.2 reads it): SAFMN's blocks at a reduced resolution, restoring at x1.

    f = conv3x3(pixel_unshuffle(x, u))              to_feat: 3 u^2 -> dim
    f = feats(f) + f                                n_blocks BasicLayers: num_layers AttBlocks
                                                    (models/safmn.py's: SAFM and CCM with their
                                                    LayerNorms), conv3x3, + the layer's input
    out = conv3x3(pixel_shuffle(conv3x3(f), u))     to_img: dim -> dim u^2, shuffle, dim -> 3

u is the original's upscaling_factor (default 2; the unshuffle factor: the output keeps the
input's size). RGB in and out (fixed by the original). spandrel pads the input to a multiple of
16 (reflection, then replication, the output cropped); srgrad pads the same, and further only
where spandrel's call fails: to a multiple of u (pixel unshuffle) and to at least 8 u (SAFM's
coarsest level pools the features by 8).
"""
from __future__ import annotations

import math

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, norm
from framework.check import int_arg, number
from framework.detect import NoMatch, indices, need
from framework.registry import MODELS

from ._blocks import pad_to_requirement
from .mosr import _ratio
from .safmn import _LEVELS, AttBlock

_MULTIPLE = 16  # spandrel's SizeRequirements(multiple_of=16)


class BasicLayer(nn.Module):
    """num_layers AttBlocks, conv3x3, plus the input."""

    def __init__(self, num_layers: int, dim: int, ffn_scale: float):
        super().__init__()
        self.layers = nn.Sequential(*[AttBlock(dim, ffn_scale) for _ in range(num_layers)])
        self.conv = nn.Conv2d(dim, dim, 3, padding=1)

    def forward(self, x):
        return self.conv(self.layers(x)) + x


def _padding(u: int) -> tuple[int, int]:
    """(minimum, multiple) the input is padded to (module docstring)."""
    return 8 * u, math.lcm(_MULTIPLE, u)


@MODELS.register()
class SAFMNBCIE(nn.Module):
    """SAFMN-BCIE: (N, 3, h, w) -> (N, 3, h, w), any h, w (padded, module docstring).

    Args (the original's names and spandrel's defaults):
        dim: features (required, as the original), a multiple of 4 (SAFM's 4 parts).
        n_blocks: BasicLayers, default 6. num_layers: AttBlocks in each, default 6.
        ffn_scale: CCM's hidden width over dim, default 2.0.
        upscaling_factor: the pixel unshuffle / shuffle factor u, default 2.
        scale: 1 (a restoration network: srgrad's configs and commands pass their scale).
    """

    def __init__(self, dim: int, n_blocks: int = 6, num_layers: int = 6, ffn_scale: float = 2.0,
                 upscaling_factor: int = 2, scale: int = 1):
        super().__init__()
        name = "SAFMNBCIE"
        if int_arg(name, "scale", scale) != 1:
            raise ValueError(f"{name}: scale must be 1 (a restoration network: the output has the "
                             f"input's size; upscaling_factor is its internal unshuffle), got {scale}")
        self.scale = 1
        dim = int_arg(name, "dim", dim)
        if dim % _LEVELS:
            raise ValueError(f"{name}: dim must be a multiple of {_LEVELS} (SAFM splits the features "
                             f"in {_LEVELS}), got {dim}")
        n_blocks = int_arg(name, "n_blocks", n_blocks, 0)
        num_layers = int_arg(name, "num_layers", num_layers, 0)
        ffn_scale = number(name, "ffn_scale", ffn_scale, low=0, low_open=True)
        if int(dim * ffn_scale) < 1:
            raise ValueError(f"{name}: ffn_scale {ffn_scale} leaves CCM no hidden channel at dim {dim}")
        self.u = u = int_arg(name, "upscaling_factor", upscaling_factor)
        self.to_feat = nn.Sequential(nn.PixelUnshuffle(u), nn.Conv2d(3 * u * u, dim, 3, padding=1))
        self.feats = nn.Sequential(*[BasicLayer(num_layers, dim, ffn_scale) for _ in range(n_blocks)])
        self.to_img = nn.Sequential(nn.Conv2d(dim, dim * u * u, 3, padding=1), nn.PixelShuffle(u),
                                    nn.Conv2d(dim, 3, 3, padding=1))

    def forward(self, x):
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"SAFMNBCIE: expected an RGB input (N, 3, H, W), got shape "
                             f"{tuple(x.shape)}")
        f = self.to_feat(pad_to_requirement(x, *_padding(self.u)))
        return F.crop_to(self.to_img(self.feats(f) + f), x)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: dim from to_feat.1, upscaling_factor = sqrt(its inputs / 3), n_blocks
        and num_layers counted, ffn_scale = CCM's hidden width / dim (the smallest ratio giving
        it)."""
        dim, cin = need(shapes, "to_feat.1.weight", 4)[:2]
        u = math.isqrt(cin // 3)
        if cin % 3 or u * u * 3 != cin:
            raise NoMatch(f"to_feat.1 takes {cin} channels: not 3 x upscaling_factor^2")
        need(shapes, "to_img.2.weight", 4)
        n_blocks = len(indices(shapes, "feats", ".conv.weight"))
        num_layers = len(indices(shapes, "feats.0.layers", ".norm1.weight"))
        if not n_blocks:
            raise NoMatch("no feats.0.conv (SAFMN-BCIE's layers)")
        hidden = need(shapes, "feats.0.layers.0.ccm.ccm.0.weight", 4)[0] if num_layers else 2 * dim
        return {"dim": dim, "n_blocks": n_blocks, "num_layers": num_layers,
                "ffn_scale": _ratio(hidden, dim), "upscaling_factor": u, "scale": 1}

    @staticmethod
    def card(spec: dict):
        """to_feat, n_blocks x (num_layers AttBlocks, conv3x3), to_img. RGB at x1; the input is
        padded to a multiple of lcm(16, u) and at least 8 u. The SAFM's pooling holds for every
        size only when the features are multiples of 8 (lcm(16, u) / u): else (u = 4) its ONNX
        graph is fixed to one size."""
        d, u = spec["dim"], spec["upscaling_factor"]
        hidden, chunk = int(d * spec["ffn_scale"]), d // _LEVELS
        block = (2 * norm(d) + _LEVELS * conv(chunk, chunk, 3, groups=chunk) + conv(d, d, 1)
                 + conv(d, hidden) + conv(hidden, d, 1))
        layer = spec["num_layers"] * block + conv(d, d)
        params = conv(3 * u * u, d) + spec["n_blocks"] * layer + conv(d, d * u * u) + conv(d, 3)
        minimum, multiple = _padding(u)
        fixed = (None if (multiple // u) % 8 == 0 else
                 f"SAFM pools features of sides {multiple // u}k, not multiples of 8, by 8")
        return image_card(1, 3, 3, params, math.ceil(max(3 * u * u, d, hidden / u / u, d)),
                          pads_to=multiple, pad_minimum=minimum, channel_keys=(), fixed_onnx=fixed)
