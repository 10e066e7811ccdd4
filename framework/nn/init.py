"""Weight initialisation, as torch.nn.init: same names, same distributions, in place on a Tensor's
`.data` (dtype kept), returning the tensor.

Randomness comes from `rng` (a numpy Generator) when given, else from the framework's global generator
(framework.random), which `manual_seed(seed)` here or `framework.manual_seed(seed)` resets. It starts
seeded with 0 (torch likewise starts from a fixed default seed), so building a model after
`manual_seed(config_seed)` gives the same weights on every run."""
from __future__ import annotations

import math

import numpy as np

from .. import random
from ..tensor import Tensor

__all__ = ["manual_seed", "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_"]


def manual_seed(seed) -> None:
    """Reseed the framework's global generator (framework.random.manual_seed), which every
    initialiser (and every layer's default init) draws from."""
    random.manual_seed(seed)


def _generator(rng):
    return random.default_generator() if rng is None else rng


def _fill(tensor, values):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"init: expected a Tensor or Parameter, got {type(tensor).__name__}")
    tensor.data[...] = np.asarray(values).astype(tensor.data.dtype, copy=False)
    return tensor


def calculate_gain(nonlinearity: str, param=None) -> float:
    """Recommended gain for a nonlinearity: 1 for linear/conv/sigmoid, 5/3 tanh, sqrt(2) relu,
    sqrt(2 / (1 + slope^2)) leaky_relu (slope `param`, default 0.01), 3/4 selu."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor):
    """fan_in = shape[1] * receptive field, fan_out = shape[0] * receptive field (torch's rule, so a
    ConvTranspose2d weight (in, out/groups, kh, kw) has fan_in = out/groups * kh * kw)."""
    shape = tensor.shape
    if len(shape) < 2:
        raise ValueError(f"init: fan in and fan out cannot be computed for a tensor with fewer than 2 "
                         f"dimensions (shape {shape})")
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _fan(tensor, mode):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"init: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a: float = 0.0, b: float = 1.0, rng=None):
    """Fill with U(a, b)."""
    return _fill(tensor, _generator(rng).uniform(a, b, tensor.shape))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, rng=None):
    """Fill with N(mean, std^2)."""
    return _fill(tensor, _generator(rng).normal(mean, std, tensor.shape))


def constant_(tensor, val: float):
    return _fill(tensor, val)


def zeros_(tensor):
    return _fill(tensor, 0)


def ones_(tensor):
    return _fill(tensor, 1)


def xavier_uniform_(tensor, gain: float = 1.0, rng=None):
    """U(-a, a) with a = gain sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, rng)


def xavier_normal_(tensor, gain: float = 1.0, rng=None):
    """N(0, std^2) with std = gain sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), rng)


def kaiming_uniform_(tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     rng=None):
    """U(-b, b) with b = gain sqrt(3 / fan), gain = calculate_gain(nonlinearity, a). Layers use
    a = sqrt(5), i.e. b = 1 / sqrt(fan_in), as torch."""
    if 0 in tensor.shape:
        return tensor  # torch: a no-op (with a warning) on zero-element tensors
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, rng)


def kaiming_normal_(tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    rng=None):
    """N(0, std^2) with std = gain / sqrt(fan), gain = calculate_gain(nonlinearity, a)."""
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, rng)


# Acklam's rational approximation of the standard normal quantile (relative error < 1.2e-9): numpy
# has no erfinv, and an initialiser needs no more.
_ACKLAM_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_ACKLAM_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
             6.680131188771972e+01, -1.328068155288572e+01)
_ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
             3.754408661907416e+00)


def _polyval(coeffs, x):
    out = np.zeros_like(x)
    for c in coeffs:
        out = out * x + c
    return out


def _normal_quantile(p: np.ndarray) -> np.ndarray:
    """Phi^-1(p) for p in (0, 1), float64: a central rational function, and one on sqrt(-2 log p)
    in each tail."""
    low = 0.02425
    out = np.empty_like(p)
    mid = (p >= low) & (p <= 1 - low)
    q = p[mid] - 0.5
    r = q * q
    out[mid] = _polyval(_ACKLAM_A, r) * q / (_polyval(_ACKLAM_B, r) * r + 1)
    for tail, sign in ((p < low, 1.0), (p > 1 - low, -1.0)):
        t = np.sqrt(-2 * np.log(np.where(sign > 0, p[tail], 1 - p[tail])))
        out[tail] = sign * _polyval(_ACKLAM_C, t) / (_polyval(_ACKLAM_D, t) * t + 1)
    return out


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  rng=None):
    """Fill with N(mean, std^2) truncated to [a, b], as torch.nn.init.trunc_normal_: `a` and `b` are
    values, not multiples of std (so std=0.02 with the default [-2, 2], BasicSR's and timm's ViT
    init, is a normal in practice). Inverse CDF, as torch: a uniform draw on [Phi(a'), Phi(b')]
    (a' = (a - mean) / std) mapped through the normal quantile, then clamped to [a, b]."""
    for name, v in (("mean", mean), ("std", std), ("a", a), ("b", b)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                or not math.isfinite(v):
            raise ValueError(f"trunc_normal_: {name} must be a finite number, got {v!r}")
    if std <= 0:
        raise ValueError(f"trunc_normal_: std must be > 0, got {std!r}")
    if not a < b:
        raise ValueError(f"trunc_normal_: the interval [a, b] must have a < b, got [{a}, {b}]")
    cdf = (lambda x: 0.5 * (1.0 + math.erf((x - mean) / (std * math.sqrt(2.0)))))
    lo, hi = cdf(a), cdf(b)
    if not hi > lo:
        raise ValueError(f"trunc_normal_: [{a}, {b}] holds no probability of N({mean}, {std}^2) in "
                         f"float64 (it lies more than ~8 std from the mean)")
    u = _generator(rng).uniform(lo, hi, tensor.shape)
    u = np.clip(u, np.nextafter(0.0, 1.0), np.nextafter(1.0, 0.0))  # the quantile is finite inside
    return _fill(tensor, np.clip(_normal_quantile(u) * std + mean, a, b))
