"""torch.nn.utils: gradient clipping (clip_grad_norm_, clip_grad_value_, in place on .grad) and the
re-exported spectral_norm / remove_spectral_norm (framework/nn/spectral_norm.py)."""
from __future__ import annotations

import math

import numpy as np

from .._check import number
from ..tensor import Tensor
from .spectral_norm import remove_spectral_norm, spectral_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "spectral_norm", "remove_spectral_norm"]


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False) -> Tensor:
    """Scale the gradients of `parameters` in place so that their joint norm is at most `max_norm`.

    The total norm is the `norm_type` norm of the per-parameter gradient norms (inf: the largest
    absolute value); every gradient is multiplied by min(1, max_norm / (total_norm + 1e-6)), as torch.
    Parameters without a gradient are skipped.

    Args:
        parameters: a Tensor or an iterable of Tensors.
        max_norm (float): the largest allowed norm.
        norm_type (float or "inf"): order of the norm. Default 2.0.
        error_if_nonfinite (bool): raise RuntimeError if the total norm is nan or inf (otherwise the
            gradients are scaled by the non-finite factor, as torch). Default False.
    Returns:
        Tensor: the total norm before clipping, 0-d, in the gradients' dtype (float32 if none).
    """
    grads = _grads(parameters, "clip_grad_norm_")
    max_norm = _real("clip_grad_norm_", "max_norm", max_norm)
    norm_type = _real("clip_grad_norm_", "norm_type", norm_type)
    if not grads:
        return Tensor(np.zeros((), np.float32))
    dtype = np.result_type(*grads)
    norms = np.array([_vector_norm(g, norm_type) for g in grads], dtype=dtype)
    total = dtype.type(_vector_norm(norms, norm_type))
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
            "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
            "norm anyway, set `error_if_nonfinite=False`")
    coef = min(dtype.type(max_norm) / (total + dtype.type(1e-6)), dtype.type(1.0))
    if np.isnan(total):
        coef = dtype.type(np.nan)  # min() would drop the nan that torch's clamp keeps
    for g in grads:
        g *= g.dtype.type(coef)
    return Tensor(np.asarray(total, dtype))


def clip_grad_value_(parameters, clip_value: float) -> None:
    """Clamp every gradient of `parameters` in place to [-clip_value, clip_value]."""
    grads = _grads(parameters, "clip_grad_value_")
    clip_value = _real("clip_grad_value_", "clip_value", clip_value)
    for g in grads:
        np.clip(g, -clip_value, clip_value, out=g)


def _grads(parameters, owner: str) -> list[np.ndarray]:
    """The gradient arrays (shared, to be modified in place) of the parameters that have one."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = []
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"{owner}: parameters[{i}] is a {type(p).__name__}, not a Tensor")
        if p.grad is not None:
            grads.append(p.grad.data if isinstance(p.grad, Tensor) else p.grad)
    return grads


def _real(owner: str, name: str, value) -> float:
    """A number, or the string "inf" (torch accepts norm_type="inf")."""
    if isinstance(value, str) and value.lower() in ("inf", "+inf"):
        return math.inf
    return number(owner, name, value)


def _vector_norm(x: np.ndarray, order: float):
    """torch.linalg.vector_norm of the flattened x, in x's dtype."""
    a = np.abs(x.ravel())
    if order == math.inf:
        return a.max() if a.size else x.dtype.type(0)
    if order == -math.inf:
        return a.min() if a.size else x.dtype.type(math.inf)
    if order == 0:
        return x.dtype.type(np.count_nonzero(a))
    if order == 1:
        return a.sum()
    if order == 2:
        return np.sqrt(np.dot(a, a))
    return np.sum(a ** x.dtype.type(order)) ** x.dtype.type(1.0 / order)
