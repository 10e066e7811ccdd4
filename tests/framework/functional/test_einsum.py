"""einsum: float64 gradcheck and torch parity of values and every gradient; refusals."""
import pytest

import framework as sg
import framework.functional as F

from ._parity import parity, rand, torch


@pytest.mark.parametrize("eq,shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]),
    ("...c,c->...", [(2, 3, 4), (4,)]), ("ij,jk", [(2, 3), (3, 4)]), ("i,j->ij", [(3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("ij,k->ik", [(2, 3), (4,)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 2), (2, 3)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
    ("iij,jk->ik", [(2, 2, 3), (3, 4)]), ("bii->b", [(2, 3, 3)])])
def test_einsum(eq, shapes):
    parity(lambda *xs: F.einsum(eq, *xs), lambda *xs: torch.einsum(eq, *xs),
            [rand(*s, seed=i) for i, s in enumerate(shapes)])


@pytest.mark.parametrize("eq,shapes,match", [("ii->i", [(3, 4)], "has size 3 and 4"),
                                              ("ij,jk->ik", [(2, 3), (4, 5)], "has size 3 and 4"),
                                              ("ij->ik", [(2, 3)], "names one no operand has"),
                                              ("ij,jk->ik", [(2, 3)], "2 operands")])
def test_einsum_refusals(eq, shapes, match):
    with pytest.raises(ValueError, match=match):
        F.einsum(eq, *[sg.zeros(*s) for s in shapes])
