"""Tensor: a numpy array, its gradient and its place in the graph. Every operator delegates to
`framework.functional`; no math lives here."""
from __future__ import annotations

import numpy as np

from . import autograd

_FLOATS = (np.float32, np.float64)


def _as_array(data, dtype=None) -> np.ndarray:
    """numpy array with srgrad's dtype rule: float32 by default, float64 kept, ints and bools kept."""
    if isinstance(data, Tensor):
        data = data.data
    if dtype is not None:
        return np.asarray(data, dtype=np.dtype(dtype))
    arr = np.asarray(data)
    if arr.dtype.kind == "f" and arr.dtype not in _FLOATS:
        arr = arr.astype(np.float32)  # float16 etc. compute in float32
    elif arr.dtype == np.float64 and not isinstance(data, (np.ndarray, np.generic)):
        arr = arr.astype(np.float32)  # Python floats and lists default to float32, as torch does
    return arr


class Tensor:
    """A numpy array with autograd. `requires_grad` only for float32/float64 data.

    Attributes: `data` (np.ndarray), `grad` (Tensor or None), `requires_grad` (bool)."""

    __slots__ = ("data", "grad", "_requires_grad", "_node", "_index", "__weakref__")
    __array_priority__ = 100  # so `ndarray * Tensor` defers to Tensor.__rmul__

    def __init__(self, data, requires_grad: bool = False, dtype=None):
        self.data = _as_array(data, dtype)
        self.grad = None
        self._node = None
        self._index = 0
        self._requires_grad = False
        self.requires_grad = requires_grad

    @classmethod
    def _wrap(cls, arr: np.ndarray) -> "Tensor":
        t = cls.__new__(cls)
        t.data, t.grad, t._node, t._index, t._requires_grad = arr, None, None, 0, False
        return t

    # -- autograd ------------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and self.data.dtype not in _FLOATS:
            raise TypeError(
                f"only float32/float64 tensors can require gradients, got dtype {self.data.dtype}")
        self._requires_grad = bool(value)

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    def backward(self, gradient=None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) . gradient into every leaf's `.grad`. A one-element tensor gets
        gradient 1; any other needs `gradient` of the same shape."""
        if not self.requires_grad:
            raise RuntimeError("backward: this tensor does not require grad and has no graph")
        if gradient is None:
            if self.data.size != 1:
                raise RuntimeError(
                    f"backward: gradient can be implied only for a scalar output, this one has shape "
                    f"{self.shape}; pass gradient= of that shape")
            g = np.ones(self.shape, self.dtype)
        else:
            g = np.asarray(gradient.data if isinstance(gradient, Tensor) else gradient, self.dtype)
            if g.shape != self.shape:
                raise ValueError(
                    f"backward: gradient has shape {g.shape} but the tensor has shape {self.shape}")
        autograd.run_backward(self, g, retain_graph)

    def detach(self) -> "Tensor":
        return Tensor._wrap(self.data)

    def zero_grad(self) -> None:
        self.grad = None

    # -- numpy-like facts ----------------------------------------------------------------------
    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)

    def numel(self) -> int:
        return self.data.size

    def numpy(self) -> np.ndarray:
        return self.data

    def item(self):
        if self.data.size != 1:
            raise ValueError(f"item: only one-element tensors convert to a number, shape {self.shape}")
        return self.data.reshape(()).item()

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        grad = ", requires_grad=True" if self.requires_grad else ""
        body = np.array2string(self.data, separator=", ", threshold=50, prefix="tensor(")
        return f"tensor({body}, dtype={self.dtype}{grad})"

    def __bool__(self):
        return bool(self.data)

    def __float__(self):
        return float(self.item())

    __hash__ = object.__hash__


def tensor(data, requires_grad: bool = False, dtype=None) -> Tensor:
    """New leaf Tensor holding a copy of `data` (float32 unless `data` is float64 or `dtype` says)."""
    arr = np.array(_as_array(data, dtype), copy=True)
    return Tensor(arr, requires_grad=requires_grad)


def from_numpy(arr: np.ndarray, requires_grad: bool = False) -> Tensor:
    """Tensor sharing memory with `arr` (its dtype kept as is)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(arr).__name__}")
    return Tensor(arr, requires_grad=requires_grad, dtype=arr.dtype)


def zeros(*shape, dtype=np.float32, requires_grad: bool = False) -> Tensor:
    return Tensor(np.zeros(_shape(shape), dtype), requires_grad=requires_grad)


def ones(*shape, dtype=np.float32, requires_grad: bool = False) -> Tensor:
    return Tensor(np.ones(_shape(shape), dtype), requires_grad=requires_grad)


def randn(*shape, dtype=np.float32, requires_grad: bool = False, rng=None) -> Tensor:
    """Standard normal samples; `rng` is a numpy Generator (default: a fresh unseeded one)."""
    rng = np.random.default_rng() if rng is None else rng
    return Tensor(rng.standard_normal(_shape(shape)).astype(dtype), requires_grad=requires_grad)


def _shape(shape):
    return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape


# -- operators and methods: thin delegations to framework.functional (imported last: it needs Tensor)
from . import functional as F  # noqa: E402


def _r(op):
    return lambda self, other: op(other, self)


Tensor.__add__, Tensor.__radd__ = F.add, _r(F.add)
Tensor.__sub__, Tensor.__rsub__ = F.sub, _r(F.sub)
Tensor.__mul__, Tensor.__rmul__ = F.mul, _r(F.mul)
Tensor.__truediv__, Tensor.__rtruediv__ = F.div, _r(F.div)
Tensor.__pow__, Tensor.__rpow__ = F.pow, _r(F.pow)
Tensor.__matmul__, Tensor.__rmatmul__ = F.matmul, _r(F.matmul)
Tensor.__neg__ = F.neg
Tensor.__getitem__ = F.getitem
Tensor.__lt__ = lambda self, o: Tensor._wrap(self.data < F._util.data_of(o))
Tensor.__le__ = lambda self, o: Tensor._wrap(self.data <= F._util.data_of(o))
Tensor.__gt__ = lambda self, o: Tensor._wrap(self.data > F._util.data_of(o))
Tensor.__ge__ = lambda self, o: Tensor._wrap(self.data >= F._util.data_of(o))
Tensor.exp, Tensor.log, Tensor.sqrt, Tensor.abs = F.exp, F.log, F.sqrt, F.abs
Tensor.clamp, Tensor.pow, Tensor.matmul = F.clamp, F.pow, F.matmul
Tensor.sum, Tensor.mean, Tensor.max = F.sum, F.mean, F.max
Tensor.reshape, Tensor.view, Tensor.permute = F.reshape, F.reshape, F.permute
Tensor.transpose, Tensor.flatten = F.transpose, F.flatten
Tensor.roll, Tensor.chunk, Tensor.split = F.roll, F.chunk, F.split
Tensor.T = property(lambda self: F.permute(self, tuple(range(self.ndim))[::-1]))
Tensor.float = lambda self: self if self.dtype == np.float32 else F.cast(self, np.float32)
Tensor.double = lambda self: self if self.dtype == np.float64 else F.cast(self, np.float64)
Tensor.astype = F.cast
