"""Winograd F(m, r) (framework/functional/_winograd.py): the tables, and conv2d through each table
against torch (values and every gradient, float64), gradcheck, float32 accuracy, tiles."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.functional import _winograd as wino
from framework.functional import conv as conv_module
from tests.conftest import t64

TABLES = sorted(wino.TRANSFORMS)


def _force(monkeypatch, size):
    """Every stride-1 r x r correlation through table `size` (normally from 16 channels), the weight
    gradient too (normally it keeps the small-map table)."""
    monkeypatch.setattr(conv_module, "_WINOGRAD_MIN_CHANNELS", 1)
    monkeypatch.setattr(conv_module, "_WINOGRAD_LARGE_MAP", 0)
    monkeypatch.setattr(conv_module, "WINOGRAD", {size[1]: (size, size)})


@pytest.mark.parametrize("size", TABLES)
def test_tables_compute_a_correlation(size, rng):
    """A^T [(G g) * (B^T d)] = the m outputs of d (a values) correlated with g (r taps)."""
    tf = wino.TRANSFORMS[size]
    a = tf.m + tf.r - 1
    assert tf.BT.shape == (a, a) and tf.G.shape == (a, tf.r) and tf.AT.shape == (tf.m, a)
    d, g = rng.standard_normal(a), rng.standard_normal(tf.r)
    ref = [d[i:i + tf.r] @ g for i in range(tf.m)]
    np.testing.assert_allclose(tf.AT @ ((tf.G @ g) * (tf.BT @ d)), ref, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("size", TABLES)
def test_kernel_transform_and_its_adjoint(size, rng):
    """U = G W G^T per (o, c) as the einsum of its definition, and dW = G^T dU G is its adjoint:
    <U(W), dU> = <W, dW> (float64, to rounding); float32 inputs give the float64 sum rounded once."""
    tf = wino.TRANSFORMS[size]
    a, r, O, C = tf.m + tf.r - 1, tf.r, 3, 5
    w, du = rng.standard_normal((O, C, r, r)), rng.standard_normal((a * a, C, O))
    u = np.empty((a * a, O, C))
    wino._kernel_transform(w, tf.G, u)
    np.testing.assert_allclose(u, np.einsum("ik,ockl,jl->ijoc", tf.G, w, tf.G).reshape(a * a, O, C),
                               rtol=1e-14, atol=1e-14)
    dw = np.empty((O, C, r, r))
    wino._kernel_transform_adjoint(du, tf.G, dw)
    np.testing.assert_allclose(np.sum(u * du.transpose(0, 2, 1)), np.sum(w * dw), rtol=1e-13)
    u32 = np.empty((a * a, O, C), np.float32)
    wino._kernel_transform(w.astype(np.float32), tf.G, u32)
    ref = np.einsum("ik,ockl,jl->ijoc", tf.G, w.astype(np.float32).astype(np.float64), tf.G)
    np.testing.assert_allclose(u32, ref.reshape(a * a, O, C), rtol=1e-7, atol=1e-7)


def test_f23_tables_hand_worked():
    """F(2, 3) at points 0, 1, -1: Lavin & Gray's tables, with the first and last rows' signs
    flipped (B^T's rows are the polynomials (x-1)(x+1), x(x+1), x(x-1) and x(x-1)(x+1))."""
    tf = wino.TRANSFORMS[(2, 3)]
    np.testing.assert_array_equal(tf.BT, [[-1, 0, 1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, -1, 0, 1]])
    np.testing.assert_array_equal(tf.G, [[-1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]])
    np.testing.assert_array_equal(tf.AT, [[1, 1, 1, 0], [0, 1, -1, 1]])


# (input, weight, options) per kernel size: odd sizes, partial tiles, every padding, one pixel
CASES = {
    3: [((2, 3, 5, 7), (3, 3, 3, 3), dict(padding=1)),
        ((1, 4, 6, 6), (3, 4, 3, 3), dict()),
        ((2, 2, 4, 3), (2, 2, 3, 3), dict(padding=2)),
        ((2, 3, 1, 1), (2, 3, 3, 3), dict(padding=1)),
        ((1, 2, 3, 8), (2, 2, 3, 3), dict(padding=(0, 1))),
        ((1, 2, 9, 11), (3, 2, 3, 3), dict(padding=1))],
    5: [((2, 3, 7, 6), (2, 3, 5, 5), dict(padding=2)),
        ((1, 2, 1, 1), (3, 2, 5, 5), dict(padding=2)),
        ((1, 3, 6, 9), (2, 3, 5, 5), dict(padding=(1, 3))),
        ((2, 2, 5, 5), (2, 2, 5, 5), dict()),
        ((1, 2, 9, 10), (2, 2, 5, 5), dict(padding=4))],
}
PARAMS = [(size, *case) for size in TABLES for case in CASES[size[1]]]


@pytest.mark.parametrize("size,x_shape,w_shape,options", PARAMS)
def test_winograd_matches_torch_and_gradcheck(size, x_shape, w_shape, options, rng, monkeypatch):
    """The forward, the input gradient (the flipped kernel's forward) and the weight gradient through
    each table, against torch in float64 (values and every gradient), then gradcheck."""
    torch = pytest.importorskip("torch")
    _force(monkeypatch, size)
    calls, grad_calls = [], []
    real, real_grad = conv_module._winograd, conv_module._winograd_weight_grad
    monkeypatch.setattr(conv_module, "_winograd", lambda *a, **k: calls.append(a[3]) or real(*a, **k))
    monkeypatch.setattr(conv_module, "_winograd_weight_grad",
                        lambda *a, **k: grad_calls.append(a[3]) or real_grad(*a, **k))
    x, w, b = t64(rng, *x_shape), t64(rng, *w_shape), t64(rng, w_shape[0])
    y = F.conv2d(x, w, b, **options)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    tx, tw, tb = (torch.tensor(t.numpy(), requires_grad=True) for t in (x, w, b))
    ty = torch.nn.functional.conv2d(tx, tw, tb, **options)
    ty.backward(torch.from_numpy(g))
    for ours, theirs in ((y, ty), (x.grad, tx.grad), (w.grad, tw.grad), (b.grad, tb.grad)):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-10)
    table = wino.TRANSFORMS[size]
    assert calls == [table, table] and grad_calls == [table]  # forward and input gradient; weight gradient
    x, w, b = t64(rng, *x_shape), t64(rng, *w_shape), t64(rng, w_shape[0])
    assert sg.gradcheck(lambda x, w, b: F.conv2d(x, w, b, **options), (x, w, b))


@pytest.mark.parametrize("size", TABLES)
def test_float32_and_tiles(size, rng, monkeypatch):
    """float32 stays float32 and stays near the float64 im2col result, for whole-image tiles and for
    one row of tiles at a time: within 2e-5 of the largest value (torch's own float32 direct sum is
    ~1e-6 off; F(4, 3) and F(4, 5) ~5e-6, F(2, 3) ~3e-7: docs/benchmarks.md)."""
    k = size[1]
    x = rng.standard_normal((3, 16, 9, 7)).astype(np.float32)
    w = (rng.standard_normal((16, 16, k, k)) / (4 * k)).astype(np.float32)
    X64, W64 = (sg.tensor(a, requires_grad=True, dtype=np.float64) for a in (x, w))
    with monkeypatch.context() as m:  # the float64 reference by im2col
        m.setattr(conv_module, "_WINOGRAD_MIN_CHANNELS", 10**9)
        y64 = F.conv2d(X64, W64, padding=k // 2)
        y64.backward(np.ones(y64.shape))
    _force(monkeypatch, size)
    for cap in (conv_module.COL_BUFFER_BYTES, 1):  # whole images, and one row of tiles at a time
        monkeypatch.setattr(conv_module, "COL_BUFFER_BYTES", cap)
        X, W = sg.tensor(x, requires_grad=True), sg.tensor(w, requires_grad=True)
        y = F.conv2d(X, W, padding=k // 2)
        y.backward(np.ones(y.shape, np.float32))
        assert y.dtype == X.grad.dtype == W.grad.dtype == np.float32
        for ours, ref in ((y, y64), (X.grad, X64.grad), (W.grad, W64.grad)):
            err = np.abs(ours.numpy() - ref.numpy()).max() / np.abs(ref.numpy()).max()
            assert err < 2e-5, (size, err)


def test_table_choice():
    """Per direction and output map: 3x3 forward F(2, 3) below 40 x 40 pixels per image, F(4, 3) from
    there; its weight gradient F(2, 3) at every size; 5x5 F(4, 5) both ways.
    16 to 64 channels a side, up to 128 for the forward from 128 x 128 pixels; none for strides,
    dilations, groups or other kernels (docs/benchmarks.md's thresholds). The batch never matters."""
    def geo(k, side=8, **kw):
        return conv_module._Geometry((k, k), kw.get("stride", (1, 1)), (k // 2, k // 2),
                                     kw.get("dilation", (1, 1)), kw.get("groups", 1), (side, side),
                                     (side, side))
    pick, T = conv_module._winograd_table, wino.TRANSFORMS
    assert pick(geo(3), 32, 64) is T[(2, 3)] and pick(geo(3, 39), 64, 64) is T[(2, 3)]
    assert pick(geo(3, 40), 64, 64) is T[(4, 3)] and pick(geo(3, 512), 16, 32) is T[(4, 3)]
    assert pick(geo(3, 16), 64, 64, weight_grad=True) is T[(2, 3)]
    assert pick(geo(3, 40), 64, 64, weight_grad=True) is T[(2, 3)]
    assert pick(geo(5), 64, 32) is T[(4, 5)] and pick(geo(5, 96), 64, 32, weight_grad=True) is T[(4, 5)]
    assert pick(geo(3, 128), 96, 16) is T[(4, 3)] and pick(geo(3, 128), 128, 128) is T[(4, 3)]
    for g, c, o in ((geo(3, 127), 96, 16), (geo(3, 128), 129, 32)):
        assert pick(g, c, o) is None
    assert pick(geo(3, 512), 96, 16, weight_grad=True) is None  # the weight gradient keeps 64
    for g, c, o in ((geo(3), 15, 64), (geo(3), 128, 32), (geo(3), 64, 65), (geo(7), 64, 64), (geo(3, stride=(2, 2)), 64, 64),
                    (geo(3, dilation=(2, 2)), 64, 64), (geo(3, groups=2), 64, 64)):
        assert pick(g, c, o) is None
