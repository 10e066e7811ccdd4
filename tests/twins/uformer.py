"""PyTorch twin of Uformer: spandrel 0.4.2's own network class (its copy of ZhendongWang6/Uformer's
model.py: keys, buffers, forward), imported lazily through _spandrel.spandrel_architecture (a test
skips with the reason when spandrel 0.4.2 or einops is absent), wrapped in spandrel's call API:
pad at the bottom and right to a square whose side is a multiple of the model's (128 for win_size
8: SizeRequirements(multiple_of=128, square=True)), reflect then replicate, and crop back. One
repair: token_projection "conv" builds its depthwise convs with dilation=True (its bias argument in
the dilation's place), which torch 2.13's conv2d refuses; the twin sets the dilation 1 that older
torch read it as."""
from __future__ import annotations

import math

from torch import nn

from . import register
from ._spandrel import pad_tensor


@register
class Uformer(nn.Module):
    def __init__(self, scale=1, **kw):
        super().__init__()
        import pytest
        pytest.importorskip("einops")
        from ._spandrel import spandrel_architecture
        self.net = spandrel_architecture("Uformer").Uformer(**kw)
        for m in self.net.modules():  # the conv projection's SepConv2d passes its bias (True) as
            if isinstance(m, nn.Conv2d) and m.dilation == (True, True):  # dilation: torch 2.13
                m.dilation = (1, 1)  # refuses a bool; older torch read it as 1
        img, win = kw.get("img_size", 256), kw.get("win_size", 8)
        self.multiple = math.lcm(128, *(2 ** lv * min(win, img // 2 ** lv) for lv in range(5)))

    def state_dict(self, *args, **kw):
        return self.net.state_dict(*args, **kw)

    def load_state_dict(self, state, strict=True, **kw):
        return self.net.load_state_dict(state, strict=strict, **kw)

    def named_parameters(self, *args, **kw):
        return self.net.named_parameters(*args, **kw)

    def forward(self, x):
        h, w = x.shape[-2:]
        side = -(-max(h, w) // self.multiple) * self.multiple
        x, _ = pad_tensor(x, side, self.multiple)
        return self.net(x)[..., :h, :w]
