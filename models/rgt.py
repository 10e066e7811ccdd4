"""RGT (Chen et al., "Recursive Generalization Transformer for Image Super-Resolution", ICLR 2024;
zhengchen1999/RGT as spandrel 0.4.2 and traiNNer-redux's `rgt` / `rgt_s` read it): DAT's layout
(conv_first, before_RG, residual groups, norm, conv_after_body + long skip, pixel-shuffle
reconstruction) with blocks alternating

- L-SA (even block index): DAT's rectangle-window self-attention (models/dat.py RectangleWindows:
  half the channels in split_size (h, w) windows, half in (w, h), a dynamic position bias, some
  blocks shifted and masked), plus a depthwise 3x3 conv of v (get_v) added to its output;
- RG-SA (odd index), the recursive-generalization self-attention: the image is reduced by a
  depthwise 4x4 stride-4 conv (reduction1, applied T times, the same weights), then dwconv, a 1x1
  conv to cr = int(embed_dim c_ratio) channels, LayerNorm and GELU: N' = (H / 4^T)(W / 4^T)
  tokens. Every pixel's q (cr channels) attends to them: k (cr), v (embed_dim) plus a depthwise
  conv of v on the reduced grid (cpe); scale (head_dim c_ratio)^-0.5. T is the original's rule on
  the input size: training max(int(log4(H // 4)), int(log4(W // 4))), evaluation
  max(int(log4(H // 16)), int(log4(W // 16)), 2) (so the output depends on train() / eval(), as
  the original's);

each block x + attn(norm1(x)), + mlp(norm2(x)) (DAT's spatial-gate MLP), then + gamma * its input
(the hybrid adaptive integration, gamma per channel, initialised 1e-4). Published: RGT (embed 180,
8 groups of 6 blocks, 6 heads, mlp_ratio 2, split (8, 32), c_ratio 0.5), RGT-S (6 groups).
Evaluation needs both sides >= 16 (the reduction runs twice at least): a smaller side is padded to
16 as spandrel's call API does (SizeRequirements(minimum=16)), in both modes; a side below 4^T (an
image 16 px high and over 1024 px wide) is refused, as the original fails on it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import Card, conv, linear, norm
from framework.check import choice, int_arg, int_list, number, pair
from framework.detect import Assumed, NoMatch, count, need
from framework.registry import MODELS

from ._blocks import PixelShuffleUpsampler, pad_to_requirement, swin_options, upsampler_scale
from .dat import (SGFN, RectangleWindows, Tokens, _image, _tokens, _v_image, check_window_buffers,
                  img_size_of_masks, position_bias_parameters, ratio_of, window_split)
from .swinir import _resi_conv, resi_parameters

_NUM_FEAT = 64
_MINIMUM = 16  # spandrel's SizeRequirements(minimum=16)
_RGB_MEAN = (0.4488, 0.4371, 0.4040)


def recursions(h: int, w: int, training: bool) -> int:
    """T, the times RG-SA reduces an (h, w) grid by 4: the original's expression (math.log, so
    the same float rounding), or a ValueError naming the size the original cannot run."""
    low = 4 if training else 16
    if h // low < 1 or w // low < 1:
        raise ValueError(f"RGT: the input (after padding) is {h}x{w}: the recursive-generalization "
                         f"attention needs both sides >= {low} in "
                         f"{'training' if training else 'evaluation'} mode")
    t = max(int(math.log(h // low, 4)), int(math.log(w // low, 4)))
    t = t if training else max(t, 2)  # testing T must be >= training's (2), as the original
    if min(h, w) < 4 ** t:
        raise ValueError(f"RGT: the input (after padding) is {h}x{w}: the recursive-generalization "
                         f"attention reduces it {t} times by 4 (its longer side's rule), so both "
                         f"sides must be >= {4 ** t}")
    return t


class LSA(RectangleWindows):
    """L-SA on (B, H*W, C): the rectangle windows plus get_v, a depthwise 3x3 conv of v."""

    def __init__(self, dim, num_heads, reso, split_size, qkv_bias, qk_scale, drop, attn_drop,
                 rg_idx, b_idx):
        super().__init__()
        self.setup(dim, num_heads, reso, split_size, qkv_bias, qk_scale, drop, attn_drop, rg_idx,
                   b_idx)
        self.get_v = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)

    def forward(self, x, h, w):
        qkv = self.qkv(x)
        y = self.windows(qkv, h, w) + _tokens(self.get_v(_v_image(qkv, h, w)))
        return self.proj_drop(self.proj(y))


class RGSA(nn.Module):
    """RG-SA on (B, H*W, C): (B, N, cr) queries against N' reduced tokens (module docstring)."""

    def __init__(self, dim, num_heads, qkv_bias, qk_scale, attn_drop, proj_drop, c_ratio):
        super().__init__()
        self.num_heads = num_heads
        self.cr = int(dim * c_ratio)
        self.scale = qk_scale or (dim // num_heads * c_ratio) ** -0.5
        self.reduction1 = nn.Conv2d(dim, dim, 4, stride=4, groups=dim)
        self.dwconv = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)
        self.conv = nn.Conv2d(dim, self.cr, 1)
        self.norm_act = nn.Sequential(nn.LayerNorm(self.cr), nn.GELU())
        self.q = nn.Linear(dim, self.cr, bias=qkv_bias)
        self.k = nn.Linear(self.cr, self.cr, bias=qkv_bias)
        self.v = nn.Linear(self.cr, dim, bias=qkv_bias)
        self.cpe = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)
        self.proj = nn.Linear(dim, dim)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x, h, w):
        y = _image(x, h, w)
        for _ in range(recursions(h, w, self.training)):
            y = self.reduction1(y)
        y = self.conv(self.dwconv(y))
        hr, wr = y.shape[2:]
        y = self.norm_act(_tokens(y))
        q, k, v = self.q(x), self.k(y), self.v(y)
        v = v + _tokens(self.cpe(_image(v, hr, wr)))
        heads = self.num_heads
        if self.training and self.attn_drop.p > 0:
            b, n = x.shape[:2]
            qh, kh, vh = (F.permute(F.reshape(t, (b, t.shape[1], heads, -1)), (0, 2, 1, 3))
                          for t in (q, k, v))
            attn = self.attn_drop(F.attention_softmax(qh @ F.transpose(kh, -2, -1), self.scale))
            out = F.reshape(F.transpose(attn @ vh, 1, 2), (b, n, -1))
        else:
            out = F.attention(q, k, v, heads, self.scale)
        return self.proj_drop(self.proj(out))


class Block(nn.Module):
    """x + drop_path(attn(norm1(x))), + drop_path(mlp(norm2(x))), + gamma * x (the block's input)."""

    def __init__(self, dim, num_heads, reso, split_size, mlp_ratio, qkv_bias, qk_scale, drop,
                 attn_drop, drop_path, c_ratio, rg_idx, b_idx):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        if b_idx % 2 == 0:
            self.attn = LSA(dim, num_heads, reso, split_size, qkv_bias, qk_scale, drop, attn_drop,
                            rg_idx, b_idx)
        else:
            self.attn = RGSA(dim, num_heads, qkv_bias, qk_scale, attn_drop, drop, c_ratio)
        self.drop_path = nn.DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.mlp = SGFN(dim, int(dim * mlp_ratio))
        self.norm2 = nn.LayerNorm(dim)
        self.gamma = nn.Parameter(np.full(dim, 1e-4, np.float32))

    def forward(self, x, x_size):
        h, w = x_size
        y = x + self.drop_path(self.attn(self.norm1(x), h, w))
        y = y + self.drop_path(self.mlp(self.norm2(y), h, w))
        return y + x * self.gamma


class ResidualGroup(nn.Module):
    """`depth` Blocks, then a conv on the image (resi_connection) and the group's skip."""

    def __init__(self, dim, depth, resi_connection, drop_paths, rg_idx, **kw):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim, drop_path=drop_paths[i], rg_idx=rg_idx, b_idx=i,
                                           **kw) for i in range(depth)])
        self.conv = _resi_conv(dim, resi_connection)

    def forward(self, x, x_size):
        y = x
        for blk in self.blocks:
            y = blk(y, x_size)
        return x + _tokens(self.conv(_image(y, *x_size)))


def reduced_tokens(h: int, w: int) -> int:
    """The most reduced tokens N' RG-SA makes for an (h, w) grid in either mode (0: it cannot run)."""
    out = 0
    for training in (True, False):
        try:
            t = recursions(h, w, training)
        except ValueError:
            continue
        out = max(out, (h // 4 ** t) * (w // 4 ** t))
    return out


@dataclass(frozen=True)
class RGTCard(Card):
    """RGT's Card: RG-SA's (B, heads, N, N') attention weights grow with N N', not with N alone."""
    rgsa_heads: int = 0

    def largest_activation(self, h: int, w: int) -> int:
        ph, pw = self.padded(h, w)
        return max(super().largest_activation(h, w),
                   self.rgsa_heads * ph * pw * reduced_tokens(ph, pw))


@MODELS.register()
class RGT(nn.Module):
    """RGT: (N, in_chans, h, w) in [0, 1] -> (N, in_chans, h*scale, w*scale), any h, w: a side
    below 16 is padded to 16 (reflected, then replicated) and the output cropped, as spandrel's call
    API does, the original's RG-SA needing 16 px in evaluation.

    Args (the original's names and defaults; `scale` is its `upscale`):
        img_size: training patch side, default 64: fixes the stored attn_mask_0 / attn_mask_1
            (a multiple of both split sides); other sizes run too.
        in_chans: image channels, default 3 (the output has as many).
        embed_dim: token features, default 180; even (two halves of windows).
        depth: blocks per residual group, default (2, 2, 2, 2) (RGT: eight 6s, RGT-S: six).
        num_heads: heads per group, default (2, 2, 2, 2) (published 6): an L-SA block uses half
            of them per half of the channels, an RG-SA block all (dividing embed_dim and cr).
        mlp_ratio: MLP hidden features / embed_dim, default 4 (published 2).
        qkv_bias: biases on the qkv / q, k, v linears, default True. qk_scale: both attentions'
            factor, default None (L-SA head_dim^-0.5, RG-SA (head_dim c_ratio)^-0.5).
        drop_rate, attn_drop_rate: dropout, default 0. drop_path_rate: stochastic depth, rising
            linearly from 0, default 0.1.
        scale: default 2 (2^n or 3: pixel shuffle).
        img_range: images are multiplied by this after the mean shift, default 1.
        resi_connection: "1conv" (default) or "3conv".
        split_size: (h, w) of the L-SA windows, default (8, 8) (published (8, 32)); each >= 2.
        c_ratio: RG-SA's channels cr = int(embed_dim c_ratio), default 0.5.
    """

    def __init__(self, img_size: int = 64, in_chans: int = 3, embed_dim: int = 180,
                 depth=(2, 2, 2, 2), num_heads=(2, 2, 2, 2), mlp_ratio: float = 4.0,
                 qkv_bias: bool = True, qk_scale=None, drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0, drop_path_rate: float = 0.1, scale: int = 2,
                 img_range: float = 1.0, resi_connection: str = "1conv", split_size=(8, 8),
                 c_ratio: float = 0.5):
        super().__init__()
        name = "RGT"
        img_size = int_arg(name, "img_size", img_size)
        in_chans = int_arg(name, "in_chans", in_chans)
        embed_dim = int_arg(name, "embed_dim", embed_dim, minimum=2)
        if embed_dim % 2:
            raise ValueError(f"{name}: embed_dim must be even (L-SA splits it in two halves), "
                             f"got {embed_dim}")
        o = swin_options(name, embed_dim, mlp_ratio, qkv_bias, qk_scale, drop_rate,
                         attn_drop_rate, drop_path_rate, False, True, img_range)
        hidden = int(embed_dim * o.mlp_ratio)
        if hidden < 2 or hidden % 2:
            raise ValueError(f"{name}: mlp_ratio {mlp_ratio} gives {hidden} MLP features: the "
                             f"spatial gate needs an even number, at least 2")
        split_size = pair(name, "split_size", split_size, minimum=2)
        if img_size % split_size[0] or img_size % split_size[1]:
            raise ValueError(f"{name}: img_size {img_size} must be a multiple of both split_size "
                             f"sides {split_size} (the stored masks' grid)")
        c_ratio = number(name, "c_ratio", c_ratio, low=0, low_open=True)
        cr = int(embed_dim * c_ratio)
        depth = int_list(name, "depth", depth, minimum=0)
        num_heads = int_list(name, "num_heads", num_heads, length=len(depth))
        for d, heads in zip(depth, num_heads):
            if d and (heads < 2 or (embed_dim // 2) % (heads // 2)):
                raise ValueError(f"{name}: num_heads {heads} must be at least 2 and its half "
                                 f"divide embed_dim / 2 = {embed_dim // 2} (L-SA)")
            if d >= 2 and (embed_dim % heads or cr < heads or cr % heads):
                raise ValueError(f"{name}: num_heads {heads} must divide embed_dim {embed_dim} "
                                 f"and cr = int(embed_dim * c_ratio) = {cr} (RG-SA)")
        self.img_range = o.img_range
        self.scale = upsampler_scale(name, scale)
        resi_connection = choice(name, "resi_connection", resi_connection, ("1conv", "3conv"))
        self.split_size = split_size
        self.mean = (np.float32(_RGB_MEAN) if in_chans == 3 else np.zeros(1, np.float32)).reshape(1, -1, 1, 1)

        self.conv_first = nn.Conv2d(in_chans, embed_dim, 3, padding=1)
        self.before_RG = nn.Sequential(Tokens(), nn.LayerNorm(embed_dim))
        rates = np.linspace(0, o.drop_path_rate, sum(depth)).tolist()
        self.layers = nn.ModuleList([ResidualGroup(
            embed_dim, d, resi_connection, rates[sum(depth[:i]):sum(depth[:i + 1])], i,
            num_heads=num_heads[i], reso=img_size, split_size=split_size, mlp_ratio=o.mlp_ratio,
            qkv_bias=o.qkv_bias, qk_scale=o.qk_scale, drop=o.drop_rate,
            attn_drop=o.attn_drop_rate, c_ratio=c_ratio) for i, d in enumerate(depth)])
        self.norm = nn.LayerNorm(embed_dim)
        self.conv_after_body = _resi_conv(embed_dim, resi_connection)
        self.conv_before_upsample = nn.Sequential(nn.Conv2d(embed_dim, _NUM_FEAT, 3, padding=1),
                                                  nn.LeakyReLU())  # torch's default slope 0.01
        self.upsample = PixelShuffleUpsampler(self.scale, _NUM_FEAT, name)
        self.conv_last = nn.Conv2d(_NUM_FEAT, in_chans, 3, padding=1)
        # the original has no _init_weights: torch's defaults (srgrad's layers'), gamma 1e-4

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"RGT: expected input (N, C, H, W), got shape {tuple(x.shape)}")
        image = x
        x = pad_to_requirement(x, _MINIMUM)  # spandrel's call API: below 16 px RG-SA cannot run
        h, w = x.shape[2:]
        mean = self.mean.astype(x.dtype, copy=False)
        x = self.conv_first((x - mean) * self.img_range)
        y = self.before_RG(x)
        for layer in self.layers:
            y = layer(y, (h, w))
        x = self.conv_after_body(_image(self.norm(y), h, w)) + x
        x = self.conv_last(self.upsample(self.conv_before_upsample(x)))
        return F.crop_to(x / self.img_range + mean, image, self.scale)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule, from shapes: in_chans, embed_dim from conv_first; per group its blocks
        (depth) and heads: pos3 gives half of them, h, and the heads are 2h when that divides
        embed_dim, else 2h + 1 (spandrel's rule; when 2h + 1 would fit the group's RG-SA blocks
        too, the weights cannot tell, and the choice is said); mlp_ratio from fc1; c_ratio =
        cr / embed_dim from the first RG-SA block's conv (spandrel's rule: exact for every
        c_ratio that makes embed_dim c_ratio a whole number, as the published 0.5; no RG-SA block:
        0.5, which then changes nothing); qkv_bias, resi_connection from which keys exist; scale
        from the upsampler; img_size from a stored mask, else 64 (or a multiple of both window
        sides: with no shifted block it changes nothing); split_size from the window buffers'
        shapes, which fix its sides, not their order: every published RGT file has the shorter
        first ((8, 32)), so that order is assumed and said, and a file with the other order is
        refused when loaded (RGT.load_state_dict compares the buffers). img_range is not in the
        weights: 1, as every published file and spandrel; the drop rates change nothing at
        inference: defaults."""
        need(shapes, "before_RG.1.weight")
        embed_dim, in_chans = need(shapes, "conv_first.weight", 4)[:2]
        layers = count(shapes, "layers", ".conv.weight") or count(shapes, "layers", ".conv.0.weight")
        if not layers:
            raise NoMatch("no residual group (layers.0.conv)")
        given = known.get("num_heads") if isinstance(known.get("num_heads"), (list, tuple)) else ()
        depth, heads, first, cr, img_size, unsure = [], [], None, None, None, []
        for i in range(layers):
            prefix = f"layers.{i}.blocks"
            d = count(shapes, prefix, ".norm1.weight")
            depth.append(d)
            if not d:
                heads.append(given[i] if i < len(given) else 2)
                continue
            need(shapes, f"{prefix}.0.gamma")
            first = first or prefix
            half = need(shapes, f"{prefix}.0.attn.attns.0.pos.pos3.2.weight", 2)[0]
            h = 2 * half if embed_dim % (2 * half) == 0 else 2 * half + 1
            heads.append(h)
            if d >= 2:
                cr = cr or need(shapes, f"{prefix}.1.attn.conv.weight", 4)[0]
                odd = 2 * half + 1
                if h == 2 * half and embed_dim % odd == 0 and cr % odd == 0:
                    unsure.append(i)
            if img_size is None:
                img_size = img_size_of_masks(shapes, prefix, d)
        if first is None:
            raise NoMatch("no RGT block")
        split = window_split(shapes, f"{first}.0.attn.attns.0")
        if "conv_after_body.weight" in shapes:
            resi = "1conv"
        elif "conv_after_body.0.weight" in shapes:
            resi = "3conv"
        else:
            raise NoMatch("no conv_after_body")
        if img_size is None:  # no stored mask: any multiple of both sides builds the same weights
            img_size = 64 if 64 % split[0] == 0 == 64 % split[1] else math.lcm(*split)
        if split[0] != split[1]:
            split = Assumed(split, "the weights' shapes fix the window's sides, not their order; "
                                   "every published RGT file has the shorter first")
        heads = tuple(heads)
        if unsure:
            heads = Assumed(heads, f"group(s) {unsure}: the weights give half the heads; an odd "
                                   f"count one higher would fit as well (spandrel's rule: even)")
        return {"img_size": img_size, "in_chans": in_chans, "embed_dim": embed_dim,
                "depth": tuple(depth), "num_heads": heads,
                "mlp_ratio": ratio_of(need(shapes, f"{first}.0.mlp.fc1.weight", 2)[0], embed_dim),
                "qkv_bias": f"{first}.0.attn.qkv.bias" in shapes,
                "scale": PixelShuffleUpsampler.detect_scale(shapes, "upsample", _NUM_FEAT),
                "resi_connection": resi, "split_size": split,
                "c_ratio": 0.5 if cr is None else ratio_of(cr, embed_dim)}

    def load_state_dict(self, state_dict, strict: bool = True):
        """As Module's, after checking the file's window buffers are this model's (DAT's rule:
        models/dat.py check_window_buffers)."""
        check_window_buffers(self, state_dict, "RGT")
        return super().load_state_dict(state_dict, strict)

    @staticmethod
    def card(spec: dict):
        """conv_first, the token norm, residual groups of blocks (L-SA: qkv, proj, two dynamic
        position-bias MLPs, get_v; RG-SA: reduction1, dwconv, conv, its norm, q, k, v, cpe, proj;
        both: two norms, the MLP, gamma) with their conv, the reconstruction. L-SA pads to the
        split windows inside; RG-SA's attention weights (heads, N, N') grow with the image's
        area times its reduced area (RGTCard)."""
        c, heads, (hs, ws) = spec["embed_dim"], list(spec["num_heads"]), spec["split_size"]
        hidden, cr, bias = int(c * spec["mlp_ratio"]), int(c * spec["c_ratio"]), spec["qkv_bias"]
        g, s = hidden // 2, spec["scale"]
        common = 2 * norm(c) + c + linear(c, hidden) + norm(g) + conv(g, g, 3, groups=g) + linear(g, c)
        lsa = (linear(c, 3 * c, bias) + linear(c, c) + conv(c, c, 3, groups=c) + common)
        rgsa = (conv(c, c, 4, groups=c) + 2 * conv(c, c, 3, groups=c) + conv(c, cr, 1) + norm(cr)
                + linear(c, cr, bias) + linear(cr, cr, bias) + linear(cr, c, bias) + linear(c, c)
                + common)
        resi = resi_parameters(c, spec["resi_connection"])
        params = conv(spec["in_chans"], c) + 2 * norm(c) + resi
        for d, h in zip(spec["depth"], heads):
            params += (d + 1) // 2 * (lsa + position_bias_parameters(c, h)) + d // 2 * rgsa + resi
        params += (conv(c, _NUM_FEAT) + PixelShuffleUpsampler.parameters(s, _NUM_FEAT)
                   + conv(_NUM_FEAT, spec["in_chans"]))
        act = max([h // 2 * hs * ws for h in heads] + [3 * c, hidden, _NUM_FEAT * s * s])
        rgsa_heads = max([h for d, h in zip(spec["depth"], heads) if d >= 2], default=0)
        return RGTCard("SR" if s > 1 else "restoration", spec["in_chans"], spec["in_chans"], s,
                       params, act, pads_to=math.lcm(hs, ws), pad_minimum=_MINIMUM,
                       channel_keys=("in_chans",), rgsa_heads=rgsa_heads,
                       fixed_onnx="RG-SA reduces the image a number of times its size sets "
                                  "(twice from 16 to 1023 px in evaluation, three times from "
                                  "1024): a graph holds for the sizes of its traced count only")
