"""DRUNet (Zhang et al., "Plug-and-Play Image Restoration with Deep Denoiser Prior", TPAMI 2021;
KAIR's models/network_unet.py UNetRes and DPIR's drunet_gray / drunet_color, as spandrel 0.4.2's
DRUNet architecture reads them): a denoiser at scale 1 told the noise level by a map. The input
is the image plus one channel holding sigma / 255 everywhere; a 3x3 conv (m_head) to nc[0]
features, three levels (nb residual blocks conv-act-conv, then a 2x2 stride-2 conv to the next
width), nb blocks at the bottom (m_body), three levels back (a 2x2 stride-2 transposed conv, the
level's skip added before it, nb blocks) and a 3x3 conv (m_tail) to out_nc, no biases anywhere.

The noise level is not in the file: `noise_level` (sigma on the 0..255 scale, default 15, KAIR's
main_test_drunet's and spandrel's) is a keyword, set by `--model-arg noise_level=25` in srgrad-infer
(a detected file says it assumed 15). The forward appends the map to the image as spandrel's call
does; an input that already has in_nc channels carries its own map as its last channel (KAIR's
training, a sigma per sample). As spandrel's size requirement, the input is padded at the bottom and
right to a multiple of 8 (reflection, then replication) and the output cropped back.

KAIR's other down / upsamplers: avgpool (a 2x2 average pool, then a 3x3 conv; maxpool has the same
keys, but its unpadded 3x3 conv breaks the skips' sizes, and spandrel reads such files as avgpool),
pixelshuffle (a 3x3 conv to 4x the features and a pixel shuffle) and upconv (nearest x2, then a 3x3
conv). Keys are KAIR's (m_head, m_down1..3.i.res.0/2, m_body.i.res.0/2, m_up3..1.0 and .i.res.*,
m_tail); as KAIR's `sequential`, a Sequential of one module is that module (nb 1: m_body.res.0).
"""
from __future__ import annotations

import framework.functional as F
from framework import nn
from framework.card import conv, image_card
from framework.check import choice, int_arg, int_list, number
from framework.detect import Assumed, NoMatch, count, need
from framework.registry import MODELS

from ._blocks import kair_unet, pad_to_requirement
from ._kair import ACT_MODES, ResBlock, check_samplers, down, sequential, up

_MULTIPLE = 8  # spandrel's SizeRequirements(multiple_of=8): three 2x downsamplings


@MODELS.register()
class DRUNet(nn.Module):
    """DRUNet: (N, in_nc - 1, H, W) (the image; or (N, in_nc, H, W) with its own noise map last)
    -> (N, out_nc, H, W), any H, W >= 1.

    Args:
        in_nc: the network's input channels, the image's plus the noise map (KAIR's keyword):
            default 4 (drunet_color; drunet_gray: 2; KAIR's UNetRes defaults to 1, a network of
            the map alone, which srgrad refuses).
        out_nc: output channels, default 3.
        nc: the features of the four levels, default [64, 128, 256, 512].
        nb: residual blocks per level, default 4 (>= 1).
        act_mode: "R" (ReLU, default: every published model) or "L" (LeakyReLU 0.2).
        downsample_mode: "strideconv" (default) or "avgpool".
        upsample_mode: "convtranspose" (default), "pixelshuffle" or "upconv".
        noise_level: the map's sigma on the 0..255 scale, default 15 (>= 0).
        scale: 1 (a restoration network: srgrad's configs and commands pass their scale).
    """

    def __init__(self, in_nc: int = 4, out_nc: int = 3, nc=(64, 128, 256, 512), nb: int = 4,
                 act_mode: str = "R", downsample_mode: str = "strideconv",
                 upsample_mode: str = "convtranspose", noise_level: float = 15.0, scale: int = 1):
        super().__init__()
        name = "DRUNet"
        self.in_nc = int_arg(name, "in_nc", in_nc, 2)
        out_nc = int_arg(name, "out_nc", out_nc)
        nc = int_list(name, "nc", nc, length=4)
        nb = int_arg(name, "nb", nb)
        choice(name, "act_mode", act_mode, tuple(ACT_MODES))
        check_samplers(name, downsample_mode, upsample_mode)
        self.noise_level = number(name, "noise_level", noise_level, low=0)
        if int_arg(name, "scale", scale) != 1:
            raise ValueError(f"{name}: scale must be 1 (a restoration network: the output has the "
                             f"input's size), got {scale}")
        self.scale = 1

        def blocks(c):
            return [ResBlock(c, act_mode) for _ in range(nb)]
        self.m_head = nn.Conv2d(self.in_nc, nc[0], 3, padding=1, bias=False)
        self.m_down1 = sequential(*blocks(nc[0]), *down(nc[0], nc[1], downsample_mode))
        self.m_down2 = sequential(*blocks(nc[1]), *down(nc[1], nc[2], downsample_mode))
        self.m_down3 = sequential(*blocks(nc[2]), *down(nc[2], nc[3], downsample_mode))
        self.m_body = sequential(*blocks(nc[3]))
        self.m_up3 = sequential(*up(nc[3], nc[2], upsample_mode), *blocks(nc[2]))
        self.m_up2 = sequential(*up(nc[2], nc[1], upsample_mode), *blocks(nc[1]))
        self.m_up1 = sequential(*up(nc[1], nc[0], upsample_mode), *blocks(nc[0]))
        self.m_tail = nn.Conv2d(nc[0], out_nc, 3, padding=1, bias=False)

    def forward(self, image):
        c = image.shape[1]
        if c not in (self.in_nc - 1, self.in_nc):
            raise ValueError(f"DRUNet: expected an image of {self.in_nc - 1} channels (in_nc "
                             f"{self.in_nc} less the noise map; or {self.in_nc} with its own map "
                             f"last), got {c}")
        x0 = pad_to_requirement(image, 0, _MULTIPLE)
        if c == self.in_nc - 1:
            # sigma / 255 everywhere, padding included (spandrel's call builds the map at the
            # padded size); made from the input, not as a constant of its shape, so an exported
            # ONNX graph keeps dynamic sizes
            level = x0[:, :1] * 0.0 + self.noise_level / 255.0
            x0 = F.cat([x0, level], axis=1)
        return F.crop_to(kair_unet(self, x0), image)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: in_nc, nc[0] from m_head, out_nc from m_tail, nb counted (m_body's
        blocks; one block is m_body itself), downsample_mode strideconv when m_down1's conv follows
        the blocks directly (else avgpool: a pool between them), upsample_mode upconv when m_up3.1
        is a conv, pixelshuffle when m_up3.0 is a 3x3 conv, else convtranspose; the widths from
        the down convs (spandrel reads them from the blocks). act_mode "R" (no weights tell it;
        every KAIR model, spandrel's assumption); noise_level is not in the file: 15, said."""
        nc0, in_nc = need(shapes, "m_head.weight", 4)[:2]
        out_nc = need(shapes, "m_tail.weight", 4)[0]
        nb = 1 if "m_body.res.0.weight" in shapes else count(shapes, "m_body", ".res.0.weight")
        if nb == 0:
            raise NoMatch("no residual block in m_body")
        need(shapes, "m_down1.0.res.0.weight")  # the blocks and the downsampler: a Sequential
        down = "strideconv" if f"m_down1.{nb}.weight" in shapes else "avgpool"
        at = nb if down == "strideconv" else nb + 1
        nc = [nc0] + [need(shapes, f"m_down{i}.{at}.weight", 4)[0] for i in (1, 2, 3)]
        if "m_up3.1.weight" in shapes:
            up = "upconv"
        elif need(shapes, "m_up3.0.weight", 4)[2] == 3:
            up = "pixelshuffle"
        else:
            up = "convtranspose"
        return {"in_nc": in_nc, "out_nc": out_nc, "nc": nc, "nb": nb,
                "act_mode": Assumed("R", "the activation has no weights: ReLU, as every KAIR DRUNet "
                                         "(spandrel assumes it too)", quiet=True),
                "downsample_mode": down, "upsample_mode": up,
                "noise_level": Assumed(15.0, "the noise level (sigma of 255) the map tells the "
                                             "network is not in the file: KAIR's and spandrel's "
                                             "default"),
                "scale": 1}

    @staticmethod
    def card(spec: dict):
        """m_head, per level i nb blocks (two bias-free 3x3 convs on nc[i]) down and up, the
        down conv (2x2, or a 3x3 after the pool) and the up conv (2x2 transposed, a 3x3 to 4x for
        the shuffle, or a 3x3 after nearest), m_body's nb blocks, m_tail. The input is the image
        without the map (in_nc - 1 channels) padded to a multiple of 8; the largest activation per
        padded pixel: nc[i] / 4^i features at level i, nc[i + 1] / 4^i after upconv's nearest."""
        nc, nb, cin, cout = list(spec["nc"]), spec["nb"], spec["in_nc"], spec["out_nc"]
        down, up = spec["downsample_mode"], spec["upsample_mode"]
        total = conv(cin, nc[0], 3, bias=False) + conv(nc[0], cout, 3, bias=False)
        # nb blocks down and nb up at levels 0-2, nb at the bottom; two convs each
        total += 2 * nb * (2 * sum(conv(c, c, 3, bias=False) for c in nc[:3])
                           + conv(nc[3], nc[3], 3, bias=False))
        for a, b in zip(nc[:3], nc[1:]):
            total += conv(a, b, 2 if down == "strideconv" else 3, bias=False)
            total += conv(b, 4 * a, 3, bias=False) if up == "pixelshuffle" else \
                conv(b, a, 2 if up == "convtranspose" else 3, bias=False)
        per_pixel = [-(-c // 4 ** i) for i, c in enumerate(nc)]
        if up == "upconv":
            per_pixel += [-(-nc[i + 1] // 4 ** i) for i in range(3)]
        return image_card(1, cin - 1, cout, total, max(cin, cout, *per_pixel), pads_to=_MULTIPLE,
                          channel_keys=("in_nc", "out_nc"), key_extra_in=1)
