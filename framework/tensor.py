"""Tensor: a numpy array, its gradient and its place in the graph. Every operator delegates to
`framework.functional`; no math lives here. The in-place methods (mul_, add_, ...) write into the
array and bump the tensor's version counter, which autograd checks before a backward uses it."""
from __future__ import annotations

import re

import numpy as np

from . import autograd
from ._check import ArgumentTypeError, did_you_mean, int_arg, is_number, number

_FLOATS = (np.float32, np.float64)
_DTYPE_KINDS = ("f", "i", "u", "b")  # with floats only float32 / float64
_DEVICE = re.compile(r"(cpu|cuda|mps|xpu|xla|meta|hip|hpu|ipu|mtia|vulkan|privateuseone)(:\d+)?")


def _as_array(data, dtype=None) -> np.ndarray:
    """numpy array with srgrad's dtype rule, torch.tensor's: a float32 or float64 array keeps its
    dtype, Python floats (and lists of them) become float32, ints and bools are kept; float16 and
    the other dtypes srgrad's kernels do not compute in are a ValueError (never a silent cast)."""
    if isinstance(data, Tensor):
        data = data.data
    if dtype is not None:
        return np.asarray(data, dtype=check_dtype("tensor", dtype))
    arr = np.asarray(data)
    if arr.dtype == np.float64 and not isinstance(data, (np.ndarray, np.generic)):
        return arr.astype(np.float32)  # Python floats and lists default to float32, as torch does
    if arr.dtype.kind not in _DTYPE_KINDS or (arr.dtype.kind == "f" and arr.dtype not in _FLOATS):
        check_dtype("tensor", arr.dtype)  # raises, naming the dtype
    return arr


def check_dtype(owner: str, dtype) -> np.dtype:
    """np.dtype(dtype) when srgrad computes in it (float32, float64; ints, unsigned ints and bool
    are kept as data), else a ValueError naming `owner`: torch's float16 is refused, not cast."""
    try:
        new = np.dtype(dtype)
    except TypeError:
        raise ArgumentTypeError(f"{owner}: {dtype!r} is not a dtype") from None
    if new.kind not in _DTYPE_KINDS or (new.kind == "f" and new not in _FLOATS):
        raise ValueError(f"{owner}: dtype {new} is not supported: srgrad computes in float32 or "
                         f"float64 (ints and bool are kept as data); convert first, e.g. with "
                         f".astype(np.float32)")
    return new


def check_device(owner: str, device) -> None:
    """None, "cpu", "cpu:0" or a device object whose .type is "cpu" (framework.device, torch's):
    anything else is a ValueError (srgrad runs on the CPU only)."""
    if device is None:
        return
    name = device if isinstance(device, str) else getattr(device, "type", None)
    if not isinstance(name, str) or not _DEVICE.fullmatch(name):
        raise ArgumentTypeError(f"{owner}: {device!r} is not a device (e.g. 'cpu')")
    if not name.startswith("cpu"):
        raise ValueError(f"{owner}: srgrad runs on the CPU only; device {name!r} is not "
                         f"available (use 'cpu', or leave the device out)")


class Tensor:
    """A numpy array with autograd. `requires_grad` only for float32/float64 data.

    Attributes: `data` (np.ndarray; assign to it, or write `x.data *= 2`, to change the values
    outside autograd's view), `grad` (Tensor or None), `requires_grad` (bool). `size()` and `shape`
    are the shape (torch), `numel()` the element count."""

    # _vc: the version counter, a one-element list shared with views (None until first needed);
    # _base: for a view made by an op, the tensor whose memory it shows
    __slots__ = ("data", "grad", "_requires_grad", "_node", "_index", "_vc", "_base", "__weakref__")
    __array_priority__ = 100  # so `ndarray * Tensor` defers to Tensor.__rmul__

    def __init__(self, data, requires_grad: bool = False, dtype=None):
        self.data = _as_array(data, dtype)
        self.grad = None
        self._node = None
        self._index = 0
        self._vc = self._base = None
        self._requires_grad = False
        self.requires_grad = requires_grad

    @classmethod
    def _wrap(cls, arr: np.ndarray) -> "Tensor":
        t = cls.__new__(cls)
        t.data, t.grad, t._node, t._index, t._requires_grad = arr, None, None, 0, False
        t._vc = t._base = None
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

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set requires_grad in place and return self (a graph output cannot be switched off:
        detach() it)."""
        if not requires_grad and self._node is not None:
            raise RuntimeError("requires_grad_: you can only change requires_grad flags of leaf "
                               "tensors; this one is an op's output (use detach())")
        self.requires_grad = requires_grad
        return self

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
        """The same memory outside the graph (shares the version counter, as torch's)."""
        t = Tensor._wrap(self.data)
        t._vc = self._counter()
        return t

    def _counter(self) -> list:
        if self._vc is None:
            self._vc = [0]
        return self._vc

    @property
    def _version(self) -> int:
        """How many in-place ops changed this memory (counted with its views), as torch's."""
        return 0 if self._vc is None else self._vc[0]

    def zero_grad(self) -> None:
        self.grad = None

    # -- numpy-like facts ----------------------------------------------------------------------
    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    device = property(lambda self: "cpu", doc="Always 'cpu': srgrad runs on the CPU.")

    def size(self, dim=None):
        """torch's size: the shape (a tuple), or with `dim` that axis's length (an int)."""
        if dim is None:
            return self.data.shape
        d = int_arg("size", "dim", dim, minimum=None)
        if not -self.ndim <= d < self.ndim:
            raise IndexError(f"size: dim {d} is out of range for a tensor with {self.ndim} "
                             f"dimensions")
        return self.data.shape[d]

    def numel(self) -> int:
        """The number of elements (numpy's `size`)."""
        return self.data.size

    dim = lambda self: self.data.ndim  # noqa: E731 (torch's x.dim())

    def to(self, *args, **kwargs) -> "Tensor":
        """x.to(dtype), x.to("cpu"), x.to(device="cpu"), x.to("cpu", dtype), x.to(other) (other's
        dtype), with copy=True for new memory even when nothing changes; non_blocking is accepted.
        A dtype change is differentiable (F.cast); otherwise x itself comes back, as in torch.
        srgrad runs on the CPU: any other device is an error."""
        dtype, copy = parse_to("to", args, kwargs)
        if dtype is not None and dtype != self.dtype:
            return F.cast(self, dtype)
        return F.clone(self) if copy else self

    def cpu(self) -> "Tensor":
        """self: srgrad's tensors live on the CPU."""
        return self

    def contiguous(self) -> "Tensor":
        """self when C-contiguous, else a differentiable C-ordered copy."""
        return self if self.data.flags.c_contiguous else F.clone(self)

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
        """torch's rule: only a one-element tensor has a truth value. (So `t in list_of_tensors`
        raises for a multi-element t, as in torch: == is element-wise; compare ids, or use a dict
        or set, which hash by identity.)"""
        if self.data.size != 1:
            what = "no values" if self.data.size == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
        return bool(self.data.reshape(()))

    def __float__(self):
        return float(self.item())

    __hash__ = object.__hash__  # identity, as torch's, while == is element-wise

    # -- in place ------------------------------------------------------------------------------
    def _inplace(self, name, update, build, *operands, check=True) -> "Tensor":
        """The body of every in-place method. Outside the graph (no_grad, or nothing requires grad)
        `update(array, *operands)` writes the result with numpy. In the graph,
        `build(prev, *operands)` computes it out of place through Functions from a copy `prev` of
        the old values (so the graph keeps them; `prev` also stands for self among the operands);
        the result is written into this tensor's memory and the tensor takes its place in the
        graph. Either way the version counter goes up, so a backward through an op that used the
        old values refuses to run."""
        if autograd._tracer is not None:
            raise RuntimeError(f"{name}: an in-place op cannot be traced for export; use the "
                               f"out-of-place op")
        for o in operands if check else ():
            _check_operand(name, self, o)
        if not self.data.flags.writeable:
            raise ValueError(f"{name}: this tensor's memory is read-only (an expand() result shows "
                             f"one element in many places); clone() it first")
        if autograd._recorder is not None:  # a captured step cannot replay a write into memory
            autograd._recorder.inplace(name)
        if autograd.is_grad_enabled() and (self._requires_grad or any(
                isinstance(o, Tensor) and o._requires_grad for o in operands)):
            self._check_graph_inplace(name)
            prev = Tensor._wrap(self.data.copy())
            prev._node, prev._index, prev._requires_grad = self._node, self._index, self._requires_grad
            _keep_saved(self._node, self.data, prev.data)
            out = build(prev, *(prev if o is self else o for o in operands))
            if out.dtype != self.dtype:
                out = F.cast(out, self.dtype)
            np.copyto(self.data, out.data)
            self._node, self._index, self._requires_grad = out._node, out._index, out._requires_grad
        else:
            _keep_saved(self._node, self.data)
            update(self.data, *(o.data if isinstance(o, Tensor) else o for o in operands))
        self._counter()[0] += 1
        return self

    def _check_graph_inplace(self, name):
        if self._requires_grad and self._node is None:
            raise RuntimeError(f"{name}: a leaf Variable that requires grad is being used in an "
                               f"in-place operation; do it under `with no_grad():` (an optimizer "
                               f"step, an initialisation) or use the out-of-place op")
        base = self._base
        if base is not None and base._requires_grad and base._node is None:
            raise RuntimeError(f"{name}: a view of a leaf Variable that requires grad is being used "
                               f"in an in-place operation; do it under `with no_grad():`")
        if base is not None:
            raise RuntimeError(f"{name}: an in-place op on a view of another tensor (of shape "
                               f"{base.shape}) cannot be recorded for backward in srgrad; use the "
                               f"out-of-place op")

    def mul_(self, other) -> "Tensor":
        """self *= other (broadcast to self's shape), in place; returns self."""
        return self._inplace("mul_", lambda a, o: np.multiply(a, o, out=a, casting="unsafe"),
                             F.mul, other)

    def div_(self, other) -> "Tensor":
        """self /= other, in place; returns self."""
        return self._inplace("div_", lambda a, o: np.divide(a, o, out=a, casting="unsafe"),
                             F.div, other)

    def add_(self, other, alpha=1) -> "Tensor":
        """self += alpha * other, in place; returns self."""
        alpha = number("add_", "alpha", alpha)
        return self._inplace("add_", lambda a, o: np.add(a, _times(o, alpha), out=a,
                                                         casting="unsafe"),
                             lambda p, o: F.add(p, _times(o, alpha)), other)

    def sub_(self, other, alpha=1) -> "Tensor":
        """self -= alpha * other, in place; returns self."""
        alpha = number("sub_", "alpha", alpha)
        F.elementwise.refuse_bool("sub_", "this operator with a bool operand", self, other)
        return self._inplace("sub_", lambda a, o: np.subtract(a, _times(o, alpha), out=a,
                                                              casting="unsafe"),
                             lambda p, o: F.sub(p, _times(o, alpha)), other)

    def clamp_(self, min=None, max=None) -> "Tensor":
        """Clip self into [min, max] (either may be None) in place; returns self."""
        if min is None and max is None:
            raise ValueError("clamp_: at least one of min and max must be given")
        lo = None if min is None else number("clamp_", "min", min)
        hi = None if max is None else number("clamp_", "max", max)
        return self._inplace("clamp_", lambda a: np.clip(a, lo, hi, out=a),
                             lambda p: F.clamp(p, lo, hi))

    def fill_(self, value) -> "Tensor":
        """Every element set to the number `value`, in place; returns self."""
        if not (is_number(value) or isinstance(value, (bool, np.bool_))):
            raise ArgumentTypeError(f"fill_: value must be a number, got {value!r}")
        return self._inplace("fill_", lambda a: a.fill(value),
                             lambda p: F.where(np.zeros(p.shape, bool), p, value))

    def zero_(self) -> "Tensor":
        """Every element set to 0, in place; returns self."""
        return self.fill_(0)

    def copy_(self, src) -> "Tensor":
        """Copy `src` (broadcast to self's shape, cast to self's dtype) into self; returns self. The
        gradient flows to src."""
        return self._inplace("copy_", lambda a, s: np.copyto(a, s, casting="unsafe"),
                             lambda p, s: F.where(np.zeros(p.shape, bool), p, s), src)

    def masked_fill_(self, mask, value) -> "Tensor":
        """masked_fill in place; returns self."""
        m = F._util.data_of(mask)
        F.masked_fill(self.detach(), m, 0)  # its checks, before anything is written
        return self._inplace("masked_fill_", lambda a, v: np.copyto(a, v, where=m),
                             lambda p, v: F.masked_fill(p, m, v), value)

    def __setitem__(self, index, value) -> None:
        """x[index] = value in place (value broadcast, cast to x's dtype), with torch's autograd
        rules: refused on a leaf that requires grad (outside no_grad); on a graph tensor the
        gradient reaches the unassigned part of the old x and a tensor value."""
        if not isinstance(value, (Tensor, np.ndarray)) and not is_number(value) and \
                not isinstance(value, (bool, np.bool_)):
            value = np.asarray(value)  # a list
        idx = F.shape.put_index(self.shape, index, value)
        self._inplace("setitem", lambda a, v: a.__setitem__(idx, v),
                      lambda p, v: F.index_put(p, idx, v), value, check=False)

    def is_contiguous(self) -> bool:
        """Whether the array is C-contiguous (torch's default memory format)."""
        return bool(self.data.flags.c_contiguous)

    # torch's `x += y` is in place (so `p -= lr * p.grad` under no_grad updates the parameter)
    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """New leaf Tensor holding a copy of `data`, as torch.tensor: a float64 numpy array stays
    float64, Python floats become float32, `dtype` converts; float16 is refused (see _as_array)."""
    check_device("tensor", device)
    arr = np.array(_as_array(data, dtype), copy=True)
    return Tensor(arr, requires_grad=requires_grad)


def from_numpy(arr: np.ndarray, requires_grad: bool = False) -> Tensor:
    """Tensor sharing memory with `arr` (its dtype kept as is)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(arr).__name__}")
    return Tensor(arr, requires_grad=requires_grad, dtype=arr.dtype)


def parse_to(owner: str, args: tuple, kwargs: dict):
    """(dtype or None, copy) from torch's `.to(...)` arguments: a device ("cpu", "cpu:0", or an
    object with `.type`, as torch.device), a dtype (numpy dtype or its name), a Tensor (its dtype),
    and keywords device=, dtype=, copy=, non_blocking=. Only the CPU exists here: another device is a
    ValueError. Also for Module.to."""
    extra = set(kwargs) - {"device", "dtype", "copy", "non_blocking"}
    if extra:
        key = sorted(extra)[0]
        raise ArgumentTypeError(f"{owner}: unexpected keyword argument {key!r}"
                                f"{did_you_mean(key, ['device', 'dtype', 'copy', 'non_blocking'])}")
    if len(args) > 2:
        raise ArgumentTypeError(f"{owner}: expected at most a device and a dtype, got {len(args)} "
                                f"positional arguments")
    dtype = None
    items = list(args) + [kwargs.get("device"), kwargs.get("dtype")]
    for item in items:
        if item is None:
            continue
        if isinstance(item, Tensor):
            item = item.dtype
        name = item if isinstance(item, str) else getattr(item, "type", None)
        if isinstance(name, str) and _DEVICE.fullmatch(name):
            check_device(owner, item)
            continue
        try:
            new = check_dtype(owner, item)
        except ArgumentTypeError:
            raise ArgumentTypeError(f"{owner}: {item!r} is neither a device nor a dtype") from None
        if dtype is not None and new != dtype:
            raise ArgumentTypeError(f"{owner}: two dtypes given, {dtype} and {new}")
        dtype = new
    copy = kwargs.get("copy", False)
    if not isinstance(copy, (bool, np.bool_)):
        raise ArgumentTypeError(f"{owner}: copy must be a bool, got {copy!r}")
    return dtype, bool(copy)


def _keep_saved(node, arr, old=None):
    """The op that produced `arr` may have saved it for its backward (exp, sigmoid, tanh save
    their output): before an in-place write, point it at `old` (a copy of the values, made here
    if not given), so its gradient stays right (torch refuses that backward; README: differ on
    purpose)."""
    ctx = None if node is None else node.ctx
    if ctx is None or not (any(a is arr for a in ctx._saved) or
                           any(v is arr for v in vars(ctx).values())):
        return
    old = arr.copy() if old is None else old
    ctx._saved = tuple(old if a is arr else a for a in ctx._saved)
    for key, value in list(vars(ctx).items()):
        if value is arr:
            setattr(ctx, key, old)


def _times(x, alpha: float):
    """alpha * x for add_/sub_ (x itself when alpha is 1; x's dtype kept)."""
    return x if alpha == 1 else x * alpha


def _check_operand(owner, t, other):
    """An in-place op keeps t's shape and dtype: `other` must broadcast to t's shape and the
    result dtype (torch's promotion) must cast to t's (torch.can_cast: no float into an int)."""
    if owner == "div_" and t.data.dtype.kind != "f":
        raise TypeError(f"div_: the result has dtype float32, which cannot be written in place "
                        f"into a {t.dtype} tensor (true division; use floor_divide_ or //=)")
    if (type(other) is float or type(other) is int) and t.data.dtype.kind != "b":  # cheaply
        if type(other) is float and t.data.dtype.kind in "iub" and owner != "copy_":
            raise TypeError(f"{owner}: the result has dtype float32, which cannot be written in "
                            f"place into a {t.dtype} tensor")
        return
    if isinstance(other, Tensor) and other.data.shape == t.data.shape and \
            other.data.dtype == t.data.dtype:
        return
    arr = other.data if isinstance(other, Tensor) else other
    if not (is_number(arr) or isinstance(arr, np.ndarray)):
        arr = np.asarray(arr)
    shape = np.shape(arr)
    try:
        fits = np.broadcast_shapes(t.shape, shape) == t.shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{owner}: an operand of shape {shape} does not broadcast to this "
                         f"tensor's shape {t.shape}")
    dtype = F._promote.result_type(t, other)
    if owner != "copy_" and not F._promote.can_cast(dtype, t.dtype):
        raise TypeError(f"{owner}: the result has dtype {dtype}, which cannot be written in place "
                        f"into a {t.dtype} tensor")


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
Tensor.__floordiv__, Tensor.__rfloordiv__ = F.floor_divide, _r(F.floor_divide)
Tensor.__mod__, Tensor.__rmod__ = F.remainder, _r(F.remainder)
Tensor.__and__, Tensor.__rand__ = F.bitwise_and, _r(F.bitwise_and)
Tensor.__or__, Tensor.__ror__ = F.bitwise_or, _r(F.bitwise_or)
Tensor.__xor__, Tensor.__rxor__ = F.bitwise_xor, _r(F.bitwise_xor)
Tensor.__invert__, Tensor.__abs__, Tensor.__pos__ = F.bitwise_not, F.abs, F.positive


def _comparing(op):
    """An operator == != < ... : element-wise against a Tensor, number, bool or numpy array (as
    torch's); anything else (None, a string, a list) is NotImplemented, so Python answers
    `x == None` with False as torch does. Tensor.__hash__ stays identity (see __bool__)."""
    def method(self, other):
        if isinstance(other, (Tensor, np.ndarray, np.generic, bool, int, float)):
            return op(self, other)
        return NotImplemented
    return method


Tensor.__eq__, Tensor.__ne__ = _comparing(F.eq), _comparing(F.ne)
Tensor.__lt__, Tensor.__le__ = _comparing(F.lt), _comparing(F.le)
Tensor.__gt__, Tensor.__ge__ = _comparing(F.gt), _comparing(F.ge)
for _name in ("eq", "ne", "lt", "le", "gt", "ge", "isfinite", "isnan", "isinf", "logical_not",
              "logical_and", "logical_or", "bitwise_and", "bitwise_or", "bitwise_xor",
              "bitwise_not", "masked_fill", "floor_divide", "remainder", "any", "all", "nonzero",
              "count_nonzero"):
    setattr(Tensor, _name, getattr(F, _name))
Tensor.greater, Tensor.less, Tensor.greater_equal, Tensor.less_equal = F.gt, F.lt, F.ge, F.le


def _inplace_method(name, op):
    def method(self, other) -> Tensor:
        def update(a, o):  # o: a Tensor's array, or the number itself
            o = Tensor._wrap(o) if isinstance(o, np.ndarray) else o
            np.copyto(a, op(Tensor._wrap(a), o).data, casting="unsafe")
        return self._inplace(name, update, op, other)
    method.__name__ = name
    method.__doc__ = f"self = {op.__name__}(self, other), in place; returns self."
    return method


# the other in-place operators (+= -= *= /= are add_ ... above), in place as torch's
for _name, _op, _dunder in (("pow_", F.pow, "__ipow__"), ("floor_divide_", F.floor_divide,
                            "__ifloordiv__"), ("remainder_", F.remainder, "__imod__"),
                            ("bitwise_and_", F.bitwise_and, "__iand__"),
                            ("bitwise_or_", F.bitwise_or, "__ior__"),
                            ("bitwise_xor_", F.bitwise_xor, "__ixor__")):
    setattr(Tensor, _name, _inplace_method(_name, _op))
    setattr(Tensor, _dunder, getattr(Tensor, _name))
Tensor.exp, Tensor.log, Tensor.sqrt, Tensor.abs = F.exp, F.log, F.sqrt, F.abs
Tensor.clamp, Tensor.pow, Tensor.matmul = F.clamp, F.pow, F.matmul
Tensor.sum, Tensor.mean, Tensor.max, Tensor.min = F.sum, F.mean, F.max, F.min
Tensor.argmax, Tensor.argmin, Tensor.var, Tensor.std = F.argmax, F.argmin, F.var, F.std
Tensor.softmax, Tensor.log_softmax = F.softmax, F.log_softmax
Tensor.clone, Tensor.unsqueeze, Tensor.squeeze = F.clone, F.unsqueeze, F.squeeze
Tensor.expand = F.expand
Tensor.expand_as = lambda self, other: F.expand(self, other.shape)
Tensor.reshape, Tensor.view, Tensor.permute = F.reshape, F.reshape, F.permute
Tensor.transpose, Tensor.flatten = F.transpose, F.flatten
Tensor.roll, Tensor.chunk, Tensor.split = F.roll, F.chunk, F.split
Tensor.flip, Tensor.repeat = F.flip, F.repeat
Tensor.T = property(lambda self: F.permute(self, tuple(range(self.ndim))[::-1]))
Tensor.float = lambda self: self if self.dtype == np.float32 else F.cast(self, np.float32)
Tensor.double = lambda self: self if self.dtype == np.float64 else F.cast(self, np.float64)
Tensor.astype = F.cast

# torch's other method spellings
Tensor.add = lambda self, other, alpha=1: F.add(self, _times(other, number("add", "alpha", alpha)))
Tensor.sub = lambda self, other, alpha=1: F.sub(self, _times(other, number("sub", "alpha", alpha)))
Tensor.mul, Tensor.div, Tensor.neg = F.mul, F.div, F.neg
Tensor.maximum, Tensor.minimum = F.maximum, F.minimum
Tensor.relu, Tensor.sigmoid, Tensor.tanh = F.relu, F.sigmoid, F.tanh
Tensor.tolist = lambda self: self.data.tolist()
Tensor.is_floating_point = lambda self: self.dtype.kind == "f"
Tensor.element_size = lambda self: self.dtype.itemsize
# integer and bool copies are data, outside the graph (torch: not differentiable)
Tensor.long = lambda self: Tensor(self.data.astype(np.int64))
Tensor.int = lambda self: Tensor(self.data.astype(np.int32))
Tensor.bool = lambda self: Tensor(self.data.astype(np.bool_))


def _t(self) -> Tensor:
    """torch's x.t(): the transpose of a 2-D tensor (a 0-D or 1-D one as it is)."""
    if self.ndim > 2:
        raise ValueError(f"t: expects a tensor with <= 2 dimensions, got {self.ndim} (use "
                         f"transpose(dim0, dim1) or permute)")
    return F.transpose(self, 0, 1) if self.ndim == 2 else self


def _half(self):
    raise ValueError("half: float16 is not supported: srgrad computes in float32 or float64 "
                     "(.float(), .double())")


def _type(self, dtype=None):
    """torch's x.type(): the dtype's name without an argument, else x.to(dtype)."""
    return str(self.dtype) if dtype is None else self.to(dtype)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """x.new_full(size, value) and the other new_* methods: x's dtype unless dtype= (torch's)."""
    from .creation import full
    return full(size, fill_value, dtype=self.dtype if dtype is None else dtype, device=device,
                requires_grad=requires_grad)


def _new_filled(value):
    def new(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
        size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        return _new_full(self, size, value, dtype=dtype, device=device,
                         requires_grad=requires_grad)
    return new


Tensor.t, Tensor.half, Tensor.type = _t, _half, _type
Tensor.new_full = _new_full
Tensor.new_zeros, Tensor.new_ones, Tensor.new_empty = _new_filled(0), _new_filled(1), _new_filled(0)
Tensor.new_tensor = lambda self, data, dtype=None, requires_grad=False: tensor(
    data, dtype=self.dtype if dtype is None else dtype, requires_grad=requires_grad)
