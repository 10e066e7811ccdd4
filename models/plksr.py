"""PLKSR (Lee & Lee, "Partial Large Kernel CNNs for Efficient Super-Resolution", 2024;
dslisleedh/PLKSR's plksr_arch.py as spandrel 0.4.2 reads it): a 3x3 conv to `dim` features,
n_blocks PLKBlocks, a 3x3 conv to 3 x scale^2 channels plus the input repeated scale^2 times
(repeat_interleave), a pixel shuffle. Each PLKBlock: x + refine(attn(lk(channe_mixer(x)))), where

    channe_mixer   (the original's spelling) CCM 3x3 -> GELU -> 1x1, ICCM 1x1 -> GELU -> 3x3, or
                   DCCM 3x3 -> GELU -> 3x3, dim -> 2 dim -> dim
    lk             a large kernel on the first int(dim split_ratio) channels only, the others passed
                   through: PLK one kernel_size^2 conv (17x17 on 16 of 64 channels; + identity with
                   with_idt), SparsePLK a sum of dilated convs (RepLKNet style), RectSparsePLK
                   m x m/3 + m/3 x m + m/3 x m/3 convs (SLaK style)
    attn           EA: x * sigmoid(conv3x3(x)), or nothing (use_ea False)
    refine         a 1x1 conv

The large kernels go through conv2d's direct routes (functional/_direct.py for 12 channels or more,
_depthwise.py for fewer), not an im2col.
RealPLKSR (models/realplksr.py) reuses PLKConv2d and EA.
"""
from __future__ import annotations

import math

import numpy as np

import framework.functional as F
from framework import nn
from framework.check import choice, flag, int_arg, int_list, number
from framework.nn import init
from framework.detect import NoMatch, Unknown, indices, need
from framework.registry import MODELS
from framework.card import conv, image_card


_CCM = {"CCM": (3, 1), "ICCM": (1, 3), "DCCM": (3, 3)}  # kernel sizes of the two convolutions
_LK_TYPES = ("PLK", "SparsePLK", "RectSparsePLK")


def trunc_normal(conv, std=0.02):
    """The original's trunc_normal_(weight, std=0.02) (values in [-2, 2]: a normal in practice)."""
    init.trunc_normal_(conv.weight, std=std)
    return conv


def partial_channels(owner: str, dim: int, split_ratio) -> int:
    """int(dim * split_ratio), the channels the large kernel sees (the original's pdim), >= 1."""
    ratio = number(owner, "split_ratio", split_ratio, low=0, high=1, low_open=True)
    pdim = int(dim * ratio)
    if pdim < 1:
        raise ValueError(f"{owner}: split_ratio {split_ratio} leaves int(dim * split_ratio) = 0 of "
                         f"{dim} channels for the large kernel")
    return pdim


def read_split_ratio(pdim: int, dim: int) -> float:
    """split_ratio for which int(dim * split_ratio) == pdim: pdim / dim, or the next float up when
    rounding makes it fall short (7 / 48 * 48 = 6.999...)."""
    ratio = pdim / dim
    return float(np.nextafter(ratio, np.inf)) if int(dim * ratio) < pdim else ratio


def check_odd_kernel(owner: str, kernel_size) -> int:
    k = int_arg(owner, "kernel_size", kernel_size)
    if k % 2 == 0:
        raise ValueError(f"{owner}: kernel_size must be odd (padded by kernel_size // 2 to keep the "
                         f"size), got {k}")
    return k


class PartialLK(nn.Module):
    """The large kernel on the first `idx` channels of (N, C, H, W), the rest passed through:
    cat(lk(x[:, :idx]), x[:, idx:]) (split and concatenated by F.split and F.cat, which write each
    piece's gradient straight into its slice)."""

    def partial(self, x):
        raise NotImplementedError

    def forward(self, x):
        if x.shape[1] == self.idx:
            return self.partial(x)
        x1, x2 = F.split(x, [self.idx, x.shape[1] - self.idx], dim=1)
        return F.cat([self.partial(x1), x2], axis=1)


class PLKConv2d(PartialLK):
    """Partial large-kernel conv: a kernel_size^2 conv on `dim` channels (+ the identity with
    with_idt, where the original's deployment convert() folds it into the kernel)."""

    def __init__(self, dim: int, kernel_size: int, with_idt: bool = False):
        super().__init__()
        self.idx, self.with_idt = dim, with_idt
        self.conv = trunc_normal(nn.Conv2d(dim, dim, kernel_size, padding=kernel_size // 2))

    def partial(self, x1):
        y = self.conv(x1)
        return y + x1 if self.with_idt else y


class SparsePLKConv2d(PartialLK):
    """RepLKNet-style: the sum of sub-kernel convs with dilations (+ a max_kernel_size conv with
    use_max_kernel, + the identity with with_idt) on `dim` channels."""

    def __init__(self, dim, max_kernel_size, sub_kernel_sizes, dilations, use_max_kernel, with_idt):
        super().__init__()
        self.idx, self.with_idt = dim, with_idt
        self.max_kernel_size = max([max_kernel_size] + [(k - 1) * d + 1 for k, d in
                                                        zip(sub_kernel_sizes, dilations)])
        convs = [nn.Conv2d(dim, dim, k, padding=(k // 2) * d, dilation=d)
                 for k, d in zip(sub_kernel_sizes, dilations)]
        if use_max_kernel:
            convs.append(nn.Conv2d(dim, dim, self.max_kernel_size, padding=self.max_kernel_size // 2))
        self.convs = nn.ModuleList([trunc_normal(c) for c in convs])

    def partial(self, x1):
        out = x1 if self.with_idt else None
        for conv in self.convs:
            out = conv(x1) if out is None else out + conv(x1)
        return out


class RectSparsePLKConv2d(PartialLK):
    """SLaK-style: an m x n, an n x m and an n x n conv summed on `dim` channels, n = m // 3."""

    def __init__(self, dim: int, kernel_size: int):
        super().__init__()
        self.idx = dim
        m, n = kernel_size, kernel_size // 3
        self.mn_conv = trunc_normal(nn.Conv2d(dim, dim, (m, n), padding=(m // 2, n // 2)))
        self.nm_conv = trunc_normal(nn.Conv2d(dim, dim, (n, m), padding=(n // 2, m // 2)))
        self.nn_conv = trunc_normal(nn.Conv2d(dim, dim, (n, n), padding=(n // 2, n // 2)))

    def partial(self, x1):
        return self.mn_conv(x1) + self.nm_conv(x1) + self.nn_conv(x1)


class EA(nn.Module):
    """Element-wise attention: x * sigmoid(conv3x3(x)) on (N, dim, H, W)."""

    def __init__(self, dim: int):
        super().__init__()
        self.f = nn.Sequential(trunc_normal(nn.Conv2d(dim, dim, 3, padding=1)), nn.Sigmoid())

    def forward(self, x):
        return x * self.f(x)


def channel_mixer(dim: int, kernels: tuple, act) -> nn.Sequential:
    """conv (dim -> 2 dim, kernels[0]) -> act -> conv (2 dim -> dim, kernels[1], trunc-normal)."""
    a, b = kernels
    return nn.Sequential(nn.Conv2d(dim, dim * 2, a, padding=a // 2), act,
                         trunc_normal(nn.Conv2d(dim * 2, dim, b, padding=b // 2)))


class PLKBlock(nn.Module):
    """x + refine(attn(lk(channe_mixer(x)))) on (N, dim, H, W) (module docstring)."""

    def __init__(self, dim, ccm_type, kernel_size, pdim, lk_type, use_max_kernel, sparse_kernels,
                 sparse_dilations, with_idt, use_ea):
        super().__init__()
        self.channe_mixer = channel_mixer(dim, _CCM[ccm_type], nn.GELU())
        if lk_type == "PLK":
            self.lk = PLKConv2d(pdim, kernel_size, with_idt)
        elif lk_type == "SparsePLK":
            self.lk = SparsePLKConv2d(pdim, kernel_size, sparse_kernels, sparse_dilations, use_max_kernel,
                                      with_idt)
        else:
            self.lk = RectSparsePLKConv2d(pdim, kernel_size)
        self.attn = EA(dim) if use_ea else nn.Identity()
        self.refine = trunc_normal(nn.Conv2d(dim, dim, 1))

    def forward(self, x):
        return self.refine(self.attn(self.lk(self.channe_mixer(x)))) + x


def repeat_channels(x, times: int):
    """torch.repeat_interleave(x, times, dim=1) on (N, C, H, W): each channel `times` times in a row,
    as one gather of channels (size-independent: it exports to ONNX as a Gather)."""
    return x[:, np.repeat(np.arange(x.shape[1]), times)]


@MODELS.register()
class PLKSR(nn.Module):
    """PLKSR: (N, 3, h, w) -> (N, 3, h*scale, w*scale) (module docstring).

    Args:
        dim: features, default 64.
        n_blocks: PLKBlocks, default 28 (PLKSR-tiny: 12).
        scale: upscaling factor, any int >= 1 (the original's upscaling_factor), default 4.
        ccm_type: "CCM" (default), "ICCM" or "DCCM" (every published PLKSR: DCCM).
        kernel_size: the large kernel, odd, default 17 (tiny: 13); SparsePLK's max kernel.
        split_ratio: the share of channels the large kernel sees, default 0.25.
        lk_type: "PLK" (default), "SparsePLK" or "RectSparsePLK" (the paper's ablations).
        use_max_kernel, sparse_kernels (default [5, 5, 5, 5]), sparse_dilations (default
            [1, 2, 3, 4]): SparsePLK's convolutions.
        with_idt: add the identity to the large kernel's output (PLK and SparsePLK), default False.
        use_ea: element-wise attention in each block, default True (tiny: False).
    """

    def __init__(self, dim: int = 64, n_blocks: int = 28, scale: int = 4, ccm_type: str = "CCM",
                 kernel_size: int = 17, split_ratio: float = 0.25, lk_type: str = "PLK",
                 use_max_kernel: bool = False, sparse_kernels=(5, 5, 5, 5), sparse_dilations=(1, 2, 3, 4),
                 with_idt: bool = False, use_ea: bool = True):
        super().__init__()
        name = "PLKSR"
        dim = int_arg(name, "dim", dim)
        n_blocks = int_arg(name, "n_blocks", n_blocks, 0)
        self.scale = int_arg(name, "scale", scale)
        ccm_type = choice(name, "ccm_type", ccm_type, tuple(_CCM))
        lk_type = choice(name, "lk_type", lk_type, _LK_TYPES)
        kernel_size = check_odd_kernel(name, kernel_size)
        pdim = partial_channels(name, dim, split_ratio)
        sparse_kernels = int_list(name, "sparse_kernels", list(sparse_kernels), odd=True)
        sparse_dilations = int_list(name, "sparse_dilations", list(sparse_dilations), len(sparse_kernels))
        if lk_type == "RectSparsePLK" and kernel_size < 3:
            raise ValueError(f"{name}: RectSparsePLK needs kernel_size >= 3 (its thin side is "
                             f"kernel_size // 3), got {kernel_size}")
        max_kernel = flag(name, "use_max_kernel", use_max_kernel)
        with_idt, use_ea = flag(name, "with_idt", with_idt), flag(name, "use_ea", use_ea)
        blocks = [PLKBlock(dim, ccm_type, kernel_size, pdim, lk_type, max_kernel, sparse_kernels,
                           sparse_dilations, with_idt, use_ea) for _ in range(n_blocks)]
        self.feats = nn.Sequential(trunc_normal(nn.Conv2d(3, dim, 3, padding=1)), *blocks,
                                   trunc_normal(nn.Conv2d(dim, 3 * self.scale ** 2, 3, padding=1)))
        self.to_img = nn.PixelShuffle(self.scale)

    def forward(self, x):
        return self.to_img(self.feats(x) + repeat_channels(x, self.scale ** 2))

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """dim from feats.0; n_blocks from the length of feats (first conv, blocks, last conv);
        scale from the last conv (3 scale^2 outputs); ccm_type from channe_mixer's kernel sizes;
        lk_type from lk's keys (lk.conv, lk.convs.i, lk.mn_conv); kernel_size and split_ratio
        from the large kernel; use_ea from attn.f.0. Not in the weights: with_idt (the original's
        deployment convert() folds its identity into the kernel, so both forms look alike): False,
        the original's default and every published model's (its options/*.yml), as spandrel.
        SparsePLK's dilations and use_max_kernel: the original's defaults when the convolutions
        are its default four 5x5 (the layout spandrel builds), else Unknown."""
        dim, in_ch = need(shapes, "feats.0.weight", 4)[:2]
        b = "feats.1"
        mix0 = need(shapes, f"{b}.channe_mixer.0.weight", 4)[2]
        mix2 = need(shapes, f"{b}.channe_mixer.2.weight", 4)[2]
        ccm = {v: k for k, v in _CCM.items()}.get((mix0, mix2))
        if ccm is None or in_ch != 3:
            raise NoMatch(f"channe_mixer kernels {mix0}, {mix2} / {in_ch} input channels are not PLKSR's")
        total = max(indices(shapes, "feats")) + 1
        last = need(shapes, f"feats.{total - 1}.weight", 4)[0]
        scale = math.isqrt(last // 3)
        if 3 * scale * scale != last:
            raise NoMatch(f"the last conv's {last} outputs are not 3 x scale^2")
        spec = {"dim": dim, "n_blocks": total - 2, "scale": scale, "ccm_type": ccm,
                "use_ea": f"{b}.attn.f.0.weight" in shapes}
        if f"{b}.lk.conv.weight" in shapes:
            pdim, _, k, _ = need(shapes, f"{b}.lk.conv.weight", 4)
            spec.update(lk_type="PLK", kernel_size=k)
        elif f"{b}.lk.mn_conv.weight" in shapes:
            pdim, _, k, _ = need(shapes, f"{b}.lk.mn_conv.weight", 4)
            spec.update(lk_type="RectSparsePLK", kernel_size=k)
        elif f"{b}.lk.convs.0.weight" in shapes:
            sizes = [need(shapes, f"{b}.lk.convs.{i}.weight", 4)[2]
                     for i in indices(shapes, f"{b}.lk.convs")]
            pdim = need(shapes, f"{b}.lk.convs.0.weight", 4)[0]
            max_kernel = known.get("use_max_kernel") is True  # then the last conv is the max kernel
            kernels = sizes[:-1] if max_kernel else sizes
            spec.update(lk_type="SparsePLK", sparse_kernels=kernels, use_max_kernel=max_kernel)
            if max_kernel:
                spec["kernel_size"] = sizes[-1]
            if kernels != [5, 5, 5, 5] and "sparse_dilations" not in known:
                spec["sparse_dilations"] = Unknown(
                    [1] * len(sizes), "SparsePLK's dilations change no weight shape (nor does "
                    "use_max_kernel, which adds the last conv)", None)
        else:
            raise NoMatch("no large kernel at feats.1.lk (conv, convs.0 or mn_conv)")
        spec["split_ratio"] = read_split_ratio(pdim, dim)
        return spec

    @staticmethod
    def card(spec: dict):
        """feats.0, n_blocks PLKBlocks (mixer dim -> 2 dim -> dim, the large kernel on
        int(dim split_ratio) channels, EA's 3x3, refine's 1x1), the last conv to 3 scale^2. RGB
        only (no channel keyword)."""
        s, d, k = spec["scale"], spec["dim"], spec["kernel_size"]
        p = int(d * spec["split_ratio"])
        a, b = _CCM[spec["ccm_type"]]
        if spec["lk_type"] == "PLK":
            lk = conv(p, p, k)
        elif spec["lk_type"] == "SparsePLK":
            sizes = list(spec["sparse_kernels"])
            lk = sum(conv(p, p, n) for n in sizes)
            if spec["use_max_kernel"]:
                lk += conv(p, p, max([k] + [(n - 1) * r + 1 for n, r in
                                            zip(sizes, spec["sparse_dilations"])]))
        else:
            lk = conv(p, p, (k, k // 3)) + conv(p, p, (k // 3, k)) + conv(p, p, k // 3)
        block = conv(d, 2 * d, a) + conv(2 * d, d, b) + lk + conv(d, d, 1) + (
            conv(d, d) if spec["use_ea"] else 0)
        params = conv(3, d) + spec["n_blocks"] * block + conv(d, 3 * s * s)
        return image_card(s, 3, 3, params, max(2 * d, 3 * s * s), channel_keys=())
