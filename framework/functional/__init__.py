"""Differentiable ops, one family per module; each module holds its Functions (and numba kernels)
and the lowercase wrappers re-exported here. `import framework.functional as F`."""
from ._util import unbroadcast
from .elementwise import (abs, add, cast, clamp, div, exp, log, maximum, minimum, mul, neg, pow,
                          sqrt, sub, where)
from .linalg import matmul
from .reduce import max, mean, sum
from .shape import cat, flatten, getitem, pad, permute, reshape, stack, transpose
# Op families below define __all__ with their public wrappers.
from .resample import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .pool import *  # noqa: F401,F403
from .pixel_shuffle import *  # noqa: F401,F403
from .activation import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
import sys as _sys

__all__ = [
    "unbroadcast", "abs", "add", "cast", "clamp", "div", "exp", "log", "maximum", "minimum", "mul",
    "neg", "pow", "sqrt", "sub", "where", "matmul", "max", "mean", "sum", "cat", "flatten", "getitem",
    "pad", "permute", "reshape", "stack", "transpose",
]
# Look the family modules up in sys.modules: a family may export a function of its own name
# (pixel_shuffle.pixel_shuffle), which shadows the submodule attribute after the star import.
for _m in ("resample", "conv", "pool", "pixel_shuffle", "activation", "normalization", "loss"):
    __all__ += list(_sys.modules[f"{__name__}.{_m}"].__all__)
