"""GANLoss: BasicSR's adversarial loss (basicsr/losses/gan_loss.py), registered in LOSSES with its
name and keywords (YAML `gan_opt: {type: GANLoss, gan_type: vanilla, loss_weight: 0.1}`).

Each gan_type is one row of a table: the loss of discriminator logits x for the side `real` (True:
the images should be judged real) and for whom (`is_disc`):
    vanilla        BCE-with-logits(x, label)                      label = real_label_val or fake_label_val
    lsgan          mean (x - label)^2
    wgan           -mean x (real), mean x (fake)
    wgan_softplus  mean softplus(-x) (real), mean softplus(x) (fake)   (StyleGAN2's logistic loss)
    hinge          discriminator: mean relu(1 - x) (real), mean relu(1 + x) (fake); generator: -mean x
loss_weight scales the generator's loss only (BasicSR: the discriminator's is always weighted 1).
"""
from __future__ import annotations

import numpy as np

from .. import functional as F
from .._check import choice, flag, number
from ..registry import LOSSES
from ..tensor import Tensor
from .module import Module

__all__ = ["GANLoss"]


def _label(x, value: float) -> Tensor:
    """A constant target of x's shape and dtype (no gradient)."""
    return Tensor._wrap(np.full(x.shape, value, x.dtype))


def _vanilla(x, real, is_disc, label):
    return F.binary_cross_entropy_with_logits(x, _label(x, label))


def _lsgan(x, real, is_disc, label):
    return F.mse_loss(x, _label(x, label))


def _wgan(x, real, is_disc, label):
    return -F.mean(x) if real else F.mean(x)


def _wgan_softplus(x, real, is_disc, label):
    return F.mean(F.softplus(-x if real else x))


def _hinge(x, real, is_disc, label):
    if not is_disc:
        return -F.mean(x)
    return F.mean(F.relu(1.0 + (-x if real else x)))


_GAN_TYPES = {"vanilla": _vanilla, "lsgan": _lsgan, "wgan": _wgan, "wgan_softplus": _wgan_softplus,
              "hinge": _hinge}


@LOSSES.register()
class GANLoss(Module):
    """Adversarial loss of discriminator outputs (any shape: (N, 1) logits or (N, 1, H, W) maps).

    Args:
        gan_type: "vanilla", "lsgan", "wgan", "wgan_softplus" or "hinge" (table in the module doc).
        real_label_val: the target of real images for vanilla and lsgan, default 1.0.
        fake_label_val: the target of fake images for vanilla and lsgan, default 0.0.
        loss_weight: multiplies the generator's loss (is_disc=False) only, default 1.0.

    forward(input, target_is_real, is_disc=False) -> the scalar loss, in input's dtype.
    """

    # what makes a loss adversarial for the training recipes (engine/run/recipes/terms.py): called
    # (prediction, target_is_real, is_disc) on the discriminator's output, never on an image
    is_gan = True

    def __init__(self, gan_type: str, real_label_val: float = 1.0, fake_label_val: float = 0.0,
                 loss_weight: float = 1.0):
        super().__init__()
        self.gan_type = choice("GANLoss", "gan_type", gan_type, tuple(_GAN_TYPES))
        self.real_label_val = number("GANLoss", "real_label_val", real_label_val)
        self.fake_label_val = number("GANLoss", "fake_label_val", fake_label_val)
        self.loss_weight = number("GANLoss", "loss_weight", loss_weight, low=0)
        self._loss = _GAN_TYPES[self.gan_type]

    @classmethod
    def check_kwargs(cls, kwargs: dict) -> None:
        """The constructor's own checks (cheap): for config validation."""
        cls(**kwargs)

    def forward(self, input, target_is_real, is_disc=False):
        x = input if isinstance(input, Tensor) else Tensor(input)
        if x.dtype not in (np.float32, np.float64):
            raise TypeError(f"GANLoss: input must be float32 or float64, got dtype {x.dtype}")
        if x.numel() == 0:
            raise ValueError("GANLoss: input is empty")
        real = flag("GANLoss", "target_is_real", target_is_real)
        is_disc = flag("GANLoss", "is_disc", is_disc)
        label = self.real_label_val if real else self.fake_label_val
        loss = self._loss(x, real, is_disc, label)
        return loss if is_disc else loss * self.loss_weight

    def extra_repr(self):
        return (f"gan_type={self.gan_type!r}, real_label_val={self.real_label_val}, "
                f"fake_label_val={self.fake_label_val}, loss_weight={self.loss_weight}")
