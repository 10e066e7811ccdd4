"""A toy problem that really trains: fit y = 3x - 1 + noise with a 1-parameter-pair linear model,
using only Tensor ops and a hand-written SGD step. Prints the loss as it falls and the fit."""
import numpy as np

import framework as sg


def main(steps: int = 200, lr: float = 0.1, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = sg.tensor(rng.uniform(-1, 1, (64, 1)))
    y = sg.tensor(3 * x.numpy() - 1 + 0.05 * rng.standard_normal((64, 1)))
    w = sg.zeros(1, 1, requires_grad=True)
    b = sg.zeros(1, requires_grad=True)
    for step in range(steps):
        loss = ((x @ w + b - y) ** 2).mean()
        w.grad = b.grad = None
        loss.backward()
        with sg.no_grad():
            w.data -= lr * w.grad.data
            b.data -= lr * b.grad.data
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step:4d}  mse {loss.item():.5f}")
    print(f"fit: y = {w.item():.3f} x + {b.item():.3f}  (true: 3x - 1)")
    return w.item(), b.item(), loss.item()


if __name__ == "__main__":
    main()
