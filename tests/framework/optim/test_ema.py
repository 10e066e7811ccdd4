"""EMA of the weights: BasicSR's model_ema rule (torch's mul_ then add_), buffers copied, a copy
that never shares arrays with the model and takes no gradient."""
import numpy as np
import pytest

from framework import nn
from framework.optim import EMA


def _net():
    nn.init.manual_seed(3)
    return nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3)).to(np.float64)


def test_ema_follows_basicsr_model_ema_step_by_step():
    torch = pytest.importorskip("torch")
    net = _net()
    ema = EMA(net, 0.9)
    ref = {k: torch.from_numpy(v.copy()) for k, v in net.state_dict().items()}
    rng = np.random.default_rng(0)
    for _ in range(4):
        for p in net.parameters():
            p.data += rng.standard_normal(p.data.shape)
        net[1].running_mean.data += 1.0
        ema.update()
        own = dict(net.named_parameters())
        for k in ref:  # BasicSR: net_g_ema_params[k].data.mul_(decay).add_(net_g_params[k].data, alpha=1 - decay)
            if k in own:
                ref[k].mul_(0.9).add_(torch.from_numpy(own[k].data), alpha=1 - 0.9)
    state = ema.state_dict()
    for k, v in ref.items():
        if k in dict(net.named_parameters()):
            np.testing.assert_allclose(state[k], v.numpy(), rtol=1e-13, atol=0)
    np.testing.assert_array_equal(state["1.running_mean"], net[1].running_mean.data)  # copied
    assert not np.array_equal(state["0.weight"], net[0].weight.data)


def test_ema_is_a_separate_frozen_copy():
    net = _net()
    ema = EMA(net, 0.5)
    assert not ema.module.training and all(not p.requires_grad for p in ema.module.parameters())
    before = ema.state_dict()["0.weight"].copy()
    net[0].weight.data += 1.0
    np.testing.assert_array_equal(ema.state_dict()["0.weight"], before)  # no shared arrays
    ema.update()
    np.testing.assert_allclose(ema.state_dict()["0.weight"], before + 0.5)


@pytest.mark.parametrize("decay", [1.0, -0.1, float("nan")])
def test_decay_outside_zero_one_is_refused(decay):
    with pytest.raises(ValueError, match="decay"):
        EMA(_net(), decay)
