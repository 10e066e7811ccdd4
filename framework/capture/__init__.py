"""Captured steps and graphs (issue 39): a function of a few input Tensors whose ops do not depend on
the data (an SR model's forward and loss at a fixed input shape) is recorded while it runs eagerly,
twice, then replayed from flat lists without the autograd engine's per-op Python.

    capture = Capture(modules=[model, loss_module])       # their buffers must not change
    out = capture(lambda x, y: {"loss": F.l1_loss(model(x), y)}, x, y)
    # out["loss"] is a Tensor; every parameter's .grad holds the gradient of out["loss"]

`capture(fn, *inputs)` runs `fn(*inputs)` (a dict of output Tensors) and, for a training capture,
the backward of its first output, as `fn(*inputs)["..."].backward()` would (or of each output
named in `roots`, in turn, as one `.backward()` after another: GAN's discriminator on real, then
fake; as eagerly, their graphs cannot share an op: the first pass frees what it saved). Per input signature
(shapes, dtypes, grad mode, the modules' training flags, the autocast precision, `key`):
1. the first call runs eagerly and is recorded (_record.py);
2. the second runs eagerly, is recorded again and compared with the first: a different op, option
   or constant is data-dependent and that signature stays eager, with the reason (`reason`);
3. later calls replay the compiled graph (_graph.py) when its guards hold (every parameter that took
   a gradient still requires one, no frozen one was unfrozen), else it is recorded again.
Refused, with the reason: an op whose Function declares `uncapturable` (dropout's mask), an
in-place op on a tensor, a tensor made from the step's data outside the ops, a loss that reaches a
graph built before the call, a module buffer changed during the step other than by an op that
declares it its `state` (batch norm's running statistics and counter, spectral norm's power
iteration vectors), more than MAX_GRAPHS signatures. A graph whose state
arrays are no longer its modules' buffers (a buffer's .data replaced) is recorded again.

What a replay cannot see: Python in `fn` that changes with anything but the inputs' data after
the two recordings (an iteration counter, a global, a monkeypatched loss): the replay runs the ops
that were recorded. Such a step needs capture off (train.capture: off).

The replay calls the same Functions' forward and backward on the same arrays in the same order,
and adds gradients exactly as the eager engine does: the results are bit-identical to the eager
step's (tests/framework/test_capture.py checks every registered model and recipe).
"""
from __future__ import annotations

from .. import autograd, precision
from ._graph import Graph
from ._record import CaptureRefused, Recording, Symbolic, compare, same, state_arrays

__all__ = ["Capture", "CaptureRefused"]

# Signatures a Capture keeps graphs for: a training run has one (its patch size); a tiled inference
# up to ~9 (the inner tiles, the edges' and corners' batches; their packed weights are shared);
# more means the shapes change from call to call.
MAX_GRAPHS = {True: 4, False: 16}


class Capture:
    """Capture `fn` per input signature (see the module docstring). `modules`: whose buffers must
    stay unchanged by the step and whose training flags are part of the signature. `train`: also
    run the backward of the first output. `enabled=False`: always eager (`reason` says "off")."""

    def __init__(self, modules=(), train: bool = True, enabled: bool = True, roots=None):
        self.modules, self.train, self.enabled = list(modules), train, enabled
        self.roots = None if roots is None else tuple(roots)  # None: the first output
        self._states = {}  # signature -> Symbolic (recorded once), Graph, or the refusal's reason
        self._packed = {}  # the inference graphs' packed weights, shared between their shapes
        self.reason = None if enabled else "off"
        self.replays = 0

    def __call__(self, fn, *inputs, key=()) -> dict:
        sig = (key, tuple((t.shape, t.dtype.str) for t in inputs), autograd.is_grad_enabled(),
               tuple(m.training for m in self.modules), precision.current())
        state = self._states.get(sig)
        if isinstance(state, Graph):
            if state.valid() and all(b.data is a for b, a in state.owners):
                self.replays += 1
                return state.run([t.data for t in inputs])
            state = None
        if not self.enabled or isinstance(state, str) or autograd._recorder is not None:
            return self._eager(fn, inputs)
        if sig not in self._states and len(self._states) >= MAX_GRAPHS[self.train]:
            self.reason = (f"more than {MAX_GRAPHS[self.train]} input shapes: they change from "
                           f"call to call")
            return self._eager(fn, inputs)
        outputs, sym = self._recorded(fn, inputs)
        try:
            if isinstance(sym, str):
                raise CaptureRefused(sym)
            if state is None:
                self._states[sig] = sym
            else:
                graph = Graph(sym, compare(state, sym), self.train, self._packed)
                # the buffers whose arrays the graph updates in place: replaced arrays (a
                # load_state_dict that assigns .data) make it record again
                ids = {id(a) for a in state_arrays(sym.ops)}
                graph.owners = [(b, b.data) for m in self.modules for _, b in m.named_buffers()
                                if b is not None and id(b.data) in ids]
                self._states[sig] = graph
                self.reason = None
        except CaptureRefused as exc:
            self._states[sig] = self.reason = str(exc)
        except Exception as exc:  # noqa: BLE001  a bug here must not stop training: eager, said
            self._states[sig] = self.reason = f"the graph could not be built ({type(exc).__name__}: {exc})"
        return outputs

    @property
    def graphs(self) -> list:
        """The compiled graphs (one per signature that replays)."""
        return [s for s in self._states.values() if isinstance(s, Graph)]

    def status(self) -> str:
        """One phrase: what the last signatures did."""
        if self.graphs and self.reason is None:
            ops = max(len(g.forward) for g in self.graphs)
            return f"replayed from a captured graph ({ops} ops)"
        if self.reason is None:
            return "not recorded yet"
        return "eager (capture off)" if self.reason == "off" else f"eager: {self.reason}"

    # -- eager runs -----------------------------------------------------------------------------
    def _roots(self, outputs) -> list:
        """The outputs whose backward a training step runs, in order."""
        if not self.train:
            return []
        if self.roots is None:
            return [next(iter(outputs.values()))]
        missing = [r for r in self.roots if r not in outputs]
        if missing:
            raise KeyError(f"Capture: roots {missing} are not outputs of the step ({list(outputs)})")
        return [outputs[r] for r in self.roots]

    def _eager(self, fn, inputs):
        outputs = fn(*inputs)
        for root in self._roots(outputs):
            root.backward()
        return outputs

    def _recorded(self, fn, inputs):
        """fn(*inputs) (and its backward) eagerly, recorded: (outputs, Symbolic or the reason)."""
        before = self._buffers()
        rec = Recording(inputs)
        prev, autograd._recorder = autograd._recorder, rec
        try:
            outputs = fn(*inputs)
        finally:
            autograd._recorder = prev
        roots = self._roots(outputs)
        try:
            sym = Symbolic(rec, outputs, roots)
        except CaptureRefused as exc:
            sym = str(exc)
        except Exception as exc:  # noqa: BLE001  as in __call__
            sym = f"the step could not be recorded ({type(exc).__name__}: {exc})"
        for root in roots:
            root.backward()
        # a buffer its ops update as their `state` (batch norm's statistics) may change: the
        # replay repeats the update; any other change is Python outside the ops
        updated = set() if isinstance(sym, str) else {id(a) for a in state_arrays(sym.ops)}
        changed = next((name for name, arr in self._buffers().items()
                        if not same(arr, before.get(name))
                        and id(self._live(name)) not in updated), None)
        if changed is not None and not isinstance(sym, str):
            sym = (f"the buffer {changed} changes during the step outside the ops: the step is "
                   f"not a function of its inputs alone")
        del rec
        return outputs, sym

    def _live(self, name):
        """The array of the buffer `_buffers` calls `name` ("<module index>.<buffer name>")."""
        i, key = name.split(".", 1)
        return dict(self.modules[int(i)].named_buffers())[key].data

    def _buffers(self) -> dict:
        return {f"{i}.{name}": b.data.copy() for i, m in enumerate(self.modules)
                for name, b in m.named_buffers() if b is not None}
