"""The graph: `Function` (the one way an op enters it), its `Context`, the iterative backward engine
and `no_grad`.

A Function's `forward(ctx, *args, **options)` receives numpy arrays in place of Tensors and returns a
numpy array (or a tuple of them); `backward(ctx, *grads)` receives one numpy gradient per output and
returns one gradient (or None) per positional argument of forward. This is PyTorch's extension API.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

_state = threading.local()

# framework.onnx's tracer while it records a model (framework/onnx/trace.py), else None: the one
# check every Function.apply pays.
_tracer = None
# framework.capture's recorder while it records a step (framework/capture.py), else None: called
# with every Function call (cls, args, kwargs, ctx, output Tensors), and told of in-place ops.
_recorder = None


def is_grad_enabled() -> bool:
    return getattr(_state, "enabled", True)


def set_grad_enabled(mode: bool) -> None:
    _state.enabled = bool(mode)


class no_grad(contextlib.ContextDecorator):
    """Disable graph recording: `with no_grad(): ...` or `@no_grad()` on a function."""

    def __enter__(self):
        self._prev = is_grad_enabled()
        set_grad_enabled(False)
        return self

    def __exit__(self, *exc):
        set_grad_enabled(self._prev)
        return False


class enable_grad(no_grad):
    """Re-enable graph recording inside a `no_grad` block."""

    def __enter__(self):
        self._prev = is_grad_enabled()
        set_grad_enabled(True)
        return self


class Context:
    """What forward leaves for backward: saved arrays, any attributes it sets, `needs_input_grad`."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()

    def save_for_backward(self, *arrays):
        self._saved = arrays

    @property
    def saved_tensors(self):
        return self._saved


class Node:
    """One recorded Function call: its class, context, inputs (Tensor or None per positional arg),
    the shapes/dtypes of its outputs (to zero-fill the gradient of an unused output) and, per Tensor
    input, (position, version counter, version at the call): backward refuses to run on an input
    that an in-place op has changed since."""

    __slots__ = ("fn", "ctx", "inputs", "out_meta", "versions", "__weakref__")

    def __init__(self, fn, ctx, inputs, out_meta, versions=()):
        self.fn, self.ctx, self.inputs, self.out_meta = fn, ctx, inputs, out_meta
        self.versions = versions

    def check_versions(self):
        for i, counter, seen in self.versions:
            if counter[0] != seen:
                t = self.inputs[i]
                what = f" (a {t.dtype} tensor of shape {t.shape})" if t is not None else ""
                raise RuntimeError(
                    f"{self.fn.__name__}.backward: one of the variables needed for gradient "
                    f"computation has been modified by an inplace operation: input {i} of "
                    f"{self.fn.__name__}{what} is at version {counter[0]}; expected version {seen} "
                    f"instead. Make the in-place change after backward(), or use the out-of-place "
                    f"op (y = y * 2 rather than y.mul_(2)).")


class Function:
    """Base class of every differentiable op. Subclass it with static `forward` and `backward`, then
    call `MyFn.apply(*args, **options)`; Tensor positional arguments are the differentiable inputs."""

    # None, or why a captured step or graph (framework/capture.py) cannot replay this op by calling
    # its forward and backward again with the recorded options (e.g. a random mask drawn per step
    # outside forward): the step then runs eagerly and says this reason.
    uncapturable: str | None = None
    # the keyword options that are arrays this op updates in place (batch norm's running
    # statistics and its counter): a captured graph passes the same arrays at every replay, so it
    # repeats the update; they are compared between two recordings by identity, not by value
    state: tuple = ()

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        Tensor = _tensor_class()
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        record = is_grad_enabled() and any(needs)
        ctx = Context(needs)
        raw = tuple(a.data if isinstance(a, Tensor) else a for a in args)
        out = cls.forward(ctx, *raw, **kwargs)
        multi = isinstance(out, tuple)
        outs = out if multi else (out,)
        tensors = tuple(Tensor._wrap(np.asarray(o)) for o in outs)
        for t in tensors:
            if t.data.base is not None:  # a view (or the very array) of an input shares its version
                _link_view(t, args, Tensor)
        if record:
            inputs, versions = [], []
            for i, a in enumerate(args):
                if isinstance(a, Tensor):
                    c = a._vc if a._vc is not None else a._counter()
                    versions.append((i, c, c[0]))
                    inputs.append(a if a._requires_grad else None)
                else:
                    inputs.append(None)
            node = Node(cls, ctx, inputs, tuple((t.shape, t.dtype) for t in tensors), versions)
            for i, t in enumerate(tensors):
                if t.dtype.kind == "f":  # floating (np.issubdtype was a per-op cost: docs/benchmarks.md)
                    t.requires_grad = True
                    t._node, t._index = node, i
        if _tracer is not None:
            _tracer(cls, args, kwargs, tensors)
        if _recorder is not None:
            _recorder(cls, args, kwargs, ctx, tensors)
        return tensors if multi else tensors[0]


_TENSOR = []


def _tensor_class():
    """framework.tensor.Tensor, imported once (tensor.py imports this module; a per-call import
    statement is a cost on every op: docs/benchmarks-history.md, "Per-op overhead")."""
    if not _TENSOR:
        from .tensor import Tensor
        _TENSOR.append(Tensor)
    return _TENSOR[0]


def _link_view(t, args, Tensor):
    """`t` (a Function output whose array is a view) shares the version counter of the input whose
    memory it may overlap (np.may_share_memory compares bounds only: cheap, and never misses), and
    remembers that input's base, so an in-place op on either is seen by the other's graph."""
    for a in args:
        if isinstance(a, Tensor) and np.may_share_memory(t.data, a.data):
            t._vc = a._counter()
            t._base = a if a._base is None else a._base
            return


def _topological(roots):
    """Nodes reachable from `roots`, each after every node that consumes it (iterative DFS, so a
    chain of any length works without touching Python's recursion limit)."""
    order, seen, stack = [], set(), [(r, False) for r in reversed(roots)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for t in node.inputs:
            if t is not None and t._node is not None and id(t._node) not in seen:
                stack.append((t._node, False))
    order.reverse()
    return order


def _accumulate(slot, g):
    return g if slot is None else slot + g


def run_backward(tensor, grad: np.ndarray, retain_graph: bool = False) -> None:
    """Propagate `grad` (the gradient of some scalar with respect to `tensor`) to every leaf that
    requires grad, adding into `leaf.grad` as PyTorch does."""
    _propagate([(tensor, grad)], retain_graph)


def _propagate(roots, retain_graph, wanted=None) -> dict:
    """Backward from (tensor, gradient) pairs. wanted None: add into every reached leaf's .grad.
    wanted {id: tensor}: touch no .grad; return {id: gradient} for those tensors (leaves or
    graph outputs: an output's gradient is complete when its node comes up in the order)."""
    got = {}

    def leaf(t, g):
        if wanted is None:
            _to_leaf(t, g)
        elif id(t) in wanted:
            got[id(t)] = np.array(g, copy=True) if id(t) not in got else got[id(t)] + g

    pending, nodes = {}, []
    for t, g in roots:
        if t._node is None:
            leaf(t, g)
            continue
        slots = pending.setdefault(id(t._node), [None] * len(t._node.out_meta))
        slots[t._index] = _accumulate(slots[t._index], g)
        nodes.append(t._node)
    outputs = {(id(t._node), t._index): i for i, t in (wanted or {}).items() if t._node is not None}
    for node in _topological(nodes):
        gouts = pending.pop(id(node), None)
        if gouts is None or all(g is None for g in gouts):
            continue
        for i, g in enumerate(gouts):
            if outputs and (id(node), i) in outputs and g is not None:
                got[outputs[(id(node), i)]] = g
        if node.ctx is None:
            raise RuntimeError(
                f"{node.fn.__name__}: trying to backward through the graph a second time; its saved "
                "arrays were freed. Pass retain_graph=True to the first backward call.")
        node.check_versions()
        gouts = [np.zeros(s, d) if g is None else g for g, (s, d) in zip(gouts, node.out_meta)]
        gins = node.fn.backward(node.ctx, *gouts)
        if not isinstance(gins, tuple):
            gins = (gins,)
        if len(gins) != len(node.inputs):
            raise RuntimeError(
                f"{node.fn.__name__}.backward returned {len(gins)} gradients, expected "
                f"{len(node.inputs)} (one per positional argument of forward)")
        for i, (t, g) in enumerate(zip(node.inputs, gins)):
            if t is None or g is None:
                continue
            g = np.asarray(g)
            if g.shape != t.shape:
                raise RuntimeError(
                    f"{node.fn.__name__}.backward returned a gradient of shape {g.shape} for input {i} "
                    f"of shape {t.shape}")
            if g.dtype != t.dtype:
                g = g.astype(t.dtype)
            if t._node is None:
                leaf(t, g)
            else:
                slots = pending.setdefault(id(t._node), [None] * len(t._node.out_meta))
                slots[t._index] = _accumulate(slots[t._index], g)
        if not retain_graph:
            node.ctx = None
    return got


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False,
         only_inputs: bool = True, allow_unused=None, is_grads_batched: bool = False,
         materialize_grads: bool = False):
    """torch.autograd.grad: the gradients of `outputs` (a Tensor or a sequence) with respect to
    `inputs` (likewise), as a tuple of Tensors, without touching any .grad. grad_outputs: one
    per output (None: 1 for a one-element output). retain_graph defaults to create_graph. An input
    the outputs do not depend on is an error unless allow_unused (then None) or
    materialize_grads (then zeros). create_graph=True is refused: srgrad's backward functions
    compute with numpy, outside the graph, so there are no higher-order gradients."""
    Tensor = _tensor_class()
    if create_graph:
        raise NotImplementedError("autograd.grad: create_graph=True (higher-order gradients) is "
                                  "not supported in srgrad: backward functions compute with numpy, "
                                  "outside the graph")
    if is_grads_batched:
        raise NotImplementedError("autograd.grad: is_grads_batched=True is not supported")
    outs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    ins = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    gouts = (grad_outputs,) if grad_outputs is None or isinstance(grad_outputs, Tensor) else \
        tuple(grad_outputs)
    gouts = gouts * len(outs) if grad_outputs is None else gouts
    if len(gouts) != len(outs):
        raise ValueError(f"autograd.grad: {len(gouts)} grad_outputs for {len(outs)} outputs")
    roots = []
    for i, (o, g) in enumerate(zip(outs, gouts)):
        if not (isinstance(o, Tensor) and o.requires_grad):
            raise RuntimeError(f"autograd.grad: element {i} of outputs does not require grad and "
                               f"does not have a graph")
        if g is None:
            if o.data.size != 1:
                raise RuntimeError(f"autograd.grad: grad can be implicitly created only for "
                                   f"one-element outputs; output {i} has shape {o.shape}: pass "
                                   f"grad_outputs")
            g = np.ones(o.shape, o.dtype)
        g = np.asarray(g.data if isinstance(g, Tensor) else g, o.dtype)
        if g.shape != o.shape:
            raise RuntimeError(f"autograd.grad: grad_outputs[{i}] has shape {g.shape}, output {i} "
                               f"has shape {o.shape}")
        roots.append((o, g))
    for i, t in enumerate(ins):
        if not (isinstance(t, Tensor) and t.requires_grad):
            raise RuntimeError(f"autograd.grad: inputs[{i}] does not require grad")
    keep = create_graph if retain_graph is None else retain_graph
    got = _propagate(roots, keep, {id(t): t for t in ins})
    result = []
    for t in ins:
        g = got.get(id(t))
        if g is None:
            if materialize_grads:
                g = np.zeros(t.shape, t.dtype)
            elif not allow_unused:
                raise RuntimeError("autograd.grad: one of the differentiated Tensors appears to "
                                   "not have been used in the graph. Set allow_unused=True if "
                                   "this is the desired behavior.")
        result.append(None if g is None else Tensor._wrap(np.asarray(g, t.dtype)))
    return tuple(result)


def _to_leaf(t, g):
    from .tensor import Tensor

    if not t.requires_grad:
        return
    if t.grad is None:
        # Copy: a backward may hand back an array it shares with another input's gradient.
        t.grad = Tensor._wrap(np.array(g, dtype=t.dtype, copy=True))
    else:
        t.grad.data += g
