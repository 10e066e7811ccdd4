"""Property tests (hypothesis) over the arguments of the ops whose numba kernels index memory
directly: interpolate, conv2d, conv_transpose2d, avg/max/adaptive pooling, pixel (un)shuffle.

Each example draws small random shapes and arguments, invalid ones included. The call must either
return or raise ValueError / TypeError; any other exception fails, and a segfault would kill pytest
(visible). When torch is installed each call is also run through torch in float64:
  - torch refuses  -> ours must refuse (ValueError / TypeError),
  - torch accepts  -> ours must accept, with the same shape, the same values and the same gradients
    (a kernel reading out of bounds would show as wrong values, one writing out of bounds in a
    backward scatter as wrong gradients); the one allowed difference: where torch returns an
    empty tensor (an output size of 0), srgrad refuses with a ValueError, and integer input, which
    some torch ops accept, is a TypeError in srgrad (differentiable ops take float input);
without torch the output shape is checked against the documented formula.
Profiles: "ci" (default: 60 examples per test, derandomized, so every run tries the same ones) and
"explore" (1000 random examples per test:
`SRGRAD_HYPOTHESIS_PROFILE=explore pytest tests/reliability/test_ops_properties.py`).
"""
import math
import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import framework as sg  # noqa: E402
from framework import functional as F  # noqa: E402

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # shapes are then checked against the formulas
    torch = TF = None

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", max_examples=1000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("SRGRAD_HYPOTHESIS_PROFILE", "ci"))

REFUSALS = (ValueError, TypeError)


# -- the one property -----------------------------------------------------------------------------
def check(ours, theirs, arrays, expected_shape=None, note="", values=True, linear=False):
    """`ours(*Tensors)` and `theirs(*torch tensors)` on the same `arrays` (the first is the input;
    every float array gets a gradient). See the module docstring for what must hold.
    `expected_shape`: a callable giving the documented output shape (used without torch); `note`
    (the arguments) goes into failure messages; values=False compares with torch's shape only;
    linear=True (an op linear in its one input) checks srgrad's gradient by the adjoint identity
    <ours(v), g> = <v, dL/dx> instead of against torch's backward."""
    mine = [sg.tensor(a, requires_grad=a.dtype.kind == "f", dtype=a.dtype) for a in arrays]
    try:
        out = ours(*mine)
        refused = None
    except REFUSALS as exc:
        out, refused = None, exc
    if out is not None:
        assert isinstance(out, sg.Tensor) and out.dtype == arrays[0].dtype, note
    if torch is None:
        if out is not None and expected_shape is not None:
            assert out.shape == tuple(expected_shape())
        return
    tt = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    try:
        ref = theirs(*tt)
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        assert out is None, f"{note}: torch refuses ({exc}) but srgrad returned shape {out.shape}"
        return
    if refused is not None and ref.numel() == 0:
        return  # torch returns an empty tensor; srgrad refuses empty outputs (documented)
    if isinstance(refused, TypeError) and arrays[0].dtype.kind != "f":
        return  # torch averages integers; srgrad's differentiable ops take float input only
    assert refused is None, \
        f"{note}: torch accepts (shape {tuple(ref.shape)}) but srgrad refused: {refused}"
    assert out.shape == tuple(ref.shape), note
    if not values:
        return
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-7, atol=1e-9,
                               err_msg=f"{note}: forward")
    if out.data.size == 0 or not any(t.requires_grad for t in mine):
        return
    g = np.random.default_rng(0).standard_normal(out.shape)
    out.backward(sg.tensor(g, dtype=out.dtype))
    if linear:
        # the forward matched torch's, so this pins the gradient to torch's forward as well
        v = np.random.default_rng(1).standard_normal(arrays[0].shape)
        lhs = float(np.sum(ours(sg.tensor(v)).data * g))
        rhs = float(np.sum(v * mine[0].grad.data))
        assert abs(lhs - rhs) <= 1e-9 * (1 + abs(lhs)), f"{note}: adjoint {lhs} vs {rhs}"
        return
    if not np.isfinite(out.data).all():
        # a max-pool window made only of padding is -inf, as in torch; torch 2.13's backward then
        # aborts the process (an index of -1), so only check that no gradient came from nowhere
        for m in mine:
            assert m.grad is None or np.isfinite(m.grad.data).all(), note
        return
    ref.backward(torch.tensor(g))
    for m, t in zip(mine, tt):
        if t.requires_grad:
            want = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
            got = np.zeros(m.shape) if m.grad is None else m.grad.data
            np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9,
                                       err_msg=f"{note}: gradient of input {len(want.shape)}-d "
                                               f"{tuple(want.shape)}")


def data(seed, shape, dtype=np.float64):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-3, 4, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


seeds = st.integers(0, 2**32 - 1)
dtypes = st.sampled_from([np.float64] * 12 + [np.int64])  # integer input: a TypeError


def int_or_pair(values):
    return st.one_of(values, st.tuples(values, values))


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def out_len(size, k, s, p, d=1, ceil=False):
    span = size + 2 * p - d * (k - 1) - 1
    n = (-(-span // s) if ceil else span // s) + 1
    if ceil and (n - 1) * s >= size + p:  # the last window must start inside the input or padding
        n -= 1
    return n


# -- convolutions ---------------------------------------------------------------------------------
@st.composite
def conv_case(draw, transposed=False):
    groups = draw(st.sampled_from([1, 1, 1, 2, 3, 0]))
    g = max(groups, 1)
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    c = g * cg + draw(st.sampled_from([0] * 12 + [1]))  # sometimes not divisible by groups
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 7)), draw(st.integers(1, 7))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    w_in = cg + draw(st.sampled_from([0] * 12 + [1]))  # sometimes mismatching the input
    weight_shape = (c, og, kh, kw) if transposed else (g * og, w_in, kh, kw)
    out_channels = g * og
    bias_len = out_channels + draw(st.sampled_from([0] * 12 + [-1, 1]))
    kw_args = {
        "stride": draw(int_or_pair(st.integers(0, 3))),
        "dilation": draw(int_or_pair(st.integers(0, 3))),
        "groups": groups,
    }
    if transposed:
        kw_args["padding"] = draw(int_or_pair(st.integers(-1, 3)))
        kw_args["output_padding"] = draw(int_or_pair(st.integers(0, 3)))
    else:
        kw_args["padding"] = draw(st.one_of(int_or_pair(st.integers(-1, 3)),
                                            st.sampled_from(["same", "valid", "full"])))
    seed, dtype = draw(seeds), draw(dtypes)
    arrays = [data(seed, (n, c if transposed else c, h, w), dtype),
              data(seed + 1, weight_shape)]
    if draw(st.booleans()):
        arrays.append(data(seed + 2, (max(bias_len, 0),)))
    return arrays, kw_args


@given(conv_case())
def test_conv2d(case):
    arrays, kw = case

    def shape():
        x, w = arrays[0], arrays[1]
        if kw["padding"] in ("same", "valid"):
            return None
        (sh, sw), (ph, pw), (dh, dw) = pair(kw["stride"]), pair(kw["padding"]), pair(kw["dilation"])
        return (x.shape[0], w.shape[0], out_len(x.shape[2], w.shape[2], sh, ph, dh),
                out_len(x.shape[3], w.shape[3], sw, pw, dw))

    check(lambda *t: F.conv2d(*t, **kw), lambda *t: TF.conv2d(*t, **kw), arrays,
          shape if kw["padding"] not in ("same", "valid", "full") else None, kw)


@given(conv_case(transposed=True))
def test_conv_transpose2d(case):
    arrays, kw = case

    def shape():
        x, w = arrays[0], arrays[1]
        (sh, sw), (ph, pw) = pair(kw["stride"]), pair(kw["padding"])
        (dh, dw), (oh, ow) = pair(kw["dilation"]), pair(kw["output_padding"])
        return (x.shape[0], w.shape[1] * max(kw["groups"], 1),
                (x.shape[2] - 1) * sh - 2 * ph + dh * (w.shape[2] - 1) + oh + 1,
                (x.shape[3] - 1) * sw - 2 * pw + dw * (w.shape[3] - 1) + ow + 1)

    check(lambda *t: F.conv_transpose2d(*t, **kw), lambda *t: TF.conv_transpose2d(*t, **kw),
          arrays, shape, kw)


# -- pooling --------------------------------------------------------------------------------------
@st.composite
def image(draw, max_side=8):
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    h, w = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    return data(draw(seeds), (n, c, h, w), draw(dtypes))


@given(image(), st.data())
def test_avg_pool2d(x, d):
    kw = {
        "kernel_size": d.draw(int_or_pair(st.integers(0, 4))),
        "stride": d.draw(st.one_of(st.none(), int_or_pair(st.integers(0, 3)))),
        "padding": d.draw(int_or_pair(st.integers(-1, 2))),
        "ceil_mode": d.draw(st.booleans()),
        "count_include_pad": d.draw(st.booleans()),
        "divisor_override": d.draw(st.sampled_from([None] * 6 + [0, 1, 3])),
    }

    def shape():
        k, p = pair(kw["kernel_size"]), pair(kw["padding"])
        s = k if kw["stride"] is None else pair(kw["stride"])
        return x.shape[:2] + tuple(out_len(x.shape[2 + i], k[i], s[i], p[i],
                                           ceil=kw["ceil_mode"]) for i in range(2))

    check(lambda t: F.avg_pool2d(t, **kw), lambda t: TF.avg_pool2d(t, **kw), [x], shape, kw)


@given(image(), st.data())
def test_max_pool2d(x, d):
    kw = {
        "kernel_size": d.draw(int_or_pair(st.integers(0, 4))),
        "stride": d.draw(st.one_of(st.none(), int_or_pair(st.integers(0, 3)))),
        "padding": d.draw(int_or_pair(st.integers(-1, 2))),
        "dilation": d.draw(int_or_pair(st.integers(0, 3))),
        "ceil_mode": d.draw(st.booleans()),
    }

    def shape():
        k, p, dil = pair(kw["kernel_size"]), pair(kw["padding"]), pair(kw["dilation"])
        s = k if kw["stride"] is None else pair(kw["stride"])
        return x.shape[:2] + tuple(out_len(x.shape[2 + i], k[i], s[i], p[i], dil[i],
                                           kw["ceil_mode"]) for i in range(2))

    check(lambda t: F.max_pool2d(t, **kw), lambda t: TF.max_pool2d(t, **kw), [x], shape, kw)


@given(image(), st.one_of(st.integers(0, 6), st.tuples(st.one_of(st.none(), st.integers(0, 6)),
                                                       st.one_of(st.none(), st.integers(0, 6)))))
def test_adaptive_avg_pool2d(x, size):
    expected = None
    if isinstance(size, int):
        expected = x.shape[:2] + (size, size)
    else:
        expected = x.shape[:2] + tuple(x.shape[2 + i] if s is None else s
                                       for i, s in enumerate(size))
    check(lambda t: F.adaptive_avg_pool2d(t, size), lambda t: TF.adaptive_avg_pool2d(t, size),
          [x], lambda: expected, size)


# -- pixel shuffle --------------------------------------------------------------------------------
@given(st.integers(-1, 4), st.integers(1, 2), st.integers(1, 5), st.integers(1, 6),
       st.integers(1, 6), seeds, dtypes, st.booleans())
def test_pixel_shuffle_and_unshuffle(r, n, k, h, w, seed, dtype, exact):
    c = k * r * r if exact and r > 0 else k
    x = data(seed, (n, c, h, w), dtype)
    check(lambda t: F.pixel_shuffle(t, r), lambda t: TF.pixel_shuffle(t, r), [x],
          lambda: (n, c // (r * r), h * r, w * r))
    hh, ww = (h * r, w * r) if exact and r > 0 else (h, w)
    x = data(seed, (n, k, hh, ww), dtype)
    check(lambda t: F.pixel_unshuffle(t, r), lambda t: TF.pixel_unshuffle(t, r), [x],
          lambda: (n, k * r * r, hh // r, ww // r))


# -- interpolate ----------------------------------------------------------------------------------
TORCH_MODES = ["nearest", "nearest-exact", "bilinear", "bicubic", "area"]
OUR_MODES = ["lanczos", "lanczos3"]


@given(image(max_side=7), st.data())
def test_interpolate(x, d):
    mode = d.draw(st.sampled_from(TORCH_MODES + OUR_MODES + ["trilinear", "Bilinear"]))
    if d.draw(st.booleans()):
        size, scale = d.draw(st.one_of(st.integers(0, 12), st.tuples(st.integers(0, 12),
                                                                      st.integers(0, 12)))), None
    else:
        factor = st.one_of(st.floats(0.25, 3.5), st.sampled_from([0.0, -1.0, 2, 0.5]))
        size, scale = None, d.draw(st.one_of(factor, st.tuples(factor, factor)))
    if d.draw(st.integers(0, 9)) == 0:  # both or neither: a refusal
        size, scale = (None, None) if size is None and d.draw(st.booleans()) else (4, 2.0)
    kw = {"size": size, "scale_factor": scale, "mode": mode,
          "align_corners": d.draw(st.sampled_from([None, None, False, True])),
          "antialias": d.draw(st.booleans()),
          "recompute_scale_factor": d.draw(st.sampled_from([None, None, True, False]))}
    if mode in OUR_MODES:  # not in torch: shape and contract only
        mine = sg.tensor(x, requires_grad=x.dtype.kind == "f", dtype=x.dtype)
        try:
            out = F.interpolate(mine, **kw)
        except REFUSALS:
            return
        if size is not None:
            want = pair(size)
        else:
            s = (scale, scale) if not isinstance(scale, tuple) else scale
            want = tuple(math.floor(x.shape[2 + i] * s[i]) for i in range(2))
        assert out.shape == x.shape[:2] + want and np.isfinite(out.data).all()
        return
    # Two torch 2.13 bugs, measured: antialiased bilinear/bicubic copies its first output row
    # (column) to the others when the input or the output is 1 pixel wide (high) -- srgrad
    # computes each column alone, as torch does otherwise, so only shapes are compared there; and
    # bicubic's backward passes the gradient through unchanged along an axis whose size does not
    # change, although its forward (with a scale_factor) does not -- so the gradient is checked by
    # the adjoint identity against the (torch-checked) forward instead of torch's backward.
    if size is not None:
        out_size = pair(size)
    elif scale is not None:
        factors = scale if isinstance(scale, tuple) else (scale, scale)
        out_size = tuple(math.floor(x.shape[2 + i] * factors[i]) for i in range(2))
    else:
        out_size = ()  # neither: a refusal
    torch_bug = (kw["antialias"] and mode in ("bilinear", "bicubic")
                 and 1 in x.shape[2:] + out_size)
    check(lambda t: F.interpolate(t, **kw), lambda t: TF.interpolate(t, **kw), [x], None, kw,
          values=not torch_bug, linear=True)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolate_antialias_one_pixel_wide_is_column_by_column(mode):
    """Where the property test cannot use torch: a 1-pixel-wide image is resized like one column
    of a wider image (torch's own result for the wider image is the reference)."""
    x = data(7, (1, 1, 5, 1))
    wide = np.repeat(x, 3, axis=3)
    ours = F.interpolate(sg.tensor(x), size=(3, 1), mode=mode, antialias=True).data
    ours_wide = F.interpolate(sg.tensor(wide), size=(3, 3), mode=mode, antialias=True).data
    np.testing.assert_allclose(ours[..., 0], ours_wide[..., 0], rtol=1e-12, atol=1e-12)
    if torch is not None:
        ref = TF.interpolate(torch.tensor(wide), size=(3, 3), mode=mode, antialias=True).numpy()
        np.testing.assert_allclose(ours[..., 0], ref[..., 0], rtol=1e-7, atol=1e-9)


@st.composite
def direct_case(draw, transposed=False):
    """Shapes of the direct route (conv.py's _direct_route: stride 1, no dilation or groups, 12+
    output channels, 32+ products per output): odd and one-pixel maps, every padding, kernels 1-5."""
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    c, o = draw(st.integers(-(-32 // (kh * kw)), 40)), draw(st.integers(16, 40))
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    if transposed:  # stride 1: the direct forward of the flipped kernel
        padding = draw(int_or_pair(st.integers(0, 4)))
        weight = (c, o, kh, kw)
    else:
        padding = draw(st.one_of(int_or_pair(st.integers(0, 3)), st.just("same")))
        weight = (o, c, kh, kw)
    seed = draw(seeds)
    arrays = [data(seed, (n, c, h, w)), data(seed + 1, weight)]
    if draw(st.booleans()):
        arrays.append(data(seed + 2, (o,)))
    return arrays, {"padding": padding}


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@given(direct_case())
def test_conv2d_direct_route(case):
    arrays, kw = case
    check(lambda *t: F.conv2d(*t, **kw), lambda *t: TF.conv2d(*t, **kw), arrays, None, kw)


@given(direct_case(transposed=True))
def test_conv_transpose2d_direct_route(case):
    arrays, kw = case
    check(lambda *t: F.conv_transpose2d(*t, **kw), lambda *t: TF.conv_transpose2d(*t, **kw), arrays,
          None, kw)


# -- out-of-bounds accesses, checked by numba itself ---------------------------------------------
# Wrong values show a stray read only when the stray memory differs; a stray write corrupts the heap
# and may abort the process much later, in another test. So the same tests run again in a child
# process with NUMBA_BOUNDSCHECK=1 (every kernel indexing checked; compiled into a private cache,
# about 30 s), with edge cases the explore profile found (all fixed in dd707ff and after).
BOUNDSCHECK = os.environ.get("NUMBA_BOUNDSCHECK") == "1"

EDGE_CASES = [
    # windows that start left of the input and lie wholly outside it (conv._valid_range clamps
    # i0 to count but not i1, so im2col / col2im touch columns [1, 2) of a 1-wide row)
    ("conv2d", [(1, 1, 2, 1), (1, 1, 1, 4)], dict(stride=2, dilation=2, padding=3)),
    ("conv_transpose2d", [(1, 1, 1, 1), (1, 1, 3, 3)], dict(stride=2, dilation=3, padding=3)),
    ("conv2d", [(1, 1, 1, 1), (2, 1, 3, 2)], dict(dilation=2, padding="same")),
    # stride 1: the flipped-correlation path's im2col assigns a 2-wide slice into an empty one (a
    # ValueError from inside numba where torch returns a (1, 1, 1, 1) result)
    ("conv_transpose2d", [(1, 1, 4, 1), (1, 1, 2, 3)], dict(stride=1, dilation=3, padding=3)),
    # a max-pool window made only of padding (pool._max_window gives it the index h0 * W + w0,
    # past the input, and the backward adds a gradient there)
    ("max_pool2d", [(1, 1, 1, 1)], dict(kernel_size=2, padding=1, dilation=2)),
]


@pytest.mark.parametrize("op,shapes,kw", EDGE_CASES, ids=[c[0] for c in EDGE_CASES])
def test_edge_cases(op, shapes, kw):
    arrays = [data(i, shape) for i, shape in enumerate(shapes)]
    check(lambda *t: getattr(F, op)(*t, **kw), lambda *t: getattr(TF, op)(*t, **kw), arrays,
          None, kw)


@pytest.mark.skipif(BOUNDSCHECK, reason="already bounds-checked: this is the child")
def test_every_op_test_again_with_numba_boundscheck(tmp_path):
    import subprocess
    import sys
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    # -n 0: in one process (this test's worker shares the cores with the suite's other one)
    result = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-n", "0", "-p",
                             "no:cacheprovider", "-x"], capture_output=True, text=True, env=env,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
