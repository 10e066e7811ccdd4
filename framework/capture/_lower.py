"""What an inference graph does once instead of at every call (its weights no longer change):

- every parameter's and constant's array is read once (not through its Tensor at each call);
- an op whose arguments are all constants (a spectral-normalised weight, a relative-position bias
  gathered from its table, a weight reshaped or flipped) is computed once and its output kept;
- a convolution on the direct route gets its weights packed into the kernel's layout once
  (_direct.pack), where the eager op packs them at every call;
- an Add whose operand is such a convolution's output, read by nothing else, with an operand of
  the same shape and dtype known before the convolution runs (a residual block's `x + conv(...)`),
  is done by the convolution as it stores each output (_direct.correlate's `residual`): one pass
  over memory fewer, and no output array of the add's own; after an AMX upsampler that stores its
  output pixel-shuffled by r, the operand may be the nearest upsampling by r of an earlier value
  (SRVGGNetCompact's `out + interpolate(x)`), which is then not made (the epilogue reads x);
- a per-channel scale read only by an Add of the scaled value's shape (RCAN's channel attention
  and its block's residual, `x * s + skip`) is one pass (elementwise.scale_add);
- under autocast("bf16") on AMX, convolutions hand each other bfloat16 planes instead of float32
  arrays, a channel Cat that only they read is read in place, a nearest upsampling only one
  of them reads is laid out from its input, and an upsampler's pixel shuffle (and the activation
  after it) is done by its convolution's epilogue (_planes.py).

Each of these computes what the eager op computes, from the same arrays: the results are the same
bits (the fused add rounds the stored conv output plus the other operand once, as np.add does;
tests/framework/test_capture.py).
"""
from __future__ import annotations

import numpy as np

from ..autograd import Context
from ..functional import _direct, _direct_amx, conv
from ..functional import elementwise
from ..functional.elementwise import Add, Mul
from ._kinds import _FIXED, _LIVE, _SLOT
from ._planes import _replication, share_planes


def fold(graph, packed: dict) -> None:
    """Fold `graph` (an inference Graph) in place: constant arguments, constant ops, and the
    lowerings of LOWERINGS (which keep what they prepare in `packed`, keyed by the arrays it
    comes from, for the other graphs of the same weights)."""
    fixed, ops, classes = {}, [], []
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
        classes.append(cls)
    ops, classes = share_planes(ops, classes, graph)
    ops, classes = _fuse_scale_adds(ops, classes, graph)
    graph.forward, graph.classes = _fuse_residual_adds(ops, classes, graph), None
    graph.constants = {}
    for name, s in list(graph.outputs.items()):
        if s in fixed:  # an output that does not depend on the input
            key = -1 - len(graph.constants)
            graph.constants[key], graph.outputs[name] = fixed[s], key


def _meta(kind, v, slot_meta):
    """(shape, dtype) of an argument: a slot's recorded one, a fixed array's own."""
    if kind == _SLOT:
        shape, dtype = slot_meta[v]
        return tuple(shape), np.dtype(dtype)
    return (np.shape(v), np.asarray(v).dtype) if kind == _FIXED else (None, None)


def _reader_counts(ops):
    """{slot: how many op arguments read it}."""
    readers = {}
    for _, spec, _, _, _ in ops:
        for kind, v in spec:
            if kind == _SLOT:
                readers[v] = readers.get(v, 0) + 1
    return readers


def _fuse_residual_adds(ops, classes, graph):
    """`ops` with each Add of a fusable convolution's output (a lowered forward with `.fused`, the
    Add its only reader, not a graph output) and an operand of that output's shape and dtype that
    exists before the convolution (the graph's input, an earlier op's output, a constant) done by
    the convolution: the Add's entry dropped, its readers reading the convolution's slot. For a
    convolution that stores its output pixel-shuffled by r, the operand may also be a nearest
    upsampling by r that only the Add reads, of a value that exists before the convolution
    (SRVGGNetCompact's `out + interpolate(x, scale_factor=r)`): the epilogue adds that value at each
    pixel's source, and the upsampling's entry is dropped too."""
    readers, outputs = _reader_counts(ops), set(graph.outputs.values())
    at = {first: k for k, (_, _, _, _, first) in enumerate(ops)}  # an op's first output slot -> op
    fused, renamed = {}, {}  # conv index -> (its new entry), Add's slot -> the conv's
    drop = set()
    for m, ((_, spec, kwargs, _, first), cls) in enumerate(zip(ops, classes)):
        if cls is not Add or kwargs or len(spec) != 2:
            continue
        for side in (0, 1):
            (kc, c), (ko, other) = spec[side], spec[1 - side]
            k = at.get(c) if kc == _SLOT else None
            if k is None or k in fused or getattr(ops[k][0], "fused", None) is None or \
                    readers.get(c) != 1 or c in outputs or ko == _LIVE:
                continue
            if _meta(ko, other, graph.slot_meta) != _meta(kc, c, graph.slot_meta):
                continue  # broadcast or promoted: not the conv's store
            source = _repeated_source(ops, classes, graph, readers, at, ops[k][0], ko, other)
            if source is not None and source < c:
                drop.add(at[other])
                ko, other = _SLOT, source
            elif ko == _SLOT and other >= c:
                continue  # made after the conv
            forward, cspec, ckwargs, cneeds, cfirst = ops[k]
            fused[k] = (forward.fused, cspec + ((ko, other),), ckwargs, cneeds, cfirst)
            renamed[first] = cfirst
            drop.add(m)
            break
    if not fused:
        return ops
    out = []
    for k, (forward, spec, kwargs, needs, first) in enumerate(ops):
        if k in drop:
            continue
        forward, spec, kwargs, needs, first = fused.get(k, (forward, spec, kwargs, needs, first))
        spec = tuple((kind, renamed.get(v, v)) if kind == _SLOT else (kind, v) for kind, v in spec)
        out.append((forward, spec, kwargs, needs, first))
    graph.outputs = {name: renamed.get(s, s) for name, s in graph.outputs.items()}
    return out


def _repeated_source(ops, classes, graph, readers, at, conv_forward, kind, v):
    """The slot of the small value whose nearest upsampling by the conv's shuffle factor r is the
    slot v (a ResampleFunction op that only one Add reads, of a float32 value of the shape (N, O /
    r^2, OH, OW) the conv's epilogue reads for it), else None."""
    r = getattr(conv_forward, "shuffle", 1)
    j = at.get(v) if kind == _SLOT else None
    if r == 1 or j is None or classes[j] is None or readers.get(v) != 1 or v in set(graph.outputs.values()):
        return None
    rep = _replication(ops[j], classes[j])
    if rep is None or rep[1:] != (r, r):
        return None
    (shape, dtype), (out_shape, out_dtype) = _meta(_SLOT, rep[0], graph.slot_meta), _meta(_SLOT, v, graph.slot_meta)
    if dtype != np.float32 or out_dtype != np.float32 or len(shape) != 4 or \
            tuple(out_shape) != (shape[0], shape[1], shape[2] * r, shape[3] * r):
        return None
    return rep[0]


def _fuse_scale_adds(ops, classes, graph):
    """(ops, classes) with each Mul of a 4-D value a by a per-channel s (N or 1, C, 1, 1), read only by
    an Add with an operand x of a's shape and dtype made before the Mul (RCAN's channel attention
    and its block's residual, x * CA + skip), done as one pass (elementwise.scale_add: the same
    values): the Add's entry dropped, its readers reading the Mul's slot."""
    readers, outputs = _reader_counts(ops), set(graph.outputs.values())
    at = {first: k for k, (_, _, _, _, first) in enumerate(ops)}
    fused, renamed, drop = {}, {}, set()
    for m, ((_, spec, kwargs, _, first), cls) in enumerate(zip(ops, classes)):
        if cls is not Add or kwargs or len(spec) != 2:
            continue
        for side in (0, 1):
            (kt, t), (ko, x) = spec[side], spec[1 - side]
            k = at.get(t) if kt == _SLOT else None
            if k is None or k in fused or classes[k] is not Mul or readers.get(t) != 1 or t in outputs \
                    or ko == _LIVE or (ko == _SLOT and x >= t) or len(ops[k][1]) != 2 or ops[k][2]:
                continue
            (ka, a), (ks, sc) = ops[k][1]
            (sa, da), (ss, ds) = _meta(ka, a, graph.slot_meta), _meta(ks, sc, graph.slot_meta)
            if sa is None or ss is None or len(sa) != 4 or len(ss) != 4:
                continue
            if sa[2:] == (1, 1) and ss[2:] != (1, 1):  # s * a: the per-channel operand first
                (ka, a, sa, da), (ks, sc, ss, ds) = (ks, sc, ss, ds), (ka, a, sa, da)
            if ss[1] != sa[1] or ss[2:] != (1, 1) or ss[0] not in (1, sa[0]) or len({da, ds}) != 1 or da.kind != "f" \
                    or _meta(ko, x, graph.slot_meta) != (sa, da) or _meta(kt, t, graph.slot_meta) != (sa, da):
                continue
            fused[k] = (_scale_add, ((ka, a), (ks, sc), (ko, x)), {}, ops[k][3], ops[k][4])
            renamed[first] = t
            drop.add(m)
            break
    if not fused:
        return ops, classes
    out, out_classes = [], []
    for k, (op, cls) in enumerate(zip(ops, classes)):
        if k in drop:
            continue
        forward, spec, kwargs, needs, first = fused.get(k, op)
        spec = tuple((kind, renamed.get(v, v)) if kind == _SLOT else (kind, v) for kind, v in spec)
        out.append((forward, spec, kwargs, needs, first))
        out_classes.append(None if k in fused else cls)
    graph.outputs = {name: renamed.get(s, s) for name, s in graph.outputs.items()}
    return out, out_classes


def _scale_add(ctx, a, s, x):
    return elementwise.scale_add(a, s, x)


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
        if conv._bf16_direct(geo, shape[1], x.dtype):  # the call's precision, not the recording's
            return eager(ctx, x, *args, **kw)
        return _direct.correlate(np.ascontiguousarray(x), w, geo.features, geo.padding, bias, slope,
                                 tiles, elems, packed)

    def fused(ctx, x, *args, **kw):
        """forward(...) + args[-1] (an Add fused by _fuse_residual_adds; on AMX tiles by their
        epilogue, else np.add after the op)."""
        if conv._bf16_direct(geo, shape[1], x.dtype) and conv._amx_route(shape[1]):
            return _direct_amx.correlate(np.ascontiguousarray(x), w, geo.features, geo.padding, bias, slope,
                                         conv._workers(), residual=args[-1])
        if conv._bf16_direct(geo, shape[1], x.dtype):
            return np.add(eager(ctx, x, *args[:-1], **kw), args[-1])
        return _direct.correlate(np.ascontiguousarray(x), w, geo.features, geo.padding, bias, slope,
                                 tiles, elems, packed, residual=args[-1])
    forward.fused = fused
    return forward


LOWERINGS = {conv.Conv2dFunction: _conv2d}
