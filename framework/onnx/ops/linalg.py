"""matmul -> Gemm for two matrices, MatMul otherwise (numpy's rules: 1-D operands, batch
broadcasting, are ONNX MatMul's)."""
from __future__ import annotations

from ...functional.linalg import MatMul
from ..graph import register_converter


@register_converter(MatMul)
def matmul(g, call):
    if len(g.shape(0)) == 2 and len(g.shape(1)) == 2:
        return g.node("Gemm", [g.input(0), g.input(1)])
    return g.node("MatMul", [g.input(0), g.input(1)])
