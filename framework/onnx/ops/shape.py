"""Shape ops: Reshape, Transpose, Slice/Gather/Squeeze/Unsqueeze (getitem), Concat (cat, stack),
Pad (constant, reflect, edge, wrap), Slice with step -1 (flip), Tile (repeat), ScatterND
(setitem, at the traced shape). Reshape targets copy a dimension (0) or infer one (-1) where
they can, and slices keep the caller's own bounds (None -> open end), so that a graph whose shapes
follow the input stays valid at other sizes."""
from __future__ import annotations

import numpy as np

from ...functional import shape as S
from ..graph import ConversionError, register_converter

_INT64_MIN, _INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def _groups(src, out):
    """((i0, i1), (j0, j1)) pairs: input dims i0..i1-1 hold exactly output dims j0..j1-1 (a split
    or a merge), or None when the shapes do not align so."""
    groups, i, j = [], 0, 0
    while i < len(src) and j < len(out):
        i1, j1, a, b = i + 1, j + 1, src[i], out[j]
        while a != b:
            if a < b and i1 < len(src):
                a, i1 = a * src[i1], i1 + 1
            elif b < a and j1 < len(out):
                b, j1 = b * out[j1], j1 + 1
            else:
                return None
        groups.append(((i, i1), (j, j1)))
        i, j = i1, j1
    return groups if i == len(src) and j == len(out) else None


def _derived(g, src, out, psrc, pout, free):
    """Output dims that follow the input size, computed from the input's own Shape where the
    reshape splits one input dim (the others numbers: a Div) or merges several (a Mul)."""
    groups = _groups(src, out)
    if groups is None or groups != _groups(psrc, pout):
        return {}
    found = {}
    for (i0, i1), (j0, j1) in groups:
        moving = [j for j in range(j0, j1) if j in free]
        if len(moving) != 1:
            continue
        dims = [g.node("Shape", [g.input(0)], start=i, end=i + 1) for i in range(i0, i1)]
        size = dims[0]
        for d in dims[1:]:
            size = g.node("Mul", [size, d])
        rest = int(np.prod([out[j] for j in range(j0, j1) if j != moving[0]]))
        found[moving[0]] = size if rest == 1 else \
            g.node("Div", [size, g.const(np.asarray([rest], np.int64))])
    return found


@register_converter(S.Reshape)
def reshape(g, call):
    """Each target dimension copies the input's (0) where it is the same, is a number where it is
    the same at both traced sizes, and otherwise follows the input's size: computed from the
    input's Shape where the reshape splits or merges dims, else read from the Shape of a value that
    has that size (g.dim_source), one left to be inferred (-1)."""
    src, out = g.shape(0), g.out_shape()
    if 0 in src or 0 in out:
        raise ConversionError(f"{call.describe()}: reshaping an empty tensor is not exported")
    psrc, pout = g.peer_shape(0), g.peer_out_shape()
    if pout is None or len(pout) != len(out) or len(psrc) != len(src):
        psrc, pout = src, out  # no second trace: the sizes of this one
    spec = [0 if i < len(src) and src[i] == d and i < len(psrc) and psrc[i] == pout[i] else d
            for i, d in enumerate(out)]
    free = [i for i, d in enumerate(spec) if d != 0 and d != pout[i]]  # sizes that follow the input
    if not free:  # nothing changes with the size: infer the largest other dimension, as before
        free = [i for i, d in enumerate(spec) if d != 0]
        if free:
            spec[max(free, key=lambda i: spec[i])] = -1
        return g.node("Reshape", [g.input(0), g.const(np.asarray(spec, np.int64))])
    read = _derived(g, src, out, psrc, pout, free)
    rest = [i for i in free if i not in read]
    inferred = rest[0] if rest else None  # by position, not size: the same choice at both sizes
    for i in rest[1:]:
        source = g.dim_source(out[i], pout[i])
        if source is None:
            g.require_static(f"reshape to {out}: size {out[i]} follows the input size but no "
                             "computed value has it")
        else:
            read[i] = source
    shape = [-1 if i == inferred else d for i, d in enumerate(spec)]
    parts = [read[i] if i in read else g.const(np.asarray([d], np.int64)) for i, d in enumerate(shape)]
    return g.node("Reshape", [g.input(0), g.node("Concat", parts, axis=0)])


@register_converter(S.Permute)
def permute(g, call):
    return g.node("Transpose", [g.input(0)], perm=[int(d) for d in call.options["dims"]])


@register_converter(S.Cat)
def cat(g, call):
    return g.node("Concat", [g.input(i) for i in range(len(call.args))], axis=int(call.options["axis"]))


@register_converter(S.Stack)
def stack(g, call):
    axis = int(call.options["axis"])
    parts = [g.unsqueeze(g.input(i), [axis]) for i in range(len(call.args))]
    return g.node("Concat", parts, axis=axis)


def _bounds(s: slice):
    step = 1 if s.step is None else int(s.step)
    if step == 0:
        raise ConversionError("getitem: slice step 0")
    start = (0 if step > 0 else _INT64_MAX) if s.start is None else int(s.start)
    stop = (_INT64_MAX if step > 0 else _INT64_MIN) if s.stop is None else int(s.stop)
    return start, stop, step


def _items(index, ndim):
    """The index as a tuple with Ellipsis expanded to full slices, lists as arrays."""
    items = index if isinstance(index, tuple) else (index,)
    items = tuple(np.asarray(i) if isinstance(i, list) else i for i in items)
    used = sum(i.ndim if isinstance(i, np.ndarray) and i.dtype == np.bool_ else 1
               for i in items if i is not None and i is not Ellipsis)
    out = []
    for i in items:
        if i is Ellipsis:
            out += [slice(None)] * (ndim - used)
        else:
            out.append(i)
    if not any(i is Ellipsis for i in items):
        out += [slice(None)] * (ndim - used)
    return out


def _parse(items):
    """(starts, ends, axes, steps, gather, squeeze axes, unsqueeze axes) of an expanded index."""
    starts, ends, axes, steps = [], [], [], []
    gather, squeeze, unsqueeze = None, [], []
    axis = pos = out = 0  # input axis, axis after the gather, output axis
    for item in items:
        if item is None:
            unsqueeze.append(out)
            out += 1
            continue
        if isinstance(item, slice):
            if item != slice(None):
                a, b, c = _bounds(item)
                starts.append(a), ends.append(b), axes.append(axis), steps.append(c)
            pos, out = pos + 1, out + 1
        elif isinstance(item, np.ndarray):
            idx = np.nonzero(item)[0] if item.dtype == np.bool_ else item.astype(np.int64)
            gather = (axis, idx)
            pos, out = pos + idx.ndim, out + idx.ndim
        else:  # an int: a one-wide slice, squeezed afterwards
            i = int(item)
            starts.append(i), ends.append(i + 1 if i != -1 else _INT64_MAX), axes.append(axis)
            steps.append(1)
            squeeze.append(pos)
            pos += 1
        axis += 1
    return starts, ends, axes, steps, gather, squeeze, unsqueeze


def _slice(g, x, starts, ends, axes, steps):
    """Slice x; a bound that differs at the peer's size (x[:, :h] with h taken from a shape in
    Python) is read from the Shape of a value that has it (g.dim_source)."""
    peer = g.peer_call()
    if peer is not None:
        other = _parse(_items(peer.options["index"], len(peer.args[0].array.shape)))
        if other[2] == axes and other[3] == steps:
            bounds = []
            for mine, theirs in ((starts, other[0]), (ends, other[1])):
                parts = [g.const(np.asarray([a], np.int64)) if a == b else g.dim_source(a, b)
                         for a, b in zip(mine, theirs)]
                if None in parts:
                    g.require_static("a slice bound follows the input size but no computed value "
                                     "has it")
                    break
                bounds.append(g.node("Concat", parts, axis=0) if mine != theirs else None)
            else:
                if any(bounds):
                    ins = [b or g.const(np.asarray(v, np.int64)) for b, v in zip(bounds, (starts, ends))]
                    return g.node("Slice", [x, *ins, g.const(np.asarray(axes, np.int64)),
                                            g.const(np.asarray(steps, np.int64))])
    return g.slice(x, starts, ends, axes, steps)


@register_converter(S.GetItem)
def getitem(g, call):
    """Basic indexing (ints, slices, None, Ellipsis) and one integer (or 1-D boolean) array without
    ints: Slice, then Gather, then Squeeze the int axes, then Unsqueeze the None axes."""
    items = _items(call.options["index"], len(g.shape(0)))
    arrays = [i for i in items if isinstance(i, np.ndarray)]
    ints = [i for i in items if isinstance(i, (int, np.integer))]
    if len(arrays) > 1 or (arrays and ints) or any(a.dtype == np.bool_ and a.ndim != 1 for a in arrays):
        raise ConversionError(f"{call.describe()}: advanced indexing beyond one integer or 1-D "
                              "boolean array (and no int indices) is not exported")
    starts, ends, axes, steps, gather, squeeze, unsqueeze = _parse(items)
    y = g.input(0)
    if axes:
        y = _slice(g, y, starts, ends, axes, steps)
    if gather is not None:
        y = g.node("Gather", [y, g.const(gather[1])], axis=gather[0])
    if squeeze:
        y = g.squeeze(y, squeeze)
    if unsqueeze:
        y = g.unsqueeze(y, unsqueeze)
    if y == g.input(0):
        y = g.node("Identity", [y])
    return y


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@register_converter(S.Pad)
def pad(g, call):
    widths, mode = call.options["widths"], call.options["mode"]
    rank = len(g.shape(0))
    full = [(0, 0)] * (rank - len(widths)) + [tuple(w) for w in widths]
    x = g.input(0)
    if mode == "circular" and g.opset < 19:  # no "wrap" yet: concatenate the wrapped slices
        for axis, (lo, hi) in enumerate(full):
            if lo or hi:
                parts = ([g.slice(x, [-lo], [_INT64_MAX], [axis])] if lo else []) + [x] + (
                    [g.slice(x, [0], [hi], [axis])] if hi else [])
                x = g.node("Concat", parts, axis=axis)
        return x
    pads = g.const(np.asarray([lo for lo, _ in full] + [hi for _, hi in full], np.int64))
    ins = [x, pads]
    if mode == "constant":
        ins.append(g.const(np.asarray(call.options["value"], g.call.args[0].array.dtype)))
    return g.node("Pad", ins, mode=_PAD_MODES[mode])


@register_converter(S.RollFunction)
def roll(g, call):  # roll(x, s) along an axis = concat(x[-s:], x[:-s]): Slice + Concat per axis
    shifts, axes = call.options["shifts"], call.options["axes"]
    shape, x = g.shape(0), g.input(0)
    if axes is None:  # the flattened array: flatten, roll, restore the shape
        flat = g.node("Reshape", [x, g.const([-1])])
        rolled = _roll_axis(g, flat, shifts[0], 0, int(np.prod(shape)))
        return g.node("Reshape", [rolled, g.const(list(shape))])
    for s, axis in zip(shifts, axes):
        x = _roll_axis(g, x, s, axis, shape[axis])
    return x


def _roll_axis(g, x, shift, axis, n):
    s = shift % n if n else 0
    if s == 0:
        return x
    # the split point as the caller wrote it, x[k:] + x[:k] with k = -shift for a shift in (-n, 0)
    # and -s for s > 0: it holds at any size larger than the shift (dynamic axes)
    k = -shift if -n < shift < 0 else -s
    head, tail = g.slice(x, [k], [_INT64_MAX], [axis]), g.slice(x, [0], [k], [axis])
    return g.node("Concat", [head, tail], axis=int(axis))


@register_converter(S.SplitFunction)
def split(g, call):  # -> one output per piece
    sizes, axis = call.options["sizes"], call.options["axis"]
    outs = g.node("Split", [g.input(0), g.const(np.asarray(sizes, np.int64))], outputs=len(sizes),
                  axis=int(axis))
    return outs if len(sizes) > 1 else (outs,)


def _spatial(g, x):
    """The (H, W) of x as an int64 tensor (Shape's last two entries)."""
    return g.node("Shape", [x], start=-2)


def _int(g, *values):
    return [g.const(np.asarray(v, np.int64)) for v in values]


@register_converter(S.PadToMultipleFunction)
def pad_to_multiple(g, call):
    """pads b + (m - H % m) % m at the bottom (b on top), the same for W, computed from Shape.
    reflect (and its fallback to replicate when the bottom padding reaches the image size) and
    symmetric are a Gather of source rows from a Range, exact at every size (ONNX's reflect Pad
    refuses a padding as wide as the image)."""
    m, mode = call.options["multiple"], call.options["mode"]
    b = call.options.get("border", 0)
    rank = len(g.shape(0))
    axes = [a % rank for a in call.options.get("axes", (-2, -1))]
    g.size_rule(m)
    x = g.input(0)
    zero, one, two, mm, bb = _int(g, 0, 1, 2, m, b)
    sizes = [g.dim(x, a) for a in axes]
    highs = [g.node("Add", [g.node("Mod", [g.node("Sub", [mm, g.node("Mod", [n, mm])]), mm]), bb])
             for n in sizes]
    if mode == "symmetric":  # source row: i mod 2n, folded back past n (2n - 1 - i)
        for axis, n, hi in zip(axes, sizes, highs):
            pos = g.node("Range", [g.node("Neg", [bb]), g.node("Add", [n, hi]), one])
            period = g.node("Mul", [two, n])
            r = g.node("Mod", [g.node("Add", [pos, period]), period])
            r = g.node("Where", [g.node("Less", [r, n]), r,
                                 g.node("Sub", [g.node("Sub", [period, one]), r])])
            x = g.node("Gather", [x, r], axis=axis)
        return x
    if mode != "reflect":
        pads = [g.const(np.asarray([b if a in axes else 0], np.int64)) for a in range(rank)]
        zeros = g.const(np.zeros(1, np.int64))
        pads += [g.unsqueeze(highs[axes.index(a)], [0]) if a in axes else zeros for a in range(rank)]
        return g.node("Pad", [x, g.node("Concat", pads, axis=0)], mode=_PAD_MODES[mode])
    small = g.node("Or", [g.node("GreaterOrEqual", [hi, n]) for hi, n in zip(highs, sizes)])
    for axis, n, hi in zip(axes, sizes, highs):
        pos = g.node("Range", [g.node("Neg", [bb]), g.node("Add", [n, hi]), one])
        last = g.node("Sub", [n, one])
        r = g.node("Abs", [pos])
        r = g.node("Where", [g.node("Less", [last, r]),
                             g.node("Sub", [g.node("Mul", [two, last]), r]), r])
        edge = g.node("Max", [g.node("Min", [pos, last]), zero])
        x = g.node("Gather", [x, g.node("Where", [small, edge, r])], axis=axis)
    return x


@register_converter(S.PadToRequirementFunction)
def pad_to_requirement(g, call):
    """Per axis: rows Range(max(n, minimum) rounded up to the multiple), source row i for i < n,
    else max(2n - 2 - i, 0) (reflection, then replication of row 0), one Gather: exact at every
    size."""
    minimum, m = call.options["minimum"], call.options["multiple"]
    g.size_rule(m)
    x = g.input(0)
    zero, one, two, mm, low = _int(g, 0, 1, 2, m, minimum)
    rank = len(g.shape(0))
    for axis in (rank - 2, rank - 1):
        n = g.dim(g.input(0), axis)
        target = g.node("Add", [g.node("Max", [n, low]), g.node("Sub", [mm, one])])
        target = g.node("Mul", [g.node("Div", [target, mm]), mm])
        pos = g.node("Range", [zero, target, one])
        back = g.node("Max", [g.node("Sub", [g.node("Sub", [g.node("Mul", [two, n]), two]), pos]),
                              zero])
        x = g.node("Gather", [x, g.node("Where", [g.node("Less", [pos, n]), pos, back])], axis=axis)
    return x


@register_converter(S.CropToFunction)
def crop_to(g, call):  # y[..., :H s, :W s] with (H, W) from the reference's Shape
    s = call.options["scale"]
    ends = g.node("Mul", [_spatial(g, g.input(1)), g.const(np.asarray([s, s], np.int64))])
    return g.node("Slice", [g.input(0), g.const(np.zeros(2, np.int64)), ends,
                            g.const(np.asarray([-2, -1], np.int64))])


@register_converter(S.Expand)
def expand(g, call):
    """A 1 where the output keeps the input's size (ONNX's Expand broadcasts like numpy), so a
    dimension that follows the image stays dynamic."""
    src, out = g.shape(0), g.out_shape()
    lead = len(out) - len(src)
    spec = [1 if i >= lead and src[i - lead] == d else d for i, d in enumerate(out)]
    return g.node("Expand", [g.input(0), g.const(np.asarray(spec, np.int64))])


@register_converter(S.Flip)
def flip(g, call):  # Slice from the last element back past the first, step -1, on each axis
    axes = [int(a) for a in call.options["axes"]]
    if not axes:
        return g.node("Identity", [g.input(0)])
    return g.slice(g.input(0), [-1] * len(axes), [_INT64_MIN] * len(axes), axes, [-1] * len(axes))


@register_converter(S.Repeat)
def repeat(g, call):  # Tile, after a Reshape that adds the new leading axes of size 1
    reps = [int(r) for r in call.options["reps"]]
    x, rank = g.input(0), len(g.shape(0))
    if len(reps) > rank:
        x = g.unsqueeze(x, list(range(len(reps) - rank)))
    return g.node("Tile", [x, g.const(np.asarray(reps, np.int64))])


@register_converter(S.SetItem)
def setitem(g, call):
    """ScatterND of the value (expanded to the indexed part) at the coordinates the index picks,
    computed at the traced shape (so the graph holds at that size only)."""
    shape = g.shape(0)
    flat = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)[call.options["index"]]
    coords = np.stack(np.unravel_index(np.ravel(flat), shape), axis=-1).astype(np.int64)
    g.require_static("x[index] = v: the scattered coordinates are those of the traced shape")
    picked = np.shape(flat)
    value = g.node("Expand", [g.input(1), g.const(np.asarray(picked, np.int64))])
    value = g.node("Reshape", [value, g.const(np.asarray([-1], np.int64))])
    return g.node("ScatterND", [g.input(0), g.const(coords), value])
