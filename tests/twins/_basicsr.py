"""What the BasicSR twins share (basicsr/archs/arch_util.py): make_layer, default_init_weights."""
from __future__ import annotations

import torch
from torch import nn


def make_layer(block, num_block, /, **kwargs):
    return nn.Sequential(*[block(**kwargs) for _ in range(num_block)])


@torch.no_grad()
def default_init_weights(modules, scale=1.0, bias_fill=0.0):
    """kaiming_normal_ (fan_in, gain sqrt(2)) times `scale` on every Conv2d weight; biases filled."""
    for module in modules if isinstance(modules, list) else [modules]:
        for m in module.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
                m.weight.mul_(scale)
                if m.bias is not None:
                    m.bias.fill_(bias_fill)
