"""SRCNN (Dong et al., "Image Super-Resolution Using Deep Convolutional Networks", TPAMI 2016), the
9-5-5 variant: patch extraction 9x9 -> non-linear mapping 5x5 -> reconstruction 5x5, 64/32 features,
ReLU. The paper feeds the network a bicubic-upsampled image; here that upsampling is inside the model
(on by default) so it maps LR (N, C, h, w) to SR (N, C, h*scale, w*scale) like every other model."""
from __future__ import annotations

from framework import nn
from framework.nn.conv import conv_act
from framework.check import int_arg, int_list
from framework.registry import MODELS
from framework.card import conv, image_card

from framework.detect import Assumed, Unknown, need


@MODELS.register()
class SRCNN(nn.Module):
    """SRCNN: (N, num_in_ch, h, w) in [0, 1] -> (N, num_out_ch, h*scale, w*scale).

    Args:
        scale: upscaling factor (any integer >= 1: the upsampling is bicubic).
        num_in_ch, num_out_ch: image channels (3 for RGB, 1 for Y).
        num_feat: features of the first two layers, default (64, 32).
        kernel_size: kernel sizes of the three layers, default (9, 5, 5) (odd: padded to keep size).
        upsample: bicubic pre-upsampling inside the model (default True); with False the input must
            already be at the output size (the paper's setting) and the output keeps its size.
    """

    def __init__(self, scale: int, num_in_ch: int = 3, num_out_ch: int = 3, num_feat=(64, 32),
                 kernel_size=(9, 5, 5), upsample: bool = True):
        super().__init__()
        self.scale = int_arg("SRCNN", "scale", scale)
        num_in_ch = int_arg("SRCNN", "num_in_ch", num_in_ch)
        num_out_ch = int_arg("SRCNN", "num_out_ch", num_out_ch)
        f1, f2 = int_list("SRCNN", "num_feat", num_feat, 2)
        k1, k2, k3 = int_list("SRCNN", "kernel_size", kernel_size, 3, odd=True)
        # Bicubic like MATLAB's/PyTorch's default (a = -0.75, half-pixel centres); learnable-free.
        self.upsample = (nn.Upsample(scale_factor=self.scale, mode="bicubic", align_corners=False)
                         if upsample else nn.Identity())
        self.conv1 = nn.Conv2d(num_in_ch, f1, k1, padding=k1 // 2)
        self.conv2 = nn.Conv2d(f1, f2, k2, padding=k2 // 2)
        self.conv3 = nn.Conv2d(f2, num_out_ch, k3, padding=k3 // 2)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.upsample(x)
        x = conv_act(self.conv1, self.relu, x)  # the ReLUs fused into the convs (same values)
        x = conv_act(self.conv2, self.relu, x)
        return self.conv3(x)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """Widths and kernel sizes from conv1..conv3. The scale has no weight (the bicubic
        pre-upsampling): the caller gives it. Nor has `upsample`: True (srgrad's SRCNN upsamples
        inside the model) is assumed and said."""
        (f1, cin, k1, _), (f2, _, k2, _), (cout, _, k3, _) = (
            need(shapes, f"conv{i}.weight", 4) for i in (1, 2, 3))
        return {"scale": Unknown(1, "the bicubic pre-upsampling has no weights"), "num_in_ch": cin,
                "num_out_ch": cout, "num_feat": [f1, f2], "kernel_size": [k1, k2, k3],
                "upsample": Assumed(True, "srgrad's SRCNN upsamples inside the model (the paper "
                                          "feeds a pre-upsampled image: upsample=false)")}

    @staticmethod
    def card(spec: dict):
        """Three convolutions, at the HR size when it upsamples (then s^2 pixels per input pixel)."""
        s = spec["scale"] if spec["upsample"] else 1
        cin, cout, (f1, f2), (k1, k2, k3) = (spec["num_in_ch"], spec["num_out_ch"],
                                             spec["num_feat"], spec["kernel_size"])
        return image_card(s, cin, cout, conv(cin, f1, k1) + conv(f1, f2, k2) + conv(f2, cout, k3),
                          max(f1, f2, cin, cout) * s * s)
