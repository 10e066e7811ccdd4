"""The logistic family's activations: silu (x Sigmoid(x)), mish (Mish from opset 18; below it
x Tanh(Softplus(x))) and softplus (Softplus(beta x) / beta, x itself where beta x > threshold, as
torch). binary_cross_entropy_with_logits is a loss: not exported (ops/__init__.py)."""
from __future__ import annotations

from ...functional.logistic import MishFunction, SiLUFunction, SoftplusFunction
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


@register_converter(SoftplusFunction)
def softplus(g, call):
    x, beta = g.input(0), float(call.options["beta"])
    bx = x if beta == 1 else g.node("Mul", [x, g.const(beta)])
    y = g.node("Softplus", [bx])
    if beta != 1:
        y = g.node("Div", [y, g.const(beta)])
    linear = g.node("Greater", [bx, g.const(float(call.options["threshold"]))])
    return g.node("Where", [linear, x, y])
