"""RRDBNet (Wang et al., "ESRGAN: Enhanced Super-Resolution Generative Adversarial Networks", ECCVW
2018; basicsr/archs/rrdbnet_arch.py): the generator of ESRGAN and Real-ESRGAN x4plus. conv_first ->
num_block residual-in-residual dense blocks (three 5-conv dense blocks each, residuals scaled by
0.2) -> conv_body + long skip -> (nearest x2 -> conv -> LeakyReLU(0.2)) per factor 2 -> conv_hr ->
conv_last. BasicSR's x2 and x1 models pixel-unshuffle the input first (by 2 or 4), so the body runs
at 1/4 of the output size with two x2 stages; the original ESRGAN repository's models (and
spandrel's) have no unshuffle and 0 to 3 stages for x1 to x8 (`shuffle_factor`), and ESRGAN+ adds a
1x1 skip in each dense block (`plus`). Parameter names and init are BasicSR's (the dense blocks'
convs: kaiming normal x 0.1); the published files in the original ESRGAN repository's key layouts
load through `RRDBNet.layouts`."""
from __future__ import annotations

import math

import framework.functional as F
from framework import nn
from framework.nn.conv import conv_act
from framework.check import choice, flag, int_arg
from framework.registry import MODELS
from framework.card import conv, image_card

from ._blocks import default_init_weights, make_layer
from framework.detect import Layout, NoMatch, count, indices, need

# BasicSR's pixel-unshuffle factor in front of the body for each scale (two x2 stages then give
# it); any other scale has none
_UNSHUFFLE = {4: 1, 2: 2, 1: 4}


# -- the original ESRGAN repository's key layouts ------------------------------------------------------
_RDB = r"RDB([123])\.(conv[1-5]|conv1x1)"


def _sequential_rules(shapes: dict) -> list:
    """The first ESRGAN code's (and old BasicSR's) flat Sequential: model.0 conv_first, model.1 a
    shortcut around sub.0..sub.{n-1} (the RRDBs) and sub.{n} (conv_body), then per x2 stage
    (Upsample, conv, LeakyReLU), then conv_hr, LeakyReLU, conv_last: 5 + 3 per stage entries."""
    top = max(indices(shapes, "model"))
    if (top + 1 - 5) % 3 or top < 4:
        raise NoMatch(f"model.* has {top + 1} entries: not 5 + 3 per x2 upsampling")
    body = max(indices(shapes, "model.1.sub"))
    rules = [(r"model\.0\.(weight|bias)", r"conv_first.\1"),
             (rf"model\.1\.sub\.{body}\.(weight|bias)", r"conv_body.\1"),
             (rf"model\.1\.sub\.(\d+)\.{_RDB}(?:\.0)?\.(weight|bias)", r"body.\1.rdb\2.\3.\4")]
    rules += [(rf"model\.{3 * k}\.(weight|bias)", rf"conv_up{k}.\1")
              for k in range(1, (top + 1 - 5) // 3 + 1)]
    return rules + [(rf"model\.{top - 2}\.(weight|bias)", r"conv_hr.\1"),
                    (rf"model\.{top}\.(weight|bias)", r"conv_last.\1")]


ESRGAN_LAYOUTS = (
    Layout("the original ESRGAN repository's first layout (model.N)",
           "RRDB_ESRGAN_x4.pth as first released, and the community's 4x_/2x_/1x_ ESRGAN "
           "files (4x-UltraSharp.pth)", ("model.0.weight", "model.1.sub.0.RDB1.conv1.0.weight"),
           _sequential_rules),
    Layout("the later ESRGAN / BSRGAN / RealSR layout (RRDB_trunk)",
           "RRDB_ESRGAN_x4.pth as xinntao/ESRGAN ships it now, BSRGAN.pth, RealSR's DF2K.pth",
           ("conv_first.weight", "RRDB_trunk.0.RDB1.conv1.weight", "trunk_conv.weight"),
           [(rf"RRDB_trunk\.(\d+)\.{_RDB}\.(weight|bias)", r"body.\1.rdb\2.\3.\4"),
            (r"trunk_conv\.(weight|bias)", r"conv_body.\1"),
            (r"upconv(\d+)\.(weight|bias)", r"conv_up\1.\2"),
            (r"HRconv\.(weight|bias)", r"conv_hr.\1")]),
)


class ResidualDenseBlock(nn.Module):
    """(N, F, H, W) -> same: five 3x3 convs, each seeing the input and every earlier output
    (F + i*G channels -> G, the last -> F), LeakyReLU(0.2) between; returns x5 * 0.2 + x. With
    `plus` (ESRGAN+), x2 += conv1x1(x) (a 1x1 conv F -> G without bias) and x4 += x2."""

    def __init__(self, num_feat: int = 64, num_grow_ch: int = 32, plus: bool = False):
        super().__init__()
        for i in range(4):
            conv = nn.Conv2d(num_feat + i * num_grow_ch, num_grow_ch, 3, padding=1)
            setattr(self, f"conv{i + 1}", conv)
        self.conv5 = nn.Conv2d(num_feat + 4 * num_grow_ch, num_feat, 3, padding=1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2)
        default_init_weights([self.conv1, self.conv2, self.conv3, self.conv4, self.conv5], 0.1)
        if plus:  # ESRGAN+'s residual path (torch's default init, as there)
            self.conv1x1 = nn.Conv2d(num_feat, num_grow_ch, 1, bias=False)

    def forward(self, x):
        feats = [x]
        for i, conv in enumerate((self.conv1, self.conv2, self.conv3, self.conv4)):
            out = conv_act(conv, self.lrelu, F.cat(feats, axis=1))  # LeakyReLU fused
            if "conv1x1" in self._modules and i == 1:
                out = out + self.conv1x1(x)
            elif "conv1x1" in self._modules and i == 3:
                out = out + feats[2]
            feats.append(out)
        return self.conv5(F.cat(feats, axis=1)) * 0.2 + x


class RRDB(nn.Module):
    """Residual in residual dense block: rdb3(rdb2(rdb1(x))) * 0.2 + x on (N, F, H, W)."""

    def __init__(self, num_feat: int, num_grow_ch: int = 32, plus: bool = False):
        super().__init__()
        self.rdb1 = ResidualDenseBlock(num_feat, num_grow_ch, plus)
        self.rdb2 = ResidualDenseBlock(num_feat, num_grow_ch, plus)
        self.rdb3 = ResidualDenseBlock(num_feat, num_grow_ch, plus)

    def forward(self, x):
        return self.rdb3(self.rdb2(self.rdb1(x))) * 0.2 + x


@MODELS.register()
class RRDBNet(nn.Module):
    """RRDBNet: (N, num_in_ch, h, w) -> (N, num_out_ch, h*scale, w*scale). With a pixel unshuffle
    (shuffle_factor > 1), sides that are not multiples of it are reflect-padded and the output
    cropped (what Real-ESRGAN's inference does around BasicSR's model, which refuses such sizes).

    Args:
        num_in_ch, num_out_ch: image channels (default 3: BasicSR requires them, srgrad does not).
        scale: 4 (default), 2, 1, 8 or another power of two.
        num_feat: features, default 64.
        num_block: RRDB blocks, default 23.
        num_grow_ch: channels each dense-block conv adds, default 32.
        init: "torch" (default: BasicSR's: torch's layer init outside the dense blocks) or "kaiming"
            (srgrad's: those convs kaiming_normal_ for the LeakyReLU, zero biases, conv_last x 0.1;
            the dense blocks keep BasicSR's 0.1-scaled init either way). Torch's init shrinks the
            signal ~40x over the five convs from input to output; kaiming keeps its scale. (On the
            bundled images it changed little: docs/benchmarks.md. Loading weights replaces either.)
        shuffle_factor: pixel-unshuffle of the input (spandrel's keyword): None (default) is
            BasicSR's, 4 // scale at x1 and x2 (then two x2 stages), none at x4 and above; 1 is the
            original ESRGAN repository's models at any scale (log2(scale) stages, conv_up1...).
            scale * shuffle_factor must be a power of two: log2 of it is the number of x2 stages.
        plus: ESRGAN+'s dense blocks (a 1x1 skip each: conv1x1), default False.
    """

    layouts = ESRGAN_LAYOUTS

    def __init__(self, num_in_ch: int = 3, num_out_ch: int = 3, scale: int = 4, num_feat: int = 64,
                 num_block: int = 23, num_grow_ch: int = 32, init: str = "torch",
                 shuffle_factor: int | None = None, plus: bool = False):
        super().__init__()
        name = "RRDBNet"
        self.scale = int_arg(name, "scale", scale)
        num_in_ch = int_arg(name, "num_in_ch", num_in_ch)
        num_out_ch = int_arg(name, "num_out_ch", num_out_ch)
        num_feat = int_arg(name, "num_feat", num_feat)
        num_block = int_arg(name, "num_block", num_block, 0)
        num_grow_ch = int_arg(name, "num_grow_ch", num_grow_ch)
        self.unshuffle = _UNSHUFFLE.get(self.scale, 1) if shuffle_factor is None else \
            int_arg(name, "shuffle_factor", shuffle_factor)
        stages = self.scale * self.unshuffle
        if stages & (stages - 1):
            raise ValueError(f"{name}: scale {self.scale} x shuffle_factor {self.unshuffle} = "
                             f"{stages} is not a power of two (the upsampling is x2 stages)")
        plus = flag(name, "plus", plus)
        self.conv_first = nn.Conv2d(num_in_ch * self.unshuffle ** 2, num_feat, 3, padding=1)
        self.body = make_layer(RRDB, num_block, num_feat=num_feat, num_grow_ch=num_grow_ch,
                               plus=plus)
        self.conv_body = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.ups = []
        for i in range(stages.bit_length() - 1):
            setattr(self, f"conv_up{i + 1}", nn.Conv2d(num_feat, num_feat, 3, padding=1))
            self.ups.append(f"conv_up{i + 1}")
        self.conv_hr = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, padding=1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2)
        if choice(name, "init", init, ("torch", "kaiming")) == "kaiming":
            trunk = [self.conv_first, self.conv_body, *(getattr(self, u) for u in self.ups),
                     self.conv_hr]
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
        for up in self.ups:
            feat = conv_act(getattr(self, up), self.lrelu,
                            F.interpolate(feat, scale_factor=2, mode="nearest"))
        out = self.conv_last(conv_act(self.conv_hr, self.lrelu, feat))
        return F.crop_to(out, image, self.scale) if self.unshuffle > 1 else out

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """The x2 stages from conv_up1, conv_up2, ...; the unshuffle u from conv_first's input
        channels (num_in_ch * u^2) as spandrel reads it: a given shuffle_factor, scale or num_in_ch
        decides, else u = 2 or 4 when they are 4 or 16 times conv_last's outputs (BasicSR's x2 and
        x1: RGB 12 -> x2, 48 -> x1), else 1; scale = 2^stages / u. num_grow_ch is conv1's output
        (32 when there are no blocks); plus when the blocks have conv1x1."""
        feat, first_in = need(shapes, "conv_first.weight", 4)[:2]
        need(shapes, "conv_body.weight", 4)
        need(shapes, "conv_hr.weight", 4)
        out = need(shapes, "conv_last.weight", 4)[0]
        stages = 0
        while f"conv_up{stages + 1}.weight" in shapes:
            stages += 1
        num_block = count(shapes, "body", ".rdb1.conv1.weight")
        grow = need(shapes, "body.0.rdb1.conv1.weight", 4)[0] if num_block else \
            known.get("num_grow_ch", 32)
        given = {k: known[k] for k in ("shuffle_factor", "scale", "num_in_ch")
                 if isinstance(known.get(k), int) and known[k] >= 1}
        if "shuffle_factor" in given:
            u = given["shuffle_factor"]
        elif "scale" in given:
            u = (2 ** stages) // given["scale"]
        elif "num_in_ch" in given:
            u = math.isqrt(first_in // given["num_in_ch"])
        else:
            u = {4 * out: 2, 16 * out: 4}.get(first_in, 1)
        if u < 1 or (2 ** stages) % u or first_in % (u * u) \
                or ("num_in_ch" in given and first_in != given["num_in_ch"] * u * u):
            raise NoMatch(f"conv_first sees {first_in} channels and there are {stages} x2 "
                          f"stages: no pixel unshuffle fits {given or 'them'}")
        scale = (2 ** stages) // u
        found = {"num_in_ch": first_in // (u * u), "num_out_ch": out, "scale": scale,
                 "num_feat": feat, "num_block": num_block, "num_grow_ch": grow}
        if u != _UNSHUFFLE.get(scale, 1):
            found["shuffle_factor"] = u
        if num_block and "body.0.rdb1.conv1x1.weight" in shapes:
            found["plus"] = True
        return found

    @staticmethod
    def card(spec: dict):
        """conv_first (on the unshuffled input), num_block RRDBs (three dense blocks of five convs),
        conv_body, a conv per x2 stage, conv_hr and conv_last at the HR size. With an unshuffle u
        the input is padded to a multiple of u."""
        s, cin, cout, f, n, g = (spec[k] for k in ("scale", "num_in_ch", "num_out_ch", "num_feat",
                                                   "num_block", "num_grow_ch"))
        u = _UNSHUFFLE.get(s, 1) if spec["shuffle_factor"] is None else spec["shuffle_factor"]
        stages = (s * u).bit_length() - 1
        rdb = (sum(conv(f + i * g, g) for i in range(4)) + conv(f + 4 * g, f)
               + (conv(f, g, 1, bias=False) if spec["plus"] else 0))
        params = conv(cin * u * u, f) + 3 * n * rdb + conv(f, f) + stages * conv(f, f) + \
            conv(f, f) + conv(f, cout)
        # the dense block's concatenation at 1/u of the size, the HR features
        act = max(-(-(f + 4 * g) // (u * u)), max(f, cin, cout) * s * s)
        return image_card(s, cin, cout, params, act, pads_to=u)
