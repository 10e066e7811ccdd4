"""AMX tile instructions for numba kernels, as inline assembly (functional/_direct_amx.py uses them).

LLVM's AMX intrinsics take its `x86_amx` type, which llvmlite cannot name, so each instruction here
is one `asm sideeffect` statement on the explicit tile registers tmm0..tmm7 (a compile-time
constant), its addresses in general registers. The statements clobber memory, so LLVM neither
reorders them nor moves loads and stores across them; the tile registers are invisible to LLVM,
which never uses them itself.

    tile_config(cfg)                 ldtilecfg: every tile 16 rows x 64 bytes (CONFIG); once per
                                     thread before its first tile instruction (the state is per thread)
    tile_load(a, offset, stride, t)  tileloadd: tmm_t row r = the 64 bytes at a's data + offset + r stride
    tile_store(a, offset, stride, t) tilestored: the reverse
    tile_zero(t)                     tilezero
    tile_dot(c, a, b)                tdpbf16ps tmm_c += tmm_a . tmm_b: c[m, n] (float32) += sum_k
                                     a[m, 2k] b[k, 2n] + a[m, 2k + 1] b[k, 2n + 1] (bfloat16 pairs)
    tile_release()                   tilerelease: the thread's tile state back to its initial state

and, from them, the 2 x 2 block every AMX kernel runs (block_zero, block_load, block_store, operands,
step, last_step, last_step_next: inline helpers, below), the 1 x 3 block of a narrow forward (row_*) and the 2 x 1
block of a narrow weight gradient (col_*).

Offsets and strides are in bytes and unchecked: validate before the kernel runs. A process must ask
Linux for the tile data first (framework/precision.py does, once), or its first tile instruction
is killed by SIGILL.
"""
from __future__ import annotations

import numpy as np
import llvmlite.binding as llvm
from llvmlite import ir
from numba import types
from numba.core.errors import TypingError
from numba.extending import intrinsic

from ._jit import kernel

__all__ = ["CONFIG", "tile_config", "tile_load", "tile_store", "tile_zero", "tile_dot", "tile_release",
           "block_zero", "block_load", "block_store", "operands", "step", "last_step", "last_step_next",
           "row_zero", "row_store", "row_operands", "row_step", "row_last", "row_last_next",
           "col_load", "col_store", "col_operands", "col_step", "col_last"]

# LLVM compiles inline assembly through its assembly parser, which numba does not initialise
llvm.initialize_native_asmparser()


def _config():
    """The 64-byte tile configuration: palette 1, tmm0..tmm7 each 16 rows of 64 bytes."""
    cfg = np.zeros(64, np.uint8)
    cfg[0] = 1
    cfg[16:32].view(np.uint16)[:] = 64  # bytes per row of each tile
    cfg[48:56] = 16  # rows of each tile
    return cfg


CONFIG = _config()
_I64 = ir.IntType(64)


def _tile(t, what):
    if not isinstance(t, types.IntegerLiteral) or not 0 <= t.literal_value < 8:
        raise TypingError(f"{what}: a tile register must be a constant 0..7, got {t}")
    return t.literal_value


def _address(context, builder, arrty, arr, offset=None):
    """The integer address of arr's data (+ offset bytes)."""
    p = builder.ptrtoint(context.make_array(arrty)(context, builder, arr).data, _I64)
    return p if offset is None else builder.add(p, offset)


def _asm(builder, text, operands, constraint=""):
    fnty = ir.FunctionType(ir.VoidType(), [_I64] * len(operands))
    builder.asm(fnty, text, ",".join([constraint] * len(operands) + ["~{memory}"]) if operands else "~{memory}",
                operands, side_effect=True)


@intrinsic
def tile_config(typingctx, cfg):
    def codegen(context, builder, sig, args):
        _asm(builder, "ldtilecfg ($0)", [_address(context, builder, sig.args[0], args[0])], "r")
        return context.get_dummy_value()
    return types.none(cfg), codegen


@intrinsic
def tile_release(typingctx):
    def codegen(context, builder, sig, args):
        _asm(builder, "tilerelease", [])
        return context.get_dummy_value()
    return types.none(), codegen


def _memory_op(name, text):
    def typer(typingctx, arr, offset, stride, t):
        if not isinstance(arr, types.Array):
            raise TypingError(f"{text}: an array, got {arr}")
        tmm = _tile(t, text)

        def codegen(context, builder, sig, args):
            off = context.cast(builder, args[1], sig.args[1], types.int64)
            stride_ = context.cast(builder, args[2], sig.args[2], types.int64)
            _asm(builder, text.format(t=tmm), [_address(context, builder, sig.args[0], args[0], off), stride_], "r")
            return context.get_dummy_value()
        return types.none(arr, offset, stride, t), codegen
    typer.__name__ = typer.__qualname__ = name
    return typer


tile_load = intrinsic(_memory_op("tile_load", "tileloadd ($0,$1,1), %tmm{t}"))
tile_store = intrinsic(_memory_op("tile_store", "tilestored %tmm{t}, ($0,$1,1)"))


@intrinsic
def tile_zero(typingctx, t):
    tmm = _tile(t, "tile_zero")

    def codegen(context, builder, sig, args):
        _asm(builder, f"tilezero %tmm{tmm}", [])
        return context.get_dummy_value()
    return types.none(t), codegen


@intrinsic
def tile_dot(typingctx, c, a, b):
    tc, ta, tb = _tile(c, "tile_dot"), _tile(a, "tile_dot"), _tile(b, "tile_dot")
    if len({tc, ta, tb}) < 3:
        raise TypingError(f"tile_dot: three different tiles, got tmm{tc}, tmm{ta}, tmm{tb}")

    def codegen(context, builder, sig, args):
        _asm(builder, f"tdpbf16ps %tmm{tb}, %tmm{ta}, %tmm{tc}", [])
        return context.get_dummy_value()
    return types.none(c, a, b), codegen


# -- the 2 x 2 block every AMX kernel runs (tmm0..tmm3: 32 x 32 float32 sums; tmm4, tmm5: two tiles of
# the left operand, 16 rows apart; tmm6, tmm7: two of the right one, 16 columns apart). Inline
# helpers (numba copies them into each kernel: a call it does not inline would cost each step).

@kernel(inline=True)
def block_zero():
    tile_zero(0)
    tile_zero(1)
    tile_zero(2)
    tile_zero(3)


@kernel(inline=True)
def block_load(c, z, stride):
    """tmm0..tmm3 = the 32 x 32 float32 block of c at byte z (row stride `stride`)."""
    tile_load(c, z, stride, 0)
    tile_load(c, z + 64, stride, 1)
    tile_load(c, z + 16 * stride, stride, 2)
    tile_load(c, z + 16 * stride + 64, stride, 3)


@kernel(inline=True)
def block_store(c, z, stride):
    """The 32 x 32 float32 block tmm0..tmm3 into c at byte z (row stride `stride`)."""
    tile_store(c, z, stride, 0)
    tile_store(c, z + 64, stride, 1)
    tile_store(c, z + 16 * stride, stride, 2)
    tile_store(c, z + 16 * stride + 64, stride, 3)


@kernel(inline=True)
def operands(a, x, sa, b, y, sb):
    """A step's operands: tmm4, tmm5 = 16 rows of a at byte x and 16 rows further (row stride sa);
    tmm6, tmm7 = 16 rows of b at byte y and 64 bytes further (row stride sb)."""
    tile_load(a, x, sa, 4)
    tile_load(b, y, sb, 6)
    tile_load(a, x + 16 * sa, sa, 5)
    tile_load(b, y + 64, sb, 7)


@kernel(inline=True)
def step(a, x, sa, b, y, sb):
    """This step's four products into the block, the next step's operands (as `operands`) loaded
    behind them: the tile unit does not rename tiles, so a load waits for the products still reading
    its tile, and loading all four first left the unit idle (docs/benchmarks.md)."""
    tile_dot(0, 4, 6)
    tile_dot(1, 4, 7)
    tile_dot(2, 5, 6)
    tile_load(a, x, sa, 4)
    tile_load(b, y, sb, 6)
    tile_dot(3, 5, 7)
    tile_load(a, x + 16 * sa, sa, 5)
    tile_load(b, y + 64, sb, 7)


@kernel(inline=True)
def last_step():
    """The last step's four products."""
    tile_dot(0, 4, 6)
    tile_dot(1, 4, 7)
    tile_dot(2, 5, 6)
    tile_dot(3, 5, 7)


@kernel(inline=True)
def last_step_next(c, z, stride, a, x, sa, b, y, sb):
    """last_step, block_store(c, z, stride), block_zero and the next block's operands(a, x, sa, b,
    y, sb), interleaved: each sum tile is stored as soon as its last product is issued and zeroed
    behind its store, each operand tile reloaded as soon as the products reading it are issued, so
    the tile unit does not wait for the four stores between two blocks (the same sums in the same
    order: the same bits; the forward's products and stores 5-15% faster, 1-3% with its epilogue:
    docs/benchmarks.md)."""
    tile_dot(0, 4, 6)
    tile_dot(1, 4, 7)
    tile_store(c, z, stride, 0)
    tile_load(a, x, sa, 4)
    tile_dot(2, 5, 6)
    tile_store(c, z + 64, stride, 1)
    tile_zero(0)
    tile_load(b, y, sb, 6)
    tile_dot(3, 5, 7)
    tile_store(c, z + 16 * stride, stride, 2)
    tile_zero(1)
    tile_load(a, x + 16 * sa, sa, 5)
    tile_store(c, z + 16 * stride + 64, stride, 3)
    tile_zero(2)
    tile_load(b, y + 64, sb, 7)
    tile_zero(3)


# -- the 1 x 3 block of a narrow product (16 rows of the left operand: a convolution with at most 16
# outputs, where the 2 x 2 block wasted half its products on padding): tmm0..tmm2 = 16 x 48 float32
# sums, tmm4 = the left operand's 16 rows, tmm5..tmm7 = three tiles of the right one, 16 columns
# apart (tmm3 unused).

@kernel(inline=True)
def row_zero():
    tile_zero(0)
    tile_zero(1)
    tile_zero(2)


@kernel(inline=True)
def row_store(c, z, stride):
    """The 16 x 48 float32 block tmm0..tmm2 into c at byte z (row stride `stride`)."""
    tile_store(c, z, stride, 0)
    tile_store(c, z + 64, stride, 1)
    tile_store(c, z + 128, stride, 2)


@kernel(inline=True)
def row_operands(a, x, sa, b, y, sb):
    """A narrow step's operands: tmm4 = 16 rows of a at byte x (row stride sa); tmm5..tmm7 = 16 rows
    of b at byte y, y + 64, y + 128 (row stride sb)."""
    tile_load(b, y, sb, 5)
    tile_load(a, x, sa, 4)
    tile_load(b, y + 64, sb, 6)
    tile_load(b, y + 128, sb, 7)


@kernel(inline=True)
def row_step(a, x, sa, b, y, sb):
    """This narrow step's three products, the next step's operands loaded behind them (as `step`)."""
    tile_dot(0, 4, 5)
    tile_dot(1, 4, 6)
    tile_load(b, y, sb, 5)
    tile_dot(2, 4, 7)
    tile_load(b, y + 64, sb, 6)
    tile_load(a, x, sa, 4)
    tile_load(b, y + 128, sb, 7)


@kernel(inline=True)
def row_last():
    """The last narrow step's three products."""
    tile_dot(0, 4, 5)
    tile_dot(1, 4, 6)
    tile_dot(2, 4, 7)


@kernel(inline=True)
def row_last_next(c, z, stride, a, x, sa, b, y, sb):
    """row_last, row_store(c, z, stride), row_zero and the next block's row_operands, interleaved
    (as last_step_next)."""
    tile_dot(0, 4, 5)
    tile_store(c, z, stride, 0)
    tile_load(b, y, sb, 5)
    tile_dot(1, 4, 6)
    tile_store(c, z + 64, stride, 1)
    tile_zero(0)
    tile_load(b, y + 64, sb, 6)
    tile_dot(2, 4, 7)
    tile_store(c, z + 128, stride, 2)
    tile_zero(1)
    tile_load(a, x, sa, 4)
    tile_load(b, y + 128, sb, 7)
    tile_zero(2)


# -- the 2 x 1 block of a narrow weight gradient (16 outputs: the 2 x 2 block's right half was
# padding): tmm0, tmm2 = 32 x 16 float32 sums (rows 16 apart, as in the 2 x 2 block), tmm4, tmm5 = two
# tiles of the left operand, tmm6 = one of the right one.

@kernel(inline=True)
def col_load(c, z, stride):
    """tmm0, tmm2 = the 32 x 16 float32 block of c at byte z (row stride `stride`)."""
    tile_load(c, z, stride, 0)
    tile_load(c, z + 16 * stride, stride, 2)


@kernel(inline=True)
def col_store(c, z, stride):
    """The 32 x 16 float32 block tmm0, tmm2 into c at byte z (row stride `stride`)."""
    tile_store(c, z, stride, 0)
    tile_store(c, z + 16 * stride, stride, 2)


@kernel(inline=True)
def col_operands(a, x, sa, b, y, sb):
    """A narrow step's operands: tmm4, tmm5 = 16 rows of a at byte x and 16 rows further (row stride
    sa); tmm6 = 16 rows of b at byte y (row stride sb)."""
    tile_load(a, x, sa, 4)
    tile_load(b, y, sb, 6)
    tile_load(a, x + 16 * sa, sa, 5)


@kernel(inline=True)
def col_step(a, x, sa, b, y, sb):
    """This narrow step's two products, the next step's operands loaded behind them (as `step`)."""
    tile_dot(0, 4, 6)
    tile_load(a, x, sa, 4)
    tile_dot(2, 5, 6)
    tile_load(b, y, sb, 6)
    tile_load(a, x + 16 * sa, sa, 5)


@kernel(inline=True)
def col_last():
    """The last narrow step's two products."""
    tile_dot(0, 4, 6)
    tile_dot(2, 5, 6)
