"""PyTorch twin of ATD: spandrel 0.4.2's own network class (spandrel/architectures/ATD/__arch/
atd_arch.py, LabShuHangGU/Adaptive-Token-Dictionary's code), built with srgrad's keywords (`scale`
for `upscale`), with spandrel's call API around its forward: SizeRequirements(minimum=8) (reflect,
then replicate), the output cropped. spandrel is imported when a twin is built (the tests skip with
the reason when it is absent)."""
from __future__ import annotations

from . import register
from ._spandrel import sized, spandrel_architecture


@register
def ATD(scale=2, upsampler="pixelshuffle", **kwargs):
    original = spandrel_architecture("ATD").ATD
    minimum = max(8, -(-kwargs.get("window_size", 8) // 2))
    return sized(original, minimum, 1, scale)(upscale=scale, upsampler=upsampler, **kwargs)
