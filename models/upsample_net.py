"""UpsampleNet (srgrad's own): a conv feature extractor at the LR size -> a learnable-free resampling of
the FEATURES (bicubic by default) -> conv refinement at the HR size, plus a resampled skip of the
input. The loss's gradient reaches the first convolutions only through the resampling's backward:
this is the network that needs a differentiable bicubic (burn's CPU backend cannot train it)."""
from __future__ import annotations

from framework import nn
from framework.nn.conv import run_fused
from framework.functional.resample import MODES
from framework.check import int_arg
from framework.registry import MODELS
from framework.card import conv, image_card

from framework.detect import Assumed, NoMatch, Unknown, indices, need



@MODELS.register()
class UpsampleNet(nn.Module):
    """UpsampleNet: (N, num_in_ch, h, w) in [0, 1] -> (N, num_out_ch, h*scale, w*scale).

    head: num_conv x (conv 3x3 -> ReLU), num_in_ch -> num_feat, at (h, w);
    upsample: nn.Upsample(scale_factor=scale, mode=mode) on the num_feat features;
    tail: (num_refine - 1) x (conv 3x3 -> ReLU) at num_feat, then conv 3x3 to num_out_ch, at the HR
    size; output = tail(upsample(head(x))) + upsample(x) when `residual`.

    Args:
        scale: upscaling factor (any integer >= 1).
        num_in_ch, num_out_ch: image channels (equal when `residual`).
        num_feat: features, default 32.
        num_conv: convolutions before the upsampling, default 2.
        num_refine: convolutions after it (the last maps to num_out_ch), default 2.
        mode: the resampling of the features and of the skip, any mode of F.interpolate that
            upsamples (default "bicubic"; bilinear and bicubic use align_corners=False).
        residual: add the resampled input to the output, default True.
    """

    def __init__(self, scale: int, num_in_ch: int = 3, num_out_ch: int = 3, num_feat: int = 32,
                 num_conv: int = 2, num_refine: int = 2, mode: str = "bicubic",
                 residual: bool = True):
        super().__init__()
        self.scale = int_arg("UpsampleNet", "scale", scale)
        num_in_ch = int_arg("UpsampleNet", "num_in_ch", num_in_ch)
        num_out_ch = int_arg("UpsampleNet", "num_out_ch", num_out_ch)
        num_feat = int_arg("UpsampleNet", "num_feat", num_feat)
        num_conv = int_arg("UpsampleNet", "num_conv", num_conv)
        num_refine = int_arg("UpsampleNet", "num_refine", num_refine)
        if not isinstance(mode, str):
            raise ValueError(f"UpsampleNet: mode must be a string, got {mode!r}")
        if residual and num_in_ch != num_out_ch:
            raise ValueError(f"UpsampleNet: residual=True needs num_in_ch == num_out_ch, "
                             f"got {num_in_ch} and {num_out_ch}")
        self.mode = mode
        self.residual = bool(residual)

        head = []
        for i in range(num_conv):
            head += [nn.Conv2d(num_in_ch if i == 0 else num_feat, num_feat, 3, padding=1), nn.ReLU()]
        self.head = nn.Sequential(*head)
        align = False if mode in MODES and MODES[mode].alignable else None
        try:  # nn.Upsample knows the modes: its error lists them
            self.upsample = nn.Upsample(scale_factor=self.scale, mode=mode, align_corners=align)
        except ValueError as err:
            raise ValueError(f"UpsampleNet: mode {mode!r}: {err}") from None
        tail = []
        for _ in range(num_refine - 1):
            tail += [nn.Conv2d(num_feat, num_feat, 3, padding=1), nn.ReLU()]
        tail.append(nn.Conv2d(num_feat, num_out_ch, 3, padding=1))
        self.tail = nn.Sequential(*tail)

    def forward(self, x):
        # head and tail with the ReLUs fused into the convs (same values as calling them)
        out = run_fused(self.tail, self.upsample(run_fused(self.head, x)))
        if self.residual:
            out = out + self.upsample(x)
        return out

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """num_conv / num_refine = the convs of head / tail; the scale has no weight: the caller
        gives it. Nor have mode and residual: "bicubic" and True (the defaults) are assumed and
        said; residual is False when the channels differ (the skip needs them equal)."""
        convs = {}
        for part in ("head", "tail"):
            convs[part] = indices(shapes, part, ".weight")
            if not convs[part] or convs[part] != list(range(0, 2 * len(convs[part]), 2)):
                raise NoMatch(f"convolutions at {part}.{convs[part]} are not {part}.0, {part}.2, ...")
        feat, cin = need(shapes, "head.0.weight", 4)[:2]
        cout = need(shapes, f"tail.{convs['tail'][-1]}.weight", 4)[0]
        return {"scale": Unknown(1, "the resampling has no weights"), "num_in_ch": cin,
                "num_out_ch": cout, "num_feat": feat, "num_conv": len(convs["head"]),
                "num_refine": len(convs["tail"]),
                "mode": Assumed("bicubic", "the default; the resampling has no weights"),
                "residual": False if cin != cout else
                Assumed(True, "the default; the skip has no weights")}

    @staticmethod
    def card(spec: dict):
        """num_conv convs at the LR size, the features resampled, num_refine convs at the HR size."""
        s, cin, cout, f = spec["scale"], spec["num_in_ch"], spec["num_out_ch"], spec["num_feat"]
        params = (conv(cin, f) + (spec["num_conv"] - 1) * conv(f, f)
                  + (spec["num_refine"] - 1) * conv(f, f) + conv(f, cout))
        return image_card(s, cin, cout, params, max(f, cin, cout) * s * s)
