"""MultiheadAttention with torch's arguments, defaults and state_dict keys (in_proj_weight,
in_proj_bias, out_proj.weight, out_proj.bias), composed of framework.functional's ops."""
from __future__ import annotations

import math

import numpy as np

from .. import functional as F
from .._check import flag, int_arg, number
from ..registry import LAYERS
from ..tensor import Tensor
from . import init
from .linear import Linear
from .module import Module, Parameter

__all__ = ["MultiheadAttention"]


@LAYERS.register()
class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True,
    batch_first=False): forward(query (L, N, E), key (S, N, E), value (S, N, E), key_padding_mask
    (N, S) bool (True: ignored) or float (added), need_weights=True, attn_mask (L, S) or
    (N heads, L, S), bool (True: not attended) or float (added), average_attn_weights=True,
    is_causal=False) -> (output (L, N, E), weights (N, L, S) averaged over heads, or (N, heads, L,
    S), or None without need_weights). batch_first=True takes and gives (N, L, E); an unbatched
    (L, E) query works too. kdim / vdim other than embed_dim, add_bias_kv and add_zero_attn are
    refused (torch's separate q/k/v projections are not implemented)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, dtype=np.float32):
        super().__init__()
        name = "MultiheadAttention"
        self.embed_dim = int_arg(name, "embed_dim", embed_dim)
        self.num_heads = int_arg(name, "num_heads", num_heads)
        if self.embed_dim % self.num_heads:
            raise ValueError(f"{name}: embed_dim {embed_dim} must be divisible by num_heads "
                             f"{num_heads}")
        if kdim not in (None, embed_dim) or vdim not in (None, embed_dim) or add_bias_kv or \
                add_zero_attn:
            raise ValueError(f"{name}: kdim/vdim other than embed_dim, add_bias_kv and "
                             f"add_zero_attn are not supported in srgrad")
        self.dropout = number(name, "dropout", dropout, low=0, high=1)
        self.batch_first = flag(name, "batch_first", batch_first)
        self.head_dim = self.embed_dim // self.num_heads
        self.in_proj_weight = Parameter(np.empty((3 * embed_dim, embed_dim), dtype))
        if flag(name, "bias", bias):
            self.in_proj_bias = Parameter(np.zeros(3 * embed_dim, dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self, rng=None):
        """torch's: in_proj_weight xavier_uniform_, the biases 0, out_proj.weight as Linear's."""
        init.xavier_uniform_(self.in_proj_weight, rng=rng)
        if self.in_proj_bias is not None:
            self.in_proj_bias.data[...] = 0
            self.out_proj.bias.data[...] = 0

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        if query.ndim == 2:  # unbatched (L, E)
            out, w = self.forward(query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1),
                                  None if key_padding_mask is None else
                                  _data(key_padding_mask)[None], need_weights, attn_mask,
                                  average_attn_weights, is_causal)
            return out.squeeze(1), (None if w is None else w.squeeze(0))
        if self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        L, N, E = query.shape
        S = key.shape[0]
        if E != self.embed_dim or key.shape[1:] != (N, E) or value.shape != key.shape:
            raise ValueError(f"MultiheadAttention({self.embed_dim}, {self.num_heads}): query, key, "
                             f"value must be (L, N, {self.embed_dim}), (S, N, {self.embed_dim}) "
                             f"twice; got {query.shape}, {key.shape}, {value.shape}")
        w, b = self.in_proj_weight, self.in_proj_bias
        q, k, v = (F.linear(t, w[i * E:(i + 1) * E], None if b is None else b[i * E:(i + 1) * E])
                   for i, t in enumerate((query, key, value)))
        h, d = self.num_heads, self.head_dim
        q, k, v = (t.reshape(t.shape[0], N * h, d).transpose(0, 1) for t in (q, k, v))
        scores = F.matmul(q * (1.0 / math.sqrt(d)), k.transpose(1, 2))  # (N h, L, S)
        mask = self._mask(attn_mask, key_padding_mask, is_causal, N, L, S, scores.dtype)
        if mask is not None:
            scores = scores + mask
        weights = F.softmax(scores, dim=-1)
        dropped = F.dropout(weights, self.dropout, self.training) if self.dropout else weights
        out = F.matmul(dropped, v).transpose(0, 1).reshape(L, N, E)
        out = self.out_proj(out)
        if self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.reshape(N, h, L, S)
        return out, (weights.mean(dim=1) if average_attn_weights else weights)

    def _mask(self, attn_mask, key_padding_mask, is_causal, N, L, S, dtype):
        """One additive mask (N heads, L, S) or (L, S) (-inf where not attended), or None."""
        total = None
        if is_causal and attn_mask is None:
            attn_mask = np.triu(np.ones((L, S), bool), 1)
        for m, shape in ((attn_mask, None), (key_padding_mask, (N, 1, 1, S))):
            if m is None:
                continue
            m = _data(m)
            add = np.where(m, -np.inf, 0.0).astype(dtype) if m.dtype == np.bool_ else \
                m.astype(dtype)
            if shape is not None:
                if m.shape != (N, S):
                    raise ValueError(f"MultiheadAttention: key_padding_mask must be (N, S) = "
                                     f"{(N, S)}, got {m.shape}")
                add = np.broadcast_to(add.reshape(shape), (N, self.num_heads, 1, S)).reshape(
                    N * self.num_heads, 1, S)
            elif m.shape not in ((L, S), (N * self.num_heads, L, S)):
                raise ValueError(f"MultiheadAttention: attn_mask must be (L, S) = {(L, S)} or "
                                 f"(N*num_heads, L, S), got {m.shape}")
            total = add if total is None else total + add
        return None if total is None else Tensor(total)

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
                f"batch_first={self.batch_first}")


def _data(x):
    return x.data if isinstance(x, Tensor) else np.asarray(x)
