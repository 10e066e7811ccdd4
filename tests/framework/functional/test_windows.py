"""windows.py: overlap_windows by hand, against torch's nn.Unfold in HAT's arrangement (values and
gradient, float64 and float32), float64 gradcheck (even and odd overlaps, one window, no overlap),
thread-count independence, errors; HAT's OCA index against its calculate_rpi_oca formula and as a
one-to-one map onto the table's rows; SwinV2's log-spaced coordinates table by hand and against the
original formula."""
from __future__ import annotations

import importlib

import numba
import numpy as np
import pytest

import framework as sg
from framework.gradcheck import gradcheck

W = importlib.import_module("framework.functional.windows")

TOLERANCE = {np.float64: 1e-12, np.float32: 1e-6}


def test_overlap_windows_by_hand():
    """A 4x4 image, window 2, neighbourhood 4 (pad 1): window 0 covers rows / columns -1..2 (the
    first row and column zero), window 3 rows / columns 1..4 (the last ones zero)."""
    x = np.arange(16, dtype=np.float64).reshape(1, 4, 4, 1)
    out = W.overlap_windows(sg.tensor(x), 2, 4).data
    assert out.shape == (4, 16, 1)
    want0 = np.zeros((4, 4))
    want0[1:, 1:] = x[0, :3, :3, 0]
    np.testing.assert_array_equal(out[0, :, 0], want0.ravel())
    want3 = np.zeros((4, 4))
    want3[:3, :3] = x[0, 1:, 1:, 0]
    np.testing.assert_array_equal(out[3, :, 0], want3.ravel())
    np.testing.assert_array_equal(W.overlap_windows(sg.tensor(x), 2, 2).data,
                                  x.reshape(2, 2, 2, 2).transpose(0, 2, 1, 3).reshape(4, 4, 1))


def _unfold_reference(torch, x, ws, ow):
    """HAT's OCAB: nn.Unfold(ow, stride=ws, padding=(ow - ws) // 2) on (B, C, H, W), rearranged
    'b (ch owh oww) nw -> (b nw) (owh oww) ch'."""
    b, h, w, c = x.shape
    t = x.permute(0, 3, 1, 2)
    u = torch.nn.Unfold(kernel_size=(ow, ow), stride=ws, padding=(ow - ws) // 2)(t)
    nw = u.shape[-1]
    return u.view(b, c, ow, ow, nw).permute(0, 4, 2, 3, 1).reshape(b * nw, ow * ow, c)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape,ws,ow", [((2, 8, 12, 3), 4, 6), ((1, 16, 16, 2), 8, 12),
                                         ((1, 4, 4, 5), 4, 8), ((3, 6, 3, 2), 3, 3)])
def test_overlap_windows_match_torch_unfold(shape, ws, ow, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(shape).astype(dtype)
    x = sg.tensor(x_np, requires_grad=True)
    y = W.overlap_windows(x, ws, ow)
    g = rng.standard_normal(y.shape).astype(dtype)
    y.backward(g)
    tx = torch.from_numpy(x_np.copy()).requires_grad_(True)
    ty = _unfold_reference(torch, tx, ws, ow)
    ty.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(y.data, ty.detach().numpy())  # copies: exact
    err = np.abs(x.grad.data - tx.grad.numpy()).max()
    assert x.grad.dtype == dtype and err <= TOLERANCE[dtype] * np.abs(tx.grad.numpy()).max()


@pytest.mark.parametrize("shape,ws,ow", [((2, 4, 6, 2), 2, 4), ((1, 6, 6, 1), 3, 4),
                                         ((1, 3, 3, 2), 3, 6), ((2, 4, 4, 1), 2, 2),
                                         ((1, 4, 2, 3), 2, 3)])
def test_overlap_windows_gradcheck(shape, ws, ow):
    x = sg.tensor(np.random.default_rng(1).standard_normal(shape), requires_grad=True)
    assert gradcheck(lambda t: W.overlap_windows(t, ws, ow) * 1.5, (x,))


def test_odd_overlap_puts_the_extra_row_and_column_at_the_bottom_right():
    """window 2, neighbourhood 3: pad 0 above / left, so window 0 covers rows and columns 0..2."""
    x = np.arange(16, dtype=np.float64).reshape(1, 4, 4, 1)
    out = W.overlap_windows(sg.tensor(x), 2, 3).data
    np.testing.assert_array_equal(out[0, :, 0], x[0, :3, :3, 0].ravel())
    want3 = np.zeros((3, 3))
    want3[:2, :2] = x[0, 2:, 2:, 0]
    np.testing.assert_array_equal(out[3, :, 0], want3.ravel())


def test_overlap_windows_gradient_does_not_depend_on_the_thread_count():
    rng = np.random.default_rng(3)
    x = sg.tensor(rng.standard_normal((4, 32, 32, 16)), requires_grad=True)  # above SERIAL_ELEMS
    g = rng.standard_normal((4 * 16, 144, 16))
    before, got = numba.get_num_threads(), []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        try:
            x.grad = None
            W.overlap_windows(x, 8, 12).backward(g)
            got.append(x.grad.data)
        finally:
            numba.set_num_threads(before)
    np.testing.assert_array_equal(got[0], got[1])


def test_overlap_windows_errors():
    x = sg.tensor(np.zeros((1, 4, 6, 2)))
    with pytest.raises(ValueError, match=r"overlap_windows: overlap_size 1 is smaller than window_size 2"):
        W.overlap_windows(x, 2, 1)
    with pytest.raises(ValueError, match=r"overlap_windows: expected \(B, H, W, C\) with H and W "
                                         r"multiples of 4 \(non-empty\), got \(1, 4, 6, 2\)"):
        W.overlap_windows(x, 4, 6)
    with pytest.raises(ValueError, match="overlap_windows: window_size must be a positive int"):
        W.overlap_windows(x, 0, 6)
    with pytest.raises(ValueError, match="overlap_windows: expected"):
        W.overlap_windows(sg.tensor(np.zeros((4, 6, 2))), 2, 3)


@pytest.mark.parametrize("ws,ratio", [(16, 0.5), (7, 0.5), (4, 0.5), (8, 0.25), (3, 1.0), (2, 0.0)])
def test_overlap_position_index_is_hats(ws, ratio):
    """HAT's calculate_rpi_oca written out with numpy (ext - ori coordinates, shifted by
    ws - wse + 1, rows times ws + wse - 1), and modulo the table's rows one to one onto them."""
    wse = ws + int(ratio * ws)
    ori = np.stack(np.meshgrid(np.arange(ws), np.arange(ws), indexing="ij")).reshape(2, -1)
    ext = np.stack(np.meshgrid(np.arange(wse), np.arange(wse), indexing="ij")).reshape(2, -1)
    rel = (ext[:, None, :] - ori[:, :, None]).transpose(1, 2, 0) + (ws - wse + 1)
    want = rel[..., 0] * (ws + wse - 1) + rel[..., 1]
    got = W.overlap_position_index(ws, wse)
    assert got.dtype == np.int64 and got.shape == (ws * ws, wse * wse)
    np.testing.assert_array_equal(got, want)
    rows = (ws + wse - 1) ** 2
    offsets = {(dy, dx) for dy in range(-(ws - 1), wse) for dx in range(-(ws - 1), wse)}
    assert len(offsets) == rows == len(np.unique(got % rows))
    assert got.min() >= -rows and got.max() < rows  # valid torch / numpy indices


def test_log_coords_table_by_hand_and_swinv2s_formula():
    """window 2: offsets -1, 0, 1 over (w - 1) = 1, times 8, sign(t) log2(|t| + 1) / 3:
    -log2(9)/3, 0, log2(9)/3. A 3x4 window against SwinV2's formula in float32."""
    t = W.log_coords_table(2, 2)
    assert t.shape == (1, 3, 3, 2) and t.dtype == np.float32
    v = np.log2(9.0) / 3
    np.testing.assert_allclose(t[0, :, 0, 0], [-v, 0, v], rtol=1e-6)
    np.testing.assert_allclose(t[0, 0, :, 1], [-v, 0, v], rtol=1e-6)
    wh, ww = 3, 4
    dy = np.arange(-(wh - 1), wh, dtype=np.float64) / (wh - 1) * 8
    dx = np.arange(-(ww - 1), ww, dtype=np.float64) / (ww - 1) * 8
    f = lambda a: np.sign(a) * np.log2(np.abs(a) + 1) / 3  # noqa: E731
    got = W.log_coords_table(wh, ww)
    np.testing.assert_allclose(got[0, :, 0, 0], f(dy), rtol=2e-7, atol=0)
    np.testing.assert_allclose(got[0, 0, :, 1], f(dx), rtol=2e-7, atol=0)
    pretrained = W.log_coords_table(3, 3, (5, 5))  # normalised by the pretrained window instead
    np.testing.assert_allclose(pretrained[0, :, 0, 0], f(np.arange(-2, 3) / 4 * 8), rtol=2e-7)
