"""nn.Upsample: a thin Module over F.interpolate (registered in LAYERS)."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework import nn
from framework.registry import LAYERS
from tests.conftest import t64


@pytest.mark.parametrize("kwargs", [dict(scale_factor=2), dict(size=(5, 3), mode="bicubic"),
                                    dict(scale_factor=(0.5, 1.5), mode="bilinear", align_corners=True),
                                    dict(scale_factor=0.5, mode="lanczos", antialias=True),
                                    dict(scale_factor=0.7, mode="nearest-exact",
                                         recompute_scale_factor=True)])
def test_forward_is_interpolate_and_differentiable(kwargs, rng):
    x = t64(rng, 1, 2, 4, 6)
    layer = nn.Upsample(**kwargs)
    np.testing.assert_array_equal(layer(x).data, F.interpolate(x, **kwargs).data)
    assert sg.gradcheck(layer, (x,))
    assert list(layer.parameters()) == []


def test_registered_and_built_from_a_spec():
    assert LAYERS.get("Upsample") is nn.Upsample
    layer = LAYERS.build({"type": "Upsample", "scale_factor": 2, "mode": "bilinear"})
    assert layer(sg.Tensor(np.ones((1, 1, 2, 2)))).shape == (1, 1, 4, 4)


def test_repr():
    assert repr(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)) == \
        "Upsample(scale_factor=2.0, mode='bilinear', align_corners=False)"
    assert repr(nn.Upsample(size=(4, 5))) == "Upsample(size=(4, 5), mode='nearest')"


def test_errors_at_construction():
    with pytest.raises(ValueError, match="unknown mode 'cubic'; known modes: nearest"):
        nn.Upsample(scale_factor=2, mode="cubic")
    with pytest.raises(ValueError, match="exactly one of size or scale_factor"):
        nn.Upsample()
    with pytest.raises(ValueError, match="exactly one of size or scale_factor"):
        nn.Upsample(size=3, scale_factor=2)
