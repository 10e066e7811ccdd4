"""The converter registry and the graph builder every converter writes into.

A converter is ONE small function per Function class, `convert(g, call) -> name(s)`: it reads the
recorded call (`call.options`, input shapes via `g.shape(i)`), emits ONNX nodes with `g.node(...)`
and returns the ONNX name of each output (a str, or a tuple for a Function with several outputs;
None for an output nothing uses). Registering one for your own Function:

    from framework.onnx import register_converter

    @register_converter(ChannelScaleFn)
    def _(g, call):                       # x (N, C, H, W) * w (C,)
        w = g.node("Reshape", [g.input(1), g.const([-1, 1, 1])])
        return g.node("Mul", [g.input(0), w])

This module needs neither onnx nor onnxruntime until a Graph is built, so a module that registers a
converter imports fine without them.
"""
from __future__ import annotations

import hashlib

import numpy as np

from .._check import did_you_mean
from .trace import Call, Const, Param, Value

__all__ = ["ConversionError", "register_converter", "converter_for", "converters", "Graph"]


class ConversionError(ValueError):
    """A call cannot be exported: no converter, or options ONNX cannot express."""


_CONVERTERS: dict = {}


def register_converter(fn_cls, converter=None, *, replace: bool = False):
    """Register `converter(g, call)` for the Function class `fn_cls`; usable as a decorator
    (`@register_converter(MyFn)`). A class already registered is an error unless replace=True."""
    if not isinstance(fn_cls, type):
        raise TypeError(f"register_converter: expected a Function class, got {fn_cls!r}")

    def deco(fn):
        if not callable(fn):
            raise TypeError(f"register_converter({fn_cls.__name__}): the converter must be callable")
        old = _CONVERTERS.get(fn_cls)
        if old is not None and old is not fn and not replace:
            raise KeyError(f"register_converter: {fn_cls.__qualname__} already has a converter "
                           f"({old.__module__}.{old.__qualname__}); pass replace=True to override it")
        _CONVERTERS[fn_cls] = fn
        return fn
    return deco if converter is None else deco(converter)


def converters() -> dict:
    """Function class -> converter (a copy)."""
    return dict(_CONVERTERS)


def converter_for(fn_cls):
    """The converter of `fn_cls`, or ConversionError saying how to add one."""
    conv = _CONVERTERS.get(fn_cls)
    if conv is not None:
        return conv
    names = {f"{c.__module__}.{c.__qualname__}": c for c in _CONVERTERS}
    same = [n for n, c in names.items() if c.__name__ == fn_cls.__name__]
    if same:  # e.g. a module imported twice under two names: two distinct classes
        hint = f"; a converter is registered for another class of that name, {same[0]}"
    else:
        hint = did_you_mean(fn_cls.__name__, [c.__name__ for c in _CONVERTERS])
    raise ConversionError(
        f"no ONNX converter for Function {fn_cls.__module__}.{fn_cls.__qualname__}{hint}. Register "
        f"one: `@framework.onnx.register_converter({fn_cls.__name__})` on a function (g, call) that "
        f"emits its ONNX nodes (docs/export.md, 'Custom Functions')")


class Graph:
    """The ONNX graph of one trace, built call by call.

    Attributes read by converters: `opset` (int), `dtype` (the float dtype of activations:
    float32, or float16 with fp16=True), `call` (the Call being converted)."""

    def __init__(self, opset: int, dtype=np.float32, trace=None, peer=None):
        from onnx import helper  # noqa: F401  (fail here, with the caller's message, if missing)

        self.opset = int(opset)
        self.dtype = np.dtype(dtype)
        self.nodes: list = []  # (NodeProto, index of the call that emitted it)
        self.initializers: dict[str, np.ndarray] = {}
        self.param_names: set[str] = set()
        self.static_reasons: list[str] = []
        self.size_multiples: set[int] = set()  # size rules the export checks every residue of
        self.notes: list[str] = []
        self.call: Call | None = None
        self.trace = trace
        self.peer = peer  # the trace at the other size of the dynamic-axes check, if any
        self.used_values: set[int] = set()  # ids of the Values some live call or output reads
        self._names: dict[int, str] = {}
        self._taken: set[str] = set()
        self._consts: dict[tuple, str] = {}
        self._counter = 0
        self._dim_sources: dict = {}
        self.memo: dict = {}  # converters' shared subgraphs (e.g. one shift mask per grid)

    # -- names -------------------------------------------------------------------------------
    def reserve(self, name: str) -> str:
        if name in self._taken:
            raise ConversionError(f"framework.onnx: the name {name!r} is used twice (an input or "
                                  "output name equal to a state_dict key?)")
        self._taken.add(name)
        return name

    def fresh(self, hint: str) -> str:
        while True:
            self._counter += 1
            name = f"{hint}_{self._counter}"
            if name not in self._taken:
                self._taken.add(name)
                return name

    def bind(self, value: Value, name: str) -> None:
        """Give a traced Value its ONNX name."""
        self._names[id(value)] = name

    # -- inputs of the current call ----------------------------------------------------------
    def ref(self, r) -> str:
        """The ONNX name of a Value / Param / Const ("" for None: an omitted optional input)."""
        if r is None:
            return ""
        if isinstance(r, Value):
            try:
                return self._names[id(r)]
            except KeyError:
                raise ConversionError(f"framework.onnx: {r.name} is used before it is computed") \
                    from None
        if isinstance(r, Param):
            return self.param(r)
        if isinstance(r, Const):
            return self.const(r.array)
        raise TypeError(f"framework.onnx: cannot reference {r!r}")

    def input(self, i: int) -> str:
        """The ONNX name of positional argument i of the current call."""
        return self.ref(self.call.args[i])

    def shape(self, i: int) -> tuple:
        """The traced shape of positional argument i of the current call (() for None)."""
        a = self.call.args[i]
        return () if a is None else tuple(a.array.shape)

    def out_shape(self, i: int = 0) -> tuple:
        return tuple(self.call.outputs[i].array.shape)

    def peer_call(self):
        """The same call in the other trace of the dynamic-axes check (None if there is none): a
        converter with several equally valid choices picks one that holds at both sizes."""
        if self.peer is None or self.call is None or self.call.index >= len(self.peer.calls):
            return None
        other = self.peer.calls[self.call.index]
        return other if other.fn is self.call.fn else None

    def peer_shape(self, i: int):
        """The shape of positional argument i in the peer call (None without one)."""
        other = self.peer_call()
        if other is None or i >= len(other.args) or other.args[i] is None:
            return None
        return tuple(other.args[i].array.shape)

    def peer_out_shape(self, i: int = 0):
        other = self.peer_call()
        return None if other is None else tuple(other.outputs[i].array.shape)

    def dim_source(self, size: int, peer_size: int):
        """A 1-element int64 tensor holding a size the model took from the input's shape in Python
        (a Reshape's height, window_reverse's (h, w), a slice's end): the Shape entry of the latest
        computed value that has `size` on some axis in this trace and `peer_size` on the same axis
        in the peer trace (None if none has). The export's size check (export.check_sizes) runs
        the graph at sizes where a coincidence would show."""
        if self.peer is None or self.call is None:
            return None
        key = (int(size), int(peer_size))
        if key in self._dim_sources:
            return self._dim_sources[key]
        pairs = [(self.trace.input, self.peer.input)]
        for call in self.trace.calls[:self.call.index]:
            other = self.peer.calls[call.index] if call.index < len(self.peer.calls) else None
            if other is None or other.fn is not call.fn:
                break
            pairs += zip(call.outputs, other.outputs)
        found = None
        for v, pv in reversed(pairs):
            if id(v) not in self._names:
                continue
            a, b = v.array.shape, pv.array.shape
            axis = next((k for k in range(min(len(a), len(b))) if (a[k], b[k]) == key), None)
            if axis is not None and len(a) == len(b):
                found = self.node("Shape", [self._names[id(v)]], start=axis, end=axis + 1)
                break
        self._dim_sources[key] = found
        return found

    def used(self, i: int) -> bool:
        """Whether output i of the current call is read by anything (e.g. max_pool2d's indices)."""
        return id(self.call.outputs[i]) in self.used_values

    def param(self, p: Param) -> str:
        """A parameter/buffer as the initializer named by its state_dict key (float params in the
        graph's dtype)."""
        if p.key not in self.initializers:
            arr = np.asarray(p.array)
            if arr.dtype.kind == "f":
                arr = arr.astype(self.dtype)
            self._taken.add(p.key)
            self.initializers[p.key] = arr
            self.param_names.add(p.key)
        return p.key

    def array(self, arr) -> str:
        """An array found in a call's options: its parameter name when it is one, else a constant."""
        return self.ref(self.trace.resolve(arr)) if self.trace is not None else self.const(arr)

    def const(self, value, dtype=None) -> str:
        """A constant initializer (deduplicated). Float values take the graph's dtype unless `dtype`
        is given; ints become int64; bools stay bool."""
        arr = np.asarray(value)
        if dtype is not None:
            arr = arr.astype(dtype)
        elif arr.dtype.kind == "f":
            arr = arr.astype(self.dtype)
        elif arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
        arr = np.ascontiguousarray(arr) if arr.ndim else arr.copy()  # a scalar stays 0-d (Range)
        key = (arr.dtype.str, arr.shape, hashlib.sha1(arr.tobytes()).hexdigest())
        name = self._consts.get(key)
        if name is None:
            name = self.fresh("const")
            self.initializers[name] = arr
            self._consts[key] = name
        return name

    # -- nodes -------------------------------------------------------------------------------
    def node(self, op_type: str, inputs, outputs: int = 1, domain: str = "", **attrs):
        """Emit one node; returns its output name (or a tuple of `outputs` names). Attributes with
        value None are left out."""
        from onnx import helper

        outs = [self.fresh(op_type.lower()) for _ in range(outputs)]
        where = f"{self.call.fn.__name__}_{self.call.index}" if self.call is not None else "graph"
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = helper.make_node(op_type, list(inputs), outs, name=f"{where}/{outs[0]}",
                                domain=domain or None, **attrs)
        self.nodes.append((node, None if self.call is None else self.call.index))
        return outs[0] if outputs == 1 else tuple(outs)

    def rename(self, old: str, new: str) -> None:
        """Rename a node output everywhere (to give a graph output its public name)."""
        for node, _ in self.nodes:
            for field in (node.input, node.output):
                for i, name in enumerate(field):
                    if name == old:
                        field[i] = new

    def produced(self) -> set[str]:
        return {o for node, _ in self.nodes for o in node.output}

    def prune(self, keep) -> None:
        """Drop the nodes no kept name depends on, then the initializers no node reads."""
        need, kept = set(keep), []
        for node, origin in reversed(self.nodes):
            if any(o in need for o in node.output):
                kept.append((node, origin))
                need.update(i for i in node.input if i)
        self.nodes = kept[::-1]
        self.initializers = {k: v for k, v in self.initializers.items() if k in need}

    def require_static(self, reason: str) -> None:
        """Declare that the current call's nodes hold for the traced input size only."""
        self.static_reasons.append(f"{self.call.describe() if self.call else 'graph'}: {reason}")

    def size_rule(self, *multiples) -> None:
        """Declare that the current call's result depends on the input size modulo each multiple
        (a padding to a multiple, a window, a stride): a dynamic export is run in ONNX Runtime at
        sizes of every residue class of them all (export.check_sizes)."""
        self.size_multiples.update(int(m) for m in multiples if int(m) > 1)

    def note(self, text: str) -> None:
        """A remark for the export report (e.g. a weight-table fallback and why)."""
        self.notes.append(f"{self.call.fn.__name__}#{self.call.index}: {text}" if self.call else text)

    # -- shared emitters ---------------------------------------------------------------------
    def reduce(self, op: str, x: str, axes, keepdims: bool) -> str:
        """Reduce* over `axes`; the axes are an input from opset 18 (13 for ReduceSum), an
        attribute before."""
        axes = [int(a) for a in axes]
        as_input = self.opset >= (13 if op == "ReduceSum" else 18)
        if as_input:
            return self.node(op, [x, self.const(np.asarray(axes, np.int64))], keepdims=int(keepdims))
        return self.node(op, [x], axes=axes, keepdims=int(keepdims))

    def unsqueeze(self, x: str, axes) -> str:
        return self.node("Unsqueeze", [x, self.const(np.asarray(axes, np.int64))])

    def squeeze(self, x: str, axes) -> str:
        return self.node("Squeeze", [x, self.const(np.asarray(axes, np.int64))])

    def dim(self, x: str, axis: int) -> str:
        """Size `axis` (>= 0) of x as an int64 scalar: Shape's entry, squeezed (for Range and
        size arithmetic)."""
        return self.squeeze(self.node("Shape", [x], start=axis, end=axis + 1), [0])

    def slice(self, x: str, starts, ends, axes, steps=None) -> str:
        ins = [x, self.const(np.asarray(starts, np.int64)), self.const(np.asarray(ends, np.int64)),
               self.const(np.asarray(axes, np.int64))]
        if steps is not None:
            ins.append(self.const(np.asarray(steps, np.int64)))
        return self.node("Slice", ins)
