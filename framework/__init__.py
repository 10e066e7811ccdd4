"""srgrad: a small CPU deep-learning framework for super-resolution, differentiable through every
resampling mode. `import framework as sg; import framework.functional as F; from framework import nn`.

The top level holds what a PyTorch user reaches for after `import torch`: the Tensor and its
factories (tensor, zeros, ones, full, *_like, rand, randn, randint, arange, linspace, eye, ...), the
common ops (cat, stack, where, clamp, exp, sum, matmul, einsum, flip, relu, softmax, eq, isfinite,
masked_fill, ...: framework.functional's, the same functions), no_grad, manual_seed, save / load,
device and cuda (the CPU is the only device), the dtype names (float32, float64, int64, ...:
numpy's types), and the subpackages nn, optim, data, functional, autograd (grad), utils (data) and
backends (cudnn), loaded with it. Tensors follow torch's type promotion and compare element-wise.
"""
import numpy as _np

from .autograd import Context, Function, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .tensor import Tensor, from_numpy, tensor
from . import functional
from .functional import (abs, add, all, any, argmax, argmin, bitwise_and, bitwise_not, bitwise_or,
                         bitwise_xor, cat, chunk, clamp, count_nonzero, div, einsum, eq, exp,
                         flatten, flip, floor_divide, ge, gt, isfinite, isinf, isnan, le, log,
                         log_softmax, logical_and, logical_not, logical_or, logical_xor, lt,
                         masked_fill, matmul, max, maximum, mean, min, minimum, mul, ne, neg,
                         nonzero, permute, pow, relu, remainder, reshape, roll, sigmoid, softmax,
                         split, sqrt, squeeze, stack, std, sub, sum, tanh, transpose, unsqueeze,
                         var, where)
from .creation import (arange, as_tensor, empty, empty_like, eye, full, full_like, linspace, ones,
                       ones_like, rand, rand_like, randint, randint_like, randn, randn_like, zeros,
                       zeros_like)
from .predicates import allclose, equal, is_floating_point, is_tensor, numel
from .device import device
from . import cuda
from .gradcheck import GradcheckError, gradcheck
from .random import manual_seed
from .weights import load, save
from .threads import get_num_threads, set_num_threads
from .precision import autocast
from . import nn, optim, data, utils, backends
from . import autograd
from . import card  # models' cards; MODELS.build checks a spec's size with them first
from .loading import load_into  # above weights/ and nn/: it runs the models' detect rules

__version__ = "0.1.0"

clip = clamp  # torch.clip is torch.clamp
inference_mode = no_grad  # torch.inference_mode(): no graph is recorded

# torch's dtype names as numpy's types (x.dtype == framework.float32); float16 is named so that
# code saying it gets srgrad's clear refusal from tensor(), .to() and the factories
float16, float32, float64 = _np.float16, _np.float32, _np.float64
half, double = _np.float16, _np.float64
int8, int16, int32, int64, uint8 = _np.int8, _np.int16, _np.int32, _np.int64, _np.uint8
long = _np.int64
# torch.float, torch.int, torch.bool (this module uses none of the builtins they shadow, nor
# any / all, torch's functions above)
float, int, bool = _np.float32, _np.int32, _np.bool_  # noqa: A001


def get_default_dtype():
    """float32: the dtype of a tensor made from Python floats (torch's default)."""
    return _np.float32


__all__ = [
    "Context", "Function", "autograd", "utils", "backends", "enable_grad", "is_grad_enabled",
    "no_grad", "set_grad_enabled",
    "inference_mode", "Tensor", "from_numpy", "tensor", "as_tensor", "functional", "nn", "optim",
    "data", "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
    "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "arange", "linspace",
    "eye", "abs", "argmax", "argmin", "cat", "chunk", "clamp", "clip", "exp", "flatten", "log",
    "log_softmax", "matmul", "max", "maximum", "mean", "min", "minimum", "permute", "pow", "relu",
    "reshape", "roll", "sigmoid", "softmax", "split", "sqrt", "squeeze", "stack", "std", "sum",
    "tanh", "transpose", "unsqueeze", "var", "where", "add", "sub", "mul", "div", "neg", "eq",
    "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "logical_and", "logical_or", "logical_xor", "logical_not", "isfinite", "isinf", "isnan",
    "masked_fill", "floor_divide", "remainder", "einsum", "flip", "any", "all", "nonzero",
    "count_nonzero", "allclose", "equal", "is_floating_point",
    "is_tensor", "numel", "device", "cuda", "GradcheckError", "gradcheck", "manual_seed", "save",
    "load", "autocast", "set_num_threads", "get_num_threads", "get_default_dtype", "float16", "float32",
    "float64", "half", "double", "int8", "int16", "int32", "int64", "uint8", "long",
]
