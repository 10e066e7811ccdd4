"""ZSSR's network (Shocher, Cohen, Irani, "'Zero-Shot' Super-Resolution using Deep Internal
Learning", CVPR 2018; assafshocher/ZSSR's build_network): 8 convolutions 3x3 with 64 features and
ReLU between them, no biases, learning the residual between the interpolated input and the HR
image. The interpolation (MATLAB's bicubic imresize, as ZSSR's upscale_method 'cubic') is inside
the model, so it maps LR (N, C, h, w) to SR (N, C, h*scale, w*scale) like every other model; it is
trained on the test image alone (framework/engine/run/recipes/zssr.py)."""
from __future__ import annotations

import math

import framework.functional as F
from framework import nn
from framework.check import number
from framework.nn import init
from framework.nn.conv import run_fused
from framework.registry import MODELS
from framework.card import conv, image_card

from framework.detect import NoMatch, Unknown, indices, need

from ._blocks import residual_net_args


@MODELS.register()
class ZSSRNet(nn.Module):
    """ZSSR: (N, C, h, w) in [0, 1] -> u + body(u), u = imresize(x, scale) (MATLAB bicubic),
    (N, C, h*scale, w*scale).

    Args:
        scale: upscaling factor (any integer >= 1).
        num_in_ch, num_out_ch: image channels; equal (the output adds the interpolated input).
        num_feat: features of the hidden layers, default 64 (ZSSR's width).
        num_layers: convolutions in all, default 8 (ZSSR's depth); at least 2.
        init_variance: the weights are drawn N(0, init_variance / fan_in), default 0.1 (ZSSR's:
            small, for residual learning).
    """

    def __init__(self, scale: int, num_in_ch: int = 3, num_out_ch: int = 3, num_feat: int = 64,
                 num_layers: int = 8, init_variance: float = 0.1):
        super().__init__()
        self.scale, num_in_ch, num_feat, num_layers = residual_net_args(
            "ZSSRNet", scale, num_in_ch, num_out_ch, num_feat, num_layers)
        variance = number("ZSSRNet", "init_variance", init_variance, 0.0, low_open=True)
        chans = [num_in_ch] + [num_feat] * (num_layers - 1) + [num_in_ch]
        layers = []
        for i in range(num_layers):
            conv = nn.Conv2d(chans[i], chans[i + 1], 3, padding=1, bias=False)
            init.normal_(conv.weight, 0.0, math.sqrt(variance / (9 * chans[i])))
            layers += [conv, nn.ReLU()] if i < num_layers - 1 else [conv]
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        u = F.imresize(x, self.scale) if self.scale > 1 else x
        return u + run_fused(self.body, u)  # self.body(u) with the ReLUs fused into the convs

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """Convolutions at body.0, body.2, ... without biases (VDSR's have them); the scale has
        no weight (the bicubic interpolation): the caller gives it."""
        convs = indices(shapes, "body", ".weight")
        if len(convs) < 2 or convs != list(range(0, 2 * len(convs), 2)):
            raise NoMatch(f"convolutions at body.{convs} are not body.0, body.2, ... (two or more)")
        if any(f"body.{i}.bias" in shapes for i in convs):
            raise NoMatch("its convolutions have biases (ZSSR's have none)")
        feat, cin = need(shapes, "body.0.weight", 4)[:2]
        return {"scale": Unknown(2, "the bicubic interpolation has no weights"), "num_in_ch": cin,
                "num_out_ch": need(shapes, f"body.{convs[-1]}.weight", 4)[0], "num_feat": feat,
                "num_layers": len(convs)}

    @staticmethod
    def card(spec: dict):
        """num_layers convs without biases, all at the HR size. Its ONNX graph holds for one size:
        the bicubic imresize is exported as its weight tables."""
        s, c, f, n = spec["scale"], spec["num_in_ch"], spec["num_feat"], spec["num_layers"]
        return image_card(s, c, spec["num_out_ch"],
                          conv(c, f, bias=False) + (n - 2) * conv(f, f, bias=False)
                          + conv(f, c, bias=False), max(f, c) * s * s,
                          fixed_onnx="MATLAB imresize is exported as its weight tables (MatMul) "
                                     "for the traced size")
