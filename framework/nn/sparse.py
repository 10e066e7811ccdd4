"""Embedding: torch's lookup table layer (weight (num_embeddings, embedding_dim), N(0, 1) init,
padding_idx) over framework.functional.embedding."""
from __future__ import annotations

import numpy as np

from .. import functional as F
from .._check import int_arg
from ..registry import LAYERS
from . import init
from .module import Module, Parameter

__all__ = ["Embedding"]


@LAYERS.register()
class Embedding(Module):
    """torch.nn.Embedding(num_embeddings, embedding_dim, padding_idx=None): forward(indices, any
    int shape) -> (..., embedding_dim), the rows of `weight`. The padding_idx row starts at 0 and
    gets no gradient; a negative padding_idx counts from the end, as torch's."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, dtype=np.float32,
                 _weight=None):
        super().__init__()
        self.num_embeddings = int_arg("Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = int_arg("Embedding", "embedding_dim", embedding_dim)
        if padding_idx is not None:
            p = int_arg("Embedding", "padding_idx", padding_idx, minimum=None)
            if not -self.num_embeddings <= p < self.num_embeddings:
                raise ValueError(f"Embedding: padding_idx {p} is out of range for "
                                 f"{self.num_embeddings} embeddings")
            padding_idx = p % self.num_embeddings
        self.padding_idx = padding_idx
        shape = (self.num_embeddings, self.embedding_dim)
        self.weight = Parameter(np.empty(shape, dtype) if _weight is None else
                                np.asarray(_weight, dtype))
        if _weight is None:
            self.reset_parameters()

    def reset_parameters(self, rng=None):
        init.normal_(self.weight, rng=rng)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"
