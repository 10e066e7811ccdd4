"""embedding: rows of a table picked by integer indices (torch.nn.functional.embedding), a
getitem on the table whose backward adds each index's gradient into its row (GetItem's add.at)."""
from __future__ import annotations

from ._util import data_of
from .compare import ne
from .elementwise import where
from .shape import getitem


def embedding(input, weight, padding_idx=None):
    """weight[input]: input any int shape, weight (num_embeddings, embedding_dim) -> (*input.shape,
    embedding_dim). Rows at padding_idx get no gradient. An index out of range is an IndexError."""
    idx = data_of(input)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be an int tensor, got dtype {idx.dtype}")
    n = weight.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"embedding: index {int(idx.min() if idx.min() < 0 else idx.max())} is "
                         f"out of range for {n} embeddings")
    out = getitem(weight, idx)
    if padding_idx is not None and out.requires_grad:
        keep = ne(idx, padding_idx).data[..., None]
        out = where(keep, out, out.detach())  # the same values; no gradient into the padding row
    return out
