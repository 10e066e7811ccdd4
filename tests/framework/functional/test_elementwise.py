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
