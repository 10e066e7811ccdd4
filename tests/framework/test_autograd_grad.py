"""autograd.grad against torch.autograd.grad: leaves and graph outputs as inputs, several outputs
with grad_outputs, allow_unused / materialize_grads, no .grad touched, refusals."""
import numpy as np
import pytest

import framework as sg

torch = pytest.importorskip("torch")


def _graph(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
    h = x * w
    return x, w, h, (h * h).sum(), (h.exp() * 3).sum()


def test_grad_matches_torch_and_leaves_grad_alone():
    (x, w, h, y, z), (tx, tw, th, ty, tz) = _graph(sg), _graph(torch)
    ours = sg.autograd.grad(y, [x, h], retain_graph=True)
    theirs = torch.autograd.grad(ty, [tx, th], retain_graph=True)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    assert x.grad is None and w.grad is None
    ours = sg.autograd.grad([y, z], w, grad_outputs=[sg.tensor(1.0), sg.tensor(2.0)])
    theirs = torch.autograd.grad([ty, tz], tw, grad_outputs=[torch.tensor(1.0), torch.tensor(2.0)])
    np.testing.assert_allclose(ours[0].numpy(), theirs[0].numpy(), rtol=1e-6)


def test_grad_unused_inputs_and_refusals():
    x, w, h, y, _ = _graph(sg)
    u = sg.ones(2, requires_grad=True)
    assert sg.autograd.grad(y, [x, u], allow_unused=True, retain_graph=True)[1] is None
    assert sg.autograd.grad(y, [u], materialize_grads=True, retain_graph=True)[0].tolist() == \
        [0.0, 0.0]
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        sg.autograd.grad(y, [u], retain_graph=True)
    with pytest.raises(RuntimeError, match="one-element outputs"):
        sg.autograd.grad(h, [x])
    with pytest.raises(NotImplementedError, match="create_graph=True"):
        sg.autograd.grad(y, [x], create_graph=True)
    sg.autograd.grad(y, [x])  # retain_graph defaults to create_graph (False): the graph is freed
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
