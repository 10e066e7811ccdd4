"""FBCNN (Jiang et al., "Towards Flexible Blind JPEG Artifacts Removal", ICCV 2021;
jiaxi-jiang/FBCNN's models/network_fbcnn.py as spandrel 0.4.2's FBCNN architecture reads it): JPEG
artifact removal at scale 1, told the compression's quality factor by an embedding it either
predicts from the image or takes from the user.

KAIR's U-Net with biases: a 3x3 conv (m_head) to nc[0], three levels of nb residual blocks and a 2x
downsampler (m_down1..3), nb blocks at the bottom (m_body_encoder). From there the QF predictor
(qf_pred: nb blocks, a global average pool, Linear 512-512-512-1 with ReLUs, a sigmoid) gives
qf = 1 - QF / 100 per image; the decoder's nb bottom blocks (m_body_decoder), then three levels back
(m_up3..1: a 2x upsampler, then nb QFAttention blocks x + gamma * res(x) + beta, the level's skip
added before the upsampler), a 3x3 conv (m_tail) to out_nc. gamma (sigmoid) and beta (tanh) of each
level come from the QF embedding (qf_embed: Linear 1-512-512-512 with ReLUs; to_gamma_i / to_beta_i:
Linear 512-nc[i-1]). The input is padded at the bottom and right to a multiple of 8 by replication
(the original's forward) and the output cropped back.

The original returns (image, qf); srgrad's forward returns the image, as spandrel's descriptor
does (`model(image)[0]`); `forward_qf` returns both (the training recipe's QF loss, FBCNN's own
test scripts' "predicted quality factor"). The quality factor: predicted per image (per tile under
srgrad-infer's tiling) unless given: the keyword `quality_factor` (QF on the JPEG 0..100 scale, as
FBCNN's main_test_fbcnn_color_real.py's QF_control; `--model-arg quality_factor=30`) or the
forward's `qf_input` (the original's argument: 1 - QF / 100, a number or an (N, 1) tensor) replace
the predicted one in the embedding (lower QF: stronger smoothing).

The widths of the QF predictor's and embedding's Linears are fixed at 512 by the original, so
nc[3] must be 512 (spandrel's class does not run otherwise). act_mode R (every published model,
spandrel's reading; L: LeakyReLU 0.2); the down / upsamplers of KAIR (maxpool refused as in DRUNet:
its files read as avgpool). Keys are the original's: m_up3..1 are ModuleLists, so a Sequential
upsampler keeps its own index (m_up3.0.0 pixelshuffle's conv, m_up3.0.1 upconv's).
"""
from __future__ import annotations

import framework as sg
import framework.functional as F
from framework import nn
from framework.card import conv, image_card, linear
from framework.check import choice, int_arg, int_list, number
from framework.detect import Assumed, NoMatch, count, need
from framework.registry import MODELS

from ._kair import ACT_MODES, ResBlock, check_samplers, conv_act_conv, down, sequential, up

_MULTIPLE = 8  # the original pads to a multiple of 8: three 2x downsamplings
_QF_WIDTH = 512  # the original's Linear(512, 512) after the pooled bottom features


class Flatten(nn.Module):
    """torch.nn.Flatten(): (N, C, 1, 1) -> (N, C) (a placeholder keeping qf_pred's indices)."""

    def forward(self, x):
        return F.flatten(x, 1)


class QFAttention(nn.Module):
    """x + (gamma * res(x) + beta), res = 3x3 conv, activation, 3x3 conv on c channels; gamma and
    beta (N, c) or (1, c) per channel."""

    def __init__(self, c: int, act_mode: str, bias: bool = True):
        super().__init__()
        self.res = conv_act_conv(c, act_mode, bias)

    def forward(self, x, gamma, beta):
        gamma = F.unsqueeze(F.unsqueeze(gamma, -1), -1)
        beta = F.unsqueeze(F.unsqueeze(beta, -1), -1)
        return x + (gamma * self.res(x) + beta)


def _linears(*widths, last=None) -> list:
    """Linear layers between consecutive widths with a ReLU after each, `last` after the final one
    instead when given."""
    out = []
    for a, b in zip(widths, widths[1:]):
        out += [nn.Linear(a, b), nn.ReLU()]
    if last is not None:
        out[-1] = last
    return out


@MODELS.register()
class FBCNN(nn.Module):
    """FBCNN: (N, in_nc, H, W) -> (N, out_nc, H, W), any H, W >= 1.

    Args:
        in_nc: input channels, default 3 (fbcnn_color; fbcnn_gray, fbcnn_gray_double: 1).
        out_nc: output channels, default 3.
        nc: the features of the four levels, default [64, 128, 256, 512] (nc[3] must be 512).
        nb: residual blocks per level, default 4 (>= 1).
        act_mode: "R" (ReLU, default: every published model) or "L" (LeakyReLU 0.2).
        downsample_mode: "strideconv" (default) or "avgpool".
        upsample_mode: "convtranspose" (default), "pixelshuffle" or "upconv".
        quality_factor: None (default: predicted from the image) or the JPEG quality 0..100 the
            QF embedding is told instead (qf_input = 1 - quality_factor / 100).
        scale: 1 (a restoration network: srgrad's configs and commands pass their scale).
    """

    def __init__(self, in_nc: int = 3, out_nc: int = 3, nc=(64, 128, 256, 512), nb: int = 4,
                 act_mode: str = "R", downsample_mode: str = "strideconv",
                 upsample_mode: str = "convtranspose", quality_factor=None, scale: int = 1):
        super().__init__()
        name = "FBCNN"
        self.in_nc = int_arg(name, "in_nc", in_nc)
        out_nc = int_arg(name, "out_nc", out_nc)
        nc = int_list(name, "nc", nc, length=4)
        if nc[3] != _QF_WIDTH:
            raise ValueError(f"{name}: nc[3] must be {_QF_WIDTH} (the original's QF predictor "
                             f"takes the bottom level's {_QF_WIDTH} pooled features into a "
                             f"Linear(512, 512)), got nc {list(nc)}")
        self.nb = nb = int_arg(name, "nb", nb)
        choice(name, "act_mode", act_mode, tuple(ACT_MODES))
        check_samplers(name, downsample_mode, upsample_mode)
        self.quality_factor = None if quality_factor is None else \
            number(name, "quality_factor", quality_factor, 0, 100)
        if int_arg(name, "scale", scale) != 1:
            raise ValueError(f"{name}: scale must be 1 (a restoration network: the output has the "
                             f"input's size), got {scale}")
        self.scale = 1

        def blocks(c, block=ResBlock):
            return [block(c, act_mode, True) for _ in range(nb)]
        self.m_head = nn.Conv2d(self.in_nc, nc[0], 3, padding=1)
        self.m_down1 = sequential(*blocks(nc[0]), *down(nc[0], nc[1], downsample_mode, bias=True))
        self.m_down2 = sequential(*blocks(nc[1]), *down(nc[1], nc[2], downsample_mode, bias=True))
        self.m_down3 = sequential(*blocks(nc[2]), *down(nc[2], nc[3], downsample_mode, bias=True))
        self.m_body_encoder = sequential(*blocks(nc[3]))
        self.m_body_decoder = sequential(*blocks(nc[3]))
        for i, (a, b) in ((3, (nc[3], nc[2])), (2, (nc[2], nc[1])), (1, (nc[1], nc[0]))):
            setattr(self, f"m_up{i}", nn.ModuleList(
                [sequential(*up(a, b, upsample_mode, bias=True)), *blocks(b, QFAttention)]))
        self.m_tail = nn.Conv2d(nc[0], out_nc, 3, padding=1)
        self.qf_pred = nn.Sequential(*blocks(nc[3]), nn.AdaptiveAvgPool2d((1, 1)), Flatten(),
                                     *_linears(_QF_WIDTH, _QF_WIDTH, _QF_WIDTH, 1, last=nn.Sigmoid()))
        self.qf_embed = nn.Sequential(*_linears(1, _QF_WIDTH, _QF_WIDTH, _QF_WIDTH))
        for i in (3, 2, 1):
            setattr(self, f"to_gamma_{i}", nn.Sequential(nn.Linear(_QF_WIDTH, nc[i - 1]), nn.Sigmoid()))
            setattr(self, f"to_beta_{i}", nn.Sequential(nn.Linear(_QF_WIDTH, nc[i - 1]), nn.Tanh()))

    def forward(self, x, qf_input=None):
        """The restored image (spandrel's call: the original's first output). qf_input: None (the
        keyword quality_factor, else the predicted QF) or 1 - QF / 100 (a number or (N, 1))."""
        return self._run(x, qf_input, want_qf=False)[0]

    def forward_qf(self, x, qf_input=None):
        """The original's (image, qf): qf (N, 1) the predicted 1 - QF / 100 (also when qf_input
        or quality_factor replaces it in the embedding)."""
        return self._run(x, qf_input, want_qf=True)

    def _run(self, x, qf_input, want_qf: bool):
        if x.shape[1] != self.in_nc:
            raise ValueError(f"FBCNN: expected an image of {self.in_nc} channels (in_nc), got "
                             f"{x.shape[1]}")
        if qf_input is None and self.quality_factor is not None:
            qf_input = 1.0 - self.quality_factor / 100.0
        if qf_input is not None and not hasattr(qf_input, "shape"):
            # one QF for the batch: a (1, 1) constant (the embedding broadcasts over N)
            qf_input = sg.full((1, 1), float(qf_input), dtype=x.dtype)
        x0 = F.pad_to_multiple(x, _MULTIPLE, mode="replicate")
        x1 = self.m_head(x0)
        x2 = self.m_down1(x1)
        x3 = self.m_down2(x2)
        x4 = self.m_down3(x3)
        h = self.m_body_encoder(x4)
        # the predictor runs when its output is used (the embedding, or the caller's qf)
        qf = self.qf_pred(h) if want_qf or qf_input is None else None
        embedding = self.qf_embed(qf if qf_input is None else qf_input)
        h = self.m_body_decoder(h) + x4
        for i, skip in ((3, x3), (2, x2), (1, x1)):
            level = getattr(self, f"m_up{i}")
            gamma = getattr(self, f"to_gamma_{i}")(embedding)
            beta = getattr(self, f"to_beta_{i}")(embedding)
            h = level[0](h)
            for block in list(level)[1:]:
                h = block(h, gamma, beta)
            h = h + skip
        return F.crop_to(self.m_tail(h), x), qf

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule: in_nc and nc[0] from m_head, out_nc from m_tail, nb counted
        (m_body_encoder's blocks; one block is m_body_encoder itself), downsample_mode
        strideconv when m_down1's conv follows the blocks directly (else avgpool: a pool between
        them; maxpool's files look the same and do not run), upsample_mode convtranspose when
        m_up3.0 is a conv, upconv when m_up3.0.1 is, pixelshuffle when m_up3.0.0 is; the widths
        from the down convs. act_mode R (no weights tell it: every published model, spandrel's
        reading). quality_factor is an inference choice, not in the file: None (predicted), said
        with the flag that sets it."""
        nc0, in_nc = need(shapes, "m_head.weight", 4)[:2]
        out_nc = need(shapes, "m_tail.weight", 4)[0]
        need(shapes, "qf_pred.0.res.0.weight")
        one = "m_body_encoder.res.0.weight" in shapes
        nb = 1 if one else count(shapes, "m_body_encoder", ".res.0.weight")
        if nb == 0:
            raise NoMatch("no residual block in m_body_encoder")
        need(shapes, "m_down1.0.res.0.weight")
        down_mode = "strideconv" if f"m_down1.{nb}.weight" in shapes else "avgpool"
        at = nb if down_mode == "strideconv" else nb + 1
        nc = [nc0] + [need(shapes, f"m_down{i}.{at}.weight", 4)[0] for i in (1, 2, 3)]
        if "m_up3.0.weight" in shapes:
            up_mode = "convtranspose"
        elif "m_up3.0.1.weight" in shapes:
            up_mode = "upconv"
        elif "m_up3.0.0.weight" in shapes:
            up_mode = "pixelshuffle"
        else:
            raise NoMatch("no upsampler at m_up3.0 (convtranspose), m_up3.0.1 (upconv) or "
                          "m_up3.0.0 (pixelshuffle)")
        if nc[3] != _QF_WIDTH:
            raise NoMatch(f"the bottom level has {nc[3]} features: the original's QF predictor "
                          f"runs on {_QF_WIDTH} only")
        return {"in_nc": in_nc, "out_nc": out_nc, "nc": nc, "nb": nb,
                "act_mode": Assumed("R", "the activation has no weights: ReLU, as every published "
                                         "FBCNN (spandrel reads it so too)", quiet=True),
                "downsample_mode": down_mode, "upsample_mode": up_mode, "scale": 1,
                "quality_factor": Assumed(None, "the network predicts the JPEG quality of each "
                                                "image (of each tile under --tile); a QF of "
                                                "0..100 replaces the prediction")}

    @staticmethod
    def card(spec: dict):
        """m_head, per level i nb blocks down and nb QFAttention blocks up (two 3x3 convs with
        bias each), the down conv (2x2, or a 3x3 after the pool) and the up conv (2x2 transposed,
        a 3x3 to 4x for the shuffle, or a 3x3 after nearest), 3 nb blocks on nc[3] (encoder,
        decoder, predictor), the predictor's Linears 512-512-512-1, the embedding's 1-512-512-512,
        a gamma and a beta Linear 512-nc[i] per level, m_tail. The input is padded to a multiple
        of 8; the largest activation per padded pixel: nc[i] / 4^i features at level i, nc[i + 1]
        / 4^i after upconv's nearest."""
        nc, nb, cin, cout = list(spec["nc"]), spec["nb"], spec["in_nc"], spec["out_nc"]
        down_mode, up_mode = spec["downsample_mode"], spec["upsample_mode"]
        total = conv(cin, nc[0]) + conv(nc[0], cout)
        total += 2 * nb * (2 * sum(conv(c, c) for c in nc[:3]) + 3 * conv(nc[3], nc[3]))
        for a, b in zip(nc[:3], nc[1:]):
            total += conv(a, b, 2 if down_mode == "strideconv" else 3)
            total += conv(b, 4 * a) if up_mode == "pixelshuffle" else \
                conv(b, a, 2 if up_mode == "convtranspose" else 3)
        w = _QF_WIDTH
        total += 2 * linear(w, w) + linear(w, 1) + linear(1, w) + 2 * linear(w, w)
        total += 2 * sum(linear(w, c) for c in nc[:3])
        per_pixel = [-(-c // 4 ** i) for i, c in enumerate(nc)]
        if up_mode == "upconv":
            per_pixel += [-(-nc[i + 1] // 4 ** i) for i in range(3)]
        return image_card(1, cin, cout, total, max(cin, cout, *per_pixel), pads_to=_MULTIPLE,
                          channel_keys=("in_nc", "out_nc"))
