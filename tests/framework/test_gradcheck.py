import numpy as np
import pytest

import framework as sg


class _WrongGrad(sg.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):  # deliberately wrong: should be 2 a g
        (a,) = ctx.saved_tensors
        return 3 * a * g


def test_gradcheck_reports_input_element_expected_and_got():
    x = sg.tensor(np.array([[1.0, 2.0]]), requires_grad=True)
    with pytest.raises(sg.GradcheckError, match=r"input 0 element \(0, 0\), output 0 element \(0, 0\): expected \(numeric\) 2, got \(analytic\) 3"):
        sg.gradcheck(_WrongGrad.apply, (x,))
    assert sg.gradcheck(_WrongGrad.apply, (x,), raise_exception=False) is False


def test_gradcheck_needs_float64_and_a_grad_input():
    with pytest.raises(TypeError, match="needs float64"):
        sg.gradcheck(lambda a: a * 2, (sg.tensor([1.0], requires_grad=True),))
    with pytest.raises(ValueError, match="no input has requires_grad"):
        sg.gradcheck(lambda a: a * 2, (sg.tensor(np.ones(2)),))


def test_gradcheck_handles_non_contiguous_inputs_and_multiple_inputs():
    base = np.arange(12.0).reshape(3, 4)
    x = sg.tensor(base, requires_grad=True)
    x.data = base.T  # non-contiguous view
    y = sg.tensor(np.ones(3) * 0.5, requires_grad=True)
    assert sg.gradcheck(lambda a, b: (a * b).exp(), (x, y))


def test_gradcheck_leaves_the_callers_tensors_alone():
    """The same .data array (a non-contiguous view stays that view), the same values and the same
    .grad after a pass, a failure and an fn that raises half-way (it used to swap .data for a
    contiguous copy, set .grad to None, and leave an element perturbed by eps)."""
    base = np.arange(12.0).reshape(3, 4)
    x = sg.tensor(base, requires_grad=True)
    view = base.T
    x.data = view
    y = sg.tensor(np.array([0.5, 1.5, 2.5]), requires_grad=True)
    old_grad = sg.tensor(np.full(3, 7.0))
    y.grad = old_grad
    assert sg.gradcheck(lambda a, b: (a * b).exp(), (x, y))
    assert x.data is view and y.grad is old_grad
    np.testing.assert_array_equal(view, np.arange(12.0).reshape(3, 4).T)
    assert sg.gradcheck(_WrongGrad.apply, (x,), raise_exception=False) is False
    assert x.data is view and x.grad is None
    np.testing.assert_array_equal(base, np.arange(12.0).reshape(3, 4))

    calls = []

    def fails_in_the_numeric_loop(a):
        calls.append(1)
        if len(calls) > 3:  # the first call builds the graph; then one per perturbation
            raise RuntimeError("boom")
        return a * 2
    z = sg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    before = z.data
    with pytest.raises(RuntimeError, match="boom"):
        sg.gradcheck(fails_in_the_numeric_loop, (z,))
    assert z.data is before
    np.testing.assert_array_equal(z.data, [1.0, 2.0, 3.0])
