"""GRL (Li, Fan, Xiang, Demandolx, Ranjan, Timofte and Van Gool, "Efficient and Explicit Modelling
of Image Hierarchies for Image Restoration", CVPR 2023; ofsoundof/GRL-Image-Restoration as
spandrel 0.4.2 and traiNNer-redux (`grl_b`, `grl_s`, `grl_t`) read it): global, regional and
local modelling in one transformer block.

    conv_first -> tokens -> norm_start -> stages -> norm_end -> conv_after_body (+ long skip)
    -> reconstruction; a stage: blocks, then its conv (conv_type) and a residual.
    block: x + norm1(attn(x)) [+ CAB(x): local_connection], then x + norm2(mlp(x)) (post-norm)

The block's mixed attention (`attn`, models/_grl_blocks.py) projects qkv once (a linear or a
separable conv) and splits the channels in two halves: window attention on one (square windows,
shifted by half a window in even blocks: regional), anchored stripe attention on the other
(stripes of stripe_size, horizontal in even blocks and vertical in odd ones, shifted in blocks 2,
3 of every 4: global), through
anchors, a projection of the features downscaled by anchor_window_down_factor (avgpool / maxpool
+ linear, conv2d, separable conv or patch merging; in one stage or in x2 steps). Both are SwinV2's
scaled cosine attention with a continuous position bias (Swin2SR's; the ops are
framework.functional.anchor_attention). Their outputs are concatenated and projected (`proj`).

Published sizes: GRL-base (180 features, depths 4 4 8 8 8 4 4, 3 + 3 heads, local connection,
pixel shuffle), GRL-small (128, 4 4 4 4, 2 + 2 heads) and GRL-tiny (64, 4 4 4 4, 2 + 2,
pixelshuffledirect); MLP x2, avgpool anchors at df 4. The official SR files use window 32 and
stripes 64 x 64 (real-world "nearest+conv" x4: 16 and 32 x 64; x1 restoration: 8 and 8 x 8);
traiNNer-redux trains with window 8, stripe_size (8, None) and stripe_groups (None, 4) (a stripe
a quarter of the padded width).

The input is padded at the bottom and right to a multiple of max(window, stripe sizes,
stripe_groups x df) (reflect, or zeros when the image is smaller than the padding: the
original's check_image_size) and the output cropped. The original's relative-position tables,
indices and masks (its non-persistent buffers table_w, index_sh_a2w, mask_sv_w2a, ...) are
computed for the padded size at each forward; some published files hold them, which the layouts
below read (window, stripe and down factor) and drop. The original computes the vertical stripes'
constants from the horizontal ones reversed, which holds only for square inputs when
stripe_groups is set (it fails on others); here each block uses its own stripe's.
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, linear, norm
from framework.check import choice, flag, int_arg, int_list, number, pair
from framework.detect import Assumed, Layout, NoMatch, count, need
from framework.registry import MODELS

from ._blocks import PixelShuffleUpsampler, drop_rates, trunc_normal_linears, upsampler_scale
from ._grl_blocks import TransformerStage, image_to_tokens, last_conv, tokens_to_image
from .swinir import UpsampleOneStep, resi_parameters

_UPSAMPLERS = ("", "pixelshuffle", "pixelshuffledirect", "nearest+conv")
_ANCHORS = ("avgpool", "maxpool", "conv2d", "separable_conv", "patchmerging")
_CONV_TYPES = ("1conv", "3conv", "1conv1x1", "linear")
_NUM_FEAT = 64
_RGB_MEAN = (0.4488, 0.4371, 0.4040)
BUFFERS = ("table_w", "table_sh", "table_sv", "index_w", "index_sh_a2w", "index_sh_w2a",
           "index_sv_a2w", "index_sv_w2a", "mask_w", "mask_sh_a2w", "mask_sh_w2a", "mask_sv_a2w",
           "mask_sv_w2a")


def _groups(name, key, value):
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"{name}: {key} must be a pair (one entry per axis), got {value!r}")
    out = []
    for v in value:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{name}: {key} entries must be None or positive ints, got {value!r}")
        out.append(v)
    return tuple(out)


@MODELS.register()
class GRL(nn.Module):
    """GRL: (N, in_channels, h, w) in [0, 1] -> (N, out_channels, h*scale, w*scale), any h, w.

    Args (the original's names and defaults, `scale` its `upscale`, as traiNNer-redux):
        img_size: the training patch, default 64: builds nothing here (the original's buffers for
            it are computed per input size).
        in_channels, out_channels: default 3 and 3 (a 3-channel input's mean is added back, so a
            3-channel model outputs 3).
        embed_dim: features, default 96 (base 180, small 128, tiny 64).
        scale: 1 (default, upsampler ""), 2^n or 3 ("pixelshuffle"), any ("pixelshuffledirect"),
            4 ("nearest+conv").
        img_range: the input is multiplied by this after the mean shift, default 1.
        upsampler: "" (default), "pixelshuffle", "pixelshuffledirect", "nearest+conv".
        depths: blocks per stage, default (6,) * 6. num_heads_window, num_heads_stripe: heads per
            stage (dividing embed_dim / 2), default 3 each.
        window_size: window side, default 8. stripe_size: (h, w) of a horizontal stripe (vertical
            ones reversed), default (8, 8); an entry may be None where stripe_groups gives it.
        stripe_groups: (h, w) stripes per padded side (None: stripe_size's), default (None, None).
        stripe_shift: shift the stripes of blocks 2, 3 of every 4, default False (every
            published configuration: True).
        mlp_ratio: MLP hidden / embed_dim, default 4 (published: 2). qkv_bias: default True.
        qkv_proj_type: "linear" (default) or "separable_conv".
        anchor_proj_type: "avgpool" (default), "maxpool", "conv2d", "separable_conv",
            "patchmerging". anchor_one_stage: one operator (default True) or x2 steps.
        anchor_window_down_factor: the anchors' downscale, default 1 (published: 4).
        out_proj_type: "linear" (default; the original ignores it).
        local_connection: a channel-attention conv branch in every block (CAB), default False
            (base: True).
        drop_rate, attn_drop_rate, drop_path_rate: default 0, 0, 0.1 (attn_drop_rate 0 only: the
            attention here is fused, with no dropout on its weights; every published
            configuration and traiNNer-redux's presets train with 0).
        pretrained_window_size, pretrained_stripe_size: the sizes the coordinate tables are
            normalised by (0: their own), default (0, 0).
        conv_type: the stages' and conv_after_body's conv: "1conv" (default, 3x3), "3conv",
            "1conv1x1", "linear".
        init_method: "n" (default: trunc-normal linears) or "r" (residual branches x 0.1).
        fairscale_checkpoint, offload_to_cpu: the original's activation checkpointing through
            fairscale (memory only, the same results): accepted and not used, default False.
        euclidean_dist: False only (the original's ablation).
    """

    def __init__(self, img_size=64, in_channels: int = 3, out_channels: int = 3, embed_dim: int = 96,
                 scale: int = 1, img_range: float = 1.0, upsampler: str = "",
                 depths=(6, 6, 6, 6, 6, 6), num_heads_window=(3, 3, 3, 3, 3, 3),
                 num_heads_stripe=(3, 3, 3, 3, 3, 3), window_size: int = 8, stripe_size=(8, 8),
                 stripe_groups=(None, None), stripe_shift: bool = False, mlp_ratio: float = 4.0,
                 qkv_bias: bool = True, qkv_proj_type: str = "linear",
                 anchor_proj_type: str = "avgpool", anchor_one_stage: bool = True,
                 anchor_window_down_factor: int = 1, out_proj_type: str = "linear",
                 local_connection: bool = False, drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0, drop_path_rate: float = 0.1,
                 pretrained_window_size=(0, 0), pretrained_stripe_size=(0, 0),
                 conv_type: str = "1conv", init_method: str = "n",
                 fairscale_checkpoint: bool = False, offload_to_cpu: bool = False,
                 euclidean_dist: bool = False):
        super().__init__()
        name = "GRL"
        pair(name, "img_size", img_size, minimum=1)
        self.in_channels = int_arg(name, "in_channels", in_channels)
        self.out_channels = int_arg(name, "out_channels", out_channels)
        if self.in_channels == 3 and self.out_channels != 3:
            raise ValueError(f"{name}: in_channels 3 adds its 3-channel mean to the output, so "
                             f"out_channels must be 3, got {out_channels}")
        c = self.embed_dim = int_arg(name, "embed_dim", embed_dim, 2)
        if c % 2:
            raise ValueError(f"{name}: embed_dim must be even (window and stripe attention take half "
                             f"each), got {c}")
        self.img_range = number(name, "img_range", img_range, low=0, low_open=True)
        self.upsampler = choice(name, "upsampler", upsampler, _UPSAMPLERS)
        self.scale = self._check_scale(name, scale)
        depths = int_list(name, "depths", depths, minimum=0)
        heads_w = int_list(name, "num_heads_window", num_heads_window, length=len(depths))
        heads_s = int_list(name, "num_heads_stripe", num_heads_stripe, length=len(depths))
        bad = [h for h in heads_w + heads_s if (c // 2) % h]
        if bad:
            raise ValueError(f"{name}: num_heads_window and num_heads_stripe must divide embed_dim / 2 "
                             f"= {c // 2}, got {bad[0]}")
        self.window_size = ws = int_arg(name, "window_size", window_size)
        groups = _groups(name, "stripe_groups", stripe_groups)
        sizes = []
        for s, g in zip(_groups(name, "stripe_size", stripe_size), groups):
            if s is None and g is None:
                raise ValueError(f"{name}: stripe_size has None where stripe_groups does not give "
                                 f"the stripe, got {stripe_size!r} and {stripe_groups!r}")
            sizes.append(s)
        stripe_shift = flag(name, "stripe_shift", stripe_shift)
        mlp_ratio = number(name, "mlp_ratio", mlp_ratio, low=0, low_open=True)
        if int(c * mlp_ratio) < 1:
            raise ValueError(f"{name}: mlp_ratio {mlp_ratio} leaves the MLP no hidden feature")
        qkv_bias = flag(name, "qkv_bias", qkv_bias)
        qkv_proj_type = choice(name, "qkv_proj_type", qkv_proj_type, ("linear", "separable_conv"))
        anchor_proj_type = choice(name, "anchor_proj_type", anchor_proj_type, _ANCHORS)
        anchor_one_stage = flag(name, "anchor_one_stage", anchor_one_stage)
        df = int_arg(name, "anchor_window_down_factor", anchor_window_down_factor)
        self._check_anchor(name, anchor_proj_type, anchor_one_stage, df)
        choice(name, "out_proj_type", out_proj_type, ("linear", "conv2d"))
        local_connection = flag(name, "local_connection", local_connection)
        if local_connection and c < 18:
            raise ValueError(f"{name}: local_connection's channel attention squeezes embed_dim by "
                             f"18: embed_dim must be >= 18, got {c}")
        drop_rate, attn_drop_rate, drop_path_rate = drop_rates(name, drop_rate, attn_drop_rate,
                                                               drop_path_rate)
        if attn_drop_rate:
            raise ValueError(f"{name}: attn_drop_rate must be 0 (srgrad's GRL fuses its attention, "
                             f"without dropout on the weights; every published configuration uses "
                             f"0), got {attn_drop_rate}")
        pws = pair(name, "pretrained_window_size", pretrained_window_size, minimum=0)
        pss = pair(name, "pretrained_stripe_size", pretrained_stripe_size, minimum=0)
        conv_type = choice(name, "conv_type", conv_type, _CONV_TYPES)
        if conv_type == "3conv" and c < 4:
            raise ValueError(f"{name}: conv_type '3conv' needs embed_dim >= 4, got {c}")
        init_method = choice(name, "init_method", init_method, ("n", "r"))
        flag(name, "fairscale_checkpoint", fairscale_checkpoint)
        flag(name, "offload_to_cpu", offload_to_cpu)
        if flag(name, "euclidean_dist", euclidean_dist):
            raise ValueError(f"{name}: euclidean_dist must be False (an ablation of the paper's, "
                             f"in no published file)")
        max_group = max(g or 0 for g in groups) * df
        self.pad_size = max(ws, *(s or 0 for s in sizes), max_group)
        for what, n in [("window_size", ws)] + [("stripe_size", s) for s in sizes if s]:
            if self.pad_size % n or (what == "stripe_size" and n % df):
                raise ValueError(f"{name}: the input pads to a multiple of {self.pad_size} "
                                 f"(max of window, stripes, groups x down factor), which {what} {n} "
                                 f"must divide (and the down factor {df} must divide every stripe)")
        self.mean = (np.float32(_RGB_MEAN) if self.in_channels == 3
                     else np.zeros(1, np.float32)).reshape(1, -1, 1, 1)

        self.conv_first = nn.Conv2d(self.in_channels, c, 3, padding=1)
        self.norm_start = nn.LayerNorm(c)
        self.pos_drop = nn.Dropout(drop_rate)
        rates = np.linspace(0, drop_path_rate, sum(depths)).tolist()
        block_kw = dict(window_size=ws, stripe_size=sizes, stripe_groups=groups,
                        stripe_shift=stripe_shift, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias,
                        qkv_proj_type=qkv_proj_type, anchor_proj_type=anchor_proj_type,
                        anchor_one_stage=anchor_one_stage, df=df, drop=drop_rate,
                        local_connection=local_connection,
                        res_scale=0.1 if init_method == "r" else 1.0,
                        pretrained_window_size=pws, pretrained_stripe_size=pss)
        self.layers = nn.ModuleList([
            TransformerStage(c, d, rates[sum(depths[:i]):sum(depths[:i + 1])], conv_type,
                             heads_w=heads_w[i], heads_s=heads_s[i], **block_kw)
            for i, d in enumerate(depths)])
        self.norm_end = nn.LayerNorm(c)
        self.conv_after_body = last_conv(c, conv_type)
        self._reconstruction(c, self.out_channels)
        trunc_normal_linears(self)  # the original's: Linear trunc_normal(0.02), LayerNorm 1 / 0

    def _check_scale(self, name, scale):
        if self.upsampler == "pixelshuffle":
            return upsampler_scale(name, scale)
        scale = int_arg(name, "scale", scale)
        need_scale = {"nearest+conv": 4, "": 1}.get(self.upsampler)
        if need_scale is not None and scale != need_scale:
            raise ValueError(f"{name}: upsampler {self.upsampler!r} makes x{need_scale} only: scale "
                             f"must be {need_scale}, got {scale}")
        return scale

    @staticmethod
    def _check_anchor(name, proj, one_stage, df):
        if not one_stage and proj in ("avgpool", "maxpool"):
            raise ValueError(f"{name}: anchor_proj_type {proj!r} runs in one stage only "
                             f"(anchor_one_stage True)")
        if not one_stage and (df < 2 or df & (df - 1)):
            raise ValueError(f"{name}: anchor_one_stage False downscales in x2 steps: "
                             f"anchor_window_down_factor must be a power of 2 >= 2, got {df}")
        if one_stage and proj == "patchmerging" and df != 2:
            raise ValueError(f"{name}: one-stage patch merging halves the grid: "
                             f"anchor_window_down_factor must be 2, got {df}")
        if one_stage and proj in ("conv2d", "separable_conv") and df % 2:
            raise ValueError(f"{name}: a one-stage {proj} anchor (kernel df + 1, stride df) keeps "
                             f"the grid / df only for an even df, got {df}")

    def _reconstruction(self, c, out):
        f = _NUM_FEAT
        if self.upsampler in ("pixelshuffle", "nearest+conv"):
            self.conv_before_upsample = nn.Sequential(nn.Conv2d(c, f, 3, padding=1), nn.LeakyReLU())
        if self.upsampler == "pixelshuffle":
            self.upsample = nn.Module()
            self.upsample.up = PixelShuffleUpsampler(self.scale, f, "GRL")
            self.conv_last = nn.Conv2d(f, out, 3, padding=1)
        elif self.upsampler == "pixelshuffledirect":
            self.upsample = nn.Module()
            self.upsample.up = UpsampleOneStep(self.scale, c, out)
        elif self.upsampler == "nearest+conv":
            for key in ("conv_up1", "conv_up2", "conv_hr"):
                setattr(self, key, nn.Conv2d(f, f, 3, padding=1))
            self.conv_last = nn.Conv2d(f, out, 3, padding=1)
            self.lrelu = nn.LeakyReLU(0.2)
        else:
            self.conv_last = nn.Conv2d(c, out, 3, padding=1)

    def forward_features(self, x):
        x_size = (x.shape[2], x.shape[3])
        t = self.pos_drop(self.norm_start(image_to_tokens(x)))
        for layer in self.layers:
            t = layer(t, x_size)
        return tokens_to_image(self.norm_end(t), x_size)

    def forward(self, x):
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"GRL: expected input (N, {self.in_channels}, H, W), got shape "
                             f"{tuple(x.shape)}")
        image, (h, w), p = x, x.shape[2:], self.pad_size
        ph, pw = -h % p, -w % p
        # the original's check_image_size: reflect, zeros when the image is smaller than its pad
        x = F.pad_to_multiple(x, p, mode="reflect" if ph < h and pw < w else "constant")
        mean = self.mean.astype(x.dtype, copy=False)
        x = (x - mean) * self.img_range
        first = self.conv_first(x)
        feat = self.conv_after_body(self.forward_features(first)) + first
        if self.upsampler == "pixelshuffle":
            out = self.conv_last(self.upsample.up(self.conv_before_upsample(feat)))
        elif self.upsampler == "pixelshuffledirect":
            out = self.upsample.up(feat)
        elif self.upsampler == "nearest+conv":
            feat = self.conv_before_upsample(feat)
            feat = self.lrelu(self.conv_up1(F.interpolate(feat, scale_factor=2, mode="nearest")))
            feat = self.lrelu(self.conv_up2(F.interpolate(feat, scale_factor=2, mode="nearest")))
            out = self.conv_last(self.lrelu(self.conv_hr(feat)))
        elif self.in_channels == self.out_channels:
            out = x + self.conv_last(feat)
        else:
            out = self.conv_last(feat)
        return F.crop_to(out / self.img_range + mean, image, self.scale)

    @staticmethod
    def card(spec: dict):
        """conv_first, the two norms, each block (qkv, anchors, the three attentions' logit scales
        and 2 -> 512 -> heads position MLPs, proj, two norms, the CAB, the MLP), each stage's conv,
        conv_after_body, the reconstruction. Padded to pad_size inside. The largest arrays: a
        window's attention (heads x window^2 per pixel), a stripe's (heads x its anchors per
        pixel), the qkv, the MLP, a position MLP's 512 features per table row, the upsampler."""
        c, df, s = spec["embed_dim"], spec["anchor_window_down_factor"], spec["scale"]
        out, half, ws = spec["out_channels"], spec["embed_dim"] // 2, spec["window_size"]
        hidden, bias = int(c * spec["mlp_ratio"]), spec["qkv_bias"]
        proj, one = spec["anchor_proj_type"], spec["anchor_one_stage"]
        if spec["qkv_proj_type"] == "linear":
            qkv = linear(c, 3 * c, bias)
        else:
            qkv = conv(c, c, 3, bias, c) + conv(c, 3 * c, 1, bias)
        if one:
            anchor = {"patchmerging": 4 * c * half, "conv2d": conv(c, half, df + 1),
                      "separable_conv": conv(c, c, df + 1, True, c) + conv(c, half, 1)}.get(
                          proj, linear(c, half))
        else:
            anchor = 0
            for i in range(int(math.log2(df))):
                cin = c if i == 0 else half
                anchor += {"patchmerging": 4 * cin * half, "conv2d": conv(cin, half),
                           "separable_conv": conv(cin, cin, 3, True, cin) + conv(cin, half, 1)}[proj]
        cab = (conv(c, c // 4) + conv(c // 4, c) + conv(c, c // 18, 1) + conv(c // 18, c, 1)
               if spec["local_connection"] else 0)
        kind = spec["conv_type"]
        last = (conv(c, c, 1) if kind == "1conv1x1" else linear(c, c) if kind == "linear"
                else resi_parameters(c, kind))

        def transform(h):
            return h + linear(2, 512) + linear(512, h, False)
        params = conv(spec["in_channels"], c) + 2 * norm(c) + last
        for d, hw, hs in zip(spec["depths"], spec["num_heads_window"], spec["num_heads_stripe"]):
            params += last + d * (qkv + anchor + transform(hw) + 2 * transform(hs) + linear(c, c)
                                  + 2 * norm(c) + cab + linear(c, hidden) + linear(hidden, c))
        f = _NUM_FEAT
        kind = spec["upsampler"]
        if kind == "pixelshuffle":
            params += conv(c, f) + PixelShuffleUpsampler.parameters(s, f) + conv(f, out)
            up = f * s * s
        elif kind == "pixelshuffledirect":
            params, up = params + conv(c, out * s * s), out * s * s
        elif kind == "nearest+conv":
            params, up = params + conv(c, f) + 3 * conv(f, f) + conv(f, out), f * 16
        else:
            params, up = params + conv(c, out), c
        sizes, groups = spec["stripe_size"], spec["stripe_groups"]
        pad = max(ws, *(x or 0 for x in sizes), max(g or 0 for g in groups) * df)
        heads = max(list(spec["num_heads_window"]) + list(spec["num_heads_stripe"]) + [1])
        if any(g is not None for g in groups):
            anchors, rows = pad * pad, 4 * pad * pad  # stripes grow with the input: a bound
        else:
            anchors = (sizes[0] // df) * (sizes[1] // df)
            rows = (sizes[0] + sizes[0] // df) * (sizes[1] + sizes[1] // df)
        rows = max(rows, (2 * ws) ** 2)
        act = max(heads * ws * ws, heads * anchors, 3 * c, hidden, up, -(-512 * rows // (pad * pad)))
        return image_card(s, spec["in_channels"], out, params, act, pads_to=pad,
                          channel_keys=("in_channels", "out_channels"),
                          fixed_onnx="the relative-position tables, indices and shift masks are "
                                     "built for the traced size")

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel 0.4.2's rule. From the keys: in_channels, embed_dim (conv_first); the
        upsampler, scale and out_channels (pixelshuffle: conv_before_upsample and upsample.up;
        pixelshuffledirect: upsample.up alone, its width out x scale^2 with out in (in, 3, 4, 1);
        nearest+conv: conv_up1, x4; else x1); conv_type (conv_after_body's shape); per stage its
        blocks and both head counts (logit_scale); qkv_proj_type and qkv_bias; the anchor
        projection (one stage or x2 steps, its type, the down factor from a conv's kernel or the
        number of steps; one-stage patch merging: 2, the only factor its forward runs, where
        spandrel says 4); local_connection (a CAB); mlp_ratio (fc1).
        Not in the keys, decided by spandrel's rules (said when they change the result):
        window_size, stripe_size and the down factor of pooled anchors come from the original's
        table / index buffers when the file holds them (the layouts below); else the official
        files' values: window 32, stripes 64 x 64 at SR scales; 16, 32 x 64 for "nearest+conv";
        8, 8 x 8 at x1; the down factor 4 (every official file). traiNNer-redux's grl_b / grl_s /
        grl_t train with window 8, stripe_size (8, None), stripe_groups (None, 4): such a file needs
        them given. Pooled anchors are avgpool (maxpool has the same keys; no published file uses
        it); stripe_shift True and stripe_groups (None, None) (every official configuration)."""
        embed_dim, in_ch = need(shapes, "conv_first.weight", 4)[:2]
        need(shapes, "norm_start.weight")
        if "conv_before_upsample.0.weight" in shapes and "upsample.up.0.weight" in shapes:
            upsampler = "pixelshuffle"
            out = need(shapes, "conv_last.weight", 4)[0]
            scale = PixelShuffleUpsampler.detect_scale(shapes, "upsample.up", _NUM_FEAT)
        elif "upsample.up.0.weight" in shapes:
            upsampler = "pixelshuffledirect"
            rows = need(shapes, "upsample.up.0.weight", 4)[0]
            scale = out = None
            for cand in (in_ch, 3, 4, 1):
                r = math.isqrt(rows // cand) if rows % cand == 0 else 0
                if r and r * r * cand == rows:
                    scale, out = r, cand
                    break
            if scale is None:
                raise NoMatch(f"upsample.up.0 has {rows} outputs: not out_channels x scale^2")
        elif "conv_up1.weight" in shapes:
            upsampler, scale = "nearest+conv", 4
            out = need(shapes, "conv_last.weight", 4)[0]
        else:
            upsampler, scale = "", 1
            out = need(shapes, "conv_last.weight", 4)[0]
        if "conv_after_body.weight" in shapes:
            shape = shapes["conv_after_body.weight"]
            conv_type = "linear" if len(shape) == 2 else "1conv1x1" if shape[2] == 1 else "1conv"
        else:
            conv_type = "3conv"
        stages = count(shapes, "layers", ".conv.weight") or count(shapes, "layers", ".conv.0.weight")
        depths, heads_w, heads_s = [], [], []
        for i in range(stages):
            p = f"layers.{i}.blocks"
            depths.append(count(shapes, p, ".norm1.weight"))
            if not depths[-1]:
                raise NoMatch(f"layers.{i} has no block")
            heads_w.append(need(shapes, f"{p}.0.attn.window_attn.attn_transform.logit_scale", 3)[0])
            heads_s.append(need(shapes, f"{p}.0.attn.stripe_attn.attn_transform1.logit_scale", 3)[0])
        if not stages:
            raise NoMatch("no layers.0.blocks.0 (a stage's first block)")
        b = "layers.0.blocks.0"
        if f"{b}.attn.qkv.body.weight" in shapes:
            qkv_type, qkv_bias = "linear", f"{b}.attn.qkv.body.bias" in shapes
        else:
            qkv_type, qkv_bias = "separable_conv", f"{b}.attn.qkv.body.0.bias" in shapes
        found = {"in_channels": in_ch, "out_channels": out, "embed_dim": embed_dim, "scale": scale,
                 "upsampler": upsampler, "depths": tuple(depths),
                 "num_heads_window": tuple(heads_w), "num_heads_stripe": tuple(heads_s),
                 "qkv_proj_type": qkv_type, "qkv_bias": qkv_bias, "conv_type": conv_type,
                 "local_connection": f"{b}.conv.cab.0.weight" in shapes,
                 "mlp_ratio": _ratio(need(shapes, f"{b}.mlp.fc1.weight", 2)[0], embed_dim),
                 "stripe_shift": Assumed(True, "every official configuration", quiet=True),
                 "stripe_groups": Assumed((None, None), "spandrel's", quiet=True)}
        found.update(_anchor_keywords(shapes, known))
        found.update(_window_keywords(upsampler, known))
        return found


def _ratio(width: int, dim: int) -> float:
    r = width / dim
    return float(np.nextafter(r, np.inf)) if int(r * dim) < width else r


def _anchor_keywords(shapes, known) -> dict:
    """anchor_one_stage, anchor_proj_type, anchor_window_down_factor from the anchor's keys
    (spandrel's _get_anchor_params); a down factor the keys do not show (pooling, one-stage patch
    merging) from the buffers when the file had them (known), else 4 (the official files')."""
    a = "layers.0.blocks.0.attn.anchor.body"
    n = count(shapes, a, ".weight")  # its operators (a reduction, a conv, a separable conv)
    given = known.get("anchor_window_down_factor")
    if n == 1:
        if f"{a}.0.reduction.weight" in shapes:
            proj = "avgpool" if f"{a}.0.reduction.bias" in shapes else "patchmerging"
            if proj == "patchmerging":
                df = 2  # the only factor one-stage patch merging runs (spandrel's 4 fails)
            else:
                df = given if given is not None else Assumed(4, "the official files'", quiet=True)
            out = {"anchor_one_stage": True, "anchor_window_down_factor": df}
            out["anchor_proj_type"] = (proj if proj == "patchmerging" else Assumed(
                "avgpool", "avgpool and maxpool anchors have the same keys", quiet=True))
            return out
        key = f"{a}.0.weight" if f"{a}.0.weight" in shapes else f"{a}.0.0.weight"
        proj = "conv2d" if key == f"{a}.0.weight" else "separable_conv"
        return {"anchor_one_stage": True, "anchor_proj_type": proj,
                "anchor_window_down_factor": need(shapes, key, 4)[2] - 1}
    if n == 0:
        raise NoMatch(f"no {a}.0 (the anchor projection)")
    if f"{a}.0.reduction.weight" in shapes:
        proj = "patchmerging"
    elif f"{a}.0.weight" in shapes:
        proj = "conv2d"
    else:
        proj = "separable_conv"
    return {"anchor_one_stage": False, "anchor_proj_type": proj, "anchor_window_down_factor": 2 ** n}


def _window_keywords(upsampler, known) -> dict:
    """window_size and stripe_size: the buffers' (known, from the layouts) or spandrel's rule."""
    if "window_size" in known and "stripe_size" in known:
        return {}
    if upsampler == "":
        window, stripe, what = 8, (8, 8), "the official x1 restoration files'"
    elif upsampler == "nearest+conv":
        window, stripe, what = 16, (32, 64), "the official real-world x4 files'"
    else:
        window, stripe, what = 32, (64, 64), "the official SR files'"
    why = (f"{what} (spandrel's rule; not in the weights). A file trained by traiNNer-redux's "
           f"grl_t / grl_s / grl_b needs window_size=8 stripe_size=[8,null] stripe_groups=[null,4]")
    out = {}
    if "window_size" not in known:
        out["window_size"] = Assumed(window, why)
    if "stripe_size" not in known:
        out["stripe_size"] = Assumed(stripe, why, quiet="window_size" in out)
    return out


def _buffer_keywords(prefix):
    def keywords(shapes):
        """window_size, anchor_window_down_factor and stripe_size from the original's buffers
        (spandrel's reading: table_w is (1, 2w - 1, 2w - 1, 2), index_sh_a2w (s^2 / df^2, s^2)
        and table_sh (1, s + s / df - 1, ...))."""
        need_all = [f"{prefix}{k}" for k in ("table_w", "table_sh", "index_sh_a2w")]
        if not all(k in shapes for k in need_all):
            return {}
        window = (need(shapes, f"{prefix}table_w", 4)[1] + 1) // 2
        a, b = need(shapes, f"{prefix}index_sh_a2w", 2)
        df = math.isqrt(max(a, b) // max(min(a, b), 1))
        th, tw = need(shapes, f"{prefix}table_sh", 4)[1:3]
        stripe = tuple(round((t + 1) / (1 + 1 / df)) for t in (th, tw))
        return {"window_size": window, "anchor_window_down_factor": df, "stripe_size": stripe}
    return keywords


def _layout(prefix: str, name: str, example: str) -> Layout:
    p = prefix.replace(".", r"\.")
    rules = [(rf"{p}({'|'.join(BUFFERS)})", None), (rf"{p}(.+)", r"\1")]
    if prefix == "model_g.":
        rules.append((r".*", None))  # the discriminator and the rest of a training checkpoint
    # the bare keys are the model's own: that layout is for a file with the buffers
    marks = (f"{prefix}conv_first.weight", f"{prefix}norm_start.weight") + (
        ("table_w",) if not prefix else ())
    return Layout(name, example, marks, rules, keywords=_buffer_keywords(prefix))


GRL.layouts = (
    _layout("", "the original's with its table / index / mask buffers", "sr_grl_tiny_c3x4.ckpt"),
    _layout("model.", "the original's training checkpoints (model.)", "dn_grl_small_c3s15.ckpt"),
    _layout("model_g.", "the original's GAN checkpoints (model_g.)", "bsr_grl_base.ckpt"),
)
