"""grid_sample (bilinear): hand-worked values, float64 gradcheck in the input and the grid, parity with
torch of the output and both gradients for every padding mode and align_corners, grids beyond the
edges (several reflections), the exact edges (where the border and reflection rules clip, gradient
0), one-pixel inputs, float32, errors; the ONNX converter (GridSample)."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64

MODES = [(p, a) for p in ("zeros", "border", "reflection") for a in (False, True)]


def _grid(rng, n, ho, wo, spread=1.6):
    return rng.uniform(-spread, spread, (n, ho, wo, 2))


def test_hand_worked_values():
    """align_corners=True puts -1 and 1 on the corner pixels' centres: the grid of those centres
    reproduces the input, and halfway between two pixels is their mean; align_corners=False puts
    them on the outer edges: x = -1 is half a pixel left of pixel 0, so zeros padding halves it."""
    x = sg.tensor(np.arange(6.0).reshape(1, 1, 2, 3))
    ys, xs = np.meshgrid(np.linspace(-1, 1, 2), np.linspace(-1, 1, 3), indexing="ij")
    ident = sg.tensor(np.stack([xs, ys], -1)[None])
    np.testing.assert_allclose(F.grid_sample(x, ident, align_corners=True).data, x.data, rtol=0, atol=1e-15)
    mid = sg.tensor(np.array([[[[-0.5, -1.0], [0.0, 0.0]]]]))  # (x, y): between pixels 0 and 1; the centre
    np.testing.assert_allclose(F.grid_sample(x, mid, align_corners=True).data[0, 0, 0], [0.5, 2.5], atol=1e-15)
    edge = sg.tensor(np.array([[[[-1.0, -1.0]]]]))  # top-left outer corner: a quarter of pixel 0's area
    x1 = sg.tensor(np.full((1, 1, 2, 3), 8.0))
    assert F.grid_sample(x1, edge).data.item() == 2.0
    assert F.grid_sample(x1, edge, padding_mode="border").data.item() == 8.0
    assert F.grid_sample(x1, edge, padding_mode="reflection").data.item() == 8.0


@pytest.mark.parametrize("padding,align", MODES)
@pytest.mark.parametrize("shape,out", [((2, 3, 4, 5), (3, 2)), ((1, 2, 1, 1), (2, 3)), ((1, 1, 3, 1), (4, 1))])
def test_gradcheck(padding, align, shape, out, rng):
    x = t64(rng, *shape)
    grid = sg.tensor(_grid(rng, shape[0], *out, spread=2.3), requires_grad=True)
    assert sg.gradcheck(lambda a, b: F.grid_sample(a, b, padding_mode=padding, align_corners=align), (x, grid))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("padding,align", MODES)
def test_matches_torch(padding, align, dtype, rng):
    """Output, input gradient and grid gradient, with a grid reaching 3.5x beyond the edges
    (reflection flips several times) and exact -1, 0, 1 entries (the edges, where clipping sets
    the gradient to 0)."""
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((3, 4, 6, 5)).astype(dtype)
    grid = _grid(rng, 3, 7, 8, spread=3.5)
    grid[0, 0, :3] = [[-1, -1], [1, 1], [0, 0]]
    grid = grid.astype(dtype)
    X, G = sg.tensor(x, requires_grad=True), sg.tensor(grid, requires_grad=True)
    y = F.grid_sample(X, G, padding_mode=padding, align_corners=align)
    g = rng.standard_normal(y.shape).astype(dtype)
    y.backward(g)
    tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(grid, requires_grad=True)
    ty = torch.nn.functional.grid_sample(tx, tg, padding_mode=padding, align_corners=align)
    ty.backward(torch.tensor(g))
    tol = 1e-13 if dtype == np.float64 else 2e-5
    for ours, theirs in ((y, ty), (X.grad, tx.grad), (G.grad, tg.grad)):
        theirs = theirs.detach().numpy()
        assert ours.dtype == dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(ours.data, theirs, rtol=0, atol=tol * max(1, np.abs(theirs).max()))


def test_only_the_needed_gradient_and_default_align_corners(rng):
    x = sg.tensor(rng.standard_normal((1, 2, 3, 3)))
    grid = sg.tensor(_grid(rng, 1, 2, 2), requires_grad=True)
    F.grid_sample(x, grid).sum().backward()
    assert x.grad is None and grid.grad is not None
    np.testing.assert_array_equal(F.grid_sample(x, grid).data, F.grid_sample(x, grid, align_corners=False).data)


def test_errors():
    x, grid = sg.tensor(np.zeros((2, 3, 4, 4))), sg.tensor(np.zeros((2, 5, 5, 2)))
    with pytest.raises(ValueError, match=r"grid_sample: grid must be \(N, Ho, Wo, 2\) with the input's N = 2, got shape \(1, 5, 5, 2\)"):
        F.grid_sample(x, sg.tensor(np.zeros((1, 5, 5, 2))))
    with pytest.raises(ValueError, match=r"grid_sample: expected a 4-D input"):
        F.grid_sample(sg.tensor(np.zeros((3, 4, 4))), grid)
    with pytest.raises(TypeError, match="grid_sample: grid dtype float32 differs from input dtype float64"):
        F.grid_sample(x, sg.tensor(np.zeros((2, 5, 5, 2), np.float32)))
    with pytest.raises(ValueError, match="grid_sample: mode must be one of 'bilinear', got 'bicubic'"):
        F.grid_sample(x, grid, mode="bicubic")
    with pytest.raises(ValueError, match="grid_sample: padding_mode must be one of 'zeros', 'border', 'reflection'"):
        F.grid_sample(x, grid, padding_mode="reflect")
    with pytest.raises(TypeError, match="grid_sample: align_corners must be a bool"):
        F.grid_sample(x, grid, align_corners=1)
    with pytest.raises(ValueError, match="grid_sample: input of shape .* has no pixel"):
        F.grid_sample(sg.tensor(np.zeros((2, 3, 0, 4))), grid)


@pytest.mark.parametrize("padding,align", MODES)
@pytest.mark.parametrize("opset", [18, 20])
def test_onnx_grid_sample(padding, align, opset, tmp_path):
    pytest.importorskip("onnxruntime")
    from framework import nn
    from tests.framework.onnx._util import check

    class Sampler(nn.Module):  # a grid from the input itself: both inputs of GridSample are graph values
        def forward(self, x):
            g = F.permute(x[:, :2], (0, 2, 3, 1)) * 1.7 - 0.4
            return F.grid_sample(x, g, padding_mode=padding, align_corners=align)

    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 5, 6)).astype(np.float32)
    other = np.random.default_rng(1).uniform(0, 1, (2, 3, 4, 7)).astype(np.float32)
    _, ops = check(Sampler(), x, tmp_path, [other], opset=opset)
    assert "GridSample" in ops
