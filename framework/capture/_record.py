"""Recording one eager run of a function, op by op, in a form two runs can be compared in.

A `Recording` is installed as framework.autograd._recorder while the function runs eagerly: every
Function call reports its class, arguments, options, `needs_input_grad` and output Tensors, and
every in-place op on a Tensor says its name (a captured graph cannot replay a write into memory
made outside an op). `symbolic` then names each Tensor argument by where it comes from:

    ("in", j)          the function's j-th input
    ("op", k, i)       output i of recorded op k (also a detach() of it: the same array)
    ("leaf", t)        a leaf that requires grad (a parameter): its .data is read at every replay,
                       its gradient goes to its .grad
    ("const", t)       any other Tensor: a buffer, a frozen parameter, a constant made in forward
    ("raw", value)     a positional argument that is not a Tensor

Two recordings of the same step on different data must agree op by op (`compare`): same classes,
options, constants (a constant Tensor that is a different object in the second run must hold the
same values: it is then folded), same outputs. What they do not agree on is data-dependent, and the
step stays eager with the reason.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from ..tensor import Tensor


class CaptureRefused(Exception):
    """Why a function cannot be captured (its message is the reason the caller reports)."""


class Recording:
    """The autograd hook while a function runs eagerly (see the module docstring). Each op's
    arguments are named when it runs, so that the recording holds no op's output: an inference
    step's intermediates are freed as the eager run frees them (holding them all took 2.5 GB
    where the run needs 0.3, SRVGGNetCompact at 512 x 512). What the tables key by id() is checked
    through a weak reference, as a freed object's id may be reused."""

    def __init__(self, inputs):
        self.inputs = tuple(inputs)
        self.ops = []  # (cls, refs, kwargs, needs_input_grad, output shapes and dtypes)
        self.nodes = []  # per op: its graph node (training), or None
        self.grad_inputs = []  # per op: [(position, ref, dtype)] of its node's inputs
        self.problem = None
        # the hook is global: ops of other threads (the batch prefetcher's degradations) are not
        # the step's
        self.thread = threading.get_ident()
        self._where, self._arrays, self._owned = {}, {}, {}
        for j, t in enumerate(self.inputs):
            self._name(t, ("in", j))
            _put(self._owned, _root(t.data), True)

    def __call__(self, cls, args, kwargs, ctx, tensors):
        if threading.get_ident() != self.thread:
            return
        if cls.uncapturable and self.problem is None:
            self.problem = f"{cls.__name__}: {cls.uncapturable}"
        if self.problem is not None:
            return
        k = len(self.ops)
        try:
            refs = tuple(self._ref(a, cls) if isinstance(a, Tensor) else ("raw", a) for a in args)
        except CaptureRefused as exc:
            self.problem = str(exc)
            return
        # the memory the step owns: the inputs' and every op output's that is not a view of an
        # argument (a constant in it was made from the step's data outside the ops)
        borrowed = {id(_root(a.data)) for a in args if isinstance(a, Tensor)}
        for i, t in enumerate(tensors):
            self._name(t, ("op", k, i))
            if id(_root(t.data)) not in borrowed:
                _put(self._owned, _root(t.data), True)
        node = next((t._node for t in tensors if t._node is not None), None)
        grads = []
        if node is not None:
            for i, t in enumerate(node.inputs):
                if t is not None:
                    if refs[i][0] == "in":
                        self.problem = "an input of the step requires grad"
                    grads.append((i, refs[i], t.dtype))
        self.ops.append((cls, refs, kwargs, ctx.needs_input_grad,
                         tuple((t.shape, t.dtype) for t in tensors)))
        self.nodes.append(node)
        self.grad_inputs.append(grads)

    def inplace(self, name):
        if self.problem is None and threading.get_ident() == self.thread:
            self.problem = f"an in-place op ({name}) writes into a tensor during the step"

    def _name(self, t, ref):
        _put(self._where, t, ref)
        _put(self._arrays, t.data, ref)  # a detach() of it: the same array

    def ref_of(self, t):
        """The ref of a Tensor the recorded ops made or took as input (or of its array), or None."""
        return _get(self._where, t) or _get(self._arrays, t.data)

    def _ref(self, a, cls):
        ref = self.ref_of(a)
        if ref is not None:
            return ref
        if a._node is not None:
            raise CaptureRefused(f"an input of {cls.__name__} carries a graph built before the step "
                                 f"began")
        if _get(self._owned, _root(a.data)):
            raise CaptureRefused(f"an input of {cls.__name__} is a view of the step's data made "
                                 f"outside the ops")
        return ("leaf", a) if a._requires_grad else ("const", a)


def _put(table, obj, value):
    """table[id(obj)] = value, with a weak reference to obj (a strong one where obj takes none)."""
    try:
        holder = weakref.ref(obj)
    except TypeError:
        holder = (lambda o: lambda: o)(obj)
    table[id(obj)] = (holder, value)


def _get(table, obj):
    """table's value for obj itself (not for a freed object whose id it took), or None."""
    hit = table.get(id(obj))
    return hit[1] if hit is not None and hit[0]() is obj else None


class Symbolic:
    """A recording with every argument named (`ops`: (cls, refs, kwargs, needs, output shapes and
    dtypes)), the refs of the function's outputs by name, per root (the Tensors whose backward the
    step runs, in turn) its backward order (`orders`: op indices) and ref (`roots`), and per op its
    node's inputs that take a gradient: [(position, ref)]."""

    def __init__(self, rec: Recording, outputs: dict, roots=()):
        if rec.problem:
            raise CaptureRefused(rec.problem)
        self.n_inputs = len(rec.inputs)
        self.input_meta = [(t.shape, t.dtype) for t in rec.inputs]
        self.ops, self.grad_inputs = rec.ops, rec.grad_inputs
        index = {id(node): k for k, node in enumerate(rec.nodes) if node is not None}
        self.outputs = {}
        for name, t in outputs.items():
            ref = rec.ref_of(t) if isinstance(t, Tensor) else None
            if ref is None:
                raise CaptureRefused(f"output {name!r} is not made by an op of the step")
            self.outputs[name] = ref
        from ..autograd import _topological
        self.orders, self.roots = [], []
        for root in roots:
            if root._node is None:
                raise CaptureRefused("the loss does not depend on anything that requires grad")
            order = []
            for node in _topological([root._node]):  # the nodes are alive: rec.nodes holds them
                if id(node) not in index:
                    raise CaptureRefused("the loss depends on a graph built before the step began")
                order.append(index[id(node)])
            self.orders.append(order)
            self.roots.append(rec.ref_of(root))


def _root(arr):
    """The array that owns `arr`'s memory (arr itself when it is not a view)."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def compare(a: Symbolic, b: Symbolic):
    """Raise CaptureRefused unless two recordings of a step are the same graph; returns the
    constants that differ in object but not in value (index pairs (op, position)), to be folded."""
    if len(a.ops) != len(b.ops):
        raise CaptureRefused(f"the step ran {len(a.ops)} ops once and {len(b.ops)} the next time "
                             f"(data-dependent control flow)")
    folded = set()
    for k, (x, y) in enumerate(zip(a.ops, b.ops)):
        (cx, rx, kx, nx, mx), (cy, ry, ky, ny, my) = x, y
        what = f"op {k} ({cy.__name__})"
        if cx is not cy or nx != ny or mx != my or len(rx) != len(ry):
            raise CaptureRefused(f"{what} differs between two runs of the step (data-dependent "
                                 f"control flow)")
        if not same({k: v for k, v in kx.items() if k not in cx.state},
                    {k: v for k, v in ky.items() if k not in cx.state}):
            raise CaptureRefused(f"{what}: an option differs between two runs of the step "
                                 f"(computed from the data, or drawn at random, outside the ops)")
        if any(not same_objects(kx.get(s), ky.get(s)) for s in cx.state):
            raise CaptureRefused(f"{what}: the arrays it updates in place are other arrays in two "
                                 f"runs of the step")
        for i, (p, q) in enumerate(zip(rx, ry)):
            if p[0] != q[0]:
                raise CaptureRefused(f"{what}: argument {i} comes from different places in two runs")
            if p[0] in ("in", "op"):
                if p != q:
                    raise CaptureRefused(f"{what}: argument {i} comes from different ops in two runs")
            elif p[0] == "leaf":
                if p[1] is not q[1]:
                    raise CaptureRefused(f"{what}: argument {i} is a new tensor that requires grad "
                                         f"each step")
            elif p[0] == "const":
                if p[1] is not q[1]:
                    if not same(p[1].data, q[1].data):
                        raise CaptureRefused(f"{what}: argument {i}, a tensor made outside the ops, "
                                             f"differs between two runs of the step")
                    folded.add((k, i))
            elif not same(p[1], q[1]):
                raise CaptureRefused(f"{what}: argument {i} differs between two runs of the step")
    if a.outputs != b.outputs or a.orders != b.orders:
        raise CaptureRefused("the step's outputs or its backward differ between two runs")
    return folded


def state_arrays(ops) -> list:
    """The arrays recorded ops update in place (their Function's `state` options), in op order."""
    found = []
    for op in ops:
        cls, kwargs = op[0], op[2]
        for name in cls.state:
            value = kwargs.get(name)
            found += [a for a in (value if isinstance(value, (tuple, list)) else (value,))
                      if isinstance(a, np.ndarray)]
    return found


def same_objects(a, b) -> bool:
    """The same arrays (or None), item by item in tuples: a state option's identity."""
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and \
            all(same_objects(x, y) for x, y in zip(a, b))
    return a is b


def same(a, b) -> bool:
    """Value equality for options: arrays by shape, dtype and values (NaN equal to NaN), sequences
    and dicts item by item, an object without its own == by its public attributes, anything else
    by `is` or `==`."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return a is b
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if a is b:
        return True
    if type(a) is type(b) and type(a).__eq__ is object.__eq__ and hasattr(a, "__dict__"):
        # a plain object (a resampling table): its public attributes (caches start with _)
        pub = [k for k in vars(a) if not k.startswith("_")]
        return pub == [k for k in vars(b) if not k.startswith("_")] and \
            all(same(getattr(a, k), getattr(b, k)) for k in pub)
    try:
        return bool(a == b)
    except Exception:  # an object without a meaningful ==: only itself is the same
        return False
