"""Spectral normalisation (Miyato et al., 2018) with torch.nn.utils.spectral_norm's semantics and
state_dict keys: `weight_orig` (the trained Parameter), `weight_u`, `weight_v` (buffers), and a forward
pre-hook that sets `module.weight = weight_orig / sigma` before every forward.

sigma = u^T W v estimates the largest singular value of W, the weight viewed as a matrix
(dim `dim` first, the rest flattened). In training mode each forward first runs n_power_iterations of
    v <- normalize(W^T u),  u <- normalize(W v)
on the buffers in place and without a graph; in eval mode u and v are used as they are. sigma is then
computed through differentiable ops from copies of u and v, so the gradient reaches weight_orig both
directly and through sigma (d sigma / dW = u v^T), and a later forward that updates the buffers does
not change what an earlier graph saved (GAN training runs D on real and fake before one backward).
The training-mode iteration is an op (PowerIteration) whose `state` is u and v: a captured step
(framework/capture) repeats it at every replay, as it repeats batch norm's running statistics.
"""
from __future__ import annotations

import numpy as np

from .. import functional as F
from .. import random
from .._check import int_arg, number
from ..autograd import Function, no_grad
from ..tensor import Tensor
from .conv import ConvTranspose2d
from .module import Module, Parameter

__all__ = ["SpectralNorm", "PowerIteration", "spectral_norm", "remove_spectral_norm"]


def _normalize(x: np.ndarray, eps: float, out: np.ndarray) -> np.ndarray:
    """F.normalize(x, dim=0, eps, out=out) of a vector: x / max(||x||_2, eps), written into out."""
    norm = max(np.sqrt(np.dot(x, x)), x.dtype.type(eps))
    np.divide(x, norm, out=out)
    return out


class PowerIteration(Function):
    """w (rows, cols), the weight's matrix -> copies of (u, v) after `n` power iterations
    v <- normalize(W^T u), u <- normalize(W v) on the buffers u (rows,) and v (cols,) in place.
    u and v are constants of the graph (torch runs the iteration under no_grad): no gradient
    reaches w through them. They are the op's `state`, so a captured step updates them too."""

    state = ("u", "v")

    @staticmethod
    def forward(ctx, w, *, u, v, n, eps):
        for _ in range(n):
            _normalize(w.T @ u, eps, out=v)
            _normalize(w @ v, eps, out=u)
        return u.copy(), v.copy()

    @staticmethod
    def backward(ctx, gu, gv):
        return (None,)


class SpectralNorm:
    """The forward pre-hook spectral_norm registers (torch's class of the same name): recomputes
    `module.<name>` from `<name>_orig`, `<name>_u`, `<name>_v` before each forward."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12):
        self.name = name
        self.dim = dim
        self.n_power_iterations = int_arg("spectral_norm", "n_power_iterations", n_power_iterations)
        self.eps = number("spectral_norm", "eps", eps, low=0, low_open=True)

    def _perm(self, ndim: int) -> tuple:
        """dim first, the other axes in order: the matrix's rows are the weight's slices along dim."""
        return (self.dim,) + tuple(d for d in range(ndim) if d != self.dim)

    def matrix(self, w: np.ndarray) -> np.ndarray:
        """The weight as a (shape[dim], rest) numpy matrix (a view when dim is 0)."""
        if self.dim != 0:
            w = np.transpose(w, self._perm(w.ndim))
        return w.reshape(w.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        """weight_orig / sigma as a graph node, after the power iteration when asked."""
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        w_mat = weight if self.dim == 0 else F.permute(weight, self._perm(weight.ndim))
        w_mat = F.reshape(w_mat, (weight.shape[self.dim], -1))
        # copies: the graph keeps these, and the next training forward updates the buffers in place
        if do_power_iteration:
            u_now, v_now = PowerIteration.apply(w_mat, u=u.data, v=v.data,
                                                n=self.n_power_iterations, eps=self.eps)
        else:  # eval mode: constants (an exported graph holds them as such)
            u_now, v_now = Tensor._wrap(u.data.copy()), Tensor._wrap(v.data.copy())
        sigma = F.sum(F.mul(u_now, F.matmul(w_mat, v_now)))  # u . (W v), as torch.dot(u, mv(W, v))
        return F.div(weight, sigma)

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    def remove(self, module: Module) -> None:
        """Replace the reparametrisation by a plain Parameter holding the current W / sigma."""
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        for suffix in ("", "_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.data))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> "SpectralNorm":
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        weight = module._parameters.get(name) if isinstance(name, str) else None
        if weight is None:
            why = "is None" if name in module._parameters else "is not a parameter of the module"
            raise ValueError(f"spectral_norm: {name!r} {why} ({type(module).__name__} has parameters "
                             f"{[k for k, p in module._parameters.items() if p is not None]})")
        dim = int_arg("spectral_norm", "dim", dim, minimum=None)
        if not -weight.ndim <= dim < max(weight.ndim, 1):
            raise ValueError(f"spectral_norm: dim must be in [{-weight.ndim}, {weight.ndim - 1}] for "
                             f"{name!r} of shape {weight.shape}, got {dim}")
        fn = SpectralNorm(name, n_power_iterations, dim % max(weight.ndim, 1), eps)
        h, w = fn.matrix(weight.data).shape
        # u first, then v, each a standard normal draw normalised (torch: normal_(0, 1), normalize)
        gen = random.default_generator()
        dtype = weight.dtype
        u = _normalize(gen.standard_normal(h).astype(dtype), fn.eps, np.empty(h, dtype))
        v = _normalize(gen.standard_normal(w).astype(dtype), fn.eps, np.empty(w, dtype))

        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        # `weight` stays an attribute (code that initialises module.weight in place still reaches
        # the parameter's storage) until the first forward replaces it by W / sigma
        setattr(module, name, Tensor._wrap(weight.data))
        module.register_buffer(name + "_u", Tensor._wrap(u))
        module.register_buffer(name + "_v", Tensor._wrap(v))
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Spectrally normalise `module.<name>` (torch.nn.utils.spectral_norm); returns the module.

    The parameter becomes `<name>_orig`; buffers `<name>_u` (shape[dim],) and `<name>_v`
    (numel / shape[dim],) hold the power-iteration vectors, drawn from framework.random; the state_dict
    keys are torch's (BasicSR/Real-ESRGAN discriminator checkpoints load as they are).

    Args:
        module: the layer (Conv2d, ConvTranspose2d, Linear, ...).
        name: the parameter, default "weight".
        n_power_iterations: power iterations per training-mode forward, default 1.
        eps: floor of the norms in the normalisation, default 1e-12.
        dim: the output dimension of the weight, default 0 (1 for ConvTranspose2d, whose weight is
            (in, out, kh, kw)).
    """
    if not isinstance(module, Module):
        raise TypeError(f"spectral_norm: expected a Module, got {type(module).__name__}")
    if dim is None:
        dim = 1 if isinstance(module, ConvTranspose2d) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo spectral_norm: `<name>` becomes a Parameter again, holding weight_orig / sigma with the
    current u, v (no power iteration); the hook and the _orig/_u/_v entries go."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of {name!r} not found in {type(module).__name__}")
