"""FSRCNN (Dong, Loy, Tang, "Accelerating the Super-Resolution Convolutional Neural Network", ECCV 2016):
feature extraction 5x5 (d) -> shrinking 1x1 (s) -> m mapping layers 3x3 (s) -> expanding 1x1 (d) ->
a 9x9 transposed convolution that upsamples by the stride. PReLU with one slope per channel after every
convolution but the last. Parameter names follow the common PyTorch port (first_part / mid_part /
last_part), so its state_dicts load."""
from __future__ import annotations

from framework import nn
from framework.check import int_arg
from framework.registry import MODELS
from framework.card import conv, image_card

from framework.detect import NoMatch, Unknown, indices, need


@MODELS.register()
class FSRCNN(nn.Module):
    """FSRCNN(d, s, m): (N, num_in_ch, h, w) in [0, 1] -> (N, num_out_ch, h*scale, w*scale).

    Args:
        scale: upscaling factor (any integer >= 1: the stride of the transposed convolution).
        num_in_ch, num_out_ch: image channels (3 for RGB, 1 for Y).
        d: feature dimension, default 56.
        s: shrunk dimension of the mapping layers, default 12.
        m: number of 3x3 mapping layers, default 4.
    """

    def __init__(self, scale: int, num_in_ch: int = 3, num_out_ch: int = 3, d: int = 56, s: int = 12,
                 m: int = 4):
        super().__init__()
        self.scale = int_arg("FSRCNN", "scale", scale)
        num_in_ch = int_arg("FSRCNN", "num_in_ch", num_in_ch)
        num_out_ch = int_arg("FSRCNN", "num_out_ch", num_out_ch)
        d = int_arg("FSRCNN", "d", d)
        s = int_arg("FSRCNN", "s", s)
        m = int_arg("FSRCNN", "m", m, 0)
        self.first_part = nn.Sequential(nn.Conv2d(num_in_ch, d, 5, padding=2), nn.PReLU(d))
        mid = [nn.Conv2d(d, s, 1), nn.PReLU(s)]
        for _ in range(m):
            mid += [nn.Conv2d(s, s, 3, padding=1), nn.PReLU(s)]
        mid += [nn.Conv2d(s, d, 1), nn.PReLU(d)]
        self.mid_part = nn.Sequential(*mid)
        # Output size (h - 1)*scale - 2*4 + 9 + (scale - 1) = h*scale: exactly scale times the input.
        self.last_part = nn.ConvTranspose2d(d, num_out_ch, 9, stride=self.scale, padding=4,
                                            output_padding=self.scale - 1)

    def forward(self, x):
        return self.last_part(self.mid_part(self.first_part(x)))

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """d, s and the channels from the convs; m from the mid_part convs (m + 2 of them). The
        scale is the transposed conv's stride, which has no weight: the caller gives it."""
        d, cin = need(shapes, "first_part.0.weight", 4)[:2]
        mid = indices(shapes, "mid_part", ".bias")  # the convs; the PReLUs have a weight only
        if len(mid) < 2:
            raise NoMatch(f"mid_part has {len(mid)} convolutions, FSRCNN has at least 2")
        return {"scale": Unknown(1, "the transposed conv's stride has no weight"), "num_in_ch": cin,
                "num_out_ch": need(shapes, "last_part.weight", 4)[1], "d": d,
                "s": need(shapes, "mid_part.0.weight", 4)[0], "m": len(mid) - 2}

    @staticmethod
    def card(spec: dict):
        """Convs and PReLUs (one slope per channel) at the LR size, a 9x9 transposed conv."""
        s, cin, cout, d, sh, m = (spec[k] for k in ("scale", "num_in_ch", "num_out_ch", "d", "s", "m"))
        params = (conv(cin, d, 5) + d + conv(d, sh, 1) + sh + m * (conv(sh, sh, 3) + sh)
                  + conv(sh, d, 1) + d + conv(d, cout, 9))
        return image_card(s, cin, cout, params, max(d, cin, cout * s * s))
