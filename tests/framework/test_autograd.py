import numpy as np
import pytest

import framework as sg
import framework.functional as F


def test_scalar_backward_and_accumulation_over_two_calls():
    x = sg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    assert np.allclose(x.grad.numpy(), [2, 4, 6])
    (3 * x).sum().backward()
    assert np.allclose(x.grad.numpy(), [5, 7, 9])  # += as torch


def test_shared_subexpression_gets_summed_gradient():
    x = sg.tensor([2.0], requires_grad=True, dtype=np.float64)
    y = x * x
    z = y + y * x          # x^2 + x^3 -> 2x + 3x^2 = 16
    z.sum().backward()
    assert x.grad.item() == pytest.approx(16.0)


def test_backward_on_non_scalar_needs_gradient():
    x = sg.tensor(np.ones((2, 2)), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"only for a scalar output, this one has shape \(2, 2\)"):
        (x * 2).backward()
    (x * 2).backward(np.full((2, 2), 0.5))
    assert np.allclose(x.grad.numpy(), 1.0)


def test_gradient_of_wrong_shape_is_an_error():
    x = sg.tensor(np.ones((2, 2)), requires_grad=True)
    with pytest.raises(ValueError, match=r"gradient has shape \(3,\) but the tensor has shape \(2, 2\)"):
        (x * 2).backward(np.ones(3))


def test_backward_without_graph_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        sg.tensor([1.0]).backward()


def test_graph_is_freed_unless_retained():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    assert np.allclose(x.grad.numpy(), 2 * first)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_no_grad_context_and_decorator():
    x = sg.tensor([1.0], requires_grad=True)
    with sg.no_grad():
        y = x * 2
    assert not y.requires_grad and y.is_leaf

    @sg.no_grad()
    def f(a):
        return a * 3

    assert not f(x).requires_grad
    assert sg.is_grad_enabled()
    assert (x * 2).requires_grad


def test_chain_of_ten_thousand_ops_does_not_recurse():
    x = sg.tensor([1.0], requires_grad=True, dtype=np.float64)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.backward()
    assert x.grad.item() == pytest.approx(1.0001 ** 10_000, rel=1e-9)


def test_grad_only_flows_to_leaves_that_require_it():
    a = sg.tensor([1.0, 2.0], requires_grad=True)
    b = sg.tensor([3.0, 4.0])
    (a * b).sum().backward()
    assert b.grad is None and np.allclose(a.grad.numpy(), [3, 4])


def test_integer_outputs_are_not_differentiable():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    assert not (x > 1).requires_grad


class _TwoOut(sg.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * 2, a * a

    @staticmethod
    def backward(ctx, g1, g2):  # d(2a) = 2, d(a^2) = 2a
        (a,) = ctx.saved_tensors
        return 2 * g1 + 2 * a * g2


def test_multi_output_function_zero_fills_unused_output():
    x = sg.tensor([1.0, 3.0], requires_grad=True, dtype=np.float64)
    p, q = _TwoOut.apply(x)
    q.sum().backward()                      # p unused: its gradient is zero
    assert np.allclose(x.grad.numpy(), [2, 6])
    assert sg.gradcheck(lambda t: _TwoOut.apply(t), (sg.tensor([0.5, -1.5], requires_grad=True, dtype=np.float64),))


class _BadShape(sg.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, g):
        return g[:1]


class _BadCount(sg.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        return g


def test_bad_backwards_are_reported_with_the_function_name():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"_BadShape.backward returned a gradient of shape \(1,\) for input 0 of shape \(2,\)"):
        _BadShape.apply(x).sum().backward()
    with pytest.raises(RuntimeError, match="_BadCount.backward returned 1 gradients, expected 2"):
        _BadCount.apply(x, x).sum().backward()


def test_needs_input_grad_and_non_tensor_arguments():
    seen = {}

    class Scale(sg.Function):
        @staticmethod
        def forward(ctx, a, b, factor):
            seen["needs"] = ctx.needs_input_grad
            ctx.factor = factor
            return a * b * factor

        @staticmethod
        def backward(ctx, g):
            return None, None, None

    a, b = sg.tensor([1.0], requires_grad=True), sg.tensor([2.0])
    out = Scale.apply(a, b, 3.0)
    assert seen["needs"] == (True, False, False) and out.item() == 6.0


# -- version counters: a backward refuses inputs changed in place since the op used them ------------
def test_backward_through_an_input_modified_in_place_is_refused_with_torchs_message():
    a = sg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2.0
    c = b * b  # saved b at version 0
    b.mul_(3)
    with pytest.raises(RuntimeError, match=r"Mul.backward: one of the variables needed for gradient "
                                           r"computation has been modified by an inplace operation: "
                                           r"input 0 of Mul \(a float32 tensor of shape \(3,\)\) is at "
                                           r"version 1; expected version 0 instead"):
        c.sum().backward()


def test_a_parameter_changed_under_no_grad_before_backward_is_caught():
    w = sg.tensor([1.0, 2.0], requires_grad=True)
    x = sg.tensor([3.0, 4.0])
    loss = (w * x).sum()
    with sg.no_grad():
        w.mul_(0.5)  # an optimizer step before backward
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
        loss.backward()


def test_an_input_that_needs_no_grad_is_checked_too():
    w = sg.tensor([1.0, 2.0], requires_grad=True)
    buf = sg.tensor([3.0, 4.0])  # a buffer: no grad, but Mul's gradient for w is made of it
    loss = (w * buf).sum()
    buf.add_(1.0)
    with pytest.raises(RuntimeError, match="input 1 of Mul is at version 1; expected version 0"):
        loss.backward()


def test_views_and_detach_share_the_version_counter():
    x = sg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    v = x.reshape(6)
    d = x.detach()
    y = (v * v).sum()
    with sg.no_grad():
        d[0].zero_()  # through a view of a detached alias: the same memory, one counter
    assert x._version == v._version == d._version == 1 and x.numpy()[0].tolist() == [0.0] * 3
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_in_place_after_backward_and_between_steps_is_fine():
    w = sg.tensor([1.0, 2.0], requires_grad=True)
    for step in range(3):  # the training loop: forward, backward, in-place update, repeat
        loss = (w * w).sum()
        loss.backward()
        with sg.no_grad():
            w.sub_(w.grad, alpha=0.25)
        w.grad = None
    np.testing.assert_allclose(w.numpy(), [0.125, 0.25])
    assert w._version == 3


def test_a_recorded_in_place_op_keeps_earlier_values_for_its_own_backward():
    x = sg.tensor([1.0, -2.0], requires_grad=True, dtype=np.float64)
    y = x * 1.0
    y.clamp_(min=0.0)  # clamp's backward needs the values before the clamp
    y.sum().backward()
    assert x.grad.numpy().tolist() == [1.0, 0.0]
