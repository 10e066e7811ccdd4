import numpy as np
import pytest

import framework as sg


def test_dtype_rules():
    assert sg.tensor([1.0, 2.0]).dtype == np.float32          # Python floats -> float32
    assert sg.tensor(np.zeros(3)).dtype == np.float64         # float64 arrays are kept
    with pytest.raises(ValueError, match="tensor: dtype float16 is not supported: srgrad "
                                         "computes in float32 or float64"):
        sg.tensor(np.zeros(3, np.float16))  # refused, never cast silently
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


# -- torch's facts and conversions -----------------------------------------------------------------
def test_size_is_torchs_shape_and_numel_the_count():
    x = sg.zeros(2, 3, 4)
    assert x.size() == (2, 3, 4) and isinstance(x.size(), tuple)
    assert x.size(1) == 3 and x.size(-1) == 4 and x.numel() == 24 and x.dim() == 3
    assert sg.tensor(5.0).size() == () and sg.tensor(5.0).numel() == 1
    with pytest.raises(IndexError, match="size: dim 3 is out of range for a tensor with 3 dimensions"):
        x.size(3)
    with pytest.raises(TypeError, match="size: dim must be an int, got 1.0"):
        x.size(1.0)


def test_to_and_cpu_are_device_agnostic_no_ops():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    assert x.device == "cpu"
    for args, kwargs in [(("cpu",), {}), ((), {"device": "cpu"}), (("cpu:0",), {}),
                         ((x.device,), {"non_blocking": True}), ((np.float32,), {}),
                         (("cpu", "float32"), {}), ((x,), {})]:
        assert x.to(*args, **kwargs) is x
    assert x.cpu() is x
    y = x.to("cpu", copy=True)
    assert y is not x and not np.shares_memory(y.numpy(), x.numpy()) and y.requires_grad


def test_to_a_dtype_is_differentiable():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    y = x.to(np.float64)
    assert y.dtype == np.float64 and x.to(dtype="float64").dtype == np.float64
    assert x.to(sg.zeros(1, dtype=np.float64)).dtype == np.float64  # another tensor's dtype
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.numpy().tolist() == [2.0, 4.0]
    assert x.to(np.int64).numpy().tolist() == [1, 2]


def test_to_errors_name_the_problem():
    x = sg.zeros(2)
    with pytest.raises(ValueError, match="to: srgrad runs on the CPU only; device 'cuda:0' is not "
                                         "available"):
        x.to("cuda:0")
    with pytest.raises(ValueError, match="device 'mps'"):
        x.to(device="mps")
    with pytest.raises(ValueError, match="to: dtype float16 is not supported"):
        x.to(np.float16)
    with pytest.raises(TypeError, match="to: 'gpu' is neither a device nor a dtype"):
        x.to("gpu")
    with pytest.raises(TypeError, match="to: unexpected keyword argument 'dtyp'; did you mean 'dtype'"):
        x.to(dtyp=np.float64)
    with pytest.raises(TypeError, match="to: two dtypes given"):
        x.to(np.float32, dtype=np.float64)


def test_requires_grad_in_place_method():
    x = sg.zeros(3)
    assert x.requires_grad_() is x and x.requires_grad
    assert not x.requires_grad_(False).requires_grad
    y = sg.zeros(3, requires_grad=True) * 2.0
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf tensors"):
        y.requires_grad_(False)


# -- in-place ops ------------------------------------------------------------------------------------
def test_in_place_ops_values_and_the_version_counter():
    x = sg.tensor([1.0, -2.0, 3.0])
    data = x.numpy()
    assert x._version == 0
    assert x.mul_(2) is x and x.numpy().tolist() == [2.0, -4.0, 6.0]
    x.add_(sg.tensor([1.0, 1.0, 1.0]), alpha=0.5).sub_(1.0, alpha=2).div_(2)
    assert x.numpy().tolist() == [0.25, -2.75, 2.25]
    x.clamp_(min=-1.0, max=1.0)
    assert x.numpy().tolist() == [0.25, -1.0, 1.0]
    x.copy_(np.array([7, 8, 9]))
    assert x.numpy().tolist() == [7.0, 8.0, 9.0] and x.dtype == np.float32
    x.fill_(2.5)
    assert x.numpy().tolist() == [2.5] * 3
    x.zero_()
    assert x.numpy().tolist() == [0.0] * 3
    assert x.numpy() is data and x._version == 8  # the same memory, one bump per op


def test_in_place_broadcasts_operands_and_keeps_the_dtype():
    x = sg.tensor(np.ones((2, 3), np.float32))
    x.mul_(sg.tensor(np.array([1.0, 2.0, 3.0])))  # float64 operand, float32 tensor stays float32
    assert x.dtype == np.float32 and x.numpy().tolist() == [[1, 2, 3], [1, 2, 3]]
    x.copy_(sg.tensor([[5.0], [6.0]]))
    assert x.numpy().tolist() == [[5, 5, 5], [6, 6, 6]]
    with pytest.raises(ValueError, match=r"add_: an operand of shape \(3, 3\) does not broadcast to "
                                         r"this tensor's shape \(2, 3\)"):
        x.add_(np.ones((3, 3)))
    with pytest.raises(TypeError, match="mul_: the result has dtype float32, which cannot be "
                                        "written in place into a int64 tensor"):
        sg.tensor([1, 2]).mul_(0.5)
    with pytest.raises(ValueError, match="mul_: this tensor's memory is read-only"):
        sg.zeros(1).expand(3).mul_(2)
    with pytest.raises(TypeError, match="fill_: value must be a number"):
        x.fill_("1")
    with pytest.raises(ValueError, match="clamp_: at least one of min and max"):
        x.clamp_()


def test_in_place_on_a_leaf_that_requires_grad_is_refused_unless_no_grad():
    p = sg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="mul_: a leaf Variable that requires grad is being used in "
                                           "an in-place operation"):
        p.mul_(0.5)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        p[0:1].zero_()
    with sg.no_grad():
        p.mul_(0.5)
        p[1:].add_(1.0)  # a view: writes into p and bumps p's version
    assert p.numpy().tolist() == [0.5, 2.0] and p._version == 2 and p.requires_grad and p.is_leaf
    p.data *= 2  # numpy's spelling of p.data.mul_(2): outside autograd, no version bump
    assert p.numpy().tolist() == [1.0, 4.0] and p._version == 2
    p.grad = sg.tensor([3.0, 3.0])
    p.grad.zero_()  # torch's habit; optimizer.zero_grad() sets None
    assert p.grad.numpy().tolist() == [0.0, 0.0]


def test_in_place_in_the_graph_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal((2, 3)), rng.standard_normal(3)
    x, w = (sg.tensor(a, requires_grad=True) for a in (xs, ws))
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (xs, ws))
    outs = []
    for lib, a, b in ((sg, x, w), (torch, tx, tw)):
        y = a * 2.0
        y.mul_(b).add_(a, alpha=0.5).sub_(b).div_(b * b + 1).clamp_(-0.5, 0.5)
        z = a * 0.0
        z.copy_(b)  # the gradient reaches b through copy_
        loss = (y * y).sum() + (z * a).sum()
        loss.backward()
        outs.append((loss.item(), y.detach().numpy()))
    assert np.isclose(outs[0][0], outs[1][0], rtol=1e-12)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10)


def test_fill_and_zero_in_the_graph_cut_the_gradient_as_torch():
    x = sg.tensor([1.0, 2.0], requires_grad=True, dtype=np.float64)
    y = x * 3.0
    y.zero_()
    (y + x).sum().backward()
    assert y.requires_grad and x.grad.numpy().tolist() == [1.0, 1.0]


def test_in_place_on_a_view_in_the_graph_is_refused():
    x = sg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2.0
    with pytest.raises(RuntimeError, match=r"mul_: an in-place op on a view of another tensor \(of "
                                           r"shape \(3,\)\) cannot be recorded"):
        y[:2].mul_(2)


def test_augmented_assignment_is_in_place_as_torch():
    w = sg.tensor([1.0, 2.0], requires_grad=True)
    w.grad = sg.tensor([4.0, 8.0])
    alias = w
    with sg.no_grad():
        w -= 0.25 * w.grad  # the manual SGD step of torch tutorials: the parameter itself changes
        w *= 2
    assert w is alias and w.numpy().tolist() == [0.0, 0.0] and w._version == 2
    x = sg.tensor([1.0, 2.0])
    x += 1
    x /= 2
    assert x.numpy().tolist() == [1.0, 1.5]
    with pytest.raises(RuntimeError, match="sub_: a leaf Variable that requires grad"):
        w -= 1


def test_an_in_place_op_with_itself_as_operand():
    # torch refuses this backward (the saved y changed); srgrad's graph keeps the old y
    xs = np.array([0.5, -1.5, 2.0])
    x = sg.tensor(xs, requires_grad=True)
    y = x * 1.0
    y.mul_(y)  # y^2: both factors are the old y
    y += y  # 2 y^2
    y.sum().backward()
    np.testing.assert_allclose(y.numpy(), 2 * xs ** 2)
    np.testing.assert_allclose(x.grad.numpy(), 4 * xs)


@pytest.mark.parametrize("write", ["graph", "no_grad", "setitem"])
def test_inplace_write_into_an_output_its_op_saved_keeps_the_gradient(write):
    """exp saves its output for backward: writing into that output in place (mul_ in the graph,
    mul_ under no_grad, x[i] = v) used to corrupt exp's gradient silently; the saved values are
    now the old ones (torch refuses this backward: README, differ on purpose)."""
    w = sg.tensor([0.0, 1.0], requires_grad=True)
    y = w.exp()
    if write == "graph":
        y.mul_(2)
        expect = 2 * np.exp([0.0, 1.0])
    elif write == "no_grad":
        with sg.no_grad():
            y.mul_(2)
        expect = np.exp([0.0, 1.0])
    else:
        y[0] = 5.0
        expect = [0.0, np.e]
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), expect, rtol=1e-6)
