import numpy as np
import pytest

import framework as sg


def test_dtype_rules():
    assert sg.tensor([1.0, 2.0]).dtype == np.float32          # Python floats -> float32
    assert sg.tensor(np.zeros(3)).dtype == np.float64         # float64 arrays are kept
    assert sg.tensor(np.zeros(3, np.float16)).dtype == np.float32
    assert sg.tensor([1, 2]).dtype.kind == "i"
    assert sg.tensor([1.0], dtype=np.float64).dtype == np.float64
    assert sg.zeros(2, 3).dtype == np.float32 and sg.zeros((2, 3)).shape == (2, 3)
    assert sg.ones(2, dtype=np.float64).dtype == np.float64
    assert sg.randn(4, 5, rng=np.random.default_rng(0)).shape == (4, 5)


def test_tensor_copies_but_from_numpy_shares():
    a = np.zeros(3, np.float32)
    t, s = sg.tensor(a), sg.from_numpy(a)
    a[0] = 5
    assert t.numpy()[0] == 0 and s.numpy()[0] == 5
    with pytest.raises(TypeError, match="numpy.ndarray"):
        sg.from_numpy([1, 2])


def test_float32_preserved_through_ops_with_python_scalars():
    x = sg.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    y = ((x * 2.0 + 1) / 3.0 - 0.5) ** 2
    z = y.exp().log().sqrt().abs().clamp(0.0, 10.0).sum()
    assert y.dtype == np.float32 and z.dtype == np.float32
    z.backward()
    assert x.grad.dtype == np.float32


def test_requires_grad_on_integer_tensor_is_an_error():
    with pytest.raises(TypeError, match="only float32/float64 tensors can require gradients, got dtype int64"):
        sg.tensor(np.arange(3), requires_grad=True)


def test_attributes():
    x = sg.tensor(np.arange(6.0).reshape(2, 3), dtype=np.float64)
    assert x.shape == (2, 3) and x.ndim == 2 and x.numel() == 6 and len(x) == 2
    assert x.T.shape == (3, 2) and np.array_equal(x.T.numpy(), x.numpy().T)
    assert sg.tensor([[3.5]]).item() == 3.5
    with pytest.raises(ValueError, match="only one-element"):
        x.item()
    d = x.detach()
    assert d.numpy() is x.numpy() and not d.requires_grad
    assert "tensor(" in repr(x)


def test_float_and_double_casts_are_differentiable():
    x = sg.tensor(np.array([1.0, 2.0]), requires_grad=True, dtype=np.float64)
    y = x.float()
    assert y.dtype == np.float32
    (y * y).sum().backward()
    assert x.grad.dtype == np.float64 and np.allclose(x.grad.numpy(), [2.0, 4.0])


def test_comparisons_give_bool_tensors():
    x = sg.tensor([1.0, 2.0, 3.0])
    assert (x > 1.5).numpy().tolist() == [False, True, True]
    assert (x <= 2.0).numpy().tolist() == [True, True, False]
