"""Elementwise ops: gradcheck (with broadcasting), torch parity, errors."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64

BINARY = {
    "add": (lambda a, b: a + b, False),
    "sub": (lambda a, b: a - b, False),
    "mul": (lambda a, b: a * b, False),
    "div": (lambda a, b: a / b, True),
    "pow": (lambda a, b: a ** b, True),
    "maximum": (F.maximum, False),
    "minimum": (F.minimum, False),
    "remainder": (lambda a, b: a % b, True),  # random values: no a / b lands on an integer
}
SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((2, 1, 4), (3, 1))]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_gradcheck_with_broadcasting(name, sa, sb, rng):
    fn, positive = BINARY[name]
    a, b = t64(rng, *sa, positive=positive), t64(rng, *sb, positive=positive)
    assert sg.gradcheck(fn, (a, b))


@pytest.mark.parametrize("name,fn,positive", [
    ("neg", lambda a: -a, False), ("exp", F.exp, False), ("log", F.log, True),
    ("sqrt", F.sqrt, True), ("abs", F.abs, False),
    ("clamp", lambda a: F.clamp(a, -0.5, 0.7), False), ("clamp_min", lambda a: F.clamp(a, min=0.1), False),
    ("pow_scalar", lambda a: a ** 3.0, False), ("rpow", lambda a: 2.0 ** a, False),
    ("rsub", lambda a: 1.0 - a, False), ("rdiv", lambda a: 1.0 / a, True),
])
def test_unary_gradcheck(name, fn, positive, rng):
    assert sg.gradcheck(fn, (t64(rng, 3, 5, positive=positive),))


def test_where_gradcheck_and_values(rng):
    a, b = t64(rng, 3, 4), t64(rng, 4)
    cond = rng.random((3, 4)) > 0.5
    assert sg.gradcheck(lambda x, y: F.where(cond, x, y), (a, b))
    out = F.where(cond, a, b).numpy()
    assert np.array_equal(out, np.where(cond, a.numpy(), b.numpy()))


def test_maximum_ties_split_the_gradient():
    a = sg.tensor([1.0, 2.0], requires_grad=True)
    b = sg.tensor([1.0, 3.0], requires_grad=True)
    F.maximum(a, b).sum().backward()
    assert a.grad.numpy().tolist() == [0.5, 0.0] and b.grad.numpy().tolist() == [0.5, 1.0]


def test_clamp_gradient_is_one_on_the_closed_interval():
    x = sg.tensor([-2.0, -1.0, 0.0, 1.0, 2.0], requires_grad=True)
    x.clamp(-1.0, 1.0).sum().backward()
    assert x.grad.numpy().tolist() == [0, 1, 1, 1, 0]


def test_mismatched_shapes_name_both_shapes(rng):
    with pytest.raises(ValueError, match=r"add: shapes \(3, 4\) and \(5,\) cannot be broadcast"):
        t64(rng, 3, 4) + t64(rng, 5)
    with pytest.raises(ValueError, match=r"mul: shapes \(2,\) and \(3,\)"):
        t64(rng, 2) * np.ones(3)
    with pytest.raises(ValueError, match="at least one of min and max"):
        F.clamp(t64(rng, 2))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
def test_binary_parity_with_torch(name, rng):
    torch = pytest.importorskip("torch")
    fn, positive = BINARY[name]
    a, b = t64(rng, 2, 3, 4, positive=True), t64(rng, 3, 1, positive=True)
    out = fn(a, b)
    out.backward(np.ones(out.shape))
    ta = torch.tensor(a.numpy(), requires_grad=True)
    tb = torch.tensor(b.numpy(), requires_grad=True)
    tf = {"maximum": torch.maximum, "minimum": torch.minimum}.get(name, fn)
    tout = tf(ta, tb)
    tout.backward(torch.ones_like(tout))
    assert np.allclose(out.numpy(), tout.detach().numpy(), rtol=1e-12, atol=0)
    assert np.allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert np.allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "abs", "neg"])
def test_unary_parity_with_torch(name, rng):
    torch = pytest.importorskip("torch")
    a = t64(rng, 4, 5, positive=True)
    out = getattr(F, name)(a)
    out.sum().backward()
    ta = torch.tensor(a.numpy(), requires_grad=True)
    tout = getattr(torch, name)(ta)
    tout.sum().backward()
    assert np.allclose(out.numpy(), tout.detach().numpy(), rtol=1e-13)
    assert np.allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-13)


@pytest.mark.parametrize("shape", [(), (1,), (3, 5)])
def test_clone_is_a_differentiable_copy(shape, rng):
    x = t64(rng, *shape)
    y = F.clone(x)
    assert not np.shares_memory(y.numpy(), x.numpy()) and np.array_equal(y.numpy(), x.numpy())
    assert sg.gradcheck(lambda a: F.clone(a) * a, (x,))
    z = x.clone()
    (z * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(shape, 3.0))
    t = sg.tensor(np.ones(4, np.float32)).permute(0)
    assert t.clone().dtype == np.float32


def test_clone_of_a_transposed_view_is_contiguous(rng):
    x = t64(rng, 3, 4)
    y = x.T
    assert not y.numpy().flags.c_contiguous
    assert y.clone().numpy().flags.c_contiguous and y.contiguous().numpy().flags.c_contiguous
    assert x.contiguous() is x


def test_clamp_with_tensor_bounds_gradcheck(rng):
    """clamp(x, lo, hi) with tensor bounds: x's gradient inside, each bound's where it clips."""
    x = t64(rng, 3, 4)
    lo = sg.tensor(rng.standard_normal(4) - 1.0, requires_grad=True)
    hi = sg.tensor(rng.standard_normal((3, 1)) + 1.0, requires_grad=True)
    assert sg.gradcheck(lambda a, b, c: F.clamp(a, b, c), (x, lo, hi))


@pytest.mark.parametrize("sa, sb", [((3, 4, 5, 6), (3, 4, 1, 1)), ((3, 4, 1, 1), (3, 4, 5, 6)), ((5, 7), (5, 1))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_per_row_scales_gradients_in_one_pass(sa, sb, dtype, monkeypatch, rng):
    """x * s with s one value per row of x (a channel attention's (N, C, 1, 1)): both gradients
    from elementwise._row_scale_grads, against torch in float64 (float32: the scale's sum within its
    rounding; the other gradient is np.multiply's bits), and a gradcheck."""
    torch = pytest.importorskip("torch")
    from framework.functional import elementwise
    calls = []
    kernel = elementwise._row_scale_grads
    monkeypatch.setattr(elementwise, "_row_scale_grads", lambda *args: calls.append(1) or kernel(*args))
    a, b = (sg.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in (sa, sb))
    g = rng.standard_normal(np.broadcast_shapes(sa, sb)).astype(dtype)
    (a * b).backward(g)
    assert calls == [1]
    ta, tb = (torch.tensor(t.numpy().astype(np.float64), requires_grad=True) for t in (a, b))
    (ta * tb).backward(torch.tensor(g.astype(np.float64)))
    big, small = (a, b) if a.numpy().size > b.numpy().size else (b, a)
    np.testing.assert_array_equal(big.grad.numpy(), g * small.numpy())
    tsmall = tb if small is b else ta
    L = g.size // small.numpy().size
    bound = (4 if dtype == np.float32 else 1e-9) * np.finfo(np.float32).eps * L * \
        np.abs(g.reshape(small.numpy().size, L) * big.numpy().reshape(small.numpy().size, L)).sum(1)
    assert (np.abs(small.grad.numpy().reshape(-1) - tsmall.grad.numpy().reshape(-1)) <= bound).all()
    assert small.grad.dtype == dtype and small.grad.shape == small.shape
    assert sg.gradcheck(lambda a, b: a * b, (t64(rng, *sa), t64(rng, *sb)))


def test_add_arrays_is_np_add_on_every_thread(rng):
    """elementwise.add_arrays (Add's forward, a captured backward's gradient sums): np.add's bits,
    in parallel chunks from _PARALLEL_ADD elements, into `out` (aliasing an operand too); broadcasts,
    views and other dtypes go to np.add itself."""
    from framework.functional.elementwise import _PARALLEL_ADD, add_arrays
    n = 3 * _PARALLEL_ADD + 5  # several chunks and a ragged end
    for dtype in (np.float32, np.float64):
        a, b = (rng.standard_normal(n).astype(dtype) for _ in range(2))
        a[:3] = (np.inf, -0.0, np.nan)  # inf, +0 (not -0), the NaN operand
        b[:3] = (1.0, 0.0, 1.0)
        want = np.add(a, b)
        np.testing.assert_array_equal(add_arrays(a, b).view(np.uint8), want.view(np.uint8))
        out = a.copy()
        assert add_arrays(out, b, out=out) is out
        np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))
    x = rng.standard_normal((4, _PARALLEL_ADD)).astype(np.float32)
    np.testing.assert_array_equal(add_arrays(x, x[:1]), x + x[:1])  # a broadcast
    np.testing.assert_array_equal(add_arrays(x.T, x.T), x.T + x.T)  # views
    np.testing.assert_array_equal(add_arrays(np.arange(n), np.arange(n)), 2 * np.arange(n))
