"""MM-RealSR (Mou et al., "Metric Learning based Interactive Modulation for Real-World
Super-Resolution", ECCV 2022; TencentARC/MM-RealSR's MMRRDBNet_test, as spandrel 0.4.2's MMRealSR
reads it): ESRGAN's RRDBNet (models/rrdbnet.py's blocks) whose every RRDB is followed by an affine
modulation driven by degradation scores, which a small ResNet estimates from the image.

    de_net (DEResNet): per degradation i (0: blur, 1: noise; num_degradation of them)
        score_i = act(fc_degree.i(mean_hw(body.i(conv_first.i(x)))))     (N,), act: sigmoid
        body.i: per stage s num_blocks[s] ResidualBlockNoBN(num_feats[s]) (conv-ReLU-conv + x),
                then downscales[s] = 2: a 3x3 stride-2 conv to num_feats[s + 1] (the last
                stage's own width), or 1: a 3x3 conv to num_feats[s + 1] where the width changes
        fc_degree.i: Linear(num_feats[-1], 512), ReLU, Linear(512, 1)
    d = ReLU(dd_embed.0(stack(score_0, score_1, ...)))                   (N, 512)
    feat = conv_first(x); per block b: feat = RRDB_b(feat), then
        gamma, beta = split(am_list.b.fc(d), 2)   (fc: 512 -> h -> h -> 2 num_feat, ReLUs, h =
        (512 + 2 num_feat) // 2); feat = (1 + gamma) feat + beta   (per sample and channel)
    then RRDBNet's tail: conv_body + long skip, two (nearest x2, conv, LeakyReLU 0.2), conv_hr,
    LeakyReLU, conv_last.

The interactive part: `custom_degrees` replaces estimated scores, as the original's forward
argument of that name (its inference_mmrealsr.py passes (None, None): both estimated; its demo
sweeps one in [0, 1] with the other None): a list with an entry per degradation, each null (the
estimate) or a score in the activation's range ([0, 1] for sigmoid: 0 none, 1 the strongest seen in
training). `--model-arg custom_degrees=[0.3,null]` in srgrad-infer (blur 0.3, noise estimated).
The scores are per image (a mean over the whole input): tiles each estimate their own.

Only x4 runs: the original's x2 and x1 (a pixel unshuffle in front) build de_net for the
unshuffled channels but feed it the image, so its forward fails; srgrad refuses those keywords and
files. As spandrel's call, an input below 16 px is padded at the bottom and right to 16
(reflection, then replication) and the output cropped back. Init is BasicSR's: every conv and
linear of de_net, dd_embed, am_list and the dense blocks kaiming normal x 0.1 with zero biases,
torch's default elsewhere.
"""
from __future__ import annotations

import framework.functional as F
from framework import nn
from framework.card import conv, image_card, linear
from framework.check import choice, int_arg, int_list, number
from framework.detect import Assumed, NoMatch, count, need
from framework.nn.conv import conv_act
from framework.registry import MODELS

from ._blocks import ResidualBlockNoBN, default_init_weights, pad_to_requirement
from .rrdbnet import RRDB

EMBED = 512  # the degradation embedding's width (the original's "512 is real")
_MINIMUM = 16  # spandrel's SizeRequirements(minimum=16)
ACTIVATIONS = {"sigmoid": (nn.Sigmoid, (0.0, 1.0)), "tanh": (nn.Tanh, (-1.0, 1.0))}


def de_body(num_feats, num_blocks, downscales) -> list:
    """DEResNet's body as ("block", width) and ("conv", in, out, stride) entries, in order."""
    out, last = [], len(num_feats) - 1
    for s, (f, n, d) in enumerate(zip(num_feats, num_blocks, downscales)):
        out += [("block", f)] * n
        if d == 2:
            out.append(("conv", f, num_feats[min(s + 1, last)], 2))
        elif s < last and f != num_feats[s + 1]:
            out.append(("conv", f, num_feats[s + 1], 1))
    return out


class DEResNet(nn.Module):
    """The degradation estimator: (N, C, H, W) -> num_degradation scores of shape (N,)."""

    def __init__(self, num_in_ch, num_degradation, activation, num_feats, num_blocks, downscales):
        super().__init__()
        self.conv_first = nn.ModuleList([nn.Conv2d(num_in_ch, num_feats[0], 3, padding=1)
                                         for _ in range(num_degradation)])
        layout = de_body(num_feats, num_blocks, downscales)
        self.body = nn.ModuleList([nn.Sequential(*[
            ResidualBlockNoBN(e[1]) if e[0] == "block" else
            nn.Conv2d(e[1], e[2], 3, stride=e[3], padding=1) for e in layout])
            for _ in range(num_degradation)])
        act = ACTIVATIONS[activation][0]
        self.fc_degree = nn.ModuleList([nn.Sequential(
            nn.Linear(num_feats[-1], EMBED), nn.ReLU(), nn.Linear(EMBED, 1), act())
            for _ in range(num_degradation)])
        default_init_weights([self.conv_first, self.body, self.fc_degree], 0.1)

    def score(self, i: int, x):
        """Degradation i's score for each image of x: (N,)."""
        feat = F.mean(self.body[i](self.conv_first[i](x)), axis=(2, 3))
        return F.squeeze(self.fc_degree[i](feat), -1)

    def forward(self, x):
        return [self.score(i, x) for i in range(len(self.fc_degree))]


class AffineModulate(nn.Module):
    """(N, F, H, W) features and (N, 512) embedding -> (1 + gamma) x + beta, gamma and beta the
    two halves of fc(embedding) (N, 2F)."""

    def __init__(self, num_feat: int):
        super().__init__()
        hidden = (EMBED + 2 * num_feat) // 2
        self.fc = nn.Sequential(nn.Linear(EMBED, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                nn.ReLU(), nn.Linear(hidden, 2 * num_feat))
        default_init_weights([self.fc], 0.1)

    def forward(self, x, d):
        gamma, beta = F.chunk(F.unsqueeze(F.unsqueeze(self.fc(d), -1), -1), 2, dim=1)
        return x + gamma * x + beta


@MODELS.register()
class MMRealSR(nn.Module):
    """MM-RealSR's generator: (N, num_in_ch, h, w) in [0, 1] -> (N, num_out_ch, 4h, 4w).

    Args (the original MMRRDBNet_test's names and defaults; spandrel's MMRealSR):
        num_in_ch, num_out_ch: image channels, default 3.
        scale: 4 (the only one whose forward runs in the original; module docstring).
        num_feat: features, default 64. num_block: RRDBs (each with its modulation), default 23.
        num_grow_ch: dense-block growth, default 32.
        num_degradation: scores estimated (2: blur, noise), default 2.
        degradation_degree_actv: the scores' activation, "sigmoid" (default) or "tanh".
        num_feats, num_blocks, downscales: de_net's stages (widths, residual blocks, 1 or 2),
            default [64, 128, 256, 512], [2, 2, 2, 2], [2, 2, 2, 1]; the published models:
            [64, 64, 64, 128], [2, 2, 2, 2], [1, 1, 2, 1].
        custom_degrees: scores replacing the estimates (module docstring): None (default: all
            estimated) or a list of num_degradation entries, each None or a number in the
            activation's range.
        de_net_type: "DEResNet", the original's only estimator (its option files name it).
    """

    def __init__(self, num_in_ch: int = 3, num_out_ch: int = 3, scale: int = 4, num_feat: int = 64,
                 num_block: int = 23, num_grow_ch: int = 32, num_degradation: int = 2,
                 degradation_degree_actv: str = "sigmoid", num_feats=(64, 128, 256, 512),
                 num_blocks=(2, 2, 2, 2), downscales=(2, 2, 2, 1), custom_degrees=None,
                 de_net_type: str = "DEResNet"):
        super().__init__()
        name = "MMRealSR"
        num_in_ch = int_arg(name, "num_in_ch", num_in_ch)
        num_out_ch = int_arg(name, "num_out_ch", num_out_ch)
        self.scale = int_arg(name, "scale", scale)
        if self.scale != 4:
            raise ValueError(f"{name}: scale must be 4, got {self.scale}: the original's x2 and x1 "
                             f"(a pixel unshuffle in front) build de_net for the unshuffled "
                             f"channels but feed it the image, so their forward cannot run")
        num_feat = int_arg(name, "num_feat", num_feat)
        num_block = int_arg(name, "num_block", num_block, 0)
        num_grow_ch = int_arg(name, "num_grow_ch", num_grow_ch)
        self.num_degradation = int_arg(name, "num_degradation", num_degradation)
        actv = choice(name, "degradation_degree_actv", degradation_degree_actv, tuple(ACTIVATIONS))
        choice(name, "de_net_type", de_net_type, ("DEResNet",))  # the original's only estimator
        num_feats = int_list(name, "num_feats", num_feats)
        stages = len(num_feats)
        if not stages:
            raise ValueError(f"{name}: num_feats must name at least one stage")
        num_blocks = int_list(name, "num_blocks", num_blocks, stages, minimum=0)
        downscales = int_list(name, "downscales", downscales, stages)
        if any(d not in (1, 2) for d in downscales):
            raise ValueError(f"{name}: downscales must be 1 or 2 per stage, got {list(downscales)}")
        self.custom_degrees = _custom_degrees(name, custom_degrees, self.num_degradation,
                                              ACTIVATIONS[actv][1])
        self.conv_first = nn.Conv2d(num_in_ch, num_feat, 3, padding=1)
        self.body = nn.ModuleList([RRDB(num_feat, num_grow_ch) for _ in range(num_block)])
        self.am_list = nn.ModuleList([AffineModulate(num_feat) for _ in range(num_block)])
        self.conv_body = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv_up1 = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv_up2 = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv_hr = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, padding=1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2)
        self.de_net = DEResNet(num_in_ch, self.num_degradation, actv, num_feats, num_blocks,
                               downscales)
        self.dd_embed = nn.Sequential(nn.Linear(self.num_degradation, EMBED), nn.ReLU())
        default_init_weights([self.dd_embed], 0.1)

    def degrees(self, x):
        """The scores the network modulates with, (N, num_degradation): the estimates, with
        custom_degrees' numbers in their place (the original computes every estimate and then
        fills; an entry it replaces gets no gradient there, nor here, where it is not computed)."""
        zero = None
        scores = []
        for i, value in enumerate(self.custom_degrees):
            if value is None:
                scores.append(self.de_net.score(i, x))
                continue
            if zero is None:  # (N,) zeros made from the input: an exported batch stays dynamic
                zero = F.mean(x, axis=(1, 2, 3)) * 0.0
            scores.append(zero + value)
        return F.stack(scores, axis=1)

    def forward(self, image):
        x = pad_to_requirement(image, _MINIMUM)
        d = self.dd_embed(self.degrees(x))
        feat = self.conv_first(x)
        body = feat
        for block, modulate in zip(self.body, self.am_list):
            body = modulate(block(body), d)
        feat = feat + self.conv_body(body)
        for up in (self.conv_up1, self.conv_up2):
            feat = conv_act(up, self.lrelu, F.interpolate(feat, scale_factor=2, mode="nearest"))
        out = self.conv_last(conv_act(self.conv_hr, self.lrelu, feat))
        return F.crop_to(out, image, self.scale)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: num_feat, num_out_ch from conv_last; num_in_ch from conv_first (x4:
        the image's channels; when spandrel would read them as an x2 / x1 pixel unshuffle, 4 or
        16 times conv_last's outputs, the file is refused unless scale 4 is given: those cannot
        run); num_block from body, num_grow_ch from its first dense conv, num_degradation from
        dd_embed. de_net's stages from its body's keys: residual blocks of one width make a
        stage; a plain conv ends one: stride 2 (downscale 2) when it keeps the width (only a
        downscale makes one then), and, when it changes the width, also stride 2: spandrel's
        reading and the published models' ([64, 64, 64, 128] / [1, 1, 2, 1] read as [64, 128] /
        [6, 2] / [2, 1], the same network), said as assumed; give num_feats, num_blocks and
        downscales together to state another. degradation_degree_actv has no weights: sigmoid, the
        published models' and spandrel's, said as assumed."""
        feat, cin = need(shapes, "conv_first.weight", 4)[:2]
        for k in ("conv_body", "conv_up1", "conv_up2", "conv_hr"):
            need(shapes, f"{k}.weight", 4)
        out = need(shapes, "conv_last.weight", 4)[0]
        num_block = count(shapes, "body", ".rdb1.conv1.weight")
        if not num_block or count(shapes, "am_list", ".fc.0.weight") != num_block:
            raise NoMatch("body and am_list do not hold the same number (>= 1) of RRDBs and "
                          "modulations")
        grow = need(shapes, "body.0.rdb1.conv1.weight", 4)[0]
        num_deg = need(shapes, "dd_embed.0.weight", 2)[1]
        if cin in (4 * out, 16 * out) and known.get("scale") != 4 and known.get("num_in_ch") != cin:
            raise NoMatch(f"conv_first sees {cin} channels, {cin // out} x conv_last's {out}: "
                          f"spandrel reads the file as MM-RealSR x{ {4: 2, 16: 1}[cin // out]}, "
                          f"which the original cannot run (de_net is built for the unshuffled "
                          f"channels but fed the image); --model-arg scale=4 reads it as x4 on "
                          f"{cin}-channel images")
        found = {"num_in_ch": cin, "num_out_ch": out, "scale": 4, "num_feat": feat,
                 "num_block": num_block, "num_grow_ch": grow, "num_degradation": num_deg,
                 "degradation_degree_actv": Assumed(
                     "sigmoid", "the scores' activation has no weights: sigmoid, the published "
                                "models' and spandrel's", quiet=True)}
        found.update(_de_stages(shapes, known))
        return found

    @staticmethod
    def card(spec: dict):
        """conv_first, per block an RRDB (three dense blocks of five convs) and its modulation's
        three linears, conv_body, two x2 convs, conv_hr, conv_last; de_net per degradation
        (conv_first, the body's blocks and convs, two linears) and dd_embed. The largest arrays:
        the dense block's concatenation (F + 4G) at the input size or the HR features (16 F)."""
        cin, cout, f, n, g = (spec[k] for k in ("num_in_ch", "num_out_ch", "num_feat",
                                                "num_block", "num_grow_ch"))
        nd, feats = spec["num_degradation"], list(spec["num_feats"])
        rdb = sum(conv(f + i * g, g) for i in range(4)) + conv(f + 4 * g, f)
        hidden = (EMBED + 2 * f) // 2
        am = linear(EMBED, hidden) + linear(hidden, hidden) + linear(hidden, 2 * f)
        body = sum(2 * conv(e[1], e[1]) if e[0] == "block" else conv(e[1], e[2])
                   for e in de_body(feats, spec["num_blocks"], spec["downscales"]))
        de = nd * (conv(cin, feats[0]) + body + linear(feats[-1], EMBED) + linear(EMBED, 1))
        params = (conv(cin, f) + n * (3 * rdb + am) + 4 * conv(f, f) + conv(f, cout) + de
                  + linear(nd, EMBED))
        act = max(f + 4 * g, max(feats), 16 * max(f, cout))
        return image_card(4, cin, cout, params, act, pad_minimum=_MINIMUM)


def _custom_degrees(owner: str, value, n: int, bounds) -> tuple:
    """custom_degrees as a tuple of n entries, each None or a float within `bounds`."""
    if value is None:
        return (None,) * n
    low, high = bounds
    if not isinstance(value, (list, tuple)) or len(value) != n:
        raise ValueError(f"{owner}: custom_degrees must be a list of {n} entries (one per "
                         f"degradation: blur, noise), each null (estimated) or a score in "
                         f"[{low:g}, {high:g}], got {value!r}")
    return tuple(None if v is None else
                 number(owner, f"custom_degrees[{i}]", v, low, high) for i, v in enumerate(value))


def _de_stages(shapes: dict, known: dict) -> dict:
    """num_feats, num_blocks, downscales from de_net.body.0's keys (MMRealSR.detect)."""
    entries, i = [], 0
    while True:
        if f"de_net.body.0.{i}.conv1.weight" in shapes:
            entries.append(("block", need(shapes, f"de_net.body.0.{i}.conv1.weight", 4)[0]))
        elif f"de_net.body.0.{i}.weight" in shapes:
            o, c = need(shapes, f"de_net.body.0.{i}.weight", 4)[:2]
            entries.append(("conv", c, o))
        else:
            break
        i += 1
    given = [k for k in ("num_feats", "num_blocks", "downscales") if k in known]
    if given:
        if len(given) != 3:
            raise NoMatch(f"{', '.join(given)} given alone: de_net's stages need num_feats, "
                          f"num_blocks and downscales together")
        try:
            layout = de_body(*(list(known[k]) for k in ("num_feats", "num_blocks", "downscales")))
        except TypeError:
            raise NoMatch("num_feats, num_blocks and downscales must be lists") from None
        if [e[:3] for e in layout] != entries:
            raise NoMatch("the given num_feats, num_blocks and downscales do not build de_net's "
                          "body as the file has it")
        return {}
    feats, blocks, downs, width, n, changed = [], [], [], None, 0, False
    for e in entries:
        if e[0] == "block":
            if width is not None and e[1] != width:
                raise NoMatch(f"de_net's residual blocks change width ({width} -> {e[1]}) "
                              f"without a conv between")
            width, n = e[1], n + 1
        else:
            if width is not None and e[1] != width:
                raise NoMatch(f"de_net's conv takes {e[1]} channels after blocks of {width}")
            feats.append(e[1])
            blocks.append(n)
            downs.append(2)
            changed = changed or e[1] != e[2]
            width, n = e[2], 0
    if width is None:
        raise NoMatch("de_net.body.0 is empty")
    if n or not entries or entries[-1][0] == "block" or entries[-1][1] != entries[-1][2]:
        feats.append(width)
        blocks.append(n)
        downs.append(1)
    return {"num_feats": feats, "num_blocks": blocks,
            "downscales": Assumed(downs, "a conv of de_net that changes width may have stride 1 "
                                         "or 2: 2, spandrel's reading and the published models'",
                                  quiet=True) if changed else downs}
