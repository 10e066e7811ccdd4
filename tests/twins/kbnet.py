"""PyTorch twin of KBNet (KBNet_s): spandrel 0.4.2's own network class (its copy of zhangyi-3/KBNet's
kbnet_s.py and kb_utils.py: keys, forward, the zero padding to 2^levels and the crop back, and the
hand-written backward of its KBAFunction and LayerNorm2d), imported lazily through
_spandrel.spandrel_architecture (a test skips with the reason when spandrel 0.4.2 is absent). No
spandrel size requirement: its descriptor has none."""
from __future__ import annotations

from torch import nn

from . import register


@register
class KBNet(nn.Module):
    def __init__(self, scale=1, **kw):
        super().__init__()
        from ._spandrel import spandrel_architecture
        self.net = spandrel_architecture("KBNet").KBNet_s(**kw)

    def state_dict(self, *args, **kw):
        return self.net.state_dict(*args, **kw)

    def load_state_dict(self, state, strict=True, **kw):
        return self.net.load_state_dict(state, strict=strict, **kw)

    def named_parameters(self, *args, **kw):
        return self.net.named_parameters(*args, **kw)

    def forward(self, x):
        return self.net(x)
