"""embedding: torch parity of values and gradients (the padding row gets none)."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F

from ._parity import parity, rand, torch


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_and_its_padding_row(padding_idx):
    """The padding row gets no gradient (torch's rule, not the derivative: no gradcheck there)."""
    idx = np.array([[0, 2, 1], [2, 2, 3]])
    parity(lambda w: F.embedding(sg.tensor(idx), w, padding_idx=padding_idx),
            lambda w: torch.nn.functional.embedding(torch.tensor(idx), w, padding_idx=padding_idx),
            [rand(4, 3)], gradcheck=padding_idx is None)
    with pytest.raises(IndexError, match="out of range for 4 embeddings"):
        F.embedding(sg.tensor([4]), sg.zeros(4, 2))
