"""einsum: torch.einsum / np.einsum on Tensors, differentiable in every operand.

The equation is first made explicit (ellipses spelled out as letters, the implicit output -- the
letters used once, in alphabetical order, after the ellipsis axes -- written after "->"), so the
backward is one more einsum per operand: dL/dA_i = einsum(g and the other operands -> A_i's
letters), with the letters only A_i has (summed alone in the forward) broadcast back, and for a
letter repeated within A_i ("ii->i", a trace "ii") written onto that diagonal."""
from __future__ import annotations

import string

import numpy as np

from .._check import ArgumentTypeError
from ..autograd import Function
from ..tensor import Tensor

_FREE = string.ascii_letters


class Einsum(Function):
    @staticmethod
    def forward(ctx, *operands, subscripts, output):
        ctx.save_for_backward(*operands)
        ctx.meta = (subscripts, output)
        eq = ",".join(subscripts) + "->" + output
        return np.asarray(np.einsum(eq, *operands, optimize=len(operands) > 2))

    @staticmethod
    def backward(ctx, g):  # dL/dA_i = einsum(g, A_j (j != i) -> letters of A_i)
        operands = ctx.saved_tensors
        subscripts, output = ctx.meta
        grads = []
        for i, (a, sub) in enumerate(zip(operands, subscripts)):
            if not ctx.needs_input_grad[i]:
                grads.append(None)
                continue
            others = [(s, o) for j, (s, o) in enumerate(zip(subscripts, operands)) if j != i]
            have = set(output).union(*(s for s, _ in others))
            uniq = "".join(dict.fromkeys(sub))  # a repeated letter (a diagonal) once
            kept = "".join(c for c in uniq if c in have)
            eq = ",".join([output] + [s for s, _ in others]) + "->" + kept
            part = np.einsum(eq, g, *(o for _, o in others), optimize=len(others) > 1)
            lone = [k for k, c in enumerate(uniq) if c not in have]
            part = np.expand_dims(part, tuple(lone)) if lone else part
            size = dict(zip(sub, a.shape))
            part = np.broadcast_to(part, tuple(size[c] for c in uniq))
            if uniq == sub:
                grads.append(np.ascontiguousarray(part, dtype=a.dtype))
                continue
            ga = np.zeros(a.shape, a.dtype)  # the diagonal's gradient, on the diagonal
            np.einsum(f"{sub}->{uniq}", ga)[...] = part  # (a writeable view of ga)
            grads.append(ga)
        return tuple(grads)


def _explicit(equation: str, shapes) -> tuple[list[str], str]:
    """(one letter string per operand, output letters) with '...' replaced by letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(shapes):
        raise ValueError(f"einsum: the equation {equation!r} has {len(subs)} operands, "
                         f"{len(shapes)} tensors were given")
    if not all(c.isalpha() for c in lhs.replace(",", "").replace("...", "") + out.replace(
            "...", "")):
        raise ValueError(f"einsum: the equation {equation!r} may hold only letters, ',', '->' "
                         f"and '...'")
    unused = [c for c in _FREE if c not in eq]
    ell_ndim = max((len(shape) - (len(s) - 3) for s, shape in zip(subs, shapes) if "..." in s),
                   default=0)
    ell = "".join(unused[:ell_ndim])
    out_subs = []
    for s, shape in zip(subs, shapes):
        if "..." in s:
            n = len(shape) - (len(s) - 3)
            if n < 0:
                raise ValueError(f"einsum: operand {s!r} has {len(shape)} dimensions, fewer "
                                 f"than its letters")
            s = s.replace("...", ell[ell_ndim - n:])
        if len(s) != len(shape):
            raise ValueError(f"einsum: the subscripts {s!r} name {len(s)} dimensions, the operand "
                             f"has {len(shape)} (shape {tuple(shape)})")
        out_subs.append(s)
    if arrow:
        out = out.replace("...", ell)
    else:
        letters = "".join(out_subs)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1
                                   and c not in ell))
    if len(set(out)) != len(out) or any(c not in "".join(out_subs) for c in out):
        raise ValueError(f"einsum: the output {out!r} of {equation!r} repeats a letter or names "
                         f"one no operand has")
    return out_subs, out


def einsum(equation: str, *operands):
    """torch.einsum(equation, *operands) (operands also as one list): e.g. "bij,bjk->bik",
    "ij->ji", "...c,c->...", the implicit form "ij,jk". Sizes of a shared letter must agree.
    Differentiable in every operand; all operands share one dtype (as in torch)."""
    if not isinstance(equation, str):
        raise ArgumentTypeError(f"einsum: the equation must be a string, got {equation!r}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands or not all(isinstance(o, Tensor) for o in operands):
        raise ArgumentTypeError("einsum: the operands must be Tensors")
    if len({o.dtype for o in operands}) > 1:
        raise TypeError(f"einsum: operands of different dtypes "
                        f"({', '.join(str(o.dtype) for o in operands)}); cast them to one")
    subs, out = _explicit(equation, [o.shape for o in operands])
    sizes = {}
    for s, o in zip(subs, operands):
        for c, n in zip(s, o.shape):
            if sizes.setdefault(c, n) != n:
                raise ValueError(f"einsum: letter {c!r} has size {sizes[c]} and {n} in "
                                 f"{equation!r}")
    return Einsum.apply(*operands, subscripts=tuple(subs), output=out)
