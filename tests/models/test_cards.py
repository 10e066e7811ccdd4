"""Every registered model's card (framework/card.py) against the model it describes: for each case
of tests/models/cases.py (every design of SCALES at each scale on 1 and 3 channels, and each
variant), the built model's parameter count equals the card's closed form, a forward on an input
the card accepts gives the card's output shape and channels, and no op's output is larger than
the card's largest activation (or a weight's size). The hand-computed counts of the default configurations agree too."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import framework as sg
from framework import autograd
from framework.card import ROLES, Card, SizeRequirements, card, full_spec, has_card
from framework.nn import init
from framework.registry import MODELS

from .cases import SCALES, card_cases, expected_parameters, spec_of

CASES = card_cases()


def _id(spec):
    return "-".join(f"{v}" if k == "type" else f"{k}={v}" for k, v in spec.items()
                    if not isinstance(v, (dict, list, tuple)))


def test_every_registered_model_has_a_card_and_card_cases():
    """A new model of models/ cannot skip the card test: it needs a card and a case (models
    another test registers for itself are not srgrad's)."""
    names = [n for n in MODELS.names() if MODELS.get(n).__module__.startswith("models.")]
    assert [n for n in names if not has_card(n)] == []
    assert sorted({spec["type"] for spec in CASES}) == names


def _input_size(c: Card) -> tuple[int, int]:
    """A small (h, w) the card accepts, h != w unless it must be square."""
    size = c.size
    m = size.multiple_of

    def fit(n):
        return -(-max(n, size.minimum) // m) * m
    h = fit(6)
    w = h if size.square else fit(h + 1)
    return h, w


def _largest_op_output(monkeypatch):
    """A list that holds the size of the largest array any Function outputs while patched."""
    largest = [0]
    apply = autograd.Function.apply.__func__

    def watched(cls, *args, **kwargs):
        out = apply(cls, *args, **kwargs)
        for t in out if isinstance(out, tuple) else (out,):
            largest[0] = max(largest[0], t.data.size)
        return out
    monkeypatch.setattr(autograd.Function, "apply", classmethod(watched))
    return largest


@pytest.mark.parametrize("spec", CASES, ids=[_id(s) for s in CASES])
def test_card_describes_the_built_model(spec, monkeypatch):
    c = card(spec)
    assert c.role in ROLES
    init.manual_seed(0)
    model = MODELS.build(spec).eval()
    assert model.num_parameters() == c.parameters
    h, w = _input_size(c)
    assert c.size.check(h, w)
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, c.in_channels, h, w)), dtype=np.float32)
    largest = _largest_op_output(monkeypatch)
    with sg.no_grad():
        y = model(x)
    assert y.shape == (1, c.out_channels, *c.output_size(h, w))
    assert np.isfinite(y.data).all()
    # an op on a weight alone (spectral norm, a fused kernel) makes an array of a weight's size
    bound = max(c.largest_activation(h, w), max(p.data.size for p in model.parameters()))
    assert 0 < largest[0] <= bound, (largest[0], c.largest_activation(h, w))


@pytest.mark.parametrize("name,scale,channels",
                         [(n, s, c) for n in sorted(SCALES) for s in SCALES[n] for c in (1, 3)])
def test_card_counts_the_default_configurations_as_the_papers(name, scale, channels):
    """The closed forms against the layer-by-layer counts of cases.expected_parameters, at the
    default (full-size) configurations, which are never built here."""
    assert card(spec_of(name, scale, channels)).parameters == \
        expected_parameters(name, channels, scale)


def test_roles_scales_and_sizes_of_the_model_families():
    assert card({"type": "RRDBNet"}).summary() == \
        "SR x4, 3 -> 3 channels, 16.7M parameters, input any size"
    assert card({"type": "SwinIR", "scale": 1}).role == "restoration"
    assert card({"type": "UNetDiscriminatorSN", "num_in_ch": 3}).size == SizeRequirements(8, 8)
    assert card({"type": "VGGStyleDiscriminator", "num_in_ch": 3, "num_feat": 64}).output_size(
        128, 128) == ()
    kernelgan = card({"type": "KernelGANGenerator"})
    assert (kernelgan.role, kernelgan.scale, kernelgan.output_size(64, 40)) == \
        ("kernel estimator", Fraction(1, 2), (26, 14))
    assert card({"type": "RealPLKSR", "in_ch": 1, "out_ch": 1}).in_channels == 1
    assert card({"type": "SwinIR", "in_chans": 1, "scale": 1}).channel_keys == ("in_chans",)
    assert card({"type": "PLKSR"}).channel_keys == ()
    assert card({"type": "SAFMN", "dim": 36}).pads_to == 8
    assert card({"type": "EDSR", "scale": 2}).fixed_onnx is None
    assert card({"type": "HAT"}).fixed_onnx is None  # the window family: one graph (issue 44.4)
    assert "imresize" in card({"type": "ZSSRNet", "scale": 2}).fixed_onnx


def test_full_spec_fills_the_constructor_defaults():
    spec = full_spec({"type": "ESPCN", "scale": 3})
    assert spec == {"type": "ESPCN", "scale": 3, "num_in_ch": 3, "num_out_ch": 3, "num_feat": (64, 32)}


def test_a_model_without_a_card_is_named():
    with pytest.raises(KeyError, match="unknown model 'NoSuchNet'"):
        card({"type": "NoSuchNet"})

    class Plain(sg.nn.Module):
        def __init__(self, scale=2):
            super().__init__()
    MODELS.register("CardlessTestNet", Plain)
    try:
        with pytest.raises(KeyError, match="CardlessTestNet has no card"):
            card({"type": "CardlessTestNet"})
    finally:
        MODELS._items.pop("CardlessTestNet")
