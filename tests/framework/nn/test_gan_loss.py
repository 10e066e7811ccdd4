"""GANLoss: BasicSR's semantics for every gan_type (values and input gradients against a torch twin
of basicsr/losses/gan_loss.py, float64), hand-worked values, loss_weight for the generator only,
label smoothing, dtypes, registry, errors."""
import math

import numpy as np
import pytest

import framework as sg
from framework import nn
from framework.registry import LOSSES

TYPES = ["vanilla", "lsgan", "wgan", "wgan_softplus", "hinge"]
CASES = [(real, disc) for real in (True, False) for disc in (True, False)]


def torch_gan_loss(torch, gan_type, x, target_is_real, is_disc, real_label_val=1.0,
                   fake_label_val=0.0, loss_weight=1.0):
    """BasicSR's GANLoss.forward, written out with torch ops."""
    tF = torch.nn.functional
    if gan_type in ("vanilla", "lsgan"):
        label = x.new_ones(x.size()) * (real_label_val if target_is_real else fake_label_val)
        loss = (tF.binary_cross_entropy_with_logits(x, label) if gan_type == "vanilla"
                else tF.mse_loss(x, label))
    elif gan_type == "wgan":
        loss = -x.mean() if target_is_real else x.mean()
    elif gan_type == "wgan_softplus":
        loss = tF.softplus(-x).mean() if target_is_real else tF.softplus(x).mean()
    elif is_disc:  # hinge
        loss = torch.relu(1 + (-x if target_is_real else x)).mean()
    else:
        loss = -x.mean()
    return loss if is_disc else loss * loss_weight


@pytest.mark.parametrize("real,disc", CASES)
@pytest.mark.parametrize("gan_type", TYPES)
@pytest.mark.parametrize("shape", [(3, 1), (2, 1, 5, 3), (1, 1)])
def test_matches_basicsr_in_torch(gan_type, real, disc, shape):
    torch = pytest.importorskip("torch")
    kw = {"real_label_val": 0.9, "fake_label_val": 0.1, "loss_weight": 0.25}
    a = np.random.default_rng(0).standard_normal(shape) * 2
    x = sg.tensor(a, requires_grad=True)
    loss = nn.GANLoss(gan_type, **kw)(x, real, is_disc=disc)
    loss.backward()
    tx = torch.tensor(a, requires_grad=True)
    tloss = torch_gan_loss(torch, gan_type, tx, real, disc, **kw)
    tloss.backward()
    assert loss.shape == () and loss.dtype == np.float64
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-13, atol=1e-16)


def test_hand_worked_values():
    zeros, twos = sg.tensor(np.zeros((2, 1))), sg.tensor(np.full((2, 1), 2.0))
    assert nn.GANLoss("vanilla")(zeros, True).item() == pytest.approx(math.log(2), rel=1e-15)
    assert nn.GANLoss("lsgan")(twos, True).item() == 1.0         # (2 - 1)^2
    assert nn.GANLoss("lsgan")(twos, False).item() == 4.0        # (2 - 0)^2
    assert nn.GANLoss("wgan")(twos, True).item() == -2.0
    assert nn.GANLoss("wgan")(twos, False, is_disc=True).item() == 2.0
    assert nn.GANLoss("wgan_softplus")(zeros, False).item() == pytest.approx(math.log(2), rel=1e-15)
    hinge = nn.GANLoss("hinge")
    assert hinge(twos, True, is_disc=True).item() == 0.0         # relu(1 - 2)
    assert hinge(twos, False, is_disc=True).item() == 3.0        # relu(1 + 2)
    assert hinge(twos, False).item() == -2.0                     # the generator: -mean, side ignored
    assert hinge(twos, True).item() == -2.0


@pytest.mark.parametrize("gan_type", TYPES)
def test_loss_weight_scales_the_generator_only(gan_type):
    x = sg.tensor(np.random.default_rng(1).standard_normal((4, 1)))
    plain, weighted = nn.GANLoss(gan_type), nn.GANLoss(gan_type, loss_weight=0.1)
    for real in (True, False):
        assert weighted(x, real, is_disc=True).item() == plain(x, real, is_disc=True).item()
        assert weighted(x, real).item() == pytest.approx(0.1 * plain(x, real).item(), rel=1e-15)


@pytest.mark.parametrize("gan_type", TYPES)
def test_float32_stays_float32(gan_type):
    x = sg.tensor(np.random.default_rng(2).standard_normal((2, 1, 4, 4)), dtype=np.float32,
                  requires_grad=True)
    loss = nn.GANLoss(gan_type, loss_weight=0.5)(x, True)
    loss.backward()
    assert loss.dtype == x.grad.dtype == np.float32


def test_a_discriminator_step_pushes_the_logits_the_right_way():
    """The gradient of the discriminator's loss raises real logits and lowers fake ones, for every
    type (a sign error in one row of the table would show here)."""
    for gan_type in TYPES:
        loss = nn.GANLoss(gan_type)
        x = sg.tensor(np.array([[0.3], [0.6]]), requires_grad=True)  # between the labels (lsgan)
        loss(x, True, is_disc=True).backward()
        assert (x.grad.data < 0).all(), gan_type   # descending raises the real logits
        x.grad = None
        loss(x, False, is_disc=True).backward()
        assert (x.grad.data > 0).all(), gan_type


def test_registered_and_built_from_a_spec():
    loss = LOSSES.build({"type": "GANLoss", "gan_type": "vanilla", "loss_weight": 0.1})
    assert isinstance(loss, nn.GANLoss) and loss.loss_weight == 0.1
    assert LOSSES.check({"type": "GANLoss", "gan_type": "vanila"})[0][1].endswith("did you mean 'vanilla'?")
    assert "gan_type='hinge'" in repr(nn.GANLoss("hinge"))


def test_errors():
    with pytest.raises(ValueError, match="GANLoss: gan_type must be one of 'vanilla', 'lsgan', 'wgan', "
                                         "'wgan_softplus', 'hinge', got 'wgan-gp'"):
        nn.GANLoss("wgan-gp")
    with pytest.raises(ValueError, match="GANLoss: loss_weight must be >= 0"):
        nn.GANLoss("vanilla", loss_weight=-1)
    loss = nn.GANLoss("vanilla")
    x = sg.tensor(np.zeros((2, 1)))
    with pytest.raises(TypeError, match="GANLoss: target_is_real must be a bool, got 1"):
        loss(x, 1)
    with pytest.raises(TypeError, match="GANLoss: is_disc must be a bool"):
        loss(x, True, is_disc="yes")
    with pytest.raises(TypeError, match="GANLoss: input must be float32 or float64"):
        loss(np.zeros((2, 1), np.int64), True)
    with pytest.raises(ValueError, match="GANLoss: input is empty"):
        loss(sg.tensor(np.zeros((0, 1))), True)
