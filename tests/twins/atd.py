"""PyTorch twin of ATD: spandrel 0.4.2's own network class (spandrel/architectures/ATD/__arch/
atd_arch.py, LabShuHangGU/Adaptive-Token-Dictionary's code), built with srgrad's keywords (`scale`
for `upscale`), with spandrel's call API around its forward: SizeRequirements(minimum=8) (reflect,
then replicate), the output cropped. category_order "stable" runs the original with torch.sort's
stable=True (what srgrad's keyword means). spandrel is imported when a twin is built (the tests skip
with the reason when it is absent)."""
from __future__ import annotations

import torch

from . import register
from ._spandrel import sized, spandrel_architecture


@register
def ATD(scale=2, upsampler="pixelshuffle", category_order="torch_cpu", **kwargs):
    original = spandrel_architecture("ATD").ATD
    minimum = max(8, -(-kwargs.get("window_size", 8) // 2))
    base = sized(original, minimum, 1, scale)
    if category_order == "torch_cpu":
        return base(upscale=scale, upsampler=upsampler, **kwargs)

    class Stable(base):
        def forward(self, x):
            sort = torch.sort
            torch.sort = lambda t, dim=-1, stable=False, **kw: sort(t, dim=dim, stable=True, **kw)
            try:
                return super().forward(x)
            finally:
                torch.sort = sort

    return Stable(upscale=scale, upsampler=upsampler, **kwargs)
