"""EDSR (Lim et al., "Enhanced Deep Residual Networks for Single Image Super-Resolution", CVPRW 2017)
as BasicSR builds it (basicsr/archs/edsr_arch.py, arch_util.py): mean shift -> conv_first -> residual
blocks without batch norm -> conv_after_body + long skip -> pixel-shuffle upsampler -> conv_last ->
mean shift back. Parameter names are BasicSR's, so its EDSR state_dicts load (the mean is a constant,
not a buffer, as there). Optional `block`: a layer spec appended to every residual block's body.
EDSR-PyTorch's own files (MeanShift convs, head/body/tail) load through `EDSR.layouts`; its
multi-scale MDSR (per-scale 5x5 pre-processing blocks and upsamplers) is not an EDSR and is refused
by name (framework/signatures.py)."""
from __future__ import annotations

from framework import nn
from framework.check import int_arg, number
from framework.detect import Assumed, Layout, count, need
from framework.registry import LAYERS, MODELS
from framework.card import conv, image_card
from framework.random import fork_rng

from ._blocks import (PixelShuffleUpsampler, ResidualBlockNoBN, channel_mean, mean_shift_values,
                      upsampler_scale)

EDSR_LAYOUTS = (
    Layout("EDSR-PyTorch's layout (sub_mean, head.0, body.N.body.0/2, tail.0, tail.1, add_mean)",
           "edsr_baseline_x2-1bc95232.pt, edsr_x4-4f62e9ef.pt (sanghyun-son/EDSR-PyTorch)",
           ("sub_mean.weight", "head.0.weight", "tail.1.weight"),
           [(r"(sub|add)_mean\.(weight|bias)", None),
            (r"head\.0\.(weight|bias)", r"conv_first.\1"),
            (r"body\.(\d+)\.body\.0\.(weight|bias)", r"body.\1.conv1.\2"),
            (r"body\.(\d+)\.body\.2\.(weight|bias)", r"body.\1.conv2.\2"),
            (r"body\.(\d+)\.(weight|bias)", r"conv_after_body.\2"),
            (r"tail\.0\.(\d+)\.(weight|bias)", r"upsample.\1.\2"),
            (r"tail\.1\.(weight|bias)", r"conv_last.\1")],
           values=mean_shift_values),
)


@MODELS.register()
class EDSR(nn.Module):
    """EDSR: (N, num_in_ch, h, w) in [0, 1] -> (N, num_out_ch, h*scale, w*scale).

    Args:
        scale: 2, 3, 4 (or 8, 16, ...: any power of two; x4 is two x2 stages).
        num_in_ch, num_out_ch: image channels (3 for RGB, 1 for Y).
        num_feat: features, default 64 (EDSR-baseline; the paper's large model: 256).
        num_block: residual blocks, default 16 (large model: 32).
        res_scale: residual scaling, default 1 (large model: 0.1).
        img_range: images are scaled by this after the mean shift, default 255.
        rgb_mean: per-channel mean subtracted at the input and added back at the output, default
            DIV2K's (0.4488, 0.4371, 0.4040); on 1 channel the average of the three, unless a
            one-value list is given.
        block: optional layer spec `{type: Name, ...}` built through LAYERS and appended to each
            residual block's body (one fresh instance per block), e.g. `{type: ChannelScale,
            channels: 64}`.
    """

    layouts = EDSR_LAYOUTS

    def __init__(self, scale: int, num_in_ch: int = 3, num_out_ch: int = 3, num_feat: int = 64,
                 num_block: int = 16, res_scale: float = 1.0, img_range: float = 255.0,
                 rgb_mean=(0.4488, 0.4371, 0.4040), block: dict | None = None):
        super().__init__()
        self.scale = upsampler_scale("EDSR", scale)
        num_in_ch = int_arg("EDSR", "num_in_ch", num_in_ch)
        num_out_ch = int_arg("EDSR", "num_out_ch", num_out_ch)
        num_feat = int_arg("EDSR", "num_feat", num_feat)
        num_block = int_arg("EDSR", "num_block", num_block, 0)
        res_scale = number("EDSR", "res_scale", res_scale, low=0, low_open=True)
        img_range = number("EDSR", "img_range", img_range, low=0, low_open=True)
        if block is not None and (not isinstance(block, dict) or "type" not in block):
            raise ValueError(f"EDSR: block must be a layer spec {{type: Name, ...}}, got {block!r}")
        self.img_range = img_range
        # Constants, not buffers (as BasicSR): they stay out of the state_dict.
        self.mean_in = channel_mean("EDSR", rgb_mean, num_in_ch)
        self.mean_out = channel_mean("EDSR", rgb_mean, num_out_ch)

        self.conv_first = nn.Conv2d(num_in_ch, num_feat, 3, padding=1)
        self.body = nn.Sequential(*[
            ResidualBlockNoBN(num_feat, res_scale, self._build_extra(block))
            for _ in range(num_block)])
        self.conv_after_body = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.upsample = PixelShuffleUpsampler(self.scale, num_feat, "EDSR")
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, padding=1)

    @staticmethod
    def _build_extra(block):
        if block is None:
            return None
        layer = LAYERS.build(block)
        if not isinstance(layer, nn.Module):
            raise TypeError(f"EDSR: block {block['type']!r} built a {type(layer).__name__}, "
                            f"not an nn.Module")
        return layer

    def forward(self, x):
        x = (x - self.mean_in.astype(x.dtype, copy=False)) * self.img_range
        x = self.conv_first(x)
        res = self.conv_after_body(self.body(x)) + x
        x = self.conv_last(self.upsample(res))
        return x / self.img_range + self.mean_out.astype(x.dtype, copy=False)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """Blocks from body.i.conv1, the scale from the upsampler's convs. The weights do not
        tell res_scale: EDSR-PyTorch's and BasicSR's published models decide it, 1 for the
        64-feature baseline (EDSR_M, edsr_baseline) and 0.1 for the paper's 256-feature EDSR
        (EDSR_L, edsr_x*); another width assumes 1 and says so. img_range and rgb_mean are
        BasicSR's (255, DIV2K's mean: its every EDSR option file) unless EDSR-PyTorch's MeanShift
        convs say otherwise. A custom `block` must be given."""
        feat, cin = need(shapes, "conv_first.weight", 4)[:2]
        need(shapes, "conv_after_body.weight", 4)
        if feat in (64, 256):
            res_scale = Assumed(1.0 if feat == 64 else 0.1, "EDSR's published models", quiet=True)
        else:
            res_scale = Assumed(1.0, "the EDSR baseline's (the paper's 0.1 is for its 256-feature "
                                "model only); the weights do not tell")
        return {"num_in_ch": cin, "num_out_ch": need(shapes, "conv_last.weight", 4)[0],
                "num_feat": feat, "num_block": count(shapes, "body", ".conv1.weight"),
                "res_scale": res_scale,
                "scale": PixelShuffleUpsampler.detect_scale(shapes, "upsample", feat)}

    @staticmethod
    def card(spec: dict):
        """conv_first, num_block residual blocks (two convs each, plus a custom `block`'s
        parameters: one instance of it, a user's layer, is built to count them), conv_after_body, the
        pixel-shuffle upsampler, conv_last at the HR size."""
        s, cin, cout, f, n = (spec[k] for k in ("scale", "num_in_ch", "num_out_ch", "num_feat",
                                                "num_block"))
        with fork_rng():  # a scratch generator: the caller's init stream stays as it was
            extra = EDSR._build_extra(spec["block"])
        per_block = 2 * conv(f, f) + (extra.num_parameters() if extra is not None else 0)
        params = (conv(cin, f) + n * per_block + conv(f, f) + PixelShuffleUpsampler.parameters(s, f)
                  + conv(f, cout))
        return image_card(s, cin, cout, params, max(f, cin, cout) * s * s)
