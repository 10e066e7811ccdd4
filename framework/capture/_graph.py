"""A compiled graph: a recorded step as flat lists, replayed without the autograd engine.

The forward is a list of (a Function's forward, argument sources, options, needs_input_grad, first
output slot): replay calls each `forward(ctx, *arrays, **options)` on arrays from a list of slots (no
Tensor, no graph node, no version counter per op) and frees a slot after its last reader. The
backward is the eager engine's topological order, fixed at compile time: each entry calls
`backward(ctx, *grads)` and adds the input gradients into per-output slots exactly as
autograd.run_backward does (the first gradient kept as it is, each later one added by `slot + g`
into a buffer allocated once, on every thread: elementwise.add_arrays, the same sums; a leaf's first
gradient copied into its own buffer, allocated once, later ones added in place): same calls, same
operands, same order, so the same bits as the eager step. The kernels compute what they computed
eagerly; what is gone is the engine's Python around them and the allocations of the gradient sums
and the leaves' gradients.
"""
from __future__ import annotations

import numpy as np

from ..autograd import Context
from ..functional.elementwise import add_arrays
from ..tensor import Tensor
# argument sources: a slot, a live Tensor (its .data read at every call), a fixed value (they are
# the lowering's data: _lower.py folds fixed arguments)
from ._kinds import _FIXED, _LIVE, _SLOT
from ._lower import fold


class Graph:
    """`sym` (a _record.Symbolic of the step, recorded twice and compared) compiled; `folded`:
    constants to keep as values (their Tensor was made afresh in each run). `train`: with the
    backward from each of `sym.roots` in turn; else an inference graph, whose folded weights and packed
    layouts go to (and come from) the dict `packed`, shared by a Capture's graphs."""

    def __init__(self, sym, folded=(), train=True, packed=None):
        first = {}
        self.n_inputs = slot = sym.n_inputs
        for k, op in enumerate(sym.ops):
            first[k] = slot
            slot += len(op[4])
        self.n_slots = slot
        self.meta = [op[4] for op in sym.ops]

        def slot_of(ref):
            return ref[1] if ref[0] == "in" else first[ref[1]] + ref[2]

        self.leaves, leaf_index, self.lives = [], {}, []
        self.forward, self.classes = [], [op[0] for op in sym.ops]
        self.slot_meta = [*sym.input_meta, *(m for op in sym.ops for m in op[4])]
        for k, (cls, refs, kwargs, needs, meta) in enumerate(sym.ops):
            spec = []
            for i, ref in enumerate(refs):
                if ref[0] in ("in", "op"):
                    spec.append((_SLOT, slot_of(ref)))
                elif ref[0] == "leaf":
                    leaf_index.setdefault(id(ref[1]), len(self.leaves))
                    if leaf_index[id(ref[1])] == len(self.leaves):
                        self.leaves.append(ref[1])
                    spec.append((_LIVE, ref[1]))
                elif ref[0] == "const" and (k, i) in folded:
                    spec.append((_FIXED, ref[1].data))
                elif ref[0] == "const":
                    self.lives.append(ref[1])
                    spec.append((_LIVE, ref[1]))
                else:
                    spec.append((_FIXED, ref[1]))
            self.forward.append((cls.forward, tuple(spec), kwargs, needs, first[k]))
        self.outputs = {name: slot_of(ref) for name, ref in sym.outputs.items()}
        self.owners = []  # (buffer Tensor, the array its ops update in place): set by Capture
        self.backward = None
        if train:
            self._compile_backward(sym, leaf_index)
        else:  # the weights are constants from here on
            fold(self, {} if packed is None else packed)
        self._plan_frees()

    def _plan_frees(self):
        """frees[k]: the slots op k reads last (not outputs), emptied after it: an intermediate
        lives from its op to its last reader."""
        last = {}
        for k, (_, spec, _, _, _) in enumerate(self.forward):
            for kind, v in spec:
                if kind == _SLOT:
                    last[v] = k
        keep = set(self.outputs.values())
        self.frees = [[] for _ in self.forward]
        for s, k in last.items():
            if s not in keep:
                self.frees[k].append(s)

    def _compile_backward(self, sym, leaf_index):
        """Per root, a pass: per op in backward order (op, output shapes/dtypes, [(input position,
        target, dtype)]) with target ("op", k, i) or ("leaf", j), the sum buffers of outputs with
        several gradient contributions, the root (op, output) and its shape and dtype; and the
        leaves' gradient buffers (a later pass adds into them, as a second .backward() does)."""
        self.backward = []
        for order, root in zip(sym.orders, sym.roots):
            contributions, entries = {}, []
            for k in order:
                targets = []
                for i, ref, dtype in sym.grad_inputs[k]:
                    if ref[0] == "op":
                        targets.append((i, (ref[1], ref[2]), dtype))
                        contributions[ref[1], ref[2]] = contributions.get((ref[1], ref[2]), 0) + 1
                    elif ref[0] == "leaf":
                        targets.append((i, leaf_index[id(ref[1])], dtype))
                entries.append((k, sym.ops[k][4], targets))
            sums = {key: np.empty(*sym.ops[key[0]][4][key[1]])
                    for key, n in contributions.items() if n > 1}
            self.backward.append((entries, sums, (root[1], root[2]), sym.ops[root[1]][4][root[2]]))
        self.grads = [np.empty(t.shape, t.dtype) for t in self.leaves]
        self.saved = {k for order in sym.orders for k in order}

    def valid(self) -> bool:
        """Whether the graph still describes the step: every leaf still requires grad and no
        constant Tensor has started to (a frozen network unfrozen, or the reverse)."""
        return all(t._requires_grad for t in self.leaves) and \
            not any(t._requires_grad for t in self.lives)

    def run(self, arrays, backward=True) -> dict:
        """Replay on input arrays: {output name: Tensor}; with the backward (a training graph and
        `backward`), the leaves' .grad updated as Tensor.backward on the first output would."""
        vals = [None] * self.n_slots
        vals[:len(arrays)] = arrays
        train = backward and self.backward is not None
        ctxs = [None] * len(self.forward) if train else None
        for k, (forward, spec, kwargs, needs, first) in enumerate(self.forward):
            raw = [v if kind == _FIXED else vals[v] if kind == _SLOT else v.data for kind, v in spec]
            ctx = Context(needs)
            out = forward(ctx, *raw, **kwargs)
            if isinstance(out, tuple):
                for i, o in enumerate(out):
                    vals[first + i] = np.asarray(o)
            else:
                vals[first] = np.asarray(out)
            if train and k in self.saved:  # what the backward reads; the rest is freed now
                ctxs[k] = ctx
            for s in self.frees[k]:
                vals[s] = None
        outputs = {name: Tensor._wrap(vals[s] if s >= 0 else self.constants[s])
                   for name, s in self.outputs.items()}
        if train:
            del vals
            for entries, sums, root, root_meta in self.backward:
                self._backward(ctxs, entries, sums, root, root_meta)
        return outputs

    def _backward(self, ctxs, entries, sums, root, root_meta):
        pending = [None] * len(self.forward)
        k0, i0 = root
        shape, dtype = root_meta
        pending[k0] = [None] * len(self.meta[k0])
        pending[k0][i0] = np.ones(shape, dtype)
        for k, meta, targets in entries:
            gouts = pending[k]
            pending[k] = None
            if gouts is None or all(g is None for g in gouts):
                continue
            gouts = [np.zeros(s, d) if g is None else g for g, (s, d) in zip(gouts, meta)]
            ctx, ctxs[k] = ctxs[k], None
            gins = self.classes[k].backward(ctx, *gouts)
            if not isinstance(gins, tuple):
                gins = (gins,)
            for i, target, dtype in targets:
                g = gins[i]
                if g is None:
                    continue
                g = np.asarray(g)
                if g.dtype != dtype:
                    g = g.astype(dtype)
                if type(target) is int:
                    self._to_leaf(target, g)
                    continue
                j, o = target
                slots = pending[j]
                if slots is None:
                    slots = pending[j] = [None] * len(self.meta[j])
                if slots[o] is None:
                    slots[o] = g
                else:
                    slots[o] = add_arrays(slots[o], g, out=sums[target])

    def _to_leaf(self, j, g):
        t = self.leaves[j]
        if t.grad is None:
            buf = self.grads[j]
            np.copyto(buf, g)
            t.grad = Tensor._wrap(buf)
        else:
            t.grad.data += g
