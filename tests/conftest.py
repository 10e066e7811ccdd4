"""Shared test helpers."""
import numpy as np
import pytest

import framework as sg


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def t64(rng, *shape, positive=False, requires_grad=True):
    """A float64 leaf tensor of standard normals (or values in [0.5, 2) when positive)."""
    a = rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)
    return sg.tensor(a, requires_grad=requires_grad, dtype=np.float64)
