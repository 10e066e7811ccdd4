"""What an inference graph does once instead of at every call (its weights no longer change):

- every parameter's and constant's array is read once (not through its Tensor at each call);
- an op whose arguments are all constants (a spectral-normalised weight, a relative-position bias
  gathered from its table, a weight reshaped or flipped) is computed once and its output kept;
- a convolution on the direct route gets its weights packed into the kernel's layout once
  (_direct.pack), where the eager op packs them at every call; a 1x1 convolution small enough for one
  tile of im2col's route (RCAN's channel attention on a 1x1 map) runs as that route's one matmul on
  the same views, without the route's Python (_pointwise);
- an Add whose operand is such a convolution's output, read by nothing else, with an operand of
  the same shape and dtype known before the convolution runs (a residual block's `x + conv(...)`),
  is done by the convolution as it stores each output (_direct.correlate's `residual`): one pass
  over memory fewer, and no output array of the add's own; also `out * s + x` for a number s
  (RRDBNet's dense blocks), where the Mul is the output's only reader; after an AMX upsampler that
  stores its output pixel-shuffled by r, the operand may be the nearest upsampling by r of an
  earlier value (SRVGGNetCompact's `out + interpolate(x)`), which is then not made (the epilogue
  reads x); an operand made after the convolution from values made before it is made first
  (MSRResNet's `out + interpolate(x, mode="bilinear")`); a linear's output the same way (a
  transformer block's `x + mlp(norm(x))`: the residual added as the product is stored);
- a LeakyReLU of such a convolution's output, its only reader, is done by the convolution
  (relu_slope: the same formula);
- a per-channel scale (or a number) read only by an Add of the scaled value's shape (RCAN's channel
  attention and its block's residual, `x * s + skip`; RRDBNet's `out * 0.2 + x`) is one pass
  (elementwise.scale_add);
- under autocast("bf16") on AMX, convolutions hand each other bfloat16 planes instead of float32
  arrays, a channel Cat that only they read is read in place, a nearest upsampling only one
  of them reads is laid out from its input, an upsampler's pixel shuffle (and the activation after
  it) is done by its convolution's epilogue, and a residual chain's value is written as the next
  block's planes by the convolution that stores it (_planes.py), and a linear reads its rows through
  a layer norm and row moves, and writes them through row moves onto a residual (_rows.py).

Each of these computes what the eager op computes, from the same arrays: the results are the same
bits (the fused add rounds the stored conv output plus the other operand once, as np.add does;
tests/framework/test_capture.py).
"""
from __future__ import annotations

import numpy as np

from ..autograd import Context
from ..functional import _direct, _direct_amx, conv
from ..functional import elementwise
from ..functional.activation import LeakyReLUFunction
from ..functional.elementwise import Add, Mul
from ..functional.linear import LinearFunction, linear_arrays
from ._kinds import _FIXED, _LIVE, _SLOT
from ._planes import _replication, keep_planes, share_planes
from ._rows import fuse_rows


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
    ops, classes = _fuse_leaky_relus(ops, classes, graph)
    ops, classes = _fuse_residual_adds(ops, classes, graph)  # first: a conv's `out * 0.2 + x` is its own
    ops, classes = _fuse_scale_adds(ops, classes, graph)
    new, renamed, drop = fuse_rows(ops, classes, graph)
    if new:
        ops, classes = _rewritten(ops, classes, graph, new, renamed, drop)
    graph.forward, graph.classes = keep_planes(ops, graph), None
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
    """(ops, classes) with each Add of a fusable convolution's output (a lowered forward with
    `.fused`, the Add its only reader, not a graph output) and an operand of that output's shape and
    dtype that exists before the convolution (the graph's input, an earlier op's output, a constant)
    done by the convolution: the Add's entry dropped, its readers reading the convolution's slot. The
    Add may also read the output times a number (a Mul by a 0-d constant of the output's dtype, the
    Mul the output's only reader: RRDBNet's `x5 * 0.2 + x`), which the convolution then makes too
    (`residual_scale`). For a convolution that stores its output pixel-shuffled by r, the operand may
    also be a nearest upsampling by r that only the Add reads, of a value that exists before the
    convolution (SRVGGNetCompact's `out + interpolate(x, scale_factor=r)`): the epilogue adds that
    value at each pixel's source, and the upsampling's entry is dropped too. An operand made after
    the convolution by an op whose own inputs all exist before it (MSRResNet's `out +
    interpolate(x, mode="bilinear")`) is made first: that op moves to just before the convolution."""
    readers, outputs = _reader_counts(ops), set(graph.outputs.values())
    at = {first: k for k, (_, _, _, _, first) in enumerate(ops)}  # an op's first output slot -> op
    fused, renamed = {}, {}  # conv index -> (its new entry), Add's slot -> the conv's
    drop, moved = set(), {}  # moved: op index -> the conv it now runs before (its inputs exist then)

    def single(v):  # read by one op only, not a graph output
        return readers.get(v) == 1 and v not in outputs

    def conv_of(c):
        """(conv index, its output slot, the scale or None, the Mul's index or None) for the Add's
        operand c, else None."""
        k = at.get(c)
        if k is None or k in fused or not single(c):
            return None
        if getattr(ops[k][0], "fused", None) is not None:
            return k, c, None, None
        if classes[k] is not Mul or ops[k][2] or len(ops[k][1]) != 2:
            return None
        for (ka, a), (ks, s) in (ops[k][1], ops[k][1][::-1]):
            j = at.get(a) if ka == _SLOT else None
            dtypes = {_meta(kind, v, graph.slot_meta)[1] for kind, v in ((ks, s), (ka, a), (_SLOT, c))}
            if j is not None and ks == _FIXED and np.ndim(s) == 0 and len(dtypes) == 1 and j not in fused \
                    and single(a) and getattr(ops[j][0], "fused", None) is not None:
                return j, a, np.asarray(s), k
        return None

    for m, ((_, spec, kwargs, _, first), cls) in enumerate(zip(ops, classes)):
        if cls is not Add or kwargs or len(spec) != 2:
            continue
        for side in (0, 1):
            (kc, c), (ko, other) = spec[side], spec[1 - side]
            found = conv_of(c) if kc == _SLOT else None
            if found is None or ko == _LIVE:
                continue
            k, out, scale, mul = found
            if _meta(ko, other, graph.slot_meta) != _meta(kc, c, graph.slot_meta):
                continue  # broadcast or promoted: not the conv's store
            source = _repeated_source(ops, classes, graph, readers, at, ops[k][0], ko, other)
            if source is not None and source < out:
                drop.add(at[other])
                ko, other = _SLOT, source
            elif ko == _SLOT and other >= out:
                j = at.get(other)  # made after the conv: moved before it where it can be
                if j is None or j in moved or j in drop or j in fused or \
                        any(kind == _SLOT and v >= ops[k][4] for kind, v in ops[j][1]):
                    continue
                moved[j] = k
            forward, cspec, ckwargs, cneeds, cfirst = ops[k]
            fkwargs = ckwargs if scale is None else {**ckwargs, "residual_scale": scale}
            fused[k] = (forward.fused, cspec + ((ko, other),), fkwargs, cneeds, cfirst)
            renamed[first] = cfirst
            drop.update([m] if mul is None else [m, mul])
            break
    if not fused:
        return ops, classes
    order = []
    for k in range(len(ops)):
        order.extend(j for j, t in moved.items() if t == k)  # a moved op just before its conv
        if k not in moved:
            order.append(k)
    return _rewritten(ops, classes, graph, fused, renamed, drop, order)


def _rewritten(ops, classes, graph, new, renamed, drop, order=None, keep_class=False):
    """(ops, classes) in `order` (default: as they are) without the entries `drop`, each entry of
    `new` (index -> entry) in place of its op (its class None unless keep_class), every slot read
    through `renamed` (a dropped op's output -> the slot that now holds its value), the graph's
    outputs too."""
    out_ops, out_classes = [], []
    for k in range(len(ops)) if order is None else order:
        if k in drop:
            continue
        forward, spec, kwargs, needs, first = new.get(k, ops[k])
        spec = tuple((kind, renamed.get(v, v)) if kind == _SLOT else (kind, v) for kind, v in spec)
        out_ops.append((forward, spec, kwargs, needs, first))
        out_classes.append(classes[k] if keep_class or k not in new else None)
    graph.outputs = {name: renamed.get(s, s) for name, s in graph.outputs.items()}
    return out_ops, out_classes


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
    """(ops, classes) with each Mul of a 4-D value a by a per-channel s (N or 1, C, 1, 1) or by a 0-d
    constant (taken as that scale for every channel: the same products), read only by an Add with an
    operand x of a's shape and dtype made before the Mul (RCAN's channel attention and its block's
    residual, x * CA + skip; RRDBNet's `out * 0.2 + x`), done as one pass (elementwise.scale_add: the
    same values): the Add's entry dropped, its readers reading the Mul's slot."""
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
            if ka == _FIXED and np.ndim(a) == 0:  # a number times a: the number second
                (ka, a), (ks, sc) = (ks, sc), (ka, a)
            (sa, da), (ss, ds) = _meta(ka, a, graph.slot_meta), _meta(ks, sc, graph.slot_meta)
            if ks == _FIXED and ss == () and sa is not None and len(sa) == 4:  # as one scale per channel
                sc = np.full((1, sa[1], 1, 1), sc, ds)
                ss = sc.shape
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
    return _rewritten(ops, classes, graph, fused, renamed, drop)


def _scale_add(ctx, a, s, x):
    return elementwise.scale_add(a, s, x)


def _scale_add_with_planes(arena, dgeo):
    """_scale_add whose sum is also written as its reader's planes (_planes.keep_planes)."""
    def scale_add_planes(ctx, a, s, x):
        return _direct_amx.scale_add_pairs(a, s, x, arena.get(), dgeo)
    return scale_add_planes


_scale_add.with_planes = _scale_add_with_planes


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
    if w.dtype != dtype or conv._large_route(geo, shape[1], w.shape[0]):
        return None
    if not conv._direct_route(geo, shape[1], w.shape[0]):
        return _pointwise(shape, dtype, w, bias, geo, slope)
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

    def fused(ctx, x, *args, residual_scale=None, **kw):
        """forward(...) + args[-1], or forward(...) * residual_scale + args[-1] (an Add fused by
        _fuse_residual_adds; on AMX tiles by their epilogue, else np.add (np.multiply) after the op)."""
        if conv._bf16_direct(geo, shape[1], x.dtype) and conv._amx_route(shape[1]):
            return _direct_amx.correlate(np.ascontiguousarray(x), w, geo.features, geo.padding, bias, slope,
                                         conv._workers(), residual=args[-1],
                                         residual_scale=1.0 if residual_scale is None else residual_scale)
        if residual_scale is not None:
            return np.add(np.multiply(forward(ctx, x, *args[:-1], **kw), residual_scale), args[-1])
        if conv._bf16_direct(geo, shape[1], x.dtype):
            return np.add(eager(ctx, x, *args[:-1], **kw), args[-1])
        return _direct.correlate(np.ascontiguousarray(x), w, geo.features, geo.padding, bias, slope,
                                 tiles, elems, packed, residual=args[-1])
    forward.fused = fused
    forward.remake = lambda **changes: _conv2d(spec, {**kwargs, **changes}, slot_meta, cache, eager)
    return forward


def _pointwise(shape, dtype, w, bias, geo, slope):
    """Conv2dFunction's forward of a 1x1 convolution small enough for one tile of im2col's route, run
    on the calling thread with BLAS as it is (conv._column_tiles' serial tile and conv._run's serial
    products, rules of shapes only: RCAN's channel attention on a 1x1 map), as that route computes it (conv._correlate_gemm, or for fewer outputs than channels
    _correlate_adjoint of the flipped kernel): the same matmul on the same views, then the bias, without
    the route's Python (which ran at 60-100 us a call after a large kernel had taken the caches, against
    ~20 us for this)."""
    N, C, H, W = shape
    O = w.shape[0]
    if not (geo.is_pointwise() and geo.groups == 1 and geo.stride == (1, 1) and slope is None and len(shape) == 4
            and tuple(geo.features) == (H, W)):
        return None
    flipped = geo.flipped()
    adjoint = flipped is not None and O < C  # _correlate_gemm's own choice
    if not 0 < N * H * W * C * O < conv._BLAS_SERIAL_MACS:
        return None  # more than one tile, or one run with BLAS held to one thread (conv._run): the op as it is
    wm = conv._flip(w, 1, C).reshape(1, C, O).transpose(0, 2, 1) if adjoint else np.ascontiguousarray(w).reshape(1, O, C)
    b = None if bias is None else np.asarray(bias).reshape(1, O, 1, 1) if adjoint else np.asarray(bias).reshape(1, O, 1)

    def forward(ctx, x, *args, **kw):
        x = np.ascontiguousarray(x)
        if adjoint:
            y = np.zeros((N, O, H, W), dtype)
            np.matmul(wm, x.reshape(N, 1, C, H * W), out=y.reshape(N, 1, O, H * W))
            if b is not None:
                y += b
            return y
        y = np.empty((N, O, H, W), dtype)
        out = y.reshape(N, 1, O, H * W)
        np.matmul(wm, x.reshape(N, 1, C, H * W), out=out)
        if b is not None:
            out += b
        return y
    return forward


def _fuse_leaky_relus(ops, classes, graph):
    """(ops, classes) with each LeakyReLU op whose input is a lowered direct convolution's output
    (no activation of its own, the LeakyReLU its only reader, not a graph output) done by that
    convolution (relu_slope: the direct route's epilogue, x if x > 0 else slope x, the LeakyReLU
    kernel's formula for every value; MSRResNet's conv_first): the activation's entry dropped, its
    readers reading the convolution's slot. Only a positive slope: relu_slope 0 is a relu, which
    sends -0 and the negatives to +0 where LeakyReLU(0) gives -0 (so a ReLU is not fused either)."""
    readers, outputs = _reader_counts(ops), set(graph.outputs.values())
    at = {first: k for k, (_, _, _, _, first) in enumerate(ops)}
    remade, renamed, drop = {}, {}, set()
    for m, ((_, spec, kwargs, _, first), cls) in enumerate(zip(ops, classes)):
        if cls is not LeakyReLUFunction or len(spec) != 1 or spec[0][0] != _SLOT or set(kwargs) != {"negative_slope"} \
                or not kwargs["negative_slope"] > 0:  # relu_slope 0 is relu's (+0 for a negative), not x * 0
            continue
        c = spec[0][1]
        k = at.get(c)
        if k is None or k in remade or readers.get(c) != 1 or c in outputs:
            continue
        forward, cspec, ckwargs, cneeds, cfirst = ops[k]
        if getattr(forward, "remake", None) is None or ckwargs.get("relu_slope") is not None:
            continue
        new = {**ckwargs, "relu_slope": float(kwargs["negative_slope"])}
        lowered = forward.remake(relu_slope=new["relu_slope"])
        if lowered is None:
            continue
        remade[k] = (lowered, cspec, new, cneeds, cfirst)
        renamed[first] = cfirst
        drop.add(m)
    if not remade:
        return ops, classes
    return _rewritten(ops, classes, graph, remade, renamed, drop, keep_class=True)


def _linear(spec, kwargs, slot_meta, cache, eager):
    """LinearFunction's forward as it is, and `.fused`: the product plus a residual added as it is
    stored (linear_arrays; _fuse_residual_adds: a transformer block's `x + mlp(norm(x))`), so the
    Add's pass over memory and its output array are gone: the same bits (the bias, then the
    residual, each one IEEE sum)."""
    if kwargs or len(spec) != 3 or spec[0][0] != _SLOT or spec[1][0] != _FIXED or spec[2][0] != _FIXED:
        return None

    def forward(ctx, x, w, b):
        return eager(ctx, x, w, b)

    def fused(ctx, x, w, b, residual, residual_scale=None):
        if residual_scale is not None:  # `linear(x) * s + residual`: the two numpy passes, as eager
            return np.add(np.multiply(eager(ctx, x, w, b), residual_scale), residual)
        return linear_arrays(x, w, b, residual)
    forward.fused = fused
    return forward


LOWERINGS = {conv.Conv2dFunction: _conv2d, LinearFunction: _linear}
