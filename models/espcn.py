"""ESPCN (Shi et al., "Real-Time Single Image and Video Super-Resolution Using an Efficient Sub-Pixel
Convolutional Neural Network", CVPR 2016): 5x5 (64) -> tanh -> 3x3 (32) -> tanh -> 3x3 to
C*scale^2 channels -> pixel shuffle. All convolutions run at the LR size; the last layer's channels are
rearranged into the scale x scale sub-pixel grid. Parameter names follow the common PyTorch port
(first_part / last_part)."""
from __future__ import annotations

from framework import nn
from framework.check import int_arg, int_list
from framework.registry import MODELS
from framework.card import conv, image_card

from framework.detect import need, split_shuffle


@MODELS.register()
class ESPCN(nn.Module):
    """ESPCN: (N, num_in_ch, h, w) in [0, 1] -> (N, num_out_ch, h*scale, w*scale).

    Args:
        scale: upscaling factor (any integer >= 1: the pixel-shuffle factor).
        num_in_ch, num_out_ch: image channels (3 for RGB, 1 for Y).
        num_feat: features of the two hidden layers, default (64, 32).
    """

    def __init__(self, scale: int, num_in_ch: int = 3, num_out_ch: int = 3, num_feat=(64, 32)):
        super().__init__()
        self.scale = int_arg("ESPCN", "scale", scale)
        num_in_ch = int_arg("ESPCN", "num_in_ch", num_in_ch)
        num_out_ch = int_arg("ESPCN", "num_out_ch", num_out_ch)
        f1, f2 = int_list("ESPCN", "num_feat", num_feat, 2)
        self.first_part = nn.Sequential(
            nn.Conv2d(num_in_ch, f1, 5, padding=2), nn.Tanh(),
            nn.Conv2d(f1, f2, 3, padding=1), nn.Tanh(),
        )
        self.last_part = nn.Sequential(
            nn.Conv2d(f2, num_out_ch * self.scale ** 2, 3, padding=1),
            nn.PixelShuffle(self.scale),
        )

    def forward(self, x):
        return self.last_part(self.first_part(x))

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """Widths from the two hidden convs; the last conv's num_out_ch * scale^2 outputs split as
        detect.split_shuffle does (num_out_ch = num_in_ch first, unless scale is given)."""
        f1, cin = need(shapes, "first_part.0.weight", 4)[:2]
        last = need(shapes, "last_part.0.weight", 4)[0]
        num_out_ch, scale = split_shuffle(last, cin, known, "ESPCN")
        return {"scale": scale, "num_in_ch": cin, "num_out_ch": num_out_ch,
                "num_feat": [f1, need(shapes, "first_part.2.weight", 4)[0]]}

    @staticmethod
    def card(spec: dict):
        """Three convs at the LR size, the last to num_out_ch scale^2 channels."""
        s, cin, cout, (f1, f2) = spec["scale"], spec["num_in_ch"], spec["num_out_ch"], spec["num_feat"]
        return image_card(s, cin, cout, conv(cin, f1, 5) + conv(f1, f2, 3) + conv(f2, cout * s * s, 3),
                          max(f1, f2, cin, cout * s * s))
