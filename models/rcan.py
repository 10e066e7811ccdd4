"""RCAN (Zhang et al., "Image Super-Resolution Using Very Deep Residual Channel Attention Networks",
ECCV 2018; basicsr/archs/rcan_arch.py): mean shift -> conv_first -> num_group residual groups (each
num_block residual channel-attention blocks + a conv + a skip) -> conv_after_body + long skip ->
pixel-shuffle upsampler -> conv_last -> mean shift back. Channel attention rescales each feature map
by sigmoid(conv(relu(conv(global average)))). Parameter names are BasicSR's; the mean is a constant,
not a buffer, as there (BasicSR's state_dicts have no mean key). traiNNer-redux's `unshuffle_mod`
(x1/x2 models that pixel-unshuffle the input and upsample x4) is a keyword; the official RCAN
repository's files (and traiNNer's, without MeanShift) load through `RCAN.layouts`."""
from __future__ import annotations

import math

import framework.functional as F
from framework import nn
from framework.check import flag, int_arg, number
from framework.detect import Layout, NoMatch, count, need
from framework.registry import MODELS
from framework.card import conv, image_card

from ._blocks import (PixelShuffleUpsampler, channel_mean, make_layer, mean_shift_values,
                      upsampler_scale)


def _official_keywords(shapes: dict) -> dict:
    """The official layout's structure: a pixel unshuffle before head.1 (traiNNer's unshuffle_mod);
    no MeanShift pair (traiNNer's norm: false): no shift at all, so rgb_mean 0 and img_range 1."""
    found = {"unshuffle_mod": "head.1.weight" in shapes}
    if "sub_mean.weight" not in shapes:
        found.update(img_range=1.0, rgb_mean=(0.0, 0.0, 0.0))
    return found


RCAN_LAYOUTS = (
    Layout("the official RCAN repository's layout (sub_mean, head.0, body.G.body.B.body.N, tail)",
           "RCAN_BIX4.pt (yulunzhang/RCAN, a legacy torch.save file); traiNNer-redux's RCAN "
           "(4x_..._RCAN.pth: no sub_mean, head.1 after a pixel unshuffle)",
           ("tail.1.weight", "body.0.body.0.body.3.conv_du.0.weight"),
           [(r"(sub|add)_mean\.(weight|bias)", None),
            (r"head\.[01]\.(weight|bias)", r"conv_first.\1"),
            (r"body\.(\d+)\.body\.(\d+)\.body\.([02])\.(weight|bias)",
             r"body.\1.residual_group.\2.rcab.\3.\4"),
            (r"body\.(\d+)\.body\.(\d+)\.body\.3\.conv_du\.0\.(weight|bias)",
             r"body.\1.residual_group.\2.rcab.3.attention.1.\3"),
            (r"body\.(\d+)\.body\.(\d+)\.body\.3\.conv_du\.2\.(weight|bias)",
             r"body.\1.residual_group.\2.rcab.3.attention.3.\3"),
            (r"body\.(\d+)\.body\.(\d+)\.(weight|bias)", r"body.\1.conv.\3"),
            (r"body\.(\d+)\.(weight|bias)", r"conv_after_body.\2"),
            (r"tail\.0\.(\d+)\.(weight|bias)", r"upsample.\1.\2"),
            (r"tail\.1\.(weight|bias)", r"conv_last.\1")],
           _official_keywords, mean_shift_values),
)


class ChannelAttention(nn.Module):
    """x * sigmoid(W2 relu(W1 avg(x) + b1) + b2) on (N, F, H, W); W1: F -> F // squeeze_factor
    (HAT's may be a float ratio: the width is int(F // squeeze_factor))."""

    def __init__(self, num_feat: int, squeeze_factor: int = 16):
        super().__init__()
        mid = int(num_feat // squeeze_factor)
        self.attention = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Conv2d(num_feat, mid, 1),
            nn.ReLU(), nn.Conv2d(mid, num_feat, 1), nn.Sigmoid())

    def forward(self, x):
        return x * self.attention(x)


class RCAB(nn.Module):
    """Residual channel-attention block: x + res_scale * CA(conv(relu(conv(x))))."""

    def __init__(self, num_feat: int, squeeze_factor: int = 16, res_scale: float = 1.0):
        super().__init__()
        self.res_scale = res_scale
        self.rcab = nn.Sequential(
            nn.Conv2d(num_feat, num_feat, 3, padding=1), nn.ReLU(),
            nn.Conv2d(num_feat, num_feat, 3, padding=1), ChannelAttention(num_feat, squeeze_factor))

    def forward(self, x):
        res = self.rcab(x)
        if self.res_scale != 1:  # x * 1.0 is exact: skip the multiply in the common case
            res = res * self.res_scale
        return res + x


class ResidualGroup(nn.Module):
    """num_block RCABs, then a 3x3 conv, plus the group's input."""

    def __init__(self, num_feat: int, num_block: int, squeeze_factor: int = 16, res_scale: float = 1.0):
        super().__init__()
        self.residual_group = make_layer(RCAB, num_block, num_feat=num_feat,
                                         squeeze_factor=squeeze_factor, res_scale=res_scale)
        self.conv = nn.Conv2d(num_feat, num_feat, 3, padding=1)

    def forward(self, x):
        return self.conv(self.residual_group(x)) + x


@MODELS.register()
class RCAN(nn.Module):
    """RCAN: (N, num_in_ch, h, w) in [0, 1] -> (N, num_out_ch, h*scale, w*scale).

    Args:
        num_in_ch, num_out_ch: image channels, default 3.
        num_feat: features, default 64.
        num_group: residual groups, default 10.
        num_block: RCABs per group, default 16 (the paper's RCAN: 20).
        squeeze_factor: channel-attention reduction, default 16 (num_feat // squeeze_factor >= 1).
        scale: 2, 3, 4 (default) or another power of two.
        res_scale: residual scaling of each RCAB, default 1 (the official code ignores it: 1).
        img_range: images are scaled by this after the mean shift, default 255.
        rgb_mean: per-channel mean, default DIV2K's (0.4488, 0.4371, 0.4040); on 1 channel the
            average of the three (BasicSR's RCAN runs on 3 channels only). A model without mean
            shift (traiNNer's norm: false) is rgb_mean (0, 0, 0) with img_range 1.
        unshuffle_mod: traiNNer-redux's x1/x2 variant, default False: the input is pixel-unshuffled
            by 4 // scale (sides reflect-padded to a multiple, the output cropped) and upsampled x4.
    """

    layouts = RCAN_LAYOUTS

    def __init__(self, num_in_ch: int = 3, num_out_ch: int = 3, num_feat: int = 64, num_group: int = 10,
                 num_block: int = 16, squeeze_factor: int = 16, scale: int = 4, res_scale: float = 1.0,
                 img_range: float = 255.0, rgb_mean=(0.4488, 0.4371, 0.4040),
                 unshuffle_mod: bool = False):
        super().__init__()
        name = "RCAN"
        num_in_ch = int_arg(name, "num_in_ch", num_in_ch)
        num_out_ch = int_arg(name, "num_out_ch", num_out_ch)
        num_feat = int_arg(name, "num_feat", num_feat)
        num_group = int_arg(name, "num_group", num_group, 0)
        num_block = int_arg(name, "num_block", num_block, 0)
        squeeze_factor = int_arg(name, "squeeze_factor", squeeze_factor)
        if squeeze_factor > num_feat:
            raise ValueError(f"{name}: squeeze_factor must be <= num_feat (the attention keeps "
                             f"num_feat // squeeze_factor channels), got {squeeze_factor} > {num_feat}")
        self.unshuffle = 1
        if flag(name, "unshuffle_mod", unshuffle_mod):
            self.scale = int_arg(name, "scale", scale)
            if self.scale not in (1, 2):
                raise ValueError(f"{name}: unshuffle_mod is for scale 1 or 2 (the input is "
                                 f"unshuffled by 4 // scale, then upsampled x4), got {self.scale}")
            self.unshuffle = 4 // self.scale
        else:
            self.scale = upsampler_scale(name, scale)
        res_scale = number(name, "res_scale", res_scale, low=0, low_open=True)
        self.img_range = number(name, "img_range", img_range, low=0, low_open=True)
        # Constants, not buffers (as BasicSR): they stay out of the state_dict.
        self.mean_in = channel_mean(name, rgb_mean, num_in_ch)
        self.mean_out = channel_mean(name, rgb_mean, num_out_ch)

        self.conv_first = nn.Conv2d(num_in_ch * self.unshuffle ** 2, num_feat, 3, padding=1)
        self.body = make_layer(ResidualGroup, num_group, num_feat=num_feat, num_block=num_block,
                               squeeze_factor=squeeze_factor, res_scale=res_scale)
        self.conv_after_body = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.upsample = PixelShuffleUpsampler(self.scale * self.unshuffle, num_feat, name)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, padding=1)

    def forward(self, x):
        image = x
        if self.unshuffle > 1:  # as traiNNer's / spandrel's forward: pad, shift, unshuffle
            x = F.pad_to_multiple(x, self.unshuffle)
        x = (x - self.mean_in.astype(x.dtype, copy=False)) * self.img_range
        if self.unshuffle > 1:
            x = F.pixel_unshuffle(x, self.unshuffle)
        x = self.conv_first(x)
        res = self.conv_after_body(self.body(x)) + x
        x = self.conv_last(self.upsample(res))
        x = x / self.img_range + self.mean_out.astype(x.dtype, copy=False)
        return F.crop_to(x, image, self.scale) if self.unshuffle > 1 else x

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """Groups from body.i.conv, blocks from group 0, the squeeze factor from the attention's
        first conv (a given one that gives its width, else the largest: num_feat // width), the
        upsampler's scale; with unshuffle_mod (given, or the layout's head.1, or conv_first seeing
        4 or 16 times conv_last's channels before a x4 upsampler) the unshuffle from conv_first's
        channels and scale = 4 // it. img_range and rgb_mean are BasicSR's (255, DIV2K's mean: its
        every RCAN option file) unless a layout's MeanShift says otherwise; res_scale is 1 (BasicSR's
        options; the official code has none)."""
        feat, first_in = need(shapes, "conv_first.weight", 4)[:2]
        out = need(shapes, "conv_last.weight", 4)[0]
        need(shapes, "conv_after_body.weight", 4)
        num_group = count(shapes, "body", ".conv.weight")
        found = {"num_out_ch": out, "num_feat": feat, "num_group": num_group}
        if num_group:
            found["num_block"] = count(shapes, "body.0.residual_group", ".rcab.0.weight")
            if found["num_block"]:
                width = need(shapes, "body.0.residual_group.0.rcab.3.attention.1.weight", 4)[0]
                squeeze = known.get("squeeze_factor")
                ok = isinstance(squeeze, int) and squeeze >= 1 and feat // squeeze == width
                found["squeeze_factor"] = squeeze if ok else feat // width
        up = PixelShuffleUpsampler.detect_scale(shapes, "upsample", feat)
        unshuffle = known.get("unshuffle_mod")
        if unshuffle is None:
            unshuffle = up == 4 and first_in in (4 * out, 16 * out)
        if unshuffle:
            cin = known.get("num_in_ch") if isinstance(known.get("num_in_ch"), int) else out
            d = math.isqrt(first_in // cin) if cin >= 1 else 0
            if up != 4 or d not in (2, 4) or first_in != cin * d * d:
                raise NoMatch(f"unshuffle_mod: conv_first sees {first_in} channels and the "
                              f"upsampler is x{up}: not num_in_ch {cin} x 4 or 16 before x4")
            found.update(num_in_ch=cin, scale=4 // d, unshuffle_mod=True)
        else:
            found.update(num_in_ch=first_in, scale=up)
        return found

    @staticmethod
    def card(spec: dict):
        """conv_first, num_group groups of num_block RCABs (two convs and the attention's two 1x1
        convs) and a conv, conv_after_body, the upsampler (x scale * unshuffle), conv_last."""
        s, cin, cout, f, g, n, q = (spec[k] for k in (
            "scale", "num_in_ch", "num_out_ch", "num_feat", "num_group", "num_block",
            "squeeze_factor"))
        u = 4 // s if spec["unshuffle_mod"] else 1
        rcab = 2 * conv(f, f) + conv(f, f // q, 1) + conv(f // q, f, 1)
        params = (conv(cin * u * u, f) + g * (n * rcab + conv(f, f)) + conv(f, f)
                  + PixelShuffleUpsampler.parameters(s * u, f) + conv(f, cout))
        return image_card(s, cin, cout, params, max(f, cin, cout) * s * s, pads_to=u)
