"""A user's Function, defined outside the package: it passes gradcheck and trains a parameter."""
import numpy as np

import framework as sg


class CubeScale(sg.Function):
    """y = w * x^3 (w broadcast over x)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return w * x ** 3

    @staticmethod
    def backward(ctx, g):  # dL/dx = 3 w x^2 g ; dL/dw = sum(x^3 g)
        x, w = ctx.saved_tensors
        gx = 3 * w * x * x * g if ctx.needs_input_grad[0] else None
        gw = np.sum(x ** 3 * g, keepdims=True).reshape(w.shape) if ctx.needs_input_grad[1] else None
        return gx, gw


def test_custom_function_gradcheck():
    rng = np.random.default_rng(0)
    x = sg.tensor(rng.standard_normal(5), requires_grad=True)
    w = sg.tensor(np.array([0.7]), requires_grad=True)
    assert sg.gradcheck(CubeScale.apply, (x, w))


def test_custom_function_trains_a_parameter():
    x = sg.tensor(np.linspace(-1, 1, 9), dtype=np.float64)
    target = 2.5 * x.numpy() ** 3
    w = sg.tensor(np.array([0.0]), requires_grad=True)
    for _ in range(200):
        loss = ((CubeScale.apply(x, w) - target) ** 2).mean()
        w.grad = None
        loss.backward()
        w.data -= 0.5 * w.grad.data
    assert abs(w.item() - 2.5) < 1e-3 and loss.item() < 1e-6
