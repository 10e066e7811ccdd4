"""DnCNN (Zhang et al., "Beyond a Gaussian Denoiser: Residual Learning of Deep CNN for Image
Denoising", TIP 2017) and FDnCNN (its noise-map variant, after FFDNet, TIP 2018): KAIR's
models/network_dncnn.py as spandrel 0.4.2's DnCNN architecture reads it. A plain stack of nb 3x3
convs on nc features at scale 1: the head conv + activation, nb - 2 body convs each followed by
batch norm (act_mode "BR") and the activation, the tail conv. DnCNN learns the noise: its output is
the input minus the stack's (residual learning, in_nc == out_nc); FDnCNN's input is the image plus
one channel holding sigma / 255 everywhere and its output is the stack's (no residual).

The published files (KAIR's model zoo): dncnn_15 / 25 / 50 (gray, nb 17, BR), dncnn_gray_blind,
dncnn_color_blind and dncnn3 (nb 20, BR), fdncnn_gray / color (and _clip; nb 20, act_mode "R",
in_nc = out_nc + 1). Keys are KAIR's Sequential's: model.0 (head conv), model.1 (activation), then
per body layer a conv, a BatchNorm2d (momentum 0.9, eps 1e-4, KAIR's) and an activation, the tail
conv last.

FDnCNN's noise level is not in the file: `noise_level` (sigma on the 0..255 scale, default 15,
spandrel's call and KAIR's test) is a keyword, set by `--model-arg noise_level=25` in srgrad-infer
(a detected file says it assumed 15); an input that already has in_nc channels carries its own map
as its last channel (KAIR's training). KAIR's IRCNN (7 dilated convs) has the keys of a 7-layer
DnCNN but not its dilations: spandrel does not read it, and neither does srgrad (its rule needs
spandrel's keys, so such a file is refused, never run undilated).
"""
from __future__ import annotations

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, norm
from framework.check import choice, int_arg, number
from framework.detect import Assumed, NoMatch, indices, need
from framework.registry import MODELS

from ._kair import ACT_MODES

ACT_MODE_NAMES = ("BR", "R", "BL", "L")  # KAIR's letters: B batch norm, R ReLU, L LeakyReLU 0.2
MODES = ("DnCNN", "FDnCNN")
# spandrel 0.4.2's KeyCondition: the keys a file of each activation mode must have
_SPANDREL_R = tuple(f"model.{i}.{p}" for i in range(4, 15, 2) for p in ("weight", "bias"))
_SPANDREL_BR = ("model.3.weight", "model.3.bias", "model.3.running_mean", "model.3.running_var",
                "model.5.weight", "model.5.bias", "model.6.weight", "model.6.bias",
                "model.6.running_mean", "model.6.running_var", "model.8.weight", "model.8.bias")


def _layer(cin: int, cout: int, act_mode: str) -> list:
    """KAIR's conv(cin, cout, mode='C' + act_mode): the conv (bias), a BatchNorm2d when act_mode
    has B, the activation."""
    out = [nn.Conv2d(cin, cout, 3, padding=1)]
    if act_mode.startswith("B"):
        out.append(nn.BatchNorm2d(cout, eps=1e-4, momentum=0.9))
    return out + [ACT_MODES[act_mode[-1]]()]


@MODELS.register()
class DnCNN(nn.Module):
    """DnCNN: (N, in_nc, H, W) -> (N, out_nc, H, W); FDnCNN: (N, in_nc - 1, H, W) (the image; or
    (N, in_nc, H, W) with its own noise map last) -> (N, out_nc, H, W). Any H, W >= 1.

    Args:
        in_nc: input channels, default 1 (KAIR's; FDnCNN: the image's plus the map).
        out_nc: output channels, default 1.
        nc: features, default 64.
        nb: convolutions in all (head, nb - 2 body layers, tail), default 17 (>= 2; the blind
            and dncnn3 models 20).
        act_mode: "BR" (batch norm + ReLU in the body, default: every DnCNN of KAIR's zoo), "R"
            (ReLU, FDnCNN's), "BL" or "L" (LeakyReLU 0.2). The head's activation is the last letter.
        mode: "DnCNN" (default: output = input - stack, in_nc == out_nc) or "FDnCNN" (the noise
            map appended, output = stack; spandrel's keyword).
        noise_level: FDnCNN's map, sigma on the 0..255 scale, default 15 (>= 0).
        scale: 1 (a restoration network: srgrad's configs and commands pass their scale).
    """

    def __init__(self, in_nc: int = 1, out_nc: int = 1, nc: int = 64, nb: int = 17,
                 act_mode: str = "BR", mode: str = "DnCNN", noise_level: float = 15.0,
                 scale: int = 1):
        super().__init__()
        name = "DnCNN"
        self.in_nc = int_arg(name, "in_nc", in_nc)
        out_nc = int_arg(name, "out_nc", out_nc)
        nc = int_arg(name, "nc", nc)
        nb = int_arg(name, "nb", nb, 2)
        choice(name, "act_mode", act_mode, ACT_MODE_NAMES)
        self.mode = choice(name, "mode", mode, MODES)
        if mode == "DnCNN" and self.in_nc != out_nc:
            raise ValueError(f"{name}: mode 'DnCNN' subtracts the stack from its input, so in_nc "
                             f"must equal out_nc, got {self.in_nc} and {out_nc} (a noise-map "
                             f"network: mode 'FDnCNN')")
        if mode == "FDnCNN" and self.in_nc < 2:
            raise ValueError(f"{name}: mode 'FDnCNN' takes the image plus its noise map, so in_nc "
                             f"must be >= 2, got {self.in_nc}")
        self.noise_level = number(name, "noise_level", noise_level, low=0)
        if int_arg(name, "scale", scale) != 1:
            raise ValueError(f"{name}: scale must be 1 (a restoration network: the output has the "
                             f"input's size), got {scale}")
        self.scale = 1
        layers = _layer(self.in_nc, nc, act_mode[-1])
        for _ in range(nb - 2):
            layers += _layer(nc, nc, act_mode)
        self.model = nn.Sequential(*layers, nn.Conv2d(nc, out_nc, 3, padding=1))

    def forward(self, x):
        if self.mode == "DnCNN":
            return x - self.model(x)
        c = x.shape[1]
        if c not in (self.in_nc - 1, self.in_nc):
            raise ValueError(f"DnCNN (FDnCNN): expected an image of {self.in_nc - 1} channels "
                             f"(in_nc {self.in_nc} less the noise map; or {self.in_nc} with its own "
                             f"map last), got {c}")
        if c == self.in_nc - 1:
            # sigma / 255 everywhere (spandrel's call); made from the input so an exported ONNX
            # graph keeps dynamic sizes
            x = F.cat([x, x[:, :1] * 0.0 + self.noise_level / 255.0], axis=1)
        return self.model(x)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: model.0/.2 convs, then BR when model.3 has weights (its keys
        model.3/.6 batch norms, .5/.8 convs), else R (convs at model.4 ... model.14: at least 8);
        in_nc and nc from model.0, out_nc from the last layer, nb from the layer count; mode
        FDnCNN when in_nc != out_nc. The activation has no weights: ReLU (BR / R; LeakyReLU's files
        look the same; every KAIR model, spandrel's reading). FDnCNN's noise_level is not in the
        file: 15, said."""
        nc, in_nc = need(shapes, "model.0.weight", 4)[:2]
        for key in ("model.0.bias", "model.2.weight", "model.2.bias"):
            need(shapes, key)
        batch_norm = "model.3.weight" in shapes
        wanted = _SPANDREL_BR if batch_norm else _SPANDREL_R
        missing = [k for k in wanted if k not in shapes]
        if missing:
            raise NoMatch(f"no key {missing[0]!r} (spandrel's DnCNN rule: the keys of "
                          f"{'3' if batch_norm else '8'} or more layers; KAIR's IRCNN, 7 dilated "
                          f"convs, has a shorter stack and is not read)")
        layers = indices(shapes, "model")[-1] + 1
        per = 3 if batch_norm else 2
        if (layers - 3) % per:
            raise NoMatch(f"model.* has {layers} layers: not a head, body layers of {per} and a tail")
        out_nc = need(shapes, f"model.{layers - 1}.weight", 4)[0]
        act = "BR" if batch_norm else "R"
        found = {"in_nc": in_nc, "out_nc": out_nc, "nc": nc, "nb": (layers - 3) // per + 2,
                 "act_mode": Assumed(act, "the activation has no weights: ReLU, as every KAIR "
                                          "DnCNN (spandrel reads it so too)", quiet=True),
                 "mode": "DnCNN" if in_nc == out_nc else "FDnCNN", "scale": 1}
        if in_nc != out_nc:
            found["noise_level"] = Assumed(15.0, "the noise level (sigma of 255) the map tells "
                                                 "FDnCNN is not in the file: KAIR's and "
                                                 "spandrel's default")
        return found

    @staticmethod
    def card(spec: dict):
        """nb 3x3 convs with bias (in_nc -> nc, nb - 2 of nc -> nc, nc -> out_nc), a batch norm
        (2 nc parameters) after each body conv when act_mode has B. The image has in_nc - 1
        channels under FDnCNN; the largest activation per pixel is nc."""
        cin, cout, nc, nb = spec["in_nc"], spec["out_nc"], spec["nc"], spec["nb"]
        body = conv(nc, nc) + (norm(nc) if spec["act_mode"].startswith("B") else 0)
        total = conv(cin, nc) + (nb - 2) * body + conv(nc, cout)
        image = cin - 1 if spec["mode"] == "FDnCNN" else cin
        return image_card(1, image, cout, total, max(cin, cout, nc),
                          channel_keys=("in_nc", "out_nc"))
