"""framework/nn/conv.py's fused activations: conv_act and run_fused against the modules called one by
one (Conv2d/ConvTranspose2d themselves: tests/framework/nn/test_layers.py)."""
import numpy as np
import pytest

import framework as sg
from framework import nn
from framework.nn.conv import conv_act, run_fused


@pytest.mark.parametrize("act", [nn.ReLU(), nn.LeakyReLU(0.2), nn.LeakyReLU(-0.5), nn.Tanh()])
def test_conv_act_and_run_fused_equal_the_unfused_layers(act):
    """The values and gradients of calling the modules one by one (fused for ReLU and LeakyReLU
    of slope >= 0, unfused otherwise), and an activation with a hook is left its call."""
    rng = np.random.default_rng(0)
    seq = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), act, nn.Conv2d(4, 2, 1), act)
    x = sg.tensor(rng.standard_normal((2, 3, 5, 4)).astype(np.float32), requires_grad=True)
    outs = []
    for run in (seq, lambda x: run_fused(seq, x), lambda x: act(seq[2](conv_act(seq[0], act, x)))):
        x.grad = None
        seq.zero_grad()
        y = run(x)
        y.backward(np.ones(y.shape, np.float32))
        outs.append([y.numpy(), x.grad.numpy(), seq[0].weight.grad.numpy(), seq[2].bias.grad.numpy()])
    for other in outs[1:]:
        for a, ref in zip(other, outs[0]):
            np.testing.assert_array_equal(a, ref)
    seen = []
    act.register_forward_hook(lambda m, i, o: seen.append(1))
    run_fused(seq, x)
    assert len(seen) == 2


def test_conv_act_fuses_only_relu_and_leaky_relu(monkeypatch):
    """The fused call passes relu_slope to the conv: 0 for ReLU, the slope for LeakyReLU(>= 0)."""
    conv, slopes = nn.Conv2d(2, 2, 1), []
    real = conv.forward
    monkeypatch.setattr(conv, "forward", lambda x, relu_slope=None: slopes.append(relu_slope) or real(x, relu_slope))
    x = sg.tensor(np.ones((1, 2, 2, 2), np.float32))
    for act in (nn.ReLU(), nn.LeakyReLU(0.1), nn.LeakyReLU(-0.1), nn.Sigmoid()):
        conv_act(conv, act, x)
    assert slopes == [0.0, 0.1, None, None]
