"""Activations: Relu, LeakyRelu, PRelu, Sigmoid, Tanh, Gelu (opset 20; below it the erf or tanh
formula in elementary nodes)."""
from __future__ import annotations

import math

from ...functional.activation import (GELUExact, GELUTanh, LeakyReLUFunction, PReLUFunction,
                                      ReLUFunction, SigmoidFunction, TanhFunction)
from ..graph import register_converter


def _unary(fn_cls, op):
    register_converter(fn_cls, lambda g, call: g.node(op, [g.input(0)]))


_unary(ReLUFunction, "Relu")
_unary(SigmoidFunction, "Sigmoid")
_unary(TanhFunction, "Tanh")


@register_converter(LeakyReLUFunction)
def leaky_relu(g, call):
    return g.node("LeakyRelu", [g.input(0)], alpha=float(call.options["negative_slope"]))


@register_converter(PReLUFunction)
def prelu(g, call):  # x (N, C, ...), w (C,) or (1,): the slope broadcast as (C, 1, ...)
    slope = g.input(1)
    rank, size = len(g.shape(0)), g.call.args[1].array.size
    if size > 1 and rank > 2:
        slope = g.node("Reshape", [slope, g.const([size] + [1] * (rank - 2))])
    return g.node("PRelu", [g.input(0), slope])


@register_converter(GELUExact)
def gelu(g, call):  # x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
    x = g.input(0)
    if g.opset >= 20:
        return g.node("Gelu", [x], approximate="none")
    e = g.node("Erf", [g.node("Mul", [x, g.const(1 / math.sqrt(2))])])
    return g.node("Mul", [g.node("Mul", [x, g.const(0.5)]), g.node("Add", [e, g.const(1.0)])])


@register_converter(GELUTanh)
def gelu_tanh(g, call):  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    x = g.input(0)
    if g.opset >= 20:
        return g.node("Gelu", [x], approximate="tanh")
    cube = g.node("Mul", [g.node("Mul", [x, x]), x])
    inner = g.node("Add", [x, g.node("Mul", [cube, g.const(0.044715)])])
    t = g.node("Tanh", [g.node("Mul", [inner, g.const(math.sqrt(2 / math.pi))])])
    return g.node("Mul", [g.node("Mul", [x, g.const(0.5)]), g.node("Add", [t, g.const(1.0)])])
