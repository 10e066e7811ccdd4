"""Transcendentals on explicit vectors (framework/_simd.py), each lane the bits of the scalar kernel
it mirrors: the same IEEE float32 steps in the same order, no fused multiply-add, so a kernel that
keeps its values in registers (attention's softmax) computes what the elementwise code would have
stored.

    vexp_lanes(v)   rows.vexp per lane: rows.exp32's steps on float32 lanes, llvm.exp (libm's exp,
                    math.exp's) on float64 lanes
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._simd import _f32, _splat, _vector_of

__all__ = ["vexp_lanes"]


def _exp32(builder, t):
    """rows.exp32 on a <n x float>, step for step."""
    count = t.type.count
    under = builder.fcmp_ordered("<", t, _f32(builder, -87.0, count))
    t = builder.select(under, _f32(builder, -87.0, count), t)
    floor = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t.type, [t.type]),
                                           f"llvm.floor.v{count}f32")
    n = builder.call(floor, [builder.fadd(builder.fmul(t, _f32(builder, 1.4426950408889634, count)),
                                          _f32(builder, 0.5, count))])
    r = builder.fadd(builder.fsub(t, builder.fmul(n, _f32(builder, 0.693359375, count))),
                     builder.fmul(n, _f32(builder, 2.12194440e-4, count)))
    p = _f32(builder, 1.9875691500e-4, count)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = builder.fadd(builder.fmul(p, r), _f32(builder, c, count))
    p = builder.fadd(builder.fadd(builder.fmul(p, builder.fmul(r, r)), r), _f32(builder, 1.0, count))
    i32 = ir.IntType(32)
    biased = builder.add(builder.fptosi(n, ir.VectorType(i32, count)), _splat(builder, ir.Constant(i32, 127), count))
    e = builder.shl(biased, _splat(builder, ir.Constant(i32, 23), count))
    return builder.select(under, ir.Constant(t.type, None), builder.fmul(p, builder.bitcast(e, t.type)))


@intrinsic
def vexp_lanes(typingctx, v):
    _vector_of(v, "vexp_lanes", (types.float32, types.float64))

    def codegen(context, builder, sig, args):
        t = args[0]
        if v.dtype == types.float64:
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t.type, [t.type]),
                                                f"llvm.exp.v{t.type.count}f64")
            return builder.call(fn, [t])
        return _exp32(builder, t)
    return v(v), codegen
