"""models/_blocks.py: BasicSR's make_layer and default_init_weights, the upsampler's scale read
back from shapes, spandrel's size-requirement padding."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework import nn
from framework.nn import init
from models._blocks import PixelShuffleUpsampler, default_init_weights, make_layer, pad_to_requirement
from framework.detect import NoMatch


def test_make_layer_builds_fresh_blocks_and_passes_num_block_through():
    class Block(nn.Module):
        def __init__(self, num_block):
            super().__init__()
            self.num_block = num_block
            self.conv = nn.Conv2d(2, 2, 1)

    seq = make_layer(Block, 3, num_block=7)  # RCAN's ResidualGroup takes a num_block keyword
    assert len(seq) == 3 and all(b.num_block == 7 for b in seq)
    assert seq[0].conv is not seq[1].conv
    assert list(seq.state_dict()) == [f"{i}.conv.{p}" for i in range(3) for p in ("weight", "bias")]


def test_default_init_weights_kaiming_normal_scaled_bias_filled():
    init.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(64, 96, 3), nn.ReLU(), nn.Sequential(nn.Conv2d(96, 32, 1)),
                        nn.BatchNorm2d(32))
    net[3].weight.data[...] = 5
    default_init_weights([net], scale=0.1, bias_fill=0.25)
    w = net[0].weight.data
    assert w.dtype == np.float32
    np.testing.assert_allclose(w.std(), 0.1 * np.sqrt(2 / (64 * 9)), rtol=0.02)
    np.testing.assert_allclose(net[2][0].weight.data.std(), 0.1 * np.sqrt(2 / 96), rtol=0.05)
    assert np.abs(w).max() > 3.5 * w.std()  # normal tails, not a uniform's sqrt(3) std
    assert (net[0].bias.data == 0.25).all() and (net[2][0].bias.data == 0.25).all()
    assert (net[3].weight.data == 1).all() and (net[3].bias.data == 0.25).all()


def test_default_init_weights_passes_kaiming_options():
    conv = nn.Conv2d(16, 64, 3)
    default_init_weights(conv, mode="fan_out")
    np.testing.assert_allclose(conv.weight.data.std(), np.sqrt(2 / (64 * 9)), rtol=0.05)


@pytest.mark.parametrize("scale", [2, 3, 4, 8])
def test_upsampler_scale_is_read_back_from_shapes(scale):
    up = PixelShuffleUpsampler(scale, 4)
    shapes = {f"up.{k}": v.shape for k, v in up.state_dict().items()}
    assert PixelShuffleUpsampler.detect_scale(shapes, "up", 4) == scale


@pytest.mark.parametrize("shapes,match", [
    ({}, r"no pixel-shuffle upsampler at up.0"),
    ({"up.0.weight": (16, 4, 3, 3), "up.4.weight": (16, 4, 3, 3)}, r"no pixel-shuffle upsampler"),
    ({"up.0.weight": (36, 4, 3, 3), "up.2.weight": (16, 4, 3, 3)}, r"up convs have \[36, 16\]"),
    ({"up.0.weight": (20, 4, 3, 3)}, r"not one of 36 \(x3\) or n of 16"),
])
def test_upsampler_scale_rejects_other_shapes(shapes, match):
    with pytest.raises(NoMatch, match=match):
        PixelShuffleUpsampler.detect_scale(shapes, "up", 4)


@pytest.mark.parametrize("hw,minimum,multiple,want", [
    ((5, 32), 32, 1, (32, 32)), ((40, 42), 40, 4, (40, 44)), ((2, 1), 32, 1, (32, 32)),
    ((33, 7), 32, 1, (33, 32)), ((3, 9), 0, 8, (8, 16)), ((9, 9), 0, 1, (9, 9))])
def test_size_requirement_reflects_then_replicates(hw, minimum, multiple, want):
    """spandrel's pad_tensor: reflection up to n - 1 pixels (bottom, right), the rest replicated."""
    x = np.arange(hw[0] * hw[1], dtype=np.float64).reshape(1, 1, *hw)
    y = pad_to_requirement(sg.tensor(x), minimum, multiple).data
    assert y.shape[2:] == want
    rh, rw = (min(w - n, n - 1) for w, n in zip(want, hw))
    ref = np.pad(x, ((0, 0), (0, 0), (0, rh), (0, rw)), mode="reflect")
    ref = np.pad(ref, ((0, 0), (0, 0), (0, want[0] - hw[0] - rh), (0, want[1] - hw[1] - rw)), mode="edge")
    np.testing.assert_array_equal(y, ref)
