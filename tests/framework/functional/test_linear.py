"""linear and matmul: gradcheck, torch parity of values and every gradient (float64), the batched
attention products (threaded slices equal one np.matmul), broadcasting, dtypes, errors."""
import importlib

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64

linear_module = importlib.import_module("framework.functional.linear")  # F.linear is the function


# -- matmul --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 2)), ((4,), (4, 3)), ((3, 4), (4,)), ((4,), (4,)),
                                   ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                                   ((1, 1), (1, 1)), ((2, 3, 1, 2), (2, 3, 2, 1))])
def test_matmul_gradcheck_and_values(sa, sb, rng):
    a, b = t64(rng, *sa), t64(rng, *sb)
    assert sg.gradcheck(lambda x, y: x @ y, (a, b))
    # against the product in extended precision, within the classic dot-product bound K eps |a||b|
    # (not bit-equal to numpy's matmul: which GEMM kernel and blocking run depends on the CPU)
    got, k = (a @ b).numpy(), a.shape[-1]
    ref = np.matmul(a.numpy().astype(np.longdouble), b.numpy().astype(np.longdouble))
    bound = k * np.finfo(np.float64).eps * np.matmul(np.abs(a.numpy()), np.abs(b.numpy()))
    assert got.shape == ref.shape and np.all(np.abs(got - ref) <= bound)


@pytest.mark.parametrize("sa,sb", [((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                                   ((3, 2, 5, 4), (3, 2, 4, 5)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,))])
def test_matmul_parity_with_torch(sa, sb, rng):
    torch = pytest.importorskip("torch")
    a, b = t64(rng, *sa), t64(rng, *sb)
    y = a @ b
    g = rng.standard_normal(y.shape)
    y.backward(g)
    ta, tb = torch.tensor(a.numpy(), requires_grad=True), torch.tensor(b.numpy(), requires_grad=True)
    ty = ta @ tb
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.grad.data, ta.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b.grad.data, tb.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_attention_products_threaded_equal_serial(rng, monkeypatch):
    """q k^T and attn v at window-attention shapes (B*nW, heads, N, d): the sliced products on worker
    threads give bit-identical values and gradients to one np.matmul (the same per-matrix BLAS calls)."""
    if not sg.threads.blas_controllable():
        pytest.skip("the worker threads need numpy's OpenBLAS (its thread count is set per call)")
    q, k = t64(rng, 8, 3, 16, 6), t64(rng, 8, 3, 16, 6)
    g = rng.standard_normal((8, 3, 16, 16))

    def run():
        q.grad = k.grad = None
        y = q @ k.transpose(-2, -1)
        y.backward(g)
        return y.data.copy(), q.grad.data.copy(), k.grad.data.copy()

    monkeypatch.setattr(linear_module, "_SERIAL_MACS", 1 << 62)
    serial = run()
    monkeypatch.setattr(linear_module, "_SERIAL_MACS", 0)
    monkeypatch.setattr(linear_module._tiles, "default_workers", lambda: 2)
    threaded = run()
    for s, t in zip(serial, threaded):
        np.testing.assert_array_equal(s, t)
    np.testing.assert_allclose(serial[0], np.matmul(q.data, np.swapaxes(k.data, -1, -2)), rtol=1e-14)


def test_matmul_float32_stays_float32(rng):
    a = sg.tensor(rng.standard_normal((4, 2, 3, 5)).astype(np.float32), requires_grad=True)
    b = sg.tensor(rng.standard_normal((4, 2, 5, 3)).astype(np.float32), requires_grad=True)
    y = a @ b
    y.backward(np.ones(y.shape, np.float32))
    assert y.dtype == a.grad.dtype == b.grad.dtype == np.float32


def test_matmul_errors(rng):
    with pytest.raises(ValueError, match=r"matmul: shapes \(3, 4\) and \(3, 2\) do not align \(4 != 3\)"):
        t64(rng, 3, 4) @ t64(rng, 3, 2)
    with pytest.raises(ValueError, match=r"matmul: batch shapes of \(2, 3, 4\) and \(3, 4, 2\) cannot"):
        t64(rng, 2, 3, 4) @ t64(rng, 3, 4, 2)
    with pytest.raises(ValueError, match="at least 1 dimension"):
        F.matmul(t64(rng, 3), sg.tensor(np.float64(2.0)))
    with pytest.raises(TypeError, match="matmul: operand dtypes differ \\(float32 and float64\\)"):
        sg.tensor(np.ones((2, 2), np.float32)) @ t64(rng, 2, 2)


# -- linear --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (4,), (1, 1, 4)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_gradcheck(shape, bias, rng):
    x, w = t64(rng, *shape), t64(rng, 3, 4)
    inputs = (x, w, t64(rng, 3)) if bias else (x, w)
    assert sg.gradcheck(lambda *t: F.linear(*t), inputs)


@pytest.mark.parametrize("shape,out", [((2, 5, 7), 3), ((7,), 1), ((1, 1), 5), ((3, 2, 4, 7), 6)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_torch_parity(shape, out, bias, rng):
    torch = pytest.importorskip("torch")
    arrays = [rng.standard_normal(shape), rng.standard_normal((out, shape[-1]))]
    if bias:
        arrays.append(rng.standard_normal(out))
    ours = [sg.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = F.linear(*ours)
    ty = torch.nn.functional.linear(*theirs)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    ty.backward(torch.tensor(g))
    assert y.shape == tuple(ty.shape)
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.data, t.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_linear_hand_values():
    x = sg.tensor(np.array([[1.0, 2.0], [3.0, -1.0]]), requires_grad=True)
    w = sg.tensor(np.array([[1.0, 0.5], [-2.0, 1.0], [0.0, 3.0]]), requires_grad=True)  # (out 3, in 2)
    b = sg.tensor(np.array([0.0, 1.0, -1.0]), requires_grad=True)
    y = F.linear(x, w, b)
    np.testing.assert_array_equal(y.data, [[2.0, 1.0, 5.0], [2.5, -6.0, -4.0]])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, [[-1.0, 4.5], [-1.0, 4.5]])  # column sums of W
    np.testing.assert_array_equal(w.grad.data, [[4.0, 1.0]] * 3)  # column sums of x
    np.testing.assert_array_equal(b.grad.data, [2.0, 2.0, 2.0])


def test_linear_float32_stays_float32(rng):
    x = sg.tensor(rng.standard_normal((2, 6, 5)).astype(np.float32), requires_grad=True)
    w = sg.tensor(rng.standard_normal((3, 5)).astype(np.float32), requires_grad=True)
    b = sg.tensor(np.zeros(3, np.float32), requires_grad=True)
    y = F.linear(x, w, b)
    y.backward(np.ones(y.shape, np.float32))
    assert {y.dtype, x.grad.dtype, w.grad.dtype, b.grad.dtype} == {np.dtype(np.float32)}


def test_linear_non_contiguous_input_and_gradient(rng):
    torch = pytest.importorskip("torch")
    a, wa = rng.standard_normal((5, 4, 3)), rng.standard_normal((2, 5))
    x, w = sg.tensor(a, requires_grad=True), sg.tensor(wa, requires_grad=True)
    y = F.linear(x.permute(1, 2, 0), w)  # (4, 3, 5): a strided view
    (y.permute(2, 0, 1) * sg.tensor(np.arange(24.0).reshape(2, 4, 3))).sum().backward()
    tx, tw = torch.tensor(a, requires_grad=True), torch.tensor(wa, requires_grad=True)
    ty = torch.nn.functional.linear(tx.permute(1, 2, 0), tw)
    (ty.permute(2, 0, 1) * torch.arange(24.0, dtype=torch.float64).reshape(2, 4, 3)).sum().backward()
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.data, tw.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("rows", [1, 7, 20, 0])
def test_linear_chunks_on_threads_equal_one_product(rows, rng, monkeypatch):
    """linear's rows in fixed chunks (here 3 rows) on worker threads: the output and input gradient
    are the one-product values, the weight and bias gradients the sums of per-chunk partials, the
    same bits whether the chunks run on 1 or 2 threads."""
    if not sg.threads.blas_controllable():
        pytest.skip("the worker threads need numpy's OpenBLAS (its thread count is set per call)")
    a, wa, ba = rng.standard_normal((rows, 5)), rng.standard_normal((4, 5)), rng.standard_normal(4)
    g = rng.standard_normal((rows, 4))
    monkeypatch.setattr(linear_module, "_CHUNK_ROWS", 3)
    results = []
    for workers in (1, 2):
        monkeypatch.setattr(linear_module._tiles, "default_workers", lambda: workers)
        x, w, b = (sg.tensor(v, requires_grad=True) for v in (a, wa, ba))
        y = F.linear(x, w, b)
        y.backward(g)
        results.append([y.data, x.grad.data, w.grad.data, b.grad.data])
    for one, two in zip(*results):
        np.testing.assert_array_equal(one, two)
    y, gx, gw, gb = results[0]
    np.testing.assert_allclose(y, a @ wa.T + ba, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(gx, g @ wa, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(gw, g.T @ a, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(gb, g.sum(axis=0), rtol=1e-13, atol=1e-14)
    assert gw.shape == (4, 5) and gb.shape == (4,)


def test_linear_errors(rng):
    x = t64(rng, 2, 4)
    with pytest.raises(ValueError, match=r"linear: weight must have shape \(out_features, 4\) for input "
                                         r"of shape \(2, 4\), got \(3, 5\)"):
        F.linear(x, t64(rng, 3, 5))
    with pytest.raises(ValueError, match=r"linear: bias must have shape \(3,\) .* got \(4,\)"):
        F.linear(x, t64(rng, 3, 4), t64(rng, 4))
    with pytest.raises(TypeError, match="linear: weight dtype float32 differs from input dtype float64"):
        F.linear(x, sg.tensor(np.ones((3, 4), np.float32)))
    with pytest.raises(TypeError, match="linear: input must be float32 or float64, got dtype int64"):
        F.linear(sg.Tensor(np.ones((2, 4), np.int64)), t64(rng, 3, 4))
    with pytest.raises(ValueError, match="linear: input must have at least 1 dimension"):
        F.linear(sg.tensor(np.float64(1.0)), t64(rng, 3, 1))
