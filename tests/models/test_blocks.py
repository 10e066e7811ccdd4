"""models/_blocks.py: BasicSR's make_layer and default_init_weights, and the upsampler's scale read
back from shapes."""
from __future__ import annotations

import numpy as np
import pytest

from framework import nn
from framework.nn import init
from models._blocks import PixelShuffleUpsampler, default_init_weights, make_layer
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
