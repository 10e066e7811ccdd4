"""VDSR (Kim, Lee, Lee, "Accurate Image Super-Resolution Using Very Deep Convolutional Networks", CVPR
2016): 20 convolutions 3x3 with 64 features and ReLU between them, learning the residual between the
bicubic-upsampled input and the HR image. The bicubic upsampling is inside the model, so it maps LR
(N, C, h, w) to SR (N, C, h*scale, w*scale) like every other model."""
from __future__ import annotations

from framework import nn
from framework.nn.conv import run_fused
from framework.registry import MODELS
from framework.card import conv, image_card

from framework.detect import NoMatch, Unknown, indices, need

from ._blocks import residual_net_args


@MODELS.register()
class VDSR(nn.Module):
    """VDSR: (N, C, h, w) in [0, 1] -> bicubic(x) + body(bicubic(x)), (N, C, h*scale, w*scale).

    Args:
        scale: upscaling factor (any integer >= 1: the upsampling is bicubic).
        num_in_ch, num_out_ch: image channels; equal, since the output adds the upsampled input.
        num_feat: features of the hidden layers, default 64.
        num_layers: convolutions in all (first and last included), default 20; at least 2.
    """

    def __init__(self, scale: int, num_in_ch: int = 3, num_out_ch: int = 3, num_feat: int = 64,
                 num_layers: int = 20):
        super().__init__()
        self.scale, num_in_ch, num_feat, num_layers = residual_net_args(
            "VDSR", scale, num_in_ch, num_out_ch, num_feat, num_layers)
        self.upsample = nn.Upsample(scale_factor=self.scale, mode="bicubic", align_corners=False)
        layers = [nn.Conv2d(num_in_ch, num_feat, 3, padding=1), nn.ReLU()]
        for _ in range(num_layers - 2):
            layers += [nn.Conv2d(num_feat, num_feat, 3, padding=1), nn.ReLU()]
        layers.append(nn.Conv2d(num_feat, num_out_ch, 3, padding=1))
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        x = self.upsample(x)
        return x + run_fused(self.body, x)  # self.body(x) with the ReLUs fused into the convs

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """num_layers = the convs at body.0, body.2, ...; the scale has no weight (the bicubic
        upsampling): the caller gives it."""
        convs = indices(shapes, "body", ".weight")
        if len(convs) < 2 or convs != list(range(0, 2 * len(convs), 2)):
            raise NoMatch(f"convolutions at body.{convs} are not body.0, body.2, ... (two or more)")
        feat, cin = need(shapes, "body.0.weight", 4)[:2]
        return {"scale": Unknown(1, "the bicubic upsampling has no weights"), "num_in_ch": cin,
                "num_out_ch": need(shapes, f"body.{convs[-1]}.weight", 4)[0], "num_feat": feat,
                "num_layers": len(convs)}

    @staticmethod
    def card(spec: dict):
        """num_layers convs, all at the HR size (s^2 pixels per input pixel)."""
        s, c, f, n = spec["scale"], spec["num_in_ch"], spec["num_feat"], spec["num_layers"]
        return image_card(s, c, spec["num_out_ch"],
                          conv(c, f) + (n - 2) * conv(f, f) + conv(f, c), max(f, c) * s * s)
