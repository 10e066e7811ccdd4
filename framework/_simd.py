"""Explicit SIMD vectors for the few kernels whose speed is register blocking (functional/_direct.py).

LLVM's loop vectoriser decides by heuristics that change with the CPU and the loop's size (a 16-lane
loop of 8 accumulators came out as register spills on AVX2 and as sensible code on AVX-512), so the
hot kernels say what they mean instead: a `Vector(dtype, lanes)` is one LLVM vector value, which
numba keeps in registers as it keeps any local scalar, and four intrinsics act on it:

    vload(a, i, lanes)   a[i:i + lanes] of a contiguous 1-D array (no bounds check: validate first)
    vstore(a, i, v)      a[i:i + lanes] = v
    vstore_part(a, i, v, lo, hi)   a[i + p] = v[p] for lanes lo <= p < hi only (a masked store: the
                         other lanes' addresses are never touched, so i may be negative)
    vload_part(a, i, like, lo, hi)   a[i + p] in lanes lo <= p < hi, 0 in the others: a vector of
                         like's lanes (a masked load, as vstore_part)
    vsplat(x, lanes)     x in every lane
    vfma(a, b, c)        a b + c per lane, rounded once (llvm.fma: IEEE fused multiply-add)
    vadd(a, b)           a + b per lane
    vmul(a, b)           a b per lane (rounded: with vadd after it, the bits of numba's own `s += a * b`,
                         which LLVM does not contract into an fma)
    vrelu(v), vleaky(v, s)   activation.rectify_'s relu (-0 to +0, NaN kept) and leaky relu per lane
    bits32(x)            a float32 scalar's bits as a uint32 (a bitcast)
    vsub(a, b), vmax(a, b)   a - b; b where b > a, else a (row_max's step), per lane
    (vexp_lanes: framework/_simd_math.py, exp per lane with the scalar kernel's bits)
    vwiden(v)            float32 lanes as float64 (exact)
    vpast(v, n, x)       v with the lanes from n on set to x
    vbf16_pairs(v)       float32 lanes rounded to bfloat16 (_direct_bf16._rne's bits: to nearest even,
                         NaN to 0x7FC0) and packed in pairs: uint32 lane i = lanes 2i (low half) and
                         2i + 1 (high), vdot_bf16's operand; half as many lanes
    vbf16_zip(lo, hi)    two float32 vectors rounded so, lane i the pair (lo_i, hi_i)
    vhsum(v), vhmax(v)   a vector's lanes summed (or their max) in a fixed tree: the upper half onto the
                         lower, lane by lane, until one is left
    vdot_bf16(acc, a, b)     AVX512-BF16's vdpbf16ps per 16 lanes: a and b are uint32 vectors, each
                         lane a pair of bfloat16 (low half: element 2i, high: 2i + 1), and lane i of the
                         float32 acc becomes (acc_i + a_hi b_hi) + a_lo b_lo, each add rounded to
                         nearest even (the products are exact), bfloat16 denormals read as 0 and
                         denormal results flushed to 0 (measured: tests/framework/functional/test_bf16.py).
                         Only on a CPU with AVX512-BF16: framework/precision.py says so before any call.

vfma is exact IEEE arithmetic, not fastmath: the same inputs give the same bits on every CPU, with or
without FMA hardware (where LLVM calls libm's fma), and lanes never mix, so a lane's sum keeps its
order whatever the vector width. `wide()` marks the calling kernel for 512-bit vectors: LLVM's tuning
for recent Intel server CPUs prefers 256-bit ones (`prefer-256-bit`), which splits every 16-lane
operation in two and halves the registers a kernel can block in (docs/benchmarks.md).

`lanes()` and `has_avx512()` describe the vector registers of the CPU numba compiles for (numba's
own target, so NUMBA_CPU_NAME / NUMBA_CPU_FEATURES count); kernels size their register blocks by
them, which changes speed only, never a result.
"""
from __future__ import annotations

import functools

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.datamodel import models, register_default
from numba.core.errors import TypingError
from numba.extending import intrinsic

__all__ = ["Vector", "vload", "vload_part", "vstore", "vstore_part", "vsplat", "vfma", "vadd", "vmul", "vrelu",
           "vleaky", "vdot_bf16", "wide", "lanes", "target", "bits32", "vsub", "vmax", "vhmax", "vhsum",
           "vwiden", "vpast", "vbf16_pairs", "vbf16_zip"]


class Vector(types.Type):
    """numba type of an LLVM vector <lanes x dtype>."""

    def __init__(self, dtype, lanes):
        self.dtype, self.lanes = dtype, lanes
        super().__init__(name=f"Vector({dtype}, {lanes})")


@register_default(Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        element = dmm.lookup(fe_type.dtype).get_value_type()
        super().__init__(dmm, fe_type, ir.VectorType(element, fe_type.lanes))


def _literal_lanes(n):
    if not isinstance(n, types.IntegerLiteral) or n.literal_value < 1:
        raise TypingError(f"lanes must be a positive compile-time constant, got {n}")
    return n.literal_value


def _element_pointer(context, builder, arrty, arr, i, vector):
    """Pointer to arr[i] as a pointer to the vector type."""
    data = context.make_array(arrty)(context, builder, arr).data
    return builder.bitcast(builder.gep(data, [i]), vector.as_pointer())


def _boundscheck(context, builder, arrty, arr, first, last):
    """Under NUMBA_BOUNDSCHECK=1 (as numba's own indexing): IndexError unless first and last, the
    first and last element a vector access touches, are indices of arr."""
    if context.enable_boundscheck:
        (length,) = cgutils.unpack_tuple(builder, context.make_array(arrty)(context, builder, arr).shape, 1)
        for index in (first, last):
            cgutils.do_boundscheck(context, builder, index, length)


def _check_array(arr):
    if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.layout != "C":
        raise TypingError(f"expected a contiguous 1-D array, got {arr}")


@intrinsic
def vload(typingctx, arr, i, n):
    _check_array(arr)
    vt = Vector(arr.dtype, _literal_lanes(n))

    def codegen(context, builder, sig, args):
        last = builder.add(args[1], ir.Constant(args[1].type, vt.lanes - 1))
        _boundscheck(context, builder, sig.args[0], args[0], args[1], last)
        ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1], context.get_value_type(vt))
        return builder.load(ptr, align=arr.dtype.bitwidth // 8)
    return vt(arr, types.intp, n), codegen


@intrinsic
def vstore(typingctx, arr, i, v):
    _check_array(arr)
    if not isinstance(v, Vector) or v.dtype != arr.dtype:
        raise TypingError(f"vstore: {v} into {arr}")

    def codegen(context, builder, sig, args):
        last = builder.add(args[1], ir.Constant(args[1].type, v.lanes - 1))
        _boundscheck(context, builder, sig.args[0], args[0], args[1], last)
        ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1], args[2].type)
        builder.store(args[2], ptr, align=arr.dtype.bitwidth // 8)
        return context.get_dummy_value()
    return types.none(arr, types.intp, v), codegen


def _splat(builder, value, count):
    """An LLVM vector of count copies of value."""
    vt = ir.VectorType(value.type, count)
    one = builder.insert_element(ir.Constant(vt, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), count), [0] * count))


def _part_mask(context, builder, sig, args, count):
    """The <count x i1> mask of lanes lo <= p < hi of vload_part / vstore_part (arr, i, _, lo, hi),
    after the bounds check of the elements those lanes touch (under NUMBA_BOUNDSCHECK=1)."""
    i64 = ir.IntType(64)
    lo_, hi_ = (context.cast(builder, a, t, types.int64) for a, t in zip(args[3:], sig.args[3:]))
    if context.enable_boundscheck:
        with builder.if_then(builder.icmp_signed("<", lo_, hi_)):
            last = builder.sub(builder.add(args[1], hi_), ir.Constant(i64, 1))
            _boundscheck(context, builder, sig.args[0], args[0], builder.add(args[1], lo_), last)
    lanes_ = ir.Constant(ir.VectorType(i64, count), list(range(count)))
    return builder.and_(builder.icmp_signed(">=", lanes_, _splat(builder, lo_, count)),
                        builder.icmp_signed("<", lanes_, _splat(builder, hi_, count)))


@intrinsic
def vload_part(typingctx, arr, i, like, lo, hi):
    _check_array(arr)
    if not isinstance(like, Vector) or like.dtype != arr.dtype:
        raise TypingError(f"vload_part: {like} from {arr}")
    vt = like

    def codegen(context, builder, sig, args):
        lt = context.get_value_type(vt)
        count = lt.count
        mask = _part_mask(context, builder, sig, args, count)
        ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1], lt)
        fnty = ir.FunctionType(lt, [lt.as_pointer(), ir.IntType(32), ir.VectorType(ir.IntType(1), count), lt])
        fn = cgutils.get_or_insert_function(builder.module, fnty,
                                            f"llvm.masked.load.v{count}f{arr.dtype.bitwidth}.p0")
        zero = ir.Constant(lt, [ir.Constant(lt.element, 0)] * count)
        return builder.call(fn, [ptr, ir.Constant(ir.IntType(32), arr.dtype.bitwidth // 8), mask, zero])
    return vt(arr, types.intp, like, lo, hi), codegen


@intrinsic
def vstore_part(typingctx, arr, i, v, lo, hi):
    _check_array(arr)
    if not isinstance(v, Vector) or v.dtype != arr.dtype:
        raise TypingError(f"vstore_part: {v} into {arr}")

    def codegen(context, builder, sig, args):
        vt = args[2].type
        count = vt.count
        ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1], vt)
        mask = _part_mask(context, builder, sig, args, count)
        fnty = ir.FunctionType(ir.VoidType(), [vt, vt.as_pointer(), ir.IntType(32),
                                               ir.VectorType(ir.IntType(1), count)])
        name = f"llvm.masked.store.v{count}f{v.dtype.bitwidth}.p0"
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        builder.call(fn, [args[2], ptr, ir.Constant(ir.IntType(32), v.dtype.bitwidth // 8), mask])
        return context.get_dummy_value()
    return types.none(arr, types.intp, v, lo, hi), codegen


@intrinsic
def vsplat(typingctx, x, n):
    if not isinstance(x, (types.Float, types.Integer)):
        raise TypingError(f"vsplat: a float or integer scalar, got {x}")
    count = _literal_lanes(n)

    def codegen(context, builder, sig, args):
        return _splat(builder, args[0], count)
    return Vector(x, count)(x, n), codegen


@intrinsic
def vfma(typingctx, a, b, c):
    if not (isinstance(a, Vector) and a == b == c):
        raise TypingError(f"vfma: three vectors of one type, got {a}, {b}, {c}")

    def codegen(context, builder, sig, args):
        t = args[0].type
        name = f"llvm.fma.v{t.count}f{a.dtype.bitwidth}"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t, t, t]), name)
        return builder.call(fn, args)
    return a(a, b, c), codegen


@intrinsic
def bits32(typingctx, x):
    """The bits of a float32 scalar as a uint32 (a bitcast: numba's scalars have no .view)."""
    if x != types.float32:
        raise TypingError(f"bits32: a float32, got {x}")

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.uint32(x), codegen


@intrinsic
def vadd(typingctx, a, b):
    if not (isinstance(a, Vector) and a == b):
        raise TypingError(f"vadd: two vectors of one type, got {a}, {b}")

    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], args[1])
    return a(a, b), codegen


@intrinsic
def vmul(typingctx, a, b):
    if not (isinstance(a, Vector) and a == b):
        raise TypingError(f"vmul: two vectors of one type, got {a}, {b}")

    def codegen(context, builder, sig, args):
        return builder.fmul(args[0], args[1])
    return a(a, b), codegen


@intrinsic
def vrelu(typingctx, v):
    if not isinstance(v, Vector):
        raise TypingError(f"vrelu: a vector, got {v}")

    def codegen(context, builder, sig, args):  # v <= 0 (ordered): +0; NaN fails it and stays
        zero = ir.Constant(args[0].type, None)
        return builder.select(builder.fcmp_ordered("<=", args[0], zero), zero, args[0])
    return v(v), codegen


@intrinsic
def vleaky(typingctx, v, s):
    if not isinstance(v, Vector):
        raise TypingError(f"vleaky: a vector, got {v}")

    def codegen(context, builder, sig, args):  # v > 0 (ordered): v, else v s (NaN s is NaN)
        x = args[0]
        slope = _splat(builder, context.cast(builder, args[1], sig.args[1], v.dtype), x.type.count)
        positive = builder.fcmp_ordered(">", x, ir.Constant(x.type, None))
        return builder.select(positive, x, builder.fmul(x, slope))
    return v(v, s), codegen


def _vector_of(v, what, dtypes=None):
    """A TypingError naming `what` unless v is a Vector (of one of `dtypes` when given)."""
    if not isinstance(v, Vector) or (dtypes is not None and v.dtype not in dtypes):
        kinds = "" if dtypes is None else " of " + " or ".join(str(d) for d in dtypes)
        raise TypingError(f"{what}: a vector{kinds}, got {v}")


def _f32(builder, x, count):
    return _splat(builder, ir.Constant(ir.FloatType(), x), count)


@intrinsic
def vsub(typingctx, a, b):
    if not (isinstance(a, Vector) and a == b):
        raise TypingError(f"vsub: two vectors of one type, got {a}, {b}")

    def codegen(context, builder, sig, args):
        return builder.fsub(args[0], args[1])
    return a(a, b), codegen


@intrinsic
def vmax(typingctx, a, b):
    """b where b > a (ordered), else a, per lane: rows.row_max's step (a NaN in b never wins)."""
    if not (isinstance(a, Vector) and a == b):
        raise TypingError(f"vmax: two vectors of one type, got {a}, {b}")

    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered(">", args[1], args[0]), args[1], args[0])
    return a(a, b), codegen


def _halves(builder, v):
    """(lanes 0 .. n/2 - 1, lanes n/2 .. n - 1) of an LLVM vector."""
    half = v.type.count // 2
    pick = [ir.Constant(ir.VectorType(ir.IntType(32), half), list(range(k, k + half))) for k in (0, half)]
    return builder.shuffle_vector(v, v, pick[0]), builder.shuffle_vector(v, v, pick[1])


@intrinsic
def vhsum(typingctx, v):
    """The sum of a vector's lanes (lanes a power of two) in a fixed tree: the upper half added to
    the lower half lane by lane, until one lane is left (16 lanes: ((l0 + l8) + (l4 + l12)) + ...)."""
    _vector_of(v, "vhsum")

    def codegen(context, builder, sig, args):
        x = args[0]
        while x.type.count > 1:
            lo, hi = _halves(builder, x)
            x = builder.fadd(lo, hi)
        return builder.extract_element(x, ir.Constant(ir.IntType(32), 0))
    return v.dtype(v), codegen


@intrinsic
def vhmax(typingctx, v):
    """The largest lane in vmax's tree (the upper half onto the lower), as vhsum's."""
    _vector_of(v, "vhmax")

    def codegen(context, builder, sig, args):
        x = args[0]
        while x.type.count > 1:
            lo, hi = _halves(builder, x)
            x = builder.select(builder.fcmp_ordered(">", hi, lo), hi, lo)
        return builder.extract_element(x, ir.Constant(ir.IntType(32), 0))
    return v.dtype(v), codegen


@intrinsic
def vwiden(typingctx, v):
    """A float vector's lanes as float64 (exact; float64 lanes as they are)."""
    _vector_of(v, "vwiden", (types.float32, types.float64))

    def codegen(context, builder, sig, args):
        if v.dtype == types.float64:
            return args[0]
        return builder.fpext(args[0], ir.VectorType(ir.DoubleType(), args[0].type.count))
    return Vector(types.float64, v.lanes)(v), codegen


@intrinsic
def vpast(typingctx, v, n, x):
    """v with every lane p >= n set to x (a scalar of v's type)."""
    _vector_of(v, "vpast")

    def codegen(context, builder, sig, args):
        count = args[0].type.count
        i64 = ir.IntType(64)
        n_ = context.cast(builder, args[1], sig.args[1], types.int64)
        lanes_ = ir.Constant(ir.VectorType(i64, count), list(range(count)))
        fill = _splat(builder, context.cast(builder, args[2], sig.args[2], v.dtype), count)
        return builder.select(builder.icmp_signed(">=", lanes_, _splat(builder, n_, count)), fill, args[0])
    return v(v, n, x), codegen


def _rne_lanes(builder, v):
    """_direct_bf16._rne on every lane of a <n x float>: the bfloat16 bits in <n x i32> (integer
    steps only, so the bits are the scalar kernel's on any CPU)."""
    n, i32 = v.type.count, ir.IntType(32)

    def k(c):
        return _splat(builder, ir.Constant(i32, c), n)
    u = builder.bitcast(v, ir.VectorType(i32, n))
    odd = builder.and_(builder.lshr(u, k(16)), k(1))
    r = builder.lshr(builder.add(builder.add(u, k(0x7FFF)), odd), k(16))
    nan = builder.icmp_unsigned(">", builder.and_(u, k(0x7FFFFFFF)), k(0x7F800000))
    return builder.select(nan, k(0x7FC0), r)


@intrinsic
def vbf16_pairs(typingctx, v):
    """Adjacent float32 lanes rounded to bfloat16 and packed into one uint32 (the even lane low)."""
    _vector_of(v, "vbf16_pairs", (types.float32,))
    if v.lanes % 2:
        raise TypingError(f"vbf16_pairs: an even number of lanes, got {v}")

    def codegen(context, builder, sig, args):
        r = _rne_lanes(builder, args[0])
        return builder.bitcast(builder.trunc(r, ir.VectorType(ir.IntType(16), v.lanes)),
                               ir.VectorType(ir.IntType(32), v.lanes // 2))
    return Vector(types.uint32, v.lanes // 2)(v), codegen


@intrinsic
def vbf16_zip(typingctx, lo, hi):
    """Lane i = the bfloat16 pair (lo_i rounded: low half, hi_i rounded: high half)."""
    _vector_of(lo, "vbf16_zip", (types.float32,))
    if lo != hi:
        raise TypingError(f"vbf16_zip: two vectors of one type, got {lo}, {hi}")

    def codegen(context, builder, sig, args):
        shift = _splat(builder, ir.Constant(ir.IntType(32), 16), lo.lanes)
        return builder.or_(_rne_lanes(builder, args[0]), builder.shl(_rne_lanes(builder, args[1]), shift))
    return Vector(types.uint32, lo.lanes)(lo, hi), codegen


class _BFloat(ir.Type):
    """LLVM's bfloat, which llvmlite's IR builder does not name (the AVX512-BF16 intrinsics take it)."""

    def _to_string(self):
        return "bfloat"

    def __eq__(self, other):
        return isinstance(other, _BFloat)

    def __hash__(self):
        return hash(_BFloat)


@intrinsic
def vdot_bf16(typingctx, acc, a, b):
    if not (isinstance(acc, Vector) and acc.dtype == types.float32 and acc.lanes in (16, 32, 64)
            and a == b == Vector(types.uint32, acc.lanes)):
        raise TypingError(f"vdot_bf16: float32 x 16k accumulators and two uint32 x 16k, got {acc}, {a}, {b}")

    def codegen(context, builder, sig, args):
        f32, i32 = ir.FloatType(), ir.IntType(32)
        part, pairs = ir.VectorType(f32, 16), ir.VectorType(_BFloat(), 32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(part, [part, pairs, pairs]),
                                            "llvm.x86.avx512bf16.dpbf16ps.512")

        def piece(v, k):  # lanes 16 k .. 16 k + 15 (a register of the whole vector)
            return builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, 16), list(range(16 * k, 16 * k + 16))))

        out = []
        for k in range(acc.lanes // 16):
            out.append(builder.call(fn, [piece(args[0], k), builder.bitcast(piece(args[1], k), pairs),
                                         builder.bitcast(piece(args[2], k), pairs)]))
        while len(out) > 1:  # concatenate pairwise back into one <lanes x float>
            both = ir.Constant(ir.VectorType(i32, 2 * out[0].type.count), list(range(2 * out[0].type.count)))
            out = [builder.shuffle_vector(out[i], out[i + 1], both) for i in range(0, len(out), 2)]
        return out[0]
    return acc(acc, a, b), codegen


@intrinsic
def wide(typingctx):
    """Let the calling kernel use 512-bit vectors where the CPU has them (LLVM's function attributes;
    llvmlite's checked set knows only the keyword attributes, hence the plain set.add)."""
    def codegen(context, builder, sig, args):
        for attr in ('"prefer-vector-width"="512"', '"min-legal-vector-width"="512"'):
            set.add(builder.function.attributes, attr)
        return context.get_dummy_value()
    return types.none(), codegen


# CPUs whose LLVM model has AVX-512 (for NUMBA_CPU_NAME without NUMBA_CPU_FEATURES, where numba
# passes no feature list and LLVM takes the model's own)
_AVX512_MODELS = ("skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake", "tigerlake",
                  "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids", "diamondrapids",
                  "znver4", "znver5", "x86-64-v4", "knl", "knm")


@functools.lru_cache(maxsize=None)
def target() -> tuple[str, str]:
    """(CPU name, feature list) numba compiles for: the host's, or NUMBA_CPU_NAME / _FEATURES'."""
    from numba.core.registry import cpu_target
    codegen = cpu_target.target_context.codegen()
    return codegen._get_host_cpu_name(), codegen._tm_features


@functools.lru_cache(maxsize=None)
def has_avx512() -> bool:
    """Whether the kernels compile for a CPU with AVX-512F (32 vector registers of 16 floats)."""
    name, features = target()
    if features:
        return "+avx512f" in features.split(",")
    return name.startswith(_AVX512_MODELS)


def lanes(dtype_bits: int = 32) -> int:
    """Lanes of one vector register for elements of this many bits on the CPU numba compiles for:
    512-bit registers (32 of them) with AVX-512, else 256-bit ones (16 with AVX2)."""
    return (512 if has_avx512() else 256) // dtype_bits
