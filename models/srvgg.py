"""SRVGGNetCompact (Wang et al., Real-ESRGAN, 2021; basicsr/archs/srvgg_arch.py, the model behind
realesr-general-x4v3 and realesr-animevideov3): a plain stack of 3x3 convolutions with activations,
all at the LR size, a last convolution to num_out_ch * scale^2 channels, a pixel shuffle, plus the
nearest-upsampled input, so the network learns the residual. No convolution on HR features: the
model CPU users deploy. Parameter names are BasicSR's (body.0, body.1, ...), so its weights load."""
from __future__ import annotations

import framework.functional as F
from framework import nn
from framework.check import choice, int_arg
from framework.registry import MODELS
from framework.card import conv, image_card

from ._blocks import default_init_weights
from framework.detect import NoMatch, Unknown, indices, need, split_shuffle

_ACTIVATIONS = ("relu", "prelu", "leakyrelu")
_INITS = ("torch", "kaiming")
_SLOPES = {"relu": 0.0, "prelu": 0.25, "leakyrelu": 0.1}  # the negative slope at initialisation


def _activation(act_type: str, num_feat: int) -> nn.Module:
    if act_type == "prelu":
        return nn.PReLU(num_parameters=num_feat)
    if act_type == "leakyrelu":
        return nn.LeakyReLU(negative_slope=0.1)
    return nn.ReLU()


@MODELS.register()
class SRVGGNetCompact(nn.Module):
    """SRVGGNetCompact: (N, C, h, w) -> (N, C, h*scale, w*scale).

    body = [conv(C -> F), act] + num_conv x [conv(F -> F), act] + [conv(F -> C*scale^2)], then
    pixel_shuffle(scale) + interpolate(x, scale, "nearest").

    Args:
        num_in_ch, num_out_ch: image channels, default 3; equal (the output adds the input).
        num_feat: features, default 64.
        num_conv: 3x3 convolutions between the first and the last, default 16 (realesr-general-x4v3:
            32, realesr-animevideov3: 16).
        scale: upscaling factor, any integer >= 1 (the pixel-shuffle factor), default 4.
        act_type: "prelu" (one slope per feature, default), "relu" or "leakyrelu" (slope 0.1).
        init: "torch" (default: PyTorch's layer init, as BasicSR's arch) or "kaiming" (srgrad's:
            kaiming_normal_ for the activation's slope, zero biases, the last convolution scaled by
            0.1). With torch's init each conv + activation shrinks the signal's variance about five
            times, so a deep stack (num_conv 16) starts blind to its input; L1 then drives the last
            convolution to zero (the output = the nearest-upsampled input) and training from
            scratch stalls there for hundreds of iterations. Kaiming keeps the signal's scale through
            the stack and the small last layer starts the residual near zero: use it to train from
            scratch (loading weights replaces either).
    """

    def __init__(self, num_in_ch: int = 3, num_out_ch: int = 3, num_feat: int = 64, num_conv: int = 16,
                 scale: int = 4, act_type: str = "prelu", init: str = "torch"):
        super().__init__()
        name = "SRVGGNetCompact"
        self.scale = int_arg(name, "scale", scale)
        num_in_ch = int_arg(name, "num_in_ch", num_in_ch)
        num_out_ch = int_arg(name, "num_out_ch", num_out_ch)
        num_feat = int_arg(name, "num_feat", num_feat)
        num_conv = int_arg(name, "num_conv", num_conv, 0)
        self.act_type = choice(name, "act_type", act_type, _ACTIVATIONS)
        if num_in_ch != num_out_ch:
            raise ValueError(f"{name}: the nearest-upsampled input is added to the output, so "
                             f"num_in_ch == num_out_ch is needed, got {num_in_ch} and {num_out_ch}")
        layers = [nn.Conv2d(num_in_ch, num_feat, 3, padding=1), _activation(self.act_type, num_feat)]
        for _ in range(num_conv):
            layers += [nn.Conv2d(num_feat, num_feat, 3, padding=1), _activation(self.act_type, num_feat)]
        layers.append(nn.Conv2d(num_feat, num_out_ch * self.scale ** 2, 3, padding=1))
        self.body = nn.ModuleList(layers)
        self.upsampler = nn.PixelShuffle(self.scale)
        if choice(name, "init", init, _INITS) == "kaiming":
            default_init_weights(layers[:-1], nonlinearity="leaky_relu", a=_SLOPES[self.act_type])
            default_init_weights(layers[-1], scale=0.1, nonlinearity="leaky_relu",
                                 a=_SLOPES[self.act_type])

    def forward(self, x):
        out = x
        for layer in self.body:
            out = layer(out)
        out = self.upsampler(out)
        return out + F.interpolate(x, scale_factor=self.scale, mode="nearest")

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """Convolutions at body.0, body.2, ...; PReLU slopes at the odd indices when act_type is
        prelu. ReLU and LeakyReLU have no weights: the caller says which (act_type)."""
        feat, num_in_ch = need(shapes, "body.0.weight", 4)[:2]
        convs = [i for i in indices(shapes, "body") if len(shapes.get(f"body.{i}.weight", ())) == 4]
        n = len(convs)
        if n < 2 or convs != list(range(0, 2 * n, 2)):
            raise NoMatch(f"convolutions at body.{convs} are not body.0, body.2, ... (two or more)")
        last = need(shapes, f"body.{2 * (n - 1)}.weight", 4)[0]
        num_out_ch, scale = split_shuffle(last, num_in_ch, {**known, "num_out_ch": num_in_ch},
                                          "SRVGGNetCompact")
        if "body.1.weight" in shapes:
            act = "prelu"
        else:
            act = known.get("act_type", Unknown("relu", "ReLU and LeakyReLU have no weights",
                                                ("relu", "leakyrelu")))
        return {"num_in_ch": num_in_ch, "num_out_ch": num_out_ch, "num_feat": feat,
                "num_conv": n - 2, "scale": scale, "act_type": act}

    @staticmethod
    def card(spec: dict):
        """num_conv + 2 convs at the LR size (a PReLU slope per feature after all but the last),
        the last to num_out_ch scale^2 channels."""
        s, cin, cout, f, n = (spec[k] for k in ("scale", "num_in_ch", "num_out_ch", "num_feat",
                                                "num_conv"))
        slopes = (n + 1) * f if spec["act_type"] == "prelu" else 0
        return image_card(s, cin, cout, conv(cin, f) + n * conv(f, f) + conv(f, cout * s * s) + slopes,
                          max(f, cin, cout * s * s))
