"""Every model: output shape at each scale on 1 and 3 channels, parameter counts of the default
configurations, one SGD step lowers an L1 loss, safetensors state_dict round trip, argument errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.registry import MODELS

from .cases import SCALES, SMALL, build, expected_parameters, lr_batch

NAMES = sorted(SCALES)
GRID = [(n, s, c) for n in NAMES for s in SCALES[n] for c in (1, 3)]


def test_import_registers_every_model():
    assert set(NAMES) <= set(MODELS.names())


@pytest.mark.parametrize("name,scale,channels", GRID)
def test_output_shape_and_parameter_count(name, scale, channels):
    model, _ = build(name, scale, channels)
    assert model.num_parameters() == expected_parameters(name, channels, scale)
    if name in SMALL:  # the same wiring with fewer blocks/layers runs faster
        model, _ = build(name, scale, channels, small=True)
    x = lr_batch(channels, n=2)
    y = model(x)
    assert y.shape == (2, channels, 6 * scale, 5 * scale)
    assert y.dtype == np.float32
    assert np.isfinite(y.data).all()
    # Not a constant map: the two images of the batch give different outputs.
    assert not np.allclose(y.data[0], y.data[1])


@pytest.mark.parametrize("name", sorted(SMALL))
def test_default_size_forward(name):
    model, _ = build(name, 2, 3)
    y = model(lr_batch(3, h=3, w=4, n=2))  # 2: DAT's BatchNorm trains on more than one value
    assert y.shape == (2, 3, 6, 8) and np.isfinite(y.data).all()


def test_published_parameter_counts():
    """The numbers quoted for these networks, as literals."""
    counts = {name: build(name, s, c)[0].num_parameters()
              for name, s, c in [("EDSR", 2, 3), ("FSRCNN", 2, 1), ("VDSR", 2, 1)]}
    assert counts["EDSR"] == 1_369_859                # BasicSR EDSR-baseline (EDSR_Mx2)
    assert counts["FSRCNN"] == 12_464 + 173 + 172     # paper's 12,464 weights + biases + PReLU slopes
    assert counts["VDSR"] == 664_704 + 1_217          # weights (the "665K" of the paper) + biases


@pytest.mark.parametrize("name", NAMES)
def test_one_sgd_step_lowers_l1_loss(name):
    model, _ = build(name, 2, 3, small=True)
    x = lr_batch(3, h=8, w=8, n=3)  # 3: a BatchNorm over 2 values (DAT's channel map) has no gradient
    target = sg.tensor(np.random.default_rng(5).uniform(0, 1, (3, 3, 16, 16)), dtype=np.float32)

    def loss_value():
        return (model(x) - target).abs().mean()

    loss = loss_value()
    loss.backward()
    params = list(model.parameters())
    assert all(p.grad is not None and p.grad.dtype == np.float32 for p in params)
    assert all(np.abs(p.grad.data).sum() > 0 for p in params if p.ndim > 1)  # every conv learns
    for p in params:  # plain SGD
        p.data -= np.float32(0.1) * p.grad.data
    with sg.no_grad():
        after = loss_value().item()
    assert after < loss.item() - 1e-4


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_round_trip_through_safetensors(name, tmp_path):
    from safetensors.numpy import load_file, save_file
    model, spec = build(name, 3, 1, seed=1, small=True)
    path = tmp_path / "w.safetensors"
    save_file(dict(model.state_dict()), str(path))
    fresh, _ = build(name, 3, 1, seed=2, small=True)
    x = lr_batch(1, n=2)
    with sg.no_grad():
        assert not np.array_equal(fresh(x).data, model(x).data)  # the seeds differ
        fresh.load_state_dict(load_file(str(path)), strict=True)
        np.testing.assert_array_equal(fresh(x).data, model(x).data)


@pytest.mark.parametrize("name", NAMES)
def test_construction_is_reproducible_under_manual_seed(name):
    a, _ = build(name, 2, 3, seed=7, small=True)
    b, _ = build(name, 2, 3, seed=7, small=True)
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k])


@pytest.mark.parametrize("name", NAMES)
def test_float64_model_stays_float64(name):
    model, _ = build(name, 2, 1, small=True)
    model.double()
    assert model(lr_batch(1, n=2, dtype=np.float64)).dtype == np.float64


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("scale", [0, -2, 2.5, True, "2", None])
def test_bad_scale_is_a_value_error_naming_the_model(name, scale):
    with pytest.raises(ValueError, match=rf"{name}: scale must be a positive int"):
        MODELS.build({"type": name, "scale": scale})


@pytest.mark.parametrize("scale", [5, 6, 7])
def test_edsr_refuses_scales_its_upsampler_cannot_make(scale):
    with pytest.raises(ValueError, match=rf"EDSR: scale x{scale} is not supported"):
        MODELS.build({"type": "EDSR", "scale": scale})


@pytest.mark.parametrize("name,key,value", [
    ("SRCNN", "num_feat", (64,)), ("SRCNN", "kernel_size", (9, 4, 5)), ("ESPCN", "num_feat", 64),
    ("FSRCNN", "d", 0), ("VDSR", "num_layers", 1), ("EDSR", "num_feat", 2.0),
    ("EDSR", "rgb_mean", (0.4, 0.4)), ("EDSR", "res_scale", 0), ("UpsampleNet", "num_conv", 0),
    ("SRCNN", "num_in_ch", 0),
])
def test_bad_keyword_is_a_value_error_naming_model_and_key(name, key, value):
    with pytest.raises(ValueError, match=rf"{name}: {key}"):
        MODELS.build({"type": name, "scale": 2, key: value})


@pytest.mark.parametrize("name", ["VDSR", "UpsampleNet"])
def test_residual_models_need_equal_channels(name):
    with pytest.raises(ValueError, match=rf"{name}: .*num_in_ch == num_out_ch"):
        MODELS.build({"type": name, "scale": 2, "num_in_ch": 3, "num_out_ch": 1})


def test_upsample_net_bad_mode_names_the_model_and_the_mode():
    with pytest.raises(ValueError, match=r"UpsampleNet: mode 'cubic'.*known modes"):
        MODELS.build({"type": "UpsampleNet", "scale": 2, "mode": "cubic"})


@pytest.mark.parametrize("name", ["SRCNN", "FSRCNN", "ESPCN", "VDSR", "UpsampleNet"])
def test_designs_with_any_integer_scale_accept_x1(name):
    model, _ = build(name, 1, 1, small=True)
    x = lr_batch(1)
    y = model(x)
    assert y.shape == x.shape and not np.allclose(y.data, 0)


def test_unknown_keyword_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="num_blocks"):
        MODELS.build({"type": "EDSR", "scale": 2, "num_blocks": 4})
