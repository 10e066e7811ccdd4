"""The tracer: run a model once on an example input and record every `Function.apply` it makes.

The autograd engine already sees the graph: each op enters it through `Function.apply`. While a
`Tracer` is installed (framework.autograd._tracer, a module-level hook that costs one `is not None`
check otherwise), every call is recorded as a `Call`: its Function class, its positional inputs, its
keyword options and its outputs. A positional input is one of

    Value  a Tensor produced by an earlier call (or the model input), known by identity;
    Param  a model parameter or buffer, known by the identity of its `.data` array (state_dict key);
    Const  anything else: a numpy array or Python number passed positionally (EDSR's mean shift,
           `x * res_scale`), or a Tensor made outside any Function; its value at trace time;
    None   an omitted optional input (conv2d without bias).

What is not a Function call is not recorded: Python control flow that depends on values or sizes
runs once, at the example's size, and its outcome is baked into the trace (docs/export.md).

The trace does not keep the model's activations alive: a Value computed from the input holds its
Tensor and array by weak reference, so the forward frees them as an eager one does (a fixed-size
export of EDSR at 512x512 held every intermediate, 9.9 GB). Once freed, such a Value keeps its shape
and dtype (`.array` is then a zero-strided stand-in of that shape: the converters read only shapes of
activations). The input, the outputs and every Value computed from parameters and constants alone
(a weight the model computes, which converters may read) are kept.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from .. import autograd
from ..autograd import no_grad
from ..tensor import Tensor

__all__ = ["Value", "Param", "Const", "Call", "Trace", "trace", "TraceError"]


class TraceError(ValueError):
    """The model cannot be traced (no Function produced its output, a nested trace, ...)."""


class Value:
    """A tensor computed in the traced graph: the model input or a Function's output. `kept`: its
    Tensor is held (the input, the outputs, a Value of constants alone); else it is weakly referenced
    and, once the model frees it, only its shape and dtype remain (the module docstring)."""

    __slots__ = ("name", "shape", "dtype", "_tensor", "_kept")

    def __init__(self, name: str, tensor: Tensor, kept: bool = True):
        self.name, self.shape, self.dtype = name, tuple(tensor.data.shape), tensor.data.dtype
        self._tensor = tensor if kept else weakref.ref(tensor)
        self._kept = kept

    def keep(self, tensor: Tensor) -> None:
        """Hold `tensor` (this Value's, alive) from now on."""
        self._tensor, self._kept = tensor, True

    @property
    def tensor(self) -> Tensor | None:
        """The Tensor, or None once the model freed it."""
        return self._tensor if self._kept else self._tensor()

    @property
    def released(self) -> bool:
        return self.tensor is None

    @property
    def array(self) -> np.ndarray:
        t = self.tensor
        if t is not None:
            return t.data
        return np.broadcast_to(np.zeros((), self.dtype), self.shape)  # read-only, no memory

    def __repr__(self):
        return f"Value({self.name}, {self.shape}, {self.dtype})"


class Param:
    """A parameter or buffer of the model, by its state_dict key."""

    __slots__ = ("key", "array")

    def __init__(self, key: str, array: np.ndarray):
        self.key, self.array = key, array

    def __repr__(self):
        return f"Param({self.key}, {self.array.shape})"


class Const:
    """A constant input: its value at trace time (copied, so a later in-place change cannot alter it)."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array

    def __repr__(self):
        return f"Const({self.array.shape}, {self.array.dtype})"


class Call:
    """One recorded `fn.apply(*args, **options)`: args are Value / Param / Const / None."""

    __slots__ = ("index", "fn", "args", "options", "outputs")

    def __init__(self, index, fn, args, options, outputs):
        self.index, self.fn, self.args, self.options, self.outputs = index, fn, args, options, outputs

    def describe(self, limit: int = 160) -> str:
        """`Name(option=value, ...)` for messages, long reprs shortened."""
        opts = ", ".join(f"{k}={_short(v)}" for k, v in self.options.items())
        text = f"{self.fn.__name__}({opts})"
        return text if len(text) <= limit else text[:limit - 3] + "..."

    def __repr__(self):
        return f"Call#{self.index} {self.describe()}"


def _short(v):
    if isinstance(v, np.ndarray):
        return f"array{v.shape}" if v.size > 6 else np.array2string(v, separator=",")
    if isinstance(v, (tuple, list)):
        inner = ", ".join(_short(x) for x in v)
        return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
    text = repr(v)
    if text.startswith("<"):  # an object without a repr of its own: its class
        return type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


class Trace:
    """The recorded graph: `input` (Value), `calls` in execution order, `outputs` (Values), and the
    parameter lookup `params` (id of a `.data` array -> state_dict key)."""

    def __init__(self, params: dict):
        self.params = params
        self.calls: list[Call] = []
        self.input: Value | None = None
        self.outputs: tuple = ()
        self._by_tensor: dict[int, Value] = {}
        self._by_array: dict[int, Value] = {}
        self._refs: list = []  # the weak references whose callbacks drop freed entries
        self._count = 0

    def add_value(self, tensor: Tensor, kept: bool = True) -> Value:
        """A new Value for `tensor`, found by the Tensor's identity and its array's while they live
        (a weakly kept Value's entries go when they are freed: a new object may take the id)."""
        v = Value(f"v{self._count}", tensor, kept)
        self._count += 1
        self._index(self._by_tensor, tensor, v, kept)
        self._index(self._by_array, tensor.data, v, kept)
        return v

    def _index(self, table: dict, obj, v: Value, kept: bool) -> None:
        key = id(obj)
        table[key] = v
        if not kept:
            def forget(_ref, table=table, key=key, v=v):
                if table.get(key) is v:
                    del table[key]
            self._refs.append(weakref.ref(obj, forget))

    def lookup(self, obj):
        """The Value, Param or Const for a positional argument (None stays None)."""
        if obj is None:
            return None
        if isinstance(obj, Tensor):
            v = self._by_tensor.get(id(obj)) or self._by_array.get(id(obj.data))
            return v if v is not None else self.resolve(obj.data)
        if isinstance(obj, np.ndarray):
            v = self._by_array.get(id(obj))
            return v if v is not None else self.resolve(obj)
        return Const(np.asarray(obj))

    def resolve(self, arr) -> Param | Const:
        """An array that is not a traced value: a Param when it is a parameter/buffer, else a Const
        (converters use this for arrays in options, e.g. batch_norm's running statistics)."""
        arr = np.asarray(arr)
        key = self.params.get(id(arr))
        return Param(key, arr) if key is not None else Const(np.array(arr, copy=True))

    def live_calls(self) -> list[Call]:
        """The calls some output depends on, in order (a result the model drops needs no converter)."""
        needed = {id(v) for v in self.outputs}
        live = []
        for call in reversed(self.calls):
            if any(id(o) in needed for o in call.outputs):
                live.append(call)
                needed.update(id(a) for a in call.args if isinstance(a, Value))
        return live[::-1]


class Tracer:
    """The hook installed in framework.autograd while tracing; records calls from its own thread only
    (another thread may be training meanwhile)."""

    def __init__(self, trace_: Trace):
        self.trace = trace_
        self.thread = threading.get_ident()

    def __call__(self, fn, args, options, outputs):
        if threading.get_ident() != self.thread:
            return
        t = self.trace
        refs = tuple(t.lookup(a) for a in args)
        # an output computed from the input is an activation: weakly kept; one of constants alone
        # (a weight the model computes) is kept, converters may read its values
        kept = not any(isinstance(r, Value) and not r._kept or r is t.input for r in refs)
        call = Call(len(t.calls), fn, refs, dict(options),
                    tuple(t.add_value(o, kept) for o in outputs))
        t.calls.append(call)


_lock = threading.Lock()


def _parameter_ids(model) -> dict:
    ids = {}
    for key, arr in model.state_dict().items():
        ids.setdefault(id(arr), key)  # a shared array keeps its first key, as named_parameters
    return ids


def _set_modes(model, modes):
    for m, mode in zip(model.modules(), modes):
        object.__setattr__(m, "training", mode)


def trace(model, example) -> Trace:
    """Run `model(example)` once in eval mode under no_grad and return its Trace. The model's
    train/eval flags are restored afterwards. example: a Tensor or array (e.g. (N, C, H, W))."""
    x = example if isinstance(example, Tensor) else Tensor(np.asarray(example))
    x = Tensor._wrap(x.data)  # a fresh leaf: nothing earlier shares its identity
    t = Trace(_parameter_ids(model) if hasattr(model, "state_dict") else {})
    t.input = t.add_value(x)
    modes = [m.training for m in model.modules()] if hasattr(model, "modules") else []
    if not _lock.acquire(blocking=False):
        raise TraceError("framework.onnx: another trace is running (traces do not nest)")
    try:
        if hasattr(model, "eval"):
            model.eval()
        autograd._tracer = Tracer(t)
        with no_grad():
            out = model(x)
    finally:
        autograd._tracer = None
        _lock.release()
        _set_modes(model, modes)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    values = []
    for i, o in enumerate(outs):
        v = t.lookup(o) if isinstance(o, Tensor) else None
        if not isinstance(v, Value):
            raise TraceError(
                f"framework.onnx: output {i} of {type(model).__name__} ({type(o).__name__}) was not "
                "computed by any Function from the input (a constant, or made outside the graph)")
        v.keep(o)  # the outputs are compared with ONNX Runtime's
        values.append(v)
    t.outputs = tuple(values)
    return t
