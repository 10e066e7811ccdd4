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


@register_converter(S.Reshape)
def reshape(g, call):
    src, out = g.shape(0), g.out_shape()
    if 0 in src or 0 in out:
        raise ConversionError(f"{call.describe()}: reshaping an empty tensor is not exported")
    spec = [0 if i < len(src) and src[i] == d else d for i, d in enumerate(out)]
    free = [i for i, d in enumerate(spec) if d != 0]
    if free:  # infer the largest free dimension: it is the one that grows with the image
        spec[max(free, key=lambda i: spec[i])] = -1
    return g.node("Reshape", [g.input(0), g.const(np.asarray(spec, np.int64))])


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
    y = g.input(0)
    if axes:
        y = g.slice(y, starts, ends, axes, steps)
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
    # with a shift of 0 < s < n, the split points -s and n - s hold at any size >= s (dynamic axes)
    tail = g.slice(x, [-s], [np.iinfo(np.int64).max], [axis])
    head = g.slice(x, [0], [-s], [axis])
    return g.node("Concat", [tail, head], axis=int(axis))


@register_converter(S.SplitFunction)
def split(g, call):  # -> one output per piece
    sizes, axis = call.options["sizes"], call.options["axis"]
    outs = g.node("Split", [g.input(0), g.const(np.asarray(sizes, np.int64))], outputs=len(sizes),
                  axis=int(axis))
    return outs if len(sizes) > 1 else (outs,)


def _spatial(g, x):
    """The (H, W) of x as an int64 tensor (Shape's last two entries)."""
    return g.node("Shape", [x], start=-2)


@register_converter(S.PadToMultipleFunction)
def pad_to_multiple(g, call):  # pads b + (m - H % m) % m at the bottom, the same for W, from Shape
    m, shape, mode = call.options["multiple"], g.shape(0), call.options["mode"]
    b = call.options.get("border", 0)
    if mode == "reflect" and any(b + -n % m >= max(n, 1) for n in shape[-2:]):
        g.require_static("pad_to_multiple: the traced image is smaller than its padding (replicated "
                         "instead of reflected)")
        mode = "replicate"
    mm = g.const(np.asarray([m, m], np.int64))
    pad = g.node("Mod", [g.node("Sub", [mm, g.node("Mod", [_spatial(g, g.input(0)), mm])]), mm])
    if b:
        pad = g.node("Add", [pad, g.const(np.asarray([b, b], np.int64))])
    lead = np.zeros(len(shape) - 2, np.int64)
    begins = g.const(np.concatenate([lead, [b, b]]).astype(np.int64))
    pads = g.node("Concat", [begins, g.const(lead), pad], axis=0)
    return g.node("Pad", [g.input(0), pads], mode=_PAD_MODES[mode])  # constant: zeros, Pad's default


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
