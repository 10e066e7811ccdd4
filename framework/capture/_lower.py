"""What an inference graph does once instead of at every call (its weights no longer change):

- every parameter's and constant's array is read once (not through its Tensor at each call);
- an op whose arguments are all constants (a spectral-normalised weight, a relative-position bias
  gathered from its table, a weight reshaped or flipped) is computed once and its output kept;
- a convolution on the direct route gets its weights packed into the kernel's layout once
  (_direct.pack), where the eager op packs them at every call.

Each of these computes what the eager op computes, from the same arrays: the results are the same
bits (tests/framework/test_capture.py).
"""
from __future__ import annotations

import numpy as np

from .. import precision
from ..autograd import Context
from ..functional import _direct, conv


# The kinds of an op's argument in a captured graph: a slot (an intermediate or the input), a live
# tensor read at each call (a parameter, in a training graph), a fixed array (a constant).
_SLOT, _LIVE, _FIXED = 0, 1, 2


def fold(graph, packed: dict) -> None:
    """Fold `graph` (an inference Graph) in place: constant arguments, constant ops, and the
    lowerings of LOWERINGS (which keep what they prepare in `packed`, keyed by the arrays it
    comes from, for the other graphs of the same weights)."""
    fixed, ops = {}, []
    for (forward, spec, kwargs, needs, first), cls in zip(graph.forward, graph.classes):
        spec = tuple((_FIXED, fixed[v]) if kind == _SLOT and v in fixed else
                     (_FIXED, v.data) if kind == _LIVE else (kind, v) for kind, v in spec)
        if all(kind == _FIXED for kind, _ in spec):
            out = forward(Context(needs), *(v for _, v in spec), **kwargs)
            for i, o in enumerate(out if isinstance(out, tuple) else (out,)):
                fixed[first + i] = np.asarray(o)
            continue
        lower = LOWERINGS.get(cls)
        lowered = lower(spec, kwargs, graph.slot_meta, packed, forward) if lower is not None else None
        ops.append((lowered or forward, spec, kwargs, needs, first))
    graph.forward, graph.classes = ops, None
    graph.constants = {}
    for name, s in list(graph.outputs.items()):
        if s in fixed:  # an output that does not depend on the input
            key = -1 - len(graph.constants)
            graph.constants[key], graph.outputs[name] = fixed[s], key


def _conv2d(spec, kwargs, slot_meta, cache, eager):
    """Conv2dFunction's forward with its weights packed once, when it takes the direct route in
    float32; under framework.autocast("bf16") the op's own forward (`eager`: its bf16 route)."""
    if set(kwargs) - {"geo", "relu_slope"} or len(spec) not in (2, 3):
        return None  # an option this lowering does not know: the op as it is
    (kx, x), (kw, w) = spec[:2]
    kb, bias = spec[2] if len(spec) == 3 else (_FIXED, None)
    if kx != _SLOT or kw != _FIXED or kb != _FIXED:
        return None
    shape, dtype = slot_meta[x]
    geo, slope = kwargs["geo"], kwargs.get("relu_slope")
    dtype = np.dtype(dtype)
    if w.dtype != dtype or conv._large_route(geo, shape[1], w.shape[0]) or \
            not conv._direct_route(geo, shape[1], w.shape[0]):
        return None
    key = ("direct", id(w), id(bias), dtype.str)
    if key not in cache:  # the arrays themselves kept with it: their ids stay theirs
        wc = np.ascontiguousarray(w)
        cache[key] = (w, bias, wc, _direct.pack(wc, bias, dtype))
    _, _, w, packed = cache[key]
    tiles, elems = conv._direct_tiles((shape[0], shape[1], dtype), geo)

    def forward(ctx, x, *args, **kw):
        if precision.bf16_active(x.dtype):  # the precision is the call's, not the recording's
            return eager(ctx, x, *args, **kw)
        return _direct.correlate(np.ascontiguousarray(x), w, geo.features, geo.padding, bias, slope,
                                 tiles, elems, packed)
    return forward


LOWERINGS = {conv.Conv2dFunction: _conv2d}
