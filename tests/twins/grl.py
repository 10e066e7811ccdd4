"""PyTorch twin of GRL: spandrel 0.4.2's own network (spandrel/architectures/GRL/__arch/grl.py, the
original's ofsoundof/GRL-Image-Restoration network as spandrel ships it), imported when built
(tests/twins/_spandrel.spandrel_architecture: the test skips without spandrel 0.4.2), with srgrad's
`scale` for its `upscale` (traiNNer-redux's name). Its forward is the original's, its own padding
(check_image_size) included; spandrel's call API adds none for GRL."""
from __future__ import annotations

from torch import nn

from . import register


@register
class GRL(nn.Module):
    """A factory: GRL(**srgrad keywords) is spandrel's GRL network."""

    def __new__(cls, scale=1, **kwargs):
        from ._spandrel import spandrel_architecture
        network = spandrel_architecture("GRL").GRL
        # lists as the original's defaults; img_size a tuple (it compares it with the input's (H, W))
        kwargs = {k: (tuple(v) if k == "img_size" else list(v)) if isinstance(v, (list, tuple)) else v
                  for k, v in kwargs.items()}
        return network(upscale=scale, **kwargs)
