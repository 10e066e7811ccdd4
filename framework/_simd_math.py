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

__all__ = ["vexp_lanes", "vexp_fused"]


def _exp32(builder, t, fused=False):
    """rows.exp32 on a <n x float>, step for step; `fused`: each multiply-add step one fused
    multiply-add (one rounding: other bits, ~10 instructions fewer)."""
    count = t.type.count

    def madd(a, b, c):  # a b + c
        if not fused:
            return builder.fadd(builder.fmul(a, b), c)
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t.type, [t.type] * 3),
                                             f"llvm.fma.v{count}f32")
        return builder.call(fma, [a, b, c])
    under = builder.fcmp_ordered("<", t, _f32(builder, -87.0, count))
    t = builder.select(under, _f32(builder, -87.0, count), t)
    floor = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t.type, [t.type]),
                                           f"llvm.floor.v{count}f32")
    n = builder.call(floor, [madd(t, _f32(builder, 1.4426950408889634, count), _f32(builder, 0.5, count))])
    if fused:  # (t - n ln2_hi) + n ln2_lo: n ln2_hi is exact (9 bits), n ln2_lo's rounding is fused
        r = madd(n, _f32(builder, 2.12194440e-4, count), madd(n, _f32(builder, -0.693359375, count), t))
    else:
        r = builder.fadd(builder.fsub(t, builder.fmul(n, _f32(builder, 0.693359375, count))),
                         builder.fmul(n, _f32(builder, 2.12194440e-4, count)))
    p = _f32(builder, 1.9875691500e-4, count)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = madd(p, r, _f32(builder, c, count))
    p = builder.fadd(madd(p, builder.fmul(r, r), r), _f32(builder, 1.0, count))
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


@intrinsic
def vexp_fused(typingctx, v):
    """exp32's steps on float32 lanes with each multiply-add fused (_exp32's `fused`)."""
    _vector_of(v, "vexp_fused", (types.float32,))

    def codegen(context, builder, sig, args):
        return _exp32(builder, args[0], fused=True)
    return v(v), codegen
