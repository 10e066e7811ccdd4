"""srgrad: a small CPU deep-learning framework for super-resolution, differentiable through every
resampling mode. `import framework as sg; import framework.functional as F; from framework import nn`."""
from .autograd import Context, Function, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .tensor import Tensor, from_numpy, ones, randn, tensor, zeros
from . import functional
from .gradcheck import GradcheckError, gradcheck
from .random import manual_seed
from .weights import load, save
from .threads import get_num_threads, set_num_threads

__version__ = "0.1.0"

__all__ = [
    "Context", "Function", "enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled", "Tensor",
    "from_numpy", "ones", "randn", "tensor", "zeros", "functional", "GradcheckError", "gradcheck",
    "manual_seed", "save", "load", "set_num_threads", "get_num_threads",
]
