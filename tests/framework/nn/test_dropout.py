"""Dropout and DropPath layers: torch's / timm's repr and arguments, identity in eval(), masks from
the global generator (reseeding repeats them), statistics in train()."""
import numpy as np
import pytest

import framework as sg
from framework import nn


def test_repr_matches_torch_and_timm():
    torch = pytest.importorskip("torch")
    for args in [(), (0.1,), (0.25, True)]:
        assert repr(nn.Dropout(*args)) == repr(torch.nn.Dropout(*args))
    assert repr(nn.DropPath(0.1)) == "DropPath(drop_prob=0.100)"  # timm's repr
    assert nn.Dropout().state_dict() == {} and nn.DropPath(0.2).state_dict() == {}


@pytest.mark.parametrize("layer", [nn.Dropout(0.5), nn.DropPath(0.5)])
def test_identity_in_eval(layer):
    x = sg.tensor(np.ones((8, 3), np.float32), requires_grad=True)
    layer.eval()
    assert layer(x) is x
    layer.train()
    y = layer(x)
    assert y is not x and set(np.unique(y.data)) <= {0.0, 2.0}


def test_layers_draw_from_the_global_generator():
    x = sg.tensor(np.ones((16, 10), np.float32))
    net = nn.Sequential(nn.Dropout(0.3), nn.DropPath(0.3))
    sg.manual_seed(12)
    a = net(x).data
    sg.manual_seed(12)
    np.testing.assert_array_equal(net(x).data, a)


def test_train_statistics():
    x = sg.tensor(np.ones((2000, 50), np.float32))
    y = nn.Dropout(0.2)(x).data
    assert abs((y != 0).mean() - 0.8) < 0.005
    rows = nn.DropPath(0.2)(x).data
    kept = rows[:, 0] != 0
    assert np.all(rows[kept] == np.float32(1.25)) and np.all(rows[~kept] == 0)
    assert abs(kept.mean() - 0.8) < 5 * np.sqrt(0.16 / 2000)


def test_constructor_errors():
    with pytest.raises(ValueError, match=r"Dropout: p must be in \[0.0, 1.0\], got 2"):
        nn.Dropout(2)
    with pytest.raises(TypeError, match="DropPath: drop_prob must be a number, got str '0.1'"):
        nn.DropPath("0.1")
    with pytest.raises(TypeError, match="Dropout: inplace must be a bool"):
        nn.Dropout(0.1, inplace=1)
