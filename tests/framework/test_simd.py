"""framework/_simd.py: explicit vectors in numba kernels (values, the fused multiply-add's single
rounding, typing errors), 512-bit code where the CPU has AVX-512, and the lanes rule."""
import numba
import numpy as np
import pytest
from numba.core.errors import TypingError

from framework import _simd, _simd_math
from framework._simd import vadd, vfma, vload, vsplat, vstore, wide
from framework.functional.rows import vexp


@numba.njit
def _axpy8(a, x, y, out):
    """out[i:i + 8] = a x[i:i + 8] + y[i:i + 8], one fused multiply-add per lane."""
    for i in range(0, x.shape[0], 8):
        vstore(out, i, vfma(vsplat(a, 8), vload(x, i, 8), vload(y, i, 8)))


@numba.njit
def _add8(x, y, out):
    vstore(out, 0, vadd(vload(x, 0, 8), vload(y, 0, 8)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_ops_compute_per_lane(dtype):
    x = np.arange(16, dtype=dtype)
    y = np.linspace(-1, 1, 16).astype(dtype)
    out = np.empty(16, dtype)
    _axpy8(dtype(3), x, y, out)
    np.testing.assert_array_equal(out, dtype(3) * x + y)  # exact: small integers plus y
    _add8(x, y, out)
    np.testing.assert_array_equal(out[:8], x[:8] + y[:8])


@pytest.mark.parametrize("dtype,eps", [(np.float32, 2.0**-23), (np.float64, 2.0**-52)])
def test_vfma_rounds_once(dtype, eps):
    """(1 + e)(1 - e) - 1 = -e^2 exactly; a multiply then an add rounds the product to 1 first."""
    a = np.full(8, 1 + eps, dtype)
    b = np.full(8, 1 - eps, dtype)
    out = np.empty(8, dtype)

    @numba.njit
    def fused(a, b, c, out):
        vstore(out, 0, vfma(vload(a, 0, 8), vload(b, 0, 8), vsplat(c, 8)))

    fused(a, b, dtype(-1), out)
    assert (out == -dtype(eps) ** 2).all()
    assert ((a * b) + dtype(-1) == 0).all()  # numpy's separate rounding, for contrast


def test_typing_errors_name_the_problem():
    @numba.njit
    def runtime_lanes(x, n):
        return vload(x, 0, n)

    @numba.njit
    def strided(x):
        return vload(x[::2], 0, 4)

    with pytest.raises(TypingError, match="lanes must be a positive compile-time constant"):
        runtime_lanes(np.zeros(8, np.float32), 4)
    with pytest.raises(TypingError, match="contiguous 1-D array"):
        strided(np.zeros(8, np.float32))


@pytest.mark.skipif(not _simd.has_avx512(), reason="the CPU numba compiles for has no AVX-512")
def test_wide_kernels_use_512_bit_registers():
    """A wide() kernel's 16-lane float32 vectors are single zmm registers; LLVM's default tuning for
    Intel server CPUs would split them in two ymm halves."""
    @numba.njit
    def scale(x):
        wide()
        for i in range(0, x.shape[0], 16):
            vstore(x, i, vfma(vload(x, i, 16), vsplat(np.float32(2), 16), vsplat(np.float32(1), 16)))

    x = np.ones(64, np.float32)
    scale(x)
    np.testing.assert_array_equal(x, 3)
    asm = next(iter(scale.inspect_asm().values()))
    assert "zmm" in asm


def test_lanes_follow_the_target(monkeypatch):
    """A register's lanes: zmm with AVX-512, ymm without; from numba's feature list, or from the CPU
    model when NUMBA_CPU_NAME comes without one. The direct conv's blocks follow (8 x 2 registers with
    AVX-512's 32, 6 x 2 with AVX2's 16)."""
    from framework.functional import _direct
    cases = [(("rocketlake", "+avx2,+avx512f,+fma"), True), (("haswell", "+avx2,-avx512f,+fma"), False),
             (("sapphirerapids", ""), True), (("haswell", ""), False), (("znver4", ""), True),
             (("x86-64", ""), False), (("generic", ""), False)]
    for target, wide_ in cases:
        monkeypatch.setattr(_simd, "target", lambda target=target: target)
        _simd.has_avx512.cache_clear()
        assert _simd.has_avx512() is wide_, target
        assert _simd.lanes(32) == (16 if wide_ else 8) and _simd.lanes(64) == (8 if wide_ else 4)
        assert _direct.forward_block(np.float32) == ((8, 32) if wide_ else (6, 16))
        assert _direct.weight_grad_block(64, np.float32) == ((8, 32) if wide_ else (6, 16))
        assert _direct.weight_grad_block(16, np.float32) == ((8, 16) if wide_ else (6, 16))
    _simd.has_avx512.cache_clear()


def test_vector_accesses_are_bounds_checked_under_numba_boundscheck():
    """With NUMBA_BOUNDSCHECK=1 (tests/framework/functional/test_properties.py reruns the ops so)
    a vector load or store that reaches past either end of its array raises IndexError, as numba's
    own indexing does; a masked store checks only the lanes it writes."""
    import subprocess
    import sys
    child = """
import numba, numpy as np
from framework._simd import vload, vsplat, vstore, vstore_part
@numba.njit
def load(a, i):
    vstore(np.zeros(8, np.float32), 0, vload(a, i, 8))
@numba.njit
def part(a, i, lo, hi):
    vstore_part(a, i, vsplat(np.float32(1), 8), lo, hi)
a = np.zeros(16, np.float32)
out = []
for f, args in ((load, (a, 8)), (load, (a, 9)), (load, (a, -1)), (part, (a, -3, 3, 8)), (part, (a, 10, 0, 7)),
                (part, (a, 100, 5, 5))):
    try:
        f(*args)
        out.append("ok")
    except IndexError:
        out.append("IndexError")
print(" ".join(out))
"""
    import os
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1")
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["ok", "IndexError", "IndexError", "ok", "IndexError", "ok"]


@numba.njit
def _exp_lanes(x, out):
    for i in range(0, x.shape[0], 16):
        vstore(out, i, _simd_math.vexp_lanes(vload(x, i, 16)))


@numba.njit
def _exp_scalar(x, out):
    for i in range(x.shape[0]):
        out[i] = vexp(x[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vexp_lanes_is_vexp_in_every_lane(dtype):
    """Each lane the bits of rows.vexp (exp32's float32 steps; libm's exp in float64): across the
    range, the underflow edge (-87), overflow, infinities, NaN and signed zeros."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-100, 89, 4096), rng.uniform(-1, 1, 1024),
                        [np.nan, np.inf, -np.inf, 0.0, -0.0, -87.0, -87.00001, -86.99999, 88.7, 1e-30,
                         -1e-30, 87.5, 90.0]])
    x = np.concatenate([x, np.zeros(-x.size % 16)]).astype(dtype)
    got, want = np.empty_like(x), np.empty_like(x)
    _exp_lanes(x, got)
    _exp_scalar(x, want)
    bits = np.uint32 if dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(got.view(bits), want.view(bits))
    v = x[:5120].astype(np.float64)  # and exp's values: within exp32's few ulp (float64: libm's)
    ok = (v > -80) & (v < 80)
    bound = 5e-7 if dtype == np.float32 else 1e-15
    assert ok.sum() > 4000 and np.all(np.abs(got[:5120][ok] / np.exp(v[ok]) - 1) < bound)


@numba.njit
def _reductions(x, n):
    v, w = vload(x, 0, 16), vload(x, 16, 16)
    return (_simd.vhsum(_simd.vwiden(v)), _simd.vhmax(_simd.vmax(v, w)),
            _simd.vhmax(_simd.vpast(v, n, np.float32(-np.inf))), _simd.vhsum(_simd.vwiden(_simd.vsub(v, w))))


def test_lane_reductions_in_their_documented_tree():
    """vhsum: the upper half of the lanes added onto the lower until one is left (in float64 the
    order shows: 1e16 and 1 in lanes that the tree adds before the others); vhmax the largest,
    vpast's lanes from n on replaced, vwiden exact, vsub per lane."""
    x = np.zeros(32, np.float32)
    x[:16] = np.float32(1.0)
    x[0], x[8] = np.float32(1e16), np.float32(-1e16)  # lanes 0 and 8 meet first: they cancel exactly
    x[16:] = np.arange(16, dtype=np.float32)
    total, top, first, diff = _reductions(x, 5)
    lanes = x[:16].astype(np.float64)
    while lanes.size > 1:
        lanes = lanes[:lanes.size // 2] + lanes[lanes.size // 2:]
    assert total == lanes[0] == 14.0  # left to right: the seven ones before lane 8 lost, 7
    assert top == np.float32(1e16) and first == np.float32(1e16)
    d = (x[:16] - x[16:]).astype(np.float64)
    while d.size > 1:
        d = d[:d.size // 2] + d[d.size // 2:]
    assert diff == d[0]
    x[0] = np.float32(-5.0)
    assert _reductions(x, 5)[2] == np.float32(1.0) and _reductions(x, 1)[2] == np.float32(-5.0)


@numba.njit
def _bf16_lanes(x, y, pairs, zipped):
    for i in range(0, x.shape[0], 16):
        vstore(pairs, i // 2, _simd.vbf16_pairs(vload(x, i, 16)))
        vstore(zipped, i, _simd.vbf16_zip(vload(x, i, 16), vload(y, i, 16)))


def test_bf16_lanes_round_as_the_scalar_kernel():
    """vbf16_pairs: each lane _direct_bf16._rne's bits (round_bits: to nearest even, NaN to 0x7FC0),
    lanes 2i and 2i + 1 in the low and high half of uint32 i; vbf16_zip: lane i = (x_i, y_i). Ties
    both ways, overflow to inf, denormals, signed zeros, infinities, NaNs with payloads and signs."""
    from framework.functional._direct_bf16 import round_bits
    rng = np.random.default_rng(4)
    special = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF, 0x7F7F8000, 0x00000001, 0x80000001,
                        0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFF800001,
                        0x7FFFFFFF, 0xFFFFFFFF], np.uint32)
    u = np.concatenate([special, rng.integers(0, 2 ** 32, 4096 - special.size, dtype=np.uint32)])
    x, y = u.view(np.float32), u[::-1].copy().view(np.float32)
    pairs, zipped = np.empty(u.size // 2, np.uint32), np.empty(u.size, np.uint32)
    _bf16_lanes(x, y, pairs, zipped)
    want = round_bits(x).astype(np.uint32)
    np.testing.assert_array_equal(pairs, want[0::2] | (want[1::2] << np.uint32(16)))
    np.testing.assert_array_equal(zipped, want | (round_bits(y).astype(np.uint32) << np.uint32(16)))


@numba.njit
def _exp_fused(x, out):
    for i in range(0, x.shape[0], 16):
        vstore(out, i, _simd_math.vexp_fused(vload(x, i, 16)))


def test_vexp_fused_is_exp_within_an_ulp():
    """exp32's steps with fused multiply-adds (the AMX attention's softmax): within one ulp of exp
    over [-87, 88] (measured: 0.997; like exp32 it is for t <= 88: a softmax's t <= 0), 0 below -87
    and at -inf, NaN kept, 1 at both zeros."""
    x = np.concatenate([np.linspace(-87, 88, 200_000), [-87.00001, -100.0, -np.inf, np.nan, 0.0, -0.0]])
    x = np.concatenate([x, np.zeros(-x.size % 16)]).astype(np.float32)
    got = np.empty_like(x)
    _exp_fused(x, got)
    ok = (x >= -87) & (x <= 88)
    want = np.exp(x[ok].astype(np.float64))
    ulps = np.abs(got[ok] - want) / np.spacing(want.astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 1.0
    tail = got[200_000:200_006]
    assert (tail[:3] == 0).all() and np.isnan(tail[3]) and (tail[4:] == 1).all()
