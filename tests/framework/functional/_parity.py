"""torch parity for the op tests: the same float64 arrays through an srgrad op and its torch
twin; values and every gradient compared, then a float64 gradcheck."""
import numpy as np
import pytest

import framework as sg

torch = pytest.importorskip("torch")


def parity(ours, theirs, arrays, *, grads=None, gradcheck=True):
    """Run ours(*srgrad tensors) and theirs(*torch tensors) on the same float64 arrays; compare
    the values and, through a random output weighting, every input's gradient; then gradcheck."""
    grads = [True] * len(arrays) if grads is None else grads
    a = [sg.tensor(x, requires_grad=g) for x, g in zip(arrays, grads)]
    t = [torch.tensor(x, requires_grad=g) for x, g in zip(arrays, grads)]
    y, ty = ours(*a), theirs(*t)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = np.random.default_rng(5).standard_normal(ty.shape)
    (y * sg.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    for p, q, g in zip(a, t, grads):
        if g:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12, atol=1e-12)
    if gradcheck:
        assert sg.gradcheck(ours, tuple(sg.tensor(x, requires_grad=g)
                                        for x, g in zip(arrays, grads)))


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)
