"""matmul -> Gemm for two matrices, MatMul otherwise (numpy's rules: 1-D operands, batch
broadcasting, are ONNX MatMul's); linear -> Gemm (transB) for a 2-D input, else MatMul with the
transposed weight + Add."""
from __future__ import annotations

from ...functional.linear import LinearFunction, MatMulFunction
from ..graph import register_converter


@register_converter(MatMulFunction)
def matmul(g, call):
    if len(g.shape(0)) == 2 and len(g.shape(1)) == 2:
        return g.node("Gemm", [g.input(0), g.input(1)])
    return g.node("MatMul", [g.input(0), g.input(1)])


@register_converter(LinearFunction)
def linear(g, call):  # x (..., in), weight (out, in), bias (out,) or None -> (..., out)
    x, w = g.input(0), g.input(1)
    b = g.input(2) if call.args[2] is not None else ""
    if len(g.shape(0)) == 2:
        return g.node("Gemm", [x, w] + ([b] if b else []), transB=1)
    y = g.node("MatMul", [x, g.node("Transpose", [w], perm=[1, 0])])
    return g.node("Add", [y, b]) if b else y
