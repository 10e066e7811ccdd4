"""Comparisons and masks: masked_fill's gradients against torch (the comparison operators
themselves are audited in test_promotion.py)."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F

from ._parity import parity, rand, torch


def test_masked_fill_with_a_tensor_value():
    mask = np.array([[True, False, True], [False, False, True]])
    parity(lambda x, v: F.masked_fill(x, sg.tensor(mask), v),
            lambda x, v: x.masked_fill(torch.tensor(mask), v), [rand(2, 3), rand(seed=1)])
    with pytest.raises(TypeError, match="bool tensor"):
        F.masked_fill(sg.zeros(2), sg.tensor([1, 0]), 1.0)
