"""unfold / fold: float64 gradcheck and torch parity of values and every gradient; refusals."""
import pytest

import framework as sg
import framework.functional as F

from ._parity import parity, rand, torch


FOLDS = [((2, 3, 7, 6), dict(kernel_size=3, padding=1)),
         ((1, 2, 9, 8), dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 0), stride=(2, 3))),
         ((1, 1, 4, 4), dict(kernel_size=4)), ((1, 2, 1, 1), dict(kernel_size=1))]


@pytest.mark.parametrize("shape,kw", FOLDS)
def test_unfold(shape, kw):
    parity(lambda x: F.unfold(x, **kw), lambda x: torch.nn.functional.unfold(x, **kw),
            [rand(*shape)])


@pytest.mark.parametrize("shape,kw", FOLDS)
def test_fold(shape, kw):
    cols = torch.nn.functional.unfold(torch.zeros(shape, dtype=torch.float64), **kw).shape
    parity(lambda c: F.fold(c, shape[2:], **kw),
            lambda c: torch.nn.functional.fold(c, shape[2:], **kw), [rand(*cols)])


def test_fold_and_unfold_refusals():
    with pytest.raises(ValueError, match="no sliding block"):
        F.unfold(sg.zeros(1, 1, 2, 2), 3)
    with pytest.raises(ValueError, match="blocks given"):
        F.fold(sg.zeros(1, 4, 5), (4, 4), 2)
