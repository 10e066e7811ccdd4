"""Elementwise ops: Add Sub Mul Div Pow Max Min (numpy broadcasting is ONNX's multidirectional
broadcasting), Neg Exp Log Sqrt Abs, Clip, Where, Cast, floor division and Python's remainder
(Floor of Div). Constant operands (EDSR's mean, a Python
scalar) become initializers in the graph's float type."""
from __future__ import annotations

import numpy as np

from ...functional import elementwise as E
from ..graph import register_converter

_BINARY = {E.Add: "Add", E.Sub: "Sub", E.Mul: "Mul", E.Div: "Div", E.Pow: "Pow", E.Maximum: "Max",
           E.Minimum: "Min"}
_UNARY = {E.Neg: "Neg", E.Exp: "Exp", E.Log: "Log", E.Sqrt: "Sqrt", E.Abs: "Abs"}


def _simple(op, arity):
    return lambda g, call: g.node(op, [g.input(i) for i in range(arity)])


for _fn, _op in _BINARY.items():
    register_converter(_fn, _simple(_op, 2))
for _fn, _op in _UNARY.items():
    register_converter(_fn, _simple(_op, 1))


def _floor_div(g, call):
    """floor(a / b) in the graph's float type (ONNX's integer Div truncates toward 0; Python's //
    floors), cast back to an int result's dtype."""
    dtype = call.outputs[0].array.dtype
    a, b = g.input(0), g.input(1)
    if dtype.kind != "f":
        a, b = (g.node("Cast", [v], to=_onnx_type(np.float64)) for v in (a, b))
    return g.node("Floor", [g.node("Div", [a, b])]), a, b, dtype


@register_converter(E.FloorDivide)
def floor_divide(g, call):
    q, _, _, dtype = _floor_div(g, call)
    return q if dtype.kind == "f" else g.node("Cast", [q], to=_onnx_type(dtype))


@register_converter(E.Remainder)
def remainder(g, call):  # a - floor(a / b) b: the sign of b (ONNX's Mod fmod=0 is ints only)
    q, a, b, dtype = _floor_div(g, call)
    r = g.node("Sub", [a, g.node("Mul", [q, b])])
    return r if dtype.kind == "f" else g.node("Cast", [r], to=_onnx_type(dtype))


@register_converter(E.Clamp)
def clamp(g, call):  # Clip(x, min, max), either bound omitted ("") when None
    lo, hi = call.options.get("min"), call.options.get("max")
    bound = (lambda v: "" if v is None else g.const(np.asarray(v, g.call.args[0].array.dtype)))
    return g.node("Clip", [g.input(0), bound(lo), bound(hi)])


@register_converter(E.Where)
def where(g, call):
    cond = g.input(0)
    if call.args[0].array.dtype != np.bool_:
        cond = g.node("Cast", [cond], to=_onnx_type(np.bool_))
    return g.node("Where", [cond, g.input(1), g.input(2)])


@register_converter(E.Cast)
def cast(g, call):  # a float target means the graph's float type (float16 in an fp16 export)
    dtype = np.dtype(call.options["dtype"])
    return g.node("Cast", [g.input(0)], to=_onnx_type(g.dtype if dtype.kind == "f" else dtype))


def _onnx_type(dtype) -> int:
    from onnx import helper
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


@register_converter(E.Clone)
def clone(g, call):
    return g.node("Identity", [g.input(0)])
