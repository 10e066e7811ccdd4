"""RRDBNet (Wang et al., "ESRGAN: Enhanced Super-Resolution Generative Adversarial Networks", ECCVW
2018; basicsr/archs/rrdbnet_arch.py): the generator of ESRGAN and Real-ESRGAN x4plus. conv_first ->
num_block residual-in-residual dense blocks (three 5-conv dense blocks each, residuals scaled by
0.2) -> conv_body + long skip -> two (nearest x2 -> conv -> LeakyReLU(0.2)) -> conv_hr -> conv_last.
x2 and x1 models pixel-unshuffle the input first (by 2 or 4), so the body always runs at 1/4 of the
output size. Parameter names and init are BasicSR's (the dense blocks' convs: kaiming normal x 0.1)."""
from __future__ import annotations

import framework.functional as F
from framework import nn
from framework.nn.conv import conv_act
from framework.check import choice, int_arg
from framework.registry import MODELS

from ._blocks import default_init_weights, make_layer, supported_scale
from .detect import NoMatch, count, need

# The pixel-unshuffle factor in front of the body: the two x2 upsamplings then give `scale`.
_UNSHUFFLE = {4: 1, 2: 2, 1: 4}


class ResidualDenseBlock(nn.Module):
    """(N, F, H, W) -> same: five 3x3 convs, each seeing the input and every earlier output
    (F + i*G channels -> G, the last -> F), LeakyReLU(0.2) between; returns x5 * 0.2 + x."""

    def __init__(self, num_feat: int = 64, num_grow_ch: int = 32):
        super().__init__()
        for i in range(4):
            conv = nn.Conv2d(num_feat + i * num_grow_ch, num_grow_ch, 3, padding=1)
            setattr(self, f"conv{i + 1}", conv)
        self.conv5 = nn.Conv2d(num_feat + 4 * num_grow_ch, num_feat, 3, padding=1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2)
        default_init_weights([self.conv1, self.conv2, self.conv3, self.conv4, self.conv5], 0.1)

    def forward(self, x):
        feats = [x]
        for conv in (self.conv1, self.conv2, self.conv3, self.conv4):
            feats.append(conv_act(conv, self.lrelu, F.cat(feats, axis=1)))  # LeakyReLU fused
        return self.conv5(F.cat(feats, axis=1)) * 0.2 + x


class RRDB(nn.Module):
    """Residual in residual dense block: rdb3(rdb2(rdb1(x))) * 0.2 + x on (N, F, H, W)."""

    def __init__(self, num_feat: int, num_grow_ch: int = 32):
        super().__init__()
        self.rdb1 = ResidualDenseBlock(num_feat, num_grow_ch)
        self.rdb2 = ResidualDenseBlock(num_feat, num_grow_ch)
        self.rdb3 = ResidualDenseBlock(num_feat, num_grow_ch)

    def forward(self, x):
        return self.rdb3(self.rdb2(self.rdb1(x))) * 0.2 + x


@MODELS.register()
class RRDBNet(nn.Module):
    """RRDBNet: (N, num_in_ch, h, w) -> (N, num_out_ch, h*scale, w*scale). At x2 / x1 sides that
    are not multiples of 2 / 4 are reflect-padded for the pixel unshuffle and the output cropped
    (what Real-ESRGAN's inference does around BasicSR's model, which refuses such sizes).

    Args:
        num_in_ch, num_out_ch: image channels (default 3: BasicSR requires them, srgrad does not).
        scale: 4 (default), 2 or 1.
        num_feat: features, default 64.
        num_block: RRDB blocks, default 23.
        num_grow_ch: channels each dense-block conv adds, default 32.
        init: "torch" (default: BasicSR's: torch's layer init outside the dense blocks) or "kaiming"
            (srgrad's: those convs kaiming_normal_ for the LeakyReLU, zero biases, conv_last x 0.1;
            the dense blocks keep BasicSR's 0.1-scaled init either way). Torch's init shrinks the
            signal ~40x over the five convs from input to output; kaiming keeps its scale. (On the
            bundled images it changed little: docs/benchmarks.md. Loading weights replaces either.)
    """

    def __init__(self, num_in_ch: int = 3, num_out_ch: int = 3, scale: int = 4, num_feat: int = 64,
                 num_block: int = 23, num_grow_ch: int = 32, init: str = "torch"):
        super().__init__()
        name = "RRDBNet"
        self.scale = supported_scale(name, scale, (1, 2, 4))
        num_in_ch = int_arg(name, "num_in_ch", num_in_ch)
        num_out_ch = int_arg(name, "num_out_ch", num_out_ch)
        num_feat = int_arg(name, "num_feat", num_feat)
        num_block = int_arg(name, "num_block", num_block, 0)
        num_grow_ch = int_arg(name, "num_grow_ch", num_grow_ch)
        self.unshuffle = _UNSHUFFLE[self.scale]
        self.conv_first = nn.Conv2d(num_in_ch * self.unshuffle ** 2, num_feat, 3, padding=1)
        self.body = make_layer(RRDB, num_block, num_feat=num_feat, num_grow_ch=num_grow_ch)
        self.conv_body = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv_up1 = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv_up2 = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv_hr = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, padding=1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2)
        if choice(name, "init", init, ("torch", "kaiming")) == "kaiming":
            trunk = [self.conv_first, self.conv_body, self.conv_up1, self.conv_up2, self.conv_hr]
            default_init_weights(trunk, nonlinearity="leaky_relu", a=0.2)
            default_init_weights(self.conv_last, 0.1, nonlinearity="leaky_relu", a=0.2)

    def forward(self, x):
        image = x
        if self.unshuffle > 1:
            # BasicSR's forward needs sides divisible by the unshuffle; Real-ESRGAN's inference pads
            # by reflection (bottom, right) and crops the output: the same here, inside the model
            # (one op whatever the size, so an exported graph stays dynamic)
            x = F.pixel_unshuffle(F.pad_to_multiple(x, self.unshuffle), self.unshuffle)
        feat = self.conv_first(x)
        feat = feat + self.conv_body(self.body(feat))
        feat = conv_act(self.conv_up1, self.lrelu, F.interpolate(feat, scale_factor=2, mode="nearest"))
        feat = conv_act(self.conv_up2, self.lrelu, F.interpolate(feat, scale_factor=2, mode="nearest"))
        out = self.conv_last(conv_act(self.conv_hr, self.lrelu, feat))
        return F.crop_to(out, image, self.scale) if self.unshuffle > 1 else out

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """conv_first sees num_in_ch * u^2 channels (u = 1, 2, 4 for x4, x2, x1): with num_in_ch ==
        num_out_ch that is 3 -> x4, 12 -> x2, 48 -> x1 for RGB; a given scale or num_in_ch decides
        otherwise. num_grow_ch is conv1's output (32 when there are no blocks)."""
        feat, first_in = need(shapes, "conv_first.weight", 4)[:2]
        need(shapes, "conv_up2.weight", 4)
        out = need(shapes, "conv_last.weight", 4)[0]
        num_block = count(shapes, "body", ".rdb1.conv1.weight")
        grow = need(shapes, "body.0.rdb1.conv1.weight", 4)[0] if num_block else 32
        if isinstance(known.get("scale"), int) and known["scale"] in _UNSHUFFLE:
            scale = known["scale"]
        elif isinstance(known.get("num_in_ch"), int) and known["num_in_ch"] >= 1:
            ratio = {u * u: s for s, u in _UNSHUFFLE.items()}.get(first_in / known["num_in_ch"])
            if ratio is None:
                raise NoMatch(f"conv_first sees {first_in} channels: not num_in_ch="
                              f"{known['num_in_ch']} times 1, 4 or 16")
            scale = ratio
        else:
            scale = {16 * out: 1, 4 * out: 2}.get(first_in, 4)
        u = _UNSHUFFLE[scale]
        if first_in % (u * u):
            raise NoMatch(f"conv_first sees {first_in} channels: not num_in_ch * {u * u} for x{scale}")
        return {"num_in_ch": first_in // (u * u), "num_out_ch": out, "scale": scale, "num_feat": feat,
                "num_block": num_block, "num_grow_ch": grow}
