"""The logistic family's activations: silu (x Sigmoid(x)) and mish (Mish from opset 18; below it
x Tanh(Softplus(x)))."""
from __future__ import annotations

from ...functional.logistic import MishFunction, SiLUFunction
from ..graph import register_converter


@register_converter(SiLUFunction)
def silu(g, call):
    x = g.input(0)
    return g.node("Mul", [x, g.node("Sigmoid", [x])])


@register_converter(MishFunction)
def mish(g, call):
    x = g.input(0)
    if g.opset >= 18:
        return g.node("Mish", [x])
    return g.node("Mul", [x, g.node("Tanh", [g.node("Softplus", [x])])])
