"""interpolate: parity with PyTorch 2.13 (forward and input gradient), gradcheck for every mode and
option, the weight tables themselves, where torch's backward is not its forward's adjoint, dtypes,
Pillow's LANCZOS, errors."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.functional.resample import Table, axis_table
from tests.conftest import t64

# (mode, align_corners, antialias): every combination torch 2.13 accepts.
TORCH_OPTIONS = [("nearest", None, False), ("nearest-exact", None, False), ("area", None, False),
                 ("lanczos", False, True)] + [
    (mode, ac, aa) for mode in ("bilinear", "bicubic") for ac in (False, True) for aa in (False, True)]

# (input H, W), keyword arguments giving the output geometry
GEOMETRIES = [
    ((4, 5), dict(size=(8, 10))),                     # x2 up
    ((8, 9), dict(size=(4, 3))),                      # down
    ((5, 7), dict(size=(8, 3))),                      # non-integer ratios 5->8, 7->3
    ((6, 4), dict(size=(9, 2))),                      # different H and W factors
    ((1, 1), dict(size=(3, 4))),                      # 1-pixel input
    ((5, 6), dict(size=(1, 1))),                      # 1-pixel output
    ((1, 5), dict(size=(1, 7))),
    ((7, 5), dict(size=4)),                           # int size
    ((7, 5), dict(scale_factor=0.5)),                 # the factor drives the mapping: scale 2, not 7/3
    ((5, 6), dict(scale_factor=(1.7, 2.5))),
    ((7, 5), dict(scale_factor=0.5, recompute_scale_factor=True)),
    ((5, 4), dict(scale_factor=(2.1, 1.5))),          # 5 * 2.1 -> 10 = 2n: nearest's i >> 1 shortcut
    ((9, 8), dict(scale_factor=(0.3, 0.45))),
    ((5, 5), dict(scale_factor=1.1)),                 # out == in with a factor != 1 (see below)
    ((6, 5), dict(scale_factor=(1.1, 2.0))),
]


def _kwargs(mode, ac, aa):
    kw = dict(mode=mode, antialias=aa)
    if ac is not None:
        kw["align_corners"] = ac
    return kw


def _torch_backward_is_adjoint(mode, aa, in_hw, geom, out_hw):
    """False exactly where torch 2.13's backward is not the adjoint of its forward: a scale factor
    != 1 (not recomputed) that still gives out == in. Non-antialiased bicubic's forward resamples
    but its backward copies (when both axes keep their size); the antialiased forward copies such an
    axis but its backward resamples."""
    sf = geom.get("scale_factor")
    if sf is None or geom.get("recompute_scale_factor") or mode == "area":
        return True
    sfs = sf if isinstance(sf, tuple) else (sf, sf)
    same = [n == m and s != 1.0 for n, m, s in zip(in_hw, out_hw, sfs)]
    if aa:
        return not any(same)
    if mode == "bicubic":
        return not (tuple(in_hw) == tuple(out_hw) and any(same))
    return True


@pytest.mark.parametrize("in_hw,geom", GEOMETRIES)
@pytest.mark.parametrize("mode,ac,aa", TORCH_OPTIONS)
def test_torch_parity(mode, ac, aa, in_hw, geom, rng):
    torch = pytest.importorskip("torch")
    x = t64(rng, 2, 3, *in_hw)
    y = F.interpolate(x, **geom, **_kwargs(mode, ac, aa))
    tx = torch.tensor(x.data, requires_grad=True)
    ty = torch.nn.functional.interpolate(tx, **geom, **_kwargs(mode, ac, aa))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    ty.backward(torch.tensor(g))
    if _torch_backward_is_adjoint(mode, aa, in_hw, geom, y.shape[2:]):
        np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode,aa", [("bicubic", False), ("bilinear", True), ("bicubic", True),
                                     ("lanczos", True)])
def test_where_torch_backward_is_not_the_adjoint(mode, aa, rng):
    """5 pixels with scale_factor 1.1 -> 5 pixels. We match torch's forward; our gradient is the
    exact adjoint of that forward (gradcheck passes) while torch's is not (its gradcheck fails)."""
    torch = pytest.importorskip("torch")
    kw = dict(scale_factor=1.1, mode=mode, antialias=aa, align_corners=False)
    x = t64(rng, 1, 1, 5, 5)
    tx = torch.tensor(x.data, requires_grad=True)
    ty = torch.nn.functional.interpolate(tx, **kw)
    y = F.interpolate(x, **kw)
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert sg.gradcheck(lambda t: F.interpolate(t, **kw), (x,))
    assert not torch.autograd.gradcheck(lambda t: torch.nn.functional.interpolate(t, **kw), (tx,),
                                        raise_exception=False)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    ty.backward(torch.tensor(g))
    assert np.abs(x.grad.data - tx.grad.numpy()).max() > 1e-3


# every mode x align_corners x antialias, including the lanczos calls torch refuses (burn's rule)
ALL_OPTIONS = [("nearest", None, False), ("nearest-exact", None, False), ("area", None, False)] + [
    (mode, ac, aa) for mode in ("bilinear", "bicubic", "lanczos") for ac in (False, True)
    for aa in (False, True)]


@pytest.mark.parametrize("in_hw,size", [((3, 4), (5, 2)),    # up in H, down in W
                                        ((2, 3), (4, 6)),    # x2 up
                                        ((5, 4), (2, 3)),    # down, non-integer
                                        ((1, 3), (3, 1))])   # 1-pixel input and output
@pytest.mark.parametrize("mode,ac,aa", ALL_OPTIONS)
def test_gradcheck(mode, ac, aa, in_hw, size, rng):
    x = t64(rng, 1, 2, *in_hw)
    assert sg.gradcheck(lambda t: F.interpolate(t, size=size, **_kwargs(mode, ac, aa)), (x,))


@pytest.mark.parametrize("mode,ac,aa", ALL_OPTIONS)
def test_gradcheck_with_scale_factor(mode, ac, aa, rng):
    x = t64(rng, 1, 1, 5, 3)
    assert sg.gradcheck(lambda t: F.interpolate(t, scale_factor=(1.1, 0.7), **_kwargs(mode, ac, aa)),
                        (x,))


@pytest.mark.parametrize("mode,ac,aa", ALL_OPTIONS)
def test_float32_stays_float32(mode, ac, aa, rng):
    x = sg.Tensor(rng.standard_normal((2, 3, 6, 5)).astype(np.float32), requires_grad=True)
    y = F.interpolate(x, size=(9, 4), **_kwargs(mode, ac, aa))
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32
    x64 = sg.Tensor(x.data.astype(np.float64), requires_grad=True)
    y64 = F.interpolate(x64, size=(9, 4), **_kwargs(mode, ac, aa))
    np.testing.assert_allclose(y.data, y64.data, rtol=1e-5, atol=1e-5)


def test_tables_hand_worked():
    # nearest (legacy floor) 8 -> 4 picks 0, 2, 4, 6; nearest-exact picks the centres 1, 3, 5, 7
    assert axis_table("nearest", 8, 4, None, False, False).index[:, 0].tolist() == [0, 2, 4, 6]
    assert axis_table("nearest-exact", 8, 4, None, False, False).index[:, 0].tolist() == [1, 3, 5, 7]
    # bilinear 2 -> 4, half-pixel: [1, 0], [.75, .25], [.25, .75], [0, 1]
    np.testing.assert_allclose(axis_table("bilinear", 2, 4, None, False, False).dense(),
                               [[1, 0], [.75, .25], [.25, .75], [0, 1]])
    # area 5 -> 2: windows [0, 3) and [2, 5)
    np.testing.assert_allclose(axis_table("area", 5, 2, None, False, False).dense(),
                               [[1 / 3, 1 / 3, 1 / 3, 0, 0], [0, 0, 1 / 3, 1 / 3, 1 / 3]])
    # bicubic A=-0.75, align_corners, 3 -> 5: output 1 sits at 0.5: taps -1(->0), 0, 1, 2
    k = lambda s: ((1.25 * s - 2.25) * s * s + 1) if s <= 1 else ((-0.75 * s + 3.75) * s - 6) * s + 3
    np.testing.assert_allclose(axis_table("bicubic", 3, 5, None, True, False).dense()[1],
                               [k(1.5) + k(0.5), k(0.5), k(1.5)])
    # scale_factor drives the mapping: 7 * 0.5 -> 3 outputs at 2i + 0.5, not 7/3 (i + .5) - .5
    np.testing.assert_allclose(axis_table("bilinear", 7, 3, 0.5, False, False).dense()[1],
                               [0, 0, .5, .5, 0, 0, 0])


def test_transposed_table_is_the_transpose():
    for args in [("bicubic", 7, 3, None, False, False), ("lanczos", 5, 9, None, False, True),
                 ("nearest", 9, 4, None, False, False), ("area", 3, 7, None, False, False)]:
        t = axis_table(*args)
        np.testing.assert_array_equal(t.transposed().dense(), t.dense().T)
        assert isinstance(t.transposed(), Table)


@pytest.mark.parametrize("scale", [0.5, 1 / 3, 0.75, 2.0])
@pytest.mark.parametrize("mode,pil_filter", [("lanczos", "LANCZOS"), ("bicubic", "BICUBIC"),
                                             ("bilinear", "BILINEAR")])
def test_antialiased_matches_pillow(mode, pil_filter, scale, rng):
    """antialias=True is Pillow's resampling, borders included (so the whole image is compared, not
    only the interior), on float "F" images; Pillow computes in float32, hence the tolerance."""
    Image = pytest.importorskip("PIL.Image")
    n, m = 24, round(24 * scale)
    img = rng.uniform(0, 1, (n, n)).astype(np.float32)
    ref = np.asarray(Image.fromarray(img, mode="F").resize((m, m), getattr(Image, pil_filter)))
    y = F.interpolate(sg.Tensor(img[None, None].astype(np.float64)), size=(m, m), mode=mode,
                      antialias=True)
    np.testing.assert_allclose(y.data[0, 0], ref, atol=1e-6)


def test_lanczos3_alias_and_burn_rule(rng):
    x = t64(rng, 1, 2, 5, 6)
    a = F.interpolate(x, size=(7, 4), mode="lanczos")
    b = F.interpolate(x, size=(7, 4), mode="lanczos3")
    np.testing.assert_array_equal(a.data, b.data)
    # burn's rule: rows renormalised to sum 1, support not widened (6 taps at most on a downscale)
    t = axis_table("lanczos", 20, 5, None, False, False)
    np.testing.assert_allclose(t.dense().sum(axis=1), 1.0)
    assert t.index.shape[1] <= 6


def test_input_not_modified_and_noncontiguous(rng):
    base = rng.standard_normal((2, 3, 6, 8))
    view = sg.Tensor(base[:, :, :, ::2], requires_grad=True)  # a strided view
    before = view.data.copy()
    y = F.interpolate(view, size=(5, 7), mode="bicubic")
    ref = F.interpolate(sg.Tensor(np.ascontiguousarray(before)), size=(5, 7), mode="bicubic")
    np.testing.assert_array_equal(y.data, ref.data)
    np.testing.assert_array_equal(view.data, before)


def test_no_grad_records_nothing(rng):
    x = t64(rng, 1, 1, 3, 3)
    with sg.no_grad():
        y = F.interpolate(x, scale_factor=2, mode="bilinear")
    assert not y.requires_grad


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(size=4, scale_factor=2), ValueError, "only one of size or scale_factor"),
    (dict(), ValueError, "either size or scale_factor"),
    (dict(size=0), ValueError, "size must be positive, got 0"),
    (dict(size=(3, -1)), ValueError, r"size must be positive, got \(3, -1\)"),
    (dict(scale_factor=0.0), ValueError, "scale_factor must be positive"),
    (dict(scale_factor=-2), ValueError, "scale_factor must be positive"),
    (dict(scale_factor=float("nan")), ValueError, "scale_factor must be positive"),
    (dict(scale_factor=0.1), ValueError, r"output size \(0, 0\)"),
    (dict(size=(2, 3, 4)), ValueError, "size must have 2 entries"),
    (dict(scale_factor=(2.0,)), ValueError, "scale_factor must have 2 entries"),
    (dict(size=2.5), TypeError, "size must be an int or a pair of ints, got 2.5"),
    (dict(scale_factor="2"), TypeError, "scale_factor must be a number or a pair of numbers"),
    (dict(size=4, mode="bicubc"), ValueError,
     "unknown mode 'bicubc'; known modes: nearest, nearest-exact, bilinear, bicubic, area, lanczos"),
    (dict(size=4, mode="nearest", align_corners=True), ValueError,
     "align_corners can only be set .* mode 'nearest'"),
    (dict(size=4, mode="nearest-exact", align_corners=False), ValueError, "align_corners can only"),
    (dict(size=4, mode="area", align_corners=True), ValueError, "align_corners can only"),
    (dict(size=4, mode="nearest", antialias=True), ValueError, "antialias=True is only for"),
    (dict(size=4, mode="area", antialias=True), ValueError, "got mode 'area'"),
    (dict(size=4, recompute_scale_factor=True), ValueError, "recompute_scale_factor is not meaningful"),
    (dict(size=4, mode="bilinear", align_corners=1), TypeError, "align_corners must be a bool"),
])
def test_errors(kwargs, exc, match, rng):
    x = t64(rng, 1, 1, 5, 5)
    with pytest.raises(exc, match=match):
        F.interpolate(x, **kwargs)


def test_input_errors(rng):
    with pytest.raises(ValueError, match=r"expected a 4-D input \(N, C, H, W\), got shape \(5, 5\)"):
        F.interpolate(t64(rng, 5, 5), size=3)
    with pytest.raises(ValueError, match="4-D input"):
        F.interpolate(t64(rng, 1, 1, 1, 5, 5), size=3)
    with pytest.raises(TypeError, match="input must be float32 or float64, got dtype int64"):
        F.interpolate(sg.Tensor(np.ones((1, 1, 2, 2), np.int64)), size=3)


@pytest.mark.parametrize("mode,aa", [("bicubic", False), ("lanczos", True), ("nearest", False)])
def test_parallel_path_matches_torch(mode, aa, rng):
    """Enough planes to take the multi-threaded path; odd sizes exercise the 4-row grouping's tail.
    The thread count is restored after the single-threaded path."""
    torch = pytest.importorskip("torch")
    import numba
    threads = numba.get_num_threads()
    F.interpolate(t64(rng, 1, 1, 3, 3), size=5, mode="bilinear")  # small: single-threaded
    assert numba.get_num_threads() == threads
    x = t64(rng, 8, 16, 47, 45)
    for size in [(94, 90), (21, 30)]:
        y = F.interpolate(x, size=size, mode=mode, antialias=aa)
        tx = torch.tensor(x.data, requires_grad=True)
        ty = torch.nn.functional.interpolate(tx, size=size, mode=mode, antialias=aa)
        np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-10, atol=1e-12)
        g = rng.standard_normal(y.shape)
        x.grad = None
        y.backward(g)
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
def test_antialias_width_one_where_torch_is_wrong(mode, rng):
    """torch 2.13's antialiased kernel replicates the first row when the input is 1 pixel wide
    (N, C, H, 1): a torch bug, so parity is checked against torch on the same column repeated
    3 times (each output column then equals ours), and torch's own answer is shown to differ."""
    torch = pytest.importorskip("torch")
    x = t64(rng, 1, 3, 4, 1)
    y = F.interpolate(x, size=(3, 1), mode=mode, antialias=True)
    wide = torch.nn.functional.interpolate(torch.tensor(x.data).repeat(1, 1, 1, 3), size=(3, 3),
                                           mode=mode, antialias=True)
    np.testing.assert_allclose(y.data, wide[..., :1].numpy(), rtol=1e-10, atol=1e-12)
    narrow = torch.nn.functional.interpolate(torch.tensor(x.data), size=(3, 1), mode=mode,
                                             antialias=True)
    assert np.abs(narrow.numpy() - y.data).max() > 1e-2
    assert sg.gradcheck(lambda t: F.interpolate(t, size=(3, 1), mode=mode, antialias=True), (x,))


# torch's nearest forward switches its index rule when the output's height + width exceed 128: one
# division per index in double, rounded to float32, without the m == n / m == 2n shortcuts. srgrad
# follows the forward exactly (its backward stays the transpose: the exact adjoint).
LARGE_NEAREST = [
    ((1, 3), dict(scale_factor=(130, 1.02))),       # the case: torch [10, 10, 20]
    ((1, 3), dict(scale_factor=(125, 1.02))),       # 125 + 3 = 128: the small rule, [10, 20, 30]
    ((1, 3), dict(scale_factor=(126, 1.02))),       # 126 + 3 = 129: the large rule
    ((3, 26), dict(scale_factor=(40.0, 3.96))),     # i = 99: 99 / 3.96 = 25 exactly (float32 product: 24)
    ((2, 36), dict(scale_factor=(50.0, 6.18))),     # nearest-exact: (154 + 0.5) / 6.18 = 25
    ((5, 7), dict(size=(200, 33))),                 # size-driven: (i + off) n / m
    ((3, 5), dict(scale_factor=(45.0, 2.3))),       # 5 * 2.3 -> 11 (no shortcut either way)
    ((4, 3), dict(scale_factor=(33.0, 2.1))),       # m == 2n: the small rule's shortcut is dropped
]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("in_hw,geom", LARGE_NEAREST)
def test_nearest_large_outputs_match_torchs_forward(mode, in_hw, geom, rng):
    torch = pytest.importorskip("torch")
    x = t64(rng, 1, 2, *in_hw)
    y = F.interpolate(x, mode=mode, **geom)
    ty = torch.nn.functional.interpolate(torch.tensor(x.data), mode=mode, **geom)
    np.testing.assert_array_equal(y.data, ty.numpy())
    # and the backward is the adjoint of this forward: <y, g> == <x, dL/dx>
    g = rng.standard_normal(y.shape)
    y.backward(g)
    assert np.isclose((y.data * g).sum(), (x.data * x.grad.data).sum(), rtol=1e-12)


def test_nearest_rule_switch_hand_worked():
    x = sg.tensor(np.array([[[[10.0, 20.0, 30.0]]]]))
    small = F.interpolate(x, scale_factor=(40, 1.02)).numpy()[0, 0, 0]
    large = F.interpolate(x, scale_factor=(130, 1.02)).numpy()[0, 0, 0]
    assert small.tolist() == [10, 20, 30] and large.tolist() == [10, 10, 20]


def test_antialiased_lanczos_one_pixel_wide_hand_values():
    """The issue's example: torch 2.13 gives [0.0656] * 3 (the first row copied); srgrad resizes the
    column, which is what torch gives on the same column repeated 3 wide."""
    x = sg.tensor(np.array([1.0, -2.0, 0.5, 3.0]).reshape(1, 1, 4, 1))
    y = F.interpolate(x, size=(3, 1), mode="lanczos", antialias=True).numpy().ravel()
    np.testing.assert_allclose(y, [0.0656, -1.0938, 2.6892], atol=5e-5)


@pytest.mark.parametrize("P, H, W", [(3, 7, 9), (160, 32, 31)])  # one thread; the parallel loop
def test_nearest_x2_one_pass_is_the_generic_kernels_bits(P, H, W, rng):
    # resample's one-pass nearest x2 (and its adjoint, the backward) against _resample_planes on the
    # same tables: the same values in the same order, bit for bit (-0 and a NaN included)
    from framework.functional import resample as R
    x = rng.standard_normal((P, H, W)).astype(np.float32)
    x[0, 0, :2] = (-0.0, np.nan)
    th, tw = R.axis_table("nearest", H, 2 * H, 2.0, None, False), R.axis_table("nearest", W, 2 * W, 2.0, None, False)
    assert R._x2(th) == "repeat" and R._x2(th.transposed()) == "pairs"
    assert R._x2(R.axis_table("nearest", 7, 21, 3.0, None, False)) is None
    assert R._x2(R.axis_table("bilinear", 7, 14, 2.0, False, False)) is None
    for a, (h, w) in ((x, (th, tw)), (rng.standard_normal((P, 2 * H, 2 * W)).astype(np.float32),
                                      (th.transposed(), tw.transposed()))):
        generic = np.empty((P, h.m, w.m), np.float32)
        R._resample_planes(a, h.index, h.weights_as(np.float32), w.index, w.weights_as(np.float32), True, generic)
        assert np.array_equal(R.resample(a, h, w).view(np.uint32), generic.view(np.uint32))


@pytest.mark.parametrize("P, H, W", [(3, 5, 4), (64, 40, 36), (5, 100, 7)])  # one block; parallel; 4 blocks
def test_a_global_pool_sums_blocks_of_rows_in_order_and_its_adjoint_is_the_serial_kernels_bits(P, H, W, rng):
    # adaptive_avg_pool2d(x, 1)'s row pass runs in tasks of _POOL_ROWS rows (every plane in each: the
    # rows the op before it wrote on the same core): each block's row pass (the serial kernel's on
    # the block's taps), the blocks' sums added in order, then the column pass; whatever the threads.
    # Its transposes (the backward) run in a parallel loop over the planes: the serial kernel's bits.
    import numba

    from framework.functional import resample as R
    th, tw = (R.window_table(n, *R.area_windows(n, 1), 1.0 / n) for n in (H, W))
    assert th.m == tw.m == 1
    x = rng.standard_normal((P, H, W)).astype(np.float32)
    ones = (np.arange(W)[:, None], np.ones((W, 1), np.float32))  # the identity table along W

    def serial(a, hi, hw, wi, ww):
        out = np.empty((a.shape[0], hi.shape[0], wi.shape[0]), np.float32)
        R._resample_planes(a, hi, hw, wi, ww, True, out)
        return out

    blocks = [serial(x, th.index[:, t:t + R._POOL_ROWS], th.weights_as(np.float32)[:, t:t + R._POOL_ROWS], *ones)
              for t in range(0, H, R._POOL_ROWS)]
    assert len(blocks) == -(-H // 32)
    total = blocks[0]
    for part in blocks[1:]:
        total = total + part  # float32, in order
    want = serial(total, np.zeros((1, 1), np.int64), np.ones((1, 1), np.float32), tw.index, tw.weights_as(np.float32))
    if H <= R._POOL_ROWS:  # one block: the serial kernel's own order
        assert np.array_equal(want, serial(x, th.index, th.weights_as(np.float32), tw.index, tw.weights_as(np.float32)))
    threads = numba.get_num_threads()
    for n in (threads, 1):
        numba.set_num_threads(n)
        try:
            assert np.array_equal(R.resample(x, th, tw).view(np.uint32), want.view(np.uint32))
        finally:
            numba.set_num_threads(threads)
    g = rng.standard_normal((P, 1, 1)).astype(np.float32)
    h, w = th.transposed(), tw.transposed()
    generic = np.empty((P, H, W), np.float32)
    R._resample_planes(g, h.index, h.weights_as(np.float32), w.index, w.weights_as(np.float32), False, generic)
    assert np.array_equal(R.resample(g, h, w).view(np.uint32), generic.view(np.uint32))
    x = sg.tensor(rng.standard_normal((2, P, H, W)), requires_grad=True)  # the op's values and gradient
    y = F.adaptive_avg_pool2d(x, 1)
    y.backward(np.ones(y.shape))
    np.testing.assert_allclose(y.numpy(), x.numpy().mean(axis=(2, 3), keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(x.grad.numpy(), np.full(x.shape, 1.0 / (H * W)), rtol=1e-13)
