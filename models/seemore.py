"""SeemoRe, "See More Details: Efficient Image Super-Resolution by Experts Mining" (Zamfir et al.,
ICML 2024; eduardzamfir/seemoredetails, as spandrel 0.4.2 and traiNNer-redux's `seemore_t` read it):

    x = (image - DIV2K mean) img_range;  f = conv_1(x)               (3x3, in_chans -> c)
    num_layers ResGroups: x = SME(RME(x))
    out = pixel_shuffle(upsampler(conv_2(LayerNorm(x)) + f)) / img_range + mean

RME (local, "rank mixture of experts") and SME (global, "spatial mixture of experts") are each
x = x + block(LN(x)); x = x + GatedFFN(LN(x)) (LayerNorm over the channels, eps 1e-6). The blocks:

    MoEBlock(x):  y = conv1x1(GELU(conv3x3(x))) to 2c; y channel-shuffled (groups 2) if use_shuffle;
                  x, k = chunks of y; x = GELU(striped dw 3(x)); k = calibrate(k);
                  proj(x + sum_e w_e expert_e(x, k))
        calibrate(k) = k + bilinear_up(conv1x1(dw3x3(GELU(dw4x4/4)^recursive (k))))   (align_corners False)
        expert_e(x, k) = conv_3(conv_1(x) conv_2(k))     (1x1 convs through low_dim_e: e + 2 for
                  lr_space "linear", 2^(e+1) "exp", 2e + 2 "double")
        router: w = keep_topk(softmax(Linear(mean of x over the pixels)), topk) (no bias; the
                  softmax in float32, as the original's dtype=torch.float)
    StripedConvFormer(x): q, v = chunks of GELU(conv1x1(x)) to 2c; proj(striped dw K(q) v)
    GatedFFN(x): a, g = chunks of GELU(conv1x1(x)) to 2c; GELU(conv1x1(a dw3x3(g)))
    striped dw K: a depthwise 1 x K conv, then a depthwise K x 1 conv (global_kernel_size K).

Routing is per image and differentiable as the original's in training (the weights of the kept
experts carry the gradient; framework.functional.routing). The original's eval path picks the
experts of the first image only (it assumes a batch of one, as spandrel runs it); srgrad routes
every image by its own weights in both modes, the same for one image, and every expert runs (a
zero weight drops it; one graph for ONNX). Ties: the lower expert first (keep_topk's rule).

The input is padded at the bottom and right to at least 16 (spandrel's SizeRequirements(minimum=16):
reflect, then replicate; and at least 4^recursive, the calibration's pooled size) and the output
cropped back. The published SeemoRe-T / B / L: 36 / 48 / 48 features, 6 / 8 / 16 layers,
3 experts of lr_space "exp", topk 1, recursive 2 / 2 / 1, use_shuffle True / True / False; the
mean is DIV2K's RGB mean (averaged for in_chans 1; the original runs on RGB only).
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, linear, norm
from framework.check import choice, flag, int_arg, number
from framework.detect import Assumed, NoMatch, count, need
from framework.registry import MODELS

from ._blocks import channel_mean, pad_to_requirement

_RGB_MEAN = (0.4488, 0.4371, 0.4040)
_MINIMUM = 16  # spandrel's SizeRequirements(minimum=16)
_POOL = 4  # agg_conv: a 4x4 stride-4 depthwise conv
_MAX_RECURSIVE = 15  # an input at least 4^recursive a side: from 16 on, over a billion pixels


def _recursive(value) -> int:
    """recursive checked: an int from 0 to _MAX_RECURSIVE (above, no image could run)."""
    r = int_arg("SeemoRe", "recursive", value, 0)
    if r > _MAX_RECURSIVE:
        raise ValueError(f"SeemoRe: recursive must be at most {_MAX_RECURSIVE} (an input needs "
                         f"4^recursive pixels a side), got {r}")
    return r
_SPACES = {"linear": lambda i: i + 2, "exp": lambda i: 2 ** (i + 1), "double": lambda i: 2 * i + 2}
# spandrel's values of the keywords no weight has, for the published sizes (num_layers, dim)
_PUBLISHED = {(6, 36): ("SeemoRe-T", True, 2), (8, 48): ("SeemoRe-B", True, 2),
              (16, 48): ("SeemoRe-L", False, 1)}


# the sum and the largest of low_dims(space, e), in closed form (a card is computed for any e: a
# list of 2^(i+1) for a million experts would take minutes to make)
_SPACE_SUM = {"linear": lambda e: e * (e - 1) // 2 + 2 * e, "exp": lambda e: 2 ** (e + 1) - 2,
              "double": lambda e: e * (e + 1)}


def low_dims(lr_space: str, num_experts: int) -> list[int]:
    """The experts' low_dim: e + 2 ("linear"), 2^(e+1) ("exp"), 2e + 2 ("double"), e = 0, 1, ..."""
    return [_SPACES[lr_space](i) for i in range(num_experts)]


class StripedConv2d(nn.Module):
    """A 1 x k conv then a k x 1 conv (depthwise or full), same size: (N, c, H, W) -> same."""

    def __init__(self, c: int, k: int, depthwise: bool = True):
        super().__init__()
        groups = c if depthwise else 1
        self.conv = nn.Sequential(nn.Conv2d(c, c, (1, k), padding=(0, k // 2), groups=groups),
                                  nn.Conv2d(c, c, (k, 1), padding=(k // 2, 0), groups=groups))

    def forward(self, x):
        return self.conv(x)


class GatedFFN(nn.Module):
    """a, g = chunks of GELU(fn_1(x)); GELU(fn_2(a gate(g))): (N, c, H, W) -> same."""

    def __init__(self, c: int):
        super().__init__()
        self.fn_1 = nn.Sequential(nn.Conv2d(c, 2 * c, 1), nn.GELU())
        self.fn_2 = nn.Sequential(nn.Conv2d(c, c, 1), nn.GELU())
        self.gate = nn.Conv2d(c, c, 3, padding=1, groups=c)

    def forward(self, x):
        a, g = F.chunk(self.fn_1(x), 2, 1)
        return self.fn_2(a * self.gate(g))


class Expert(nn.Module):
    """conv_3(conv_1(x) conv_2(k)): c -> low_dim -> c, 1x1 convs."""

    def __init__(self, c: int, low_dim: int):
        super().__init__()
        self.conv_1 = nn.Conv2d(c, low_dim, 1)
        self.conv_2 = nn.Conv2d(c, low_dim, 1)
        self.conv_3 = nn.Conv2d(low_dim, c, 1)

    def forward(self, x, k):
        return self.conv_3(self.conv_1(x) * self.conv_2(k))


class _Flatten(nn.Module):
    """(N, c, 1, 1) -> (N, c) (the original's einops Rearrange, no weights)."""

    def forward(self, x):
        return F.reshape(x, (x.shape[0], x.shape[1]))


class Router(nn.Module):
    """Logits (N, E) of the experts: Linear (no bias) of the mean of x over the pixels."""

    def __init__(self, c: int, num_experts: int):
        super().__init__()
        self.body = nn.Sequential(nn.AdaptiveAvgPool2d(1), _Flatten(),
                                  nn.Linear(c, num_experts, bias=False))

    def forward(self, x):
        return self.body(x)


class MoELayer(nn.Module):
    """x + sum_e w_e expert_e(x, k), w the router's softmax (float32) with its topk kept."""

    def __init__(self, c: int, dims: list, topk: int):
        super().__init__()
        self.experts = nn.ModuleList([Expert(c, d) for d in dims])
        self.gate = Router(c, len(dims))
        self.topk = topk

    def forward(self, x, k):
        logits = self.gate(x)
        w = F.cast(F.softmax(F.cast(logits, np.float32), 1), logits.dtype)
        w = F.keep_topk(w, self.topk)
        out = x
        for e, expert in enumerate(self.experts):
            out = out + expert(x, k) * F.reshape(w[:, e], (x.shape[0], 1, 1, 1))
        return out


class MoEBlock(nn.Module):
    """The RME's block (module docstring): (N, c, H, W) -> same, H, W >= 4^recursive."""

    def __init__(self, c: int, dims: list, topk: int, use_shuffle: bool, recursive: int):
        super().__init__()
        self.use_shuffle, self.recursive = use_shuffle, recursive
        self.conv_1 = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.GELU(), nn.Conv2d(c, 2 * c, 1))
        self.agg_conv = nn.Sequential(nn.Conv2d(c, c, _POOL, stride=_POOL, groups=c), nn.GELU())
        self.conv = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, groups=c), nn.Conv2d(c, c, 1))
        self.conv_2 = nn.Sequential(StripedConv2d(c, 3), nn.GELU())
        self.moe_layer = MoELayer(c, dims, topk)
        self.proj = nn.Conv2d(c, c, 1)

    def calibrate(self, k):
        h, w = k.shape[2], k.shape[3]
        x = k
        for _ in range(self.recursive):
            x = self.agg_conv(x)
        x = F.interpolate(self.conv(x), size=(h, w), mode="bilinear", align_corners=False)
        return k + x

    def forward(self, x):
        x = self.conv_1(x)
        if self.use_shuffle:  # channel_shuffle(groups=2): channel j of half i goes to 2 j + i
            n, c2, h, w = x.shape
            x = F.reshape(F.transpose(F.reshape(x, (n, 2, c2 // 2, h, w)), 1, 2), (n, c2, h, w))
        x, k = F.chunk(x, 2, 1)
        return self.proj(self.moe_layer(self.conv_2(x), self.calibrate(k)))


class StripedConvFormer(nn.Module):
    """The SME's block: q, v = chunks of GELU(to_qv(x)); proj(striped dw K(q) v)."""

    def __init__(self, c: int, kernel_size: int):
        super().__init__()
        self.proj = nn.Conv2d(c, c, 1)
        self.to_qv = nn.Sequential(nn.Conv2d(c, 2 * c, 1), nn.GELU())
        self.attn = StripedConv2d(c, kernel_size)

    def forward(self, x):
        q, v = F.chunk(self.to_qv(x), 2, 1)
        return self.proj(self.attn(q) * v)


class _PreNorm(nn.Module):
    """x + block(LN(x)), then x + GatedFFN(LN(x)) (RME and SME)."""

    def __init__(self, c: int, block):
        super().__init__()
        self.norm_1 = nn.LayerNorm2d(c)
        self.block = block
        self.norm_2 = nn.LayerNorm2d(c)
        self.ffn = GatedFFN(c)

    def forward(self, x):
        x = self.block(self.norm_1(x)) + x
        return self.ffn(self.norm_2(x)) + x


class ResGroup(nn.Module):
    def __init__(self, c: int, dims: list, topk: int, use_shuffle: bool, recursive: int,
                 kernel_size: int):
        super().__init__()
        self.local_block = _PreNorm(c, MoEBlock(c, dims, topk, use_shuffle, recursive))
        self.global_block = _PreNorm(c, StripedConvFormer(c, kernel_size))

    def forward(self, x):
        return self.global_block(self.local_block(x))


@MODELS.register()
class SeemoRe(nn.Module):
    """SeemoRe: (N, in_chans, h, w) in [0, 1] -> (N, in_chans, h scale, w scale), any h, w.

    Args (spandrel's names and defaults; traiNNer-redux's seemore_t: 36 features, 6 layers,
    3 experts, lr_space "exp"):
        scale: upscaling factor, default 4 (any integer >= 1).
        in_chans: image channels, 3 (default) or 1.
        num_experts: experts per MoE layer, default 6.
        num_layers: ResGroups, default 6.
        embedding_dim: features, default 64.
        img_range: the input's multiplier after the mean is taken off, default 1.
        use_shuffle: channel-shuffle conv_1's output before the split, default True.
        global_kernel_size: the SME's striped kernel (odd), default 11.
        recursive: the calibration's stride-4 poolings, default 2.
        lr_space: the experts' low_dim growth, "linear" (default), "exp" or "double".
        topk: experts kept per image, default 1.
    """

    def __init__(self, scale: int = 4, in_chans: int = 3, num_experts: int = 6,
                 num_layers: int = 6, embedding_dim: int = 64, img_range: float = 1.0,
                 use_shuffle: bool = True, global_kernel_size: int = 11, recursive: int = 2,
                 lr_space: str = "linear", topk: int = 1):
        super().__init__()
        name = "SeemoRe"
        self.scale = int_arg(name, "scale", scale)
        in_chans = int_arg(name, "in_chans", in_chans)
        if in_chans not in (1, 3):
            raise ValueError(f"{name}: in_chans must be 3 or 1 (the DIV2K RGB mean is taken off), "
                             f"got {in_chans}")
        num_experts = int_arg(name, "num_experts", num_experts)
        layers = int_arg(name, "num_layers", num_layers, 0)
        c = int_arg(name, "embedding_dim", embedding_dim)
        self.img_range = number(name, "img_range", img_range, low=0, low_open=True)
        shuffle = flag(name, "use_shuffle", use_shuffle)
        if shuffle and c % 2:
            raise ValueError(f"{name}: use_shuffle needs an even embedding_dim, got {c}")
        k = int_arg(name, "global_kernel_size", global_kernel_size)
        if k % 2 == 0:
            raise ValueError(f"{name}: global_kernel_size must be odd (a same-size striped conv), "
                             f"got {k}")
        self.recursive = _recursive(recursive)
        dims = low_dims(choice(name, "lr_space", lr_space, tuple(_SPACES)), num_experts)
        topk = int_arg(name, "topk", topk)
        if topk > num_experts:
            raise ValueError(f"{name}: topk {topk} is more than the {num_experts} experts")
        self.mean = channel_mean(name, _RGB_MEAN, in_chans)
        self.minimum = max(_MINIMUM, _POOL ** self.recursive)
        self.conv_1 = nn.Conv2d(in_chans, c, 3, padding=1)
        self.body = nn.ModuleList([ResGroup(c, dims, topk, shuffle, self.recursive, k)
                                   for _ in range(layers)])
        self.norm = nn.LayerNorm2d(c)
        self.conv_2 = nn.Conv2d(c, c, 3, padding=1)
        self.upsampler = nn.Sequential(nn.Conv2d(c, self.scale ** 2 * in_chans, 3, padding=1),
                                       nn.PixelShuffle(self.scale))

    def forward(self, image):
        if image.ndim != 4:
            raise ValueError(f"SeemoRe: expected input (N, C, H, W), got shape {tuple(image.shape)}")
        mean = self.mean.astype(image.dtype)
        x = (pad_to_requirement(image, self.minimum) - mean) * self.img_range
        x = self.conv_1(x)
        res = x
        for layer in self.body:
            x = layer(x)
        x = self.upsampler(self.conv_2(self.norm(x)) + res)
        return F.crop_to(x / self.img_range + mean, image, self.scale)

    @staticmethod
    def card(spec: dict):
        """conv_1, per layer the RME (two norms; conv_1's 3x3 and 1x1, agg_conv, the
        calibration's dw3x3 and 1x1, the striped dw3, the experts, the router, proj; the FFN)
        and the SME (two norms; proj, to_qv, the striped dw K; the FFN), the norm, conv_2 and
        the upsampler. The largest activation: 2c channels (conv_1's, to_qv's, fn_1's) or the widest
        expert's low_dim per pixel of the input padded to 16."""
        c, i, s = spec["embedding_dim"], spec["in_chans"], spec["scale"]
        k, e = spec["global_kernel_size"], spec["num_experts"]
        ffn = conv(c, 2 * c, 1) + conv(c, c, 1) + conv(c, c, 3, groups=c)
        striped = conv(c, c, (1, 3), groups=c) + conv(c, c, (3, 1), groups=c)
        # expert d: 2 conv(c, d, 1) + conv(d, c, 1) = 3 c d + 2 d + c, summed over the experts
        widest = _SPACES[spec["lr_space"]](e - 1) if e > 0 else 0
        experts = (3 * c + 2) * _SPACE_SUM[spec["lr_space"]](e) + e * c
        moe = (conv(c, c) + conv(c, 2 * c, 1) + conv(c, c, _POOL, groups=c) + conv(c, c, 3, groups=c)
               + conv(c, c, 1) + striped + experts + linear(c, e, False) + conv(c, c, 1))
        sme = conv(c, c, 1) + conv(c, 2 * c, 1) + conv(c, c, (1, k), groups=c) \
            + conv(c, c, (k, 1), groups=c)
        layer = 4 * norm(c) + 2 * ffn + moe + sme
        params = conv(i, c) + spec["num_layers"] * layer + norm(c) + conv(c, c) + conv(c, i * s * s)
        minimum = max(_MINIMUM, _POOL ** _recursive(spec["recursive"]))
        return image_card(s, i, i, params, max(2 * c, i * s * s, widest), pad_minimum=minimum,
                          channel_keys=("in_chans",))

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: embedding_dim and in_chans from conv_1, the layers and layer 0's
        experts counted, lr_space from the experts' low_dims (the first rule of linear, double,
        exp that gives them: with two experts double and exp build the same network), scale from
        the upsampler (in_chans scale^2 rows), global_kernel_size from the SME's striped conv.
        No weight has img_range, use_shuffle, recursive or topk: spandrel's values (img_range 1,
        topk 1; use_shuffle and recursive True and 2, or False and 1 for SeemoRe-L's 16 layers of
        48), said unless the file has a published size."""
        c, i = need(shapes, "conv_1.weight", 4)[:2]
        layers = count(shapes, "body")
        prefix = "body.0.local_block.block.moe_layer.experts"
        experts = count(shapes, prefix, ".conv_1.weight")
        if not layers or not experts:
            raise NoMatch("no ResGroup with experts (body.0.local_block.block.moe_layer.experts.0)")
        dims = [need(shapes, f"{prefix}.{e}.conv_1.weight", 4)[0] for e in range(experts)]
        space = next((s for s in ("linear", "double", "exp") if low_dims(s, experts) == dims), None)
        if space is None:
            raise NoMatch(f"the experts' low_dims {dims} follow none of linear (e + 2), double "
                          f"(2e + 2) and exp (2^(e+1))")
        rows = need(shapes, "upsampler.0.weight", 4)[0]
        scale = math.isqrt(rows // i)
        if scale < 1 or i * scale * scale != rows:
            raise NoMatch(f"the upsampler's {rows} outputs are not {i} x scale^2")
        k = need(shapes, "body.0.global_block.block.attn.conv.0.weight", 4)[3]
        label, shuffle, recursive = _PUBLISHED.get((layers, c), (None, True, 2))
        why = (f"{label}'s" if label else "spandrel's default (no weight has it; give it if the "
               "file was trained otherwise)")
        quiet = label is not None
        return {"scale": scale, "in_chans": i, "num_experts": experts, "num_layers": layers,
                "embedding_dim": c, "img_range": Assumed(1.0, why, quiet),
                "use_shuffle": Assumed(shuffle, why, quiet), "global_kernel_size": k,
                "recursive": Assumed(recursive, why, quiet), "lr_space": space,
                "topk": Assumed(1, why, quiet)}
