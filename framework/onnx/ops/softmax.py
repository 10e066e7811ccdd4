"""softmax / log_softmax -> Softmax / LogSoftmax (opset 13+: over one axis)."""
from __future__ import annotations

from ...functional.softmax import LogSoftmaxFunction, SoftmaxFunction
from ..graph import register_converter


@register_converter(SoftmaxFunction)
def softmax(g, call):
    return g.node("Softmax", [g.input(0)], axis=int(call.options["axis"]))


@register_converter(LogSoftmaxFunction)
def log_softmax(g, call):
    return g.node("LogSoftmax", [g.input(0)], axis=int(call.options["axis"]))
