"""Shape ops: reshape, unsqueeze/squeeze, expand, permute/transpose, flatten, getitem and setitem
(x[i] = v), cat, stack, pad, roll, flip, repeat, chunk/split."""
from __future__ import annotations

import functools
import operator

import numpy as np

from .._check import ArgumentTypeError, choice, int_arg, is_int
from ..autograd import Function
from ..tensor import Tensor
from ._promote import promote_types
from ._util import dims, unbroadcast
from .elementwise import cast


class Reshape(Function):
    @staticmethod
    def forward(ctx, a, *, shape):
        ctx.shape = a.shape
        return a.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape)


class Expand(Function):
    """np.broadcast_to: a read-only view, no copy (as torch.expand)."""

    @staticmethod
    def forward(ctx, a, *, shape):
        ctx.shape = a.shape
        return np.broadcast_to(a, shape)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g summed over the broadcast axes
        return np.require(unbroadcast(g, ctx.shape), requirements="C")


class Permute(Function):
    @staticmethod
    def forward(ctx, a, *, dims):
        ctx.dims = dims
        return np.transpose(a, dims)

    @staticmethod
    def backward(ctx, g):  # apply the inverse permutation
        return np.transpose(g, np.argsort(ctx.dims))


class GetItem(Function):
    @staticmethod
    def forward(ctx, a, *, index):
        ctx.meta = (a.shape, a.dtype, index)
        return np.asarray(a[index])

    @staticmethod
    def backward(ctx, g):  # scatter g back; integer arrays may repeat an index, so add.at
        shape, dtype, index = ctx.meta
        out = np.zeros(shape, dtype)
        if _has_array(index):
            np.add.at(out, index, g)
        else:
            out[index] = g
        return out


class SetItem(Function):
    """x with x[index] = v (numpy assignment, v broadcast and cast to x's dtype): the out-of-place
    form that Tensor.__setitem__ writes back in place (torch's CopySlices)."""

    @staticmethod
    def forward(ctx, a, v, *, index):
        ctx.meta = (index, np.shape(v))
        out = a.copy()
        out[index] = v
        return out

    @staticmethod
    def backward(ctx, g):  # dL/dx = g with the assigned part zeroed; dL/dv = g[index], summed
        index, vshape = ctx.meta
        na, nv = ctx.needs_input_grad
        ga = None
        if na:
            ga = g.copy()
            ga[index] = 0
        return ga, (unbroadcast(np.asarray(g[index]), vshape) if nv else None)


class Flip(Function):
    @staticmethod
    def forward(ctx, a, *, axes):
        ctx.axes = axes
        return np.flip(a, axes).copy()  # a copy, as torch.flip (a view would share a's version)

    @staticmethod
    def backward(ctx, g):  # flipping is its own inverse
        return np.flip(g, ctx.axes).copy()


class Repeat(Function):
    """torch's x.repeat(*sizes) (numpy's tile, with len(sizes) >= x.ndim)."""

    @staticmethod
    def forward(ctx, a, *, reps):
        ctx.meta = (a.shape, reps, (1,) * (len(reps) - a.ndim) + a.shape)
        return np.tile(a, reps)

    @staticmethod
    def backward(ctx, g):  # dL/dx = the sum over the copies: g as (r0, s0, r1, s1, ...) summed on r
        shape, reps, full = ctx.meta
        split = g.reshape(tuple(v for pair in zip(reps, full) for v in pair))
        return split.sum(axis=tuple(range(0, 2 * len(full), 2))).reshape(shape)


def _has_array(index):
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, (np.ndarray, list)) for i in items)


class Cat(Function):
    @staticmethod
    def forward(ctx, *arrays, axis):
        ctx.meta = (axis, np.cumsum([a.shape[axis] for a in arrays])[:-1])
        return np.concatenate(arrays, axis=axis)

    @staticmethod
    def backward(ctx, g):  # split g at the original boundaries
        axis, bounds = ctx.meta
        return tuple(np.split(g, bounds, axis=axis))


class Stack(Function):
    @staticmethod
    def forward(ctx, *arrays, axis):
        ctx.axis = axis
        return np.stack(arrays, axis=axis)

    @staticmethod
    def backward(ctx, g):
        return tuple(np.moveaxis(g, ctx.axis, 0))


class Pad(Function):
    """Pad the trailing axes. `widths` is ((before, after), ...) per padded axis, innermost last."""

    @staticmethod
    def forward(ctx, a, *, widths, mode, value):
        full = [(0, 0)] * (a.ndim - len(widths)) + list(widths)
        ctx.meta = (a.shape, full, mode)
        if mode == "constant":
            return np.pad(a, full, mode="constant", constant_values=value)
        return np.pad(a, full, mode=_NUMPY_MODES[mode])

    @staticmethod
    def backward(ctx, g):  # constant: crop; reflect/replicate/circular: fold each copy back, axis by axis
        shape, full, mode = ctx.meta
        for ax, (lo, hi) in enumerate(full):
            if lo == 0 and hi == 0:
                continue
            n = shape[ax]
            src = _pad_source(n, lo, hi, mode)
            g = np.moveaxis(g, ax, 0)
            folded = np.array(g[lo:lo + n])
            if mode != "constant":
                for p in list(range(lo)) + list(range(lo + n, lo + n + hi)):
                    folded[src[p]] += g[p]
            g = np.moveaxis(folded, 0, ax)
        return np.ascontiguousarray(g)


class RollFunction(Function):
    """np.roll by `shifts` along `axes` (None: the flattened array, shape restored)."""

    @staticmethod
    def forward(ctx, a, *, shifts, axes):
        ctx.meta = (shifts, axes)
        return np.roll(a, shifts if axes is not None else shifts[0], axes)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g rolled back by -shifts
        shifts, axes = ctx.meta
        back = tuple(-s for s in shifts)
        return np.roll(g, back if axes is not None else back[0], axes)


class SplitFunction(Function):
    """Pieces of `sizes` along `axis` (views of the input), one output each."""

    @staticmethod
    def forward(ctx, a, *, sizes, axis):
        ctx.axis = axis
        return tuple(np.split(a, np.cumsum(sizes)[:-1], axis=axis))

    @staticmethod
    def backward(ctx, *grads):  # dL/dx = each piece's gradient written into its slice
        return np.concatenate(grads, axis=ctx.axis)


class PadToMultipleFunction(Function):
    """Pad the bottom and right of (..., H, W) up to multiples of `multiple`, plus `border` on every
    side, in one pad, by reflection (by replication when the image is too small to reflect). One op
    whatever the size, unlike a Pad whose widths depend on it, so an exported graph keeps dynamic
    sizes (framework/onnx)."""

    @staticmethod
    def forward(ctx, a, *, multiple, mode, border=0, axes=(-2, -1)):
        axes = [ax % a.ndim for ax in axes]
        h, w = (a.shape[ax] for ax in axes)
        two = ((border, border + -h % multiple), (border, border + -w % multiple))
        if mode == "reflect" and (two[0][1] >= max(h, 1) or two[1][1] >= max(w, 1)):
            mode = "replicate"
        widths = [(0, 0)] * (a.ndim - axes[0])  # Pad's widths: the trailing axes from the first
        widths[0], widths[axes[1] - axes[0]] = two
        return Pad.forward(ctx, a, widths=widths, mode=mode, value=0.0)

    backward = Pad.backward  # fold the padding back


def _requirement_source(n: int, minimum: int, multiple: int) -> np.ndarray:
    """The source row of each row of an axis of n padded to max(n, minimum) rounded up to
    `multiple`: itself, then the reflection (2n - 2 - i) as far as it reaches (n - 1 rows), then row
    0 repeated (the replication of the reflection's last row)."""
    target = -(-max(n, minimum) // multiple) * multiple
    pos = np.arange(target)
    return np.where(pos < n, pos, np.maximum(2 * n - 2 - pos, 0))


class PadToRequirementFunction(Function):
    """Pad the bottom and right of (..., H, W) to max(H, minimum) rounded up to `multiple` (W alike),
    by reflection as far as the image allows and by replication beyond (spandrel's size
    requirements as its call API meets them). One op at every size (an ONNX graph that holds at
    every size: framework/onnx/ops/shape.py)."""

    @staticmethod
    def forward(ctx, a, *, minimum, multiple):
        sources = [_requirement_source(n, minimum, multiple) for n in a.shape[-2:]]
        ctx.meta = (a.shape, sources)
        return np.ascontiguousarray(a[..., sources[0], :][..., sources[1]])

    @staticmethod
    def backward(ctx, g):  # fold every copied row back onto its source, axis by axis
        shape, sources = ctx.meta
        for axis, src in ((-2, sources[0]), (-1, sources[1])):
            n = shape[axis]
            g = np.moveaxis(g, axis, 0)
            folded = np.array(g[:n])
            np.add.at(folded, src[n:], g[n:])
            g = np.moveaxis(folded, 0, axis)
        return np.ascontiguousarray(g)


class CropToFunction(Function):
    """y[..., :H scale, :W scale] for the (H, W) of `reference` (which gets no gradient): undoes
    pad_to_multiple after a network that upscales by `scale`."""

    @staticmethod
    def forward(ctx, y, reference, *, scale):
        h, w = reference.shape[-2] * scale, reference.shape[-1] * scale
        ctx.meta = (y.shape, h, w)
        return np.ascontiguousarray(y[..., :h, :w])

    @staticmethod
    def backward(ctx, g):  # dL/dy = g in the kept corner, 0 elsewhere
        shape, h, w = ctx.meta
        gy = np.zeros(shape, g.dtype)
        gy[..., :h, :w] = g
        return gy, None


_NUMPY_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap",
                "symmetric": "symmetric"}


def _pad_source(n, lo, hi, mode):
    """Input index that each padded position copies (for the non-constant modes)."""
    pos = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(pos, 0, n - 1)
    if mode == "circular":
        return pos % n
    if mode == "symmetric":  # the edge row repeated: ... 1 0 | 0 1 ... n-1 | n-1 n-2 ...
        pos = pos % (2 * n)
        return np.where(pos >= n, 2 * n - 1 - pos, pos)
    if mode == "reflect":
        if n == 1:
            return np.zeros_like(pos)
        period = 2 * (n - 1)
        pos = np.abs(pos) % period
        return np.where(pos >= n, period - pos, pos)
    return pos


def reshape(x, *shape):
    """View `x` with a new shape (one dimension may be -1)."""
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    try:
        np.empty(x.shape, dtype=np.bool_).reshape(shape)
    except ValueError:
        raise ValueError(f"reshape: cannot reshape a tensor of shape {x.shape} into {shape}") from None
    return Reshape.apply(x, shape=shape)


@dims
def unsqueeze(x, dim):
    """torch.unsqueeze: a size-1 axis inserted at `dim` (alias axis) in [-ndim - 1, ndim]; a view."""
    d = _dim("unsqueeze", dim, x.ndim + 1)
    return Reshape.apply(x, shape=x.shape[:d] + (1,) + x.shape[d:])


@dims
def squeeze(x, dim=None):
    """torch.squeeze: drop the size-1 axes among `dim` (alias axis; an int, a tuple, or None for
    all); a listed axis of another size stays, as in torch. A view."""
    if dim is None:
        axes = range(x.ndim)
    else:
        axes = {_dim("squeeze", d, max(x.ndim, 1)) for d in _ints("squeeze", "dim", dim)}
    shape = tuple(n for i, n in enumerate(x.shape) if not (i in axes and n == 1))
    return Reshape.apply(x, shape=shape)


def expand(x, *sizes):
    """torch.expand: x broadcast to `sizes` (ints or one tuple) without copying: a size-1 axis
    grows to any size, -1 keeps an axis's size, new axes go in front. The result is a read-only
    view (clone() it to write). The gradient sums over the broadcast axes."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    sizes = _ints("expand", "sizes", sizes) if sizes else ()
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise ValueError(f"expand: {len(sizes)} sizes {sizes} for a tensor of {x.ndim} dimensions "
                         f"(shape {x.shape}): give at least one size per dimension")
    shape = []
    for i, n in enumerate(sizes):
        if i < lead:
            if n < 0:
                raise ValueError(f"expand: size {n} is not allowed for the new leading dimension {i} "
                                 f"(sizes {sizes})")
        else:
            old = x.shape[i - lead]
            n = old if n == -1 else n
            if n != old and old != 1:
                raise ValueError(f"expand: size {n} must match the existing size {old} at "
                                 f"non-singleton dimension {i} (sizes {sizes}, shape {x.shape})")
            if n < 0:
                raise ValueError(f"expand: negative size {n} at dimension {i} (sizes {sizes})")
        shape.append(n)
    return Expand.apply(x, shape=tuple(shape))


def permute(x, *dims):
    dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    if sorted(d % max(x.ndim, 1) for d in dims) != list(range(x.ndim)):
        raise ValueError(f"permute: {dims} is not a permutation of the {x.ndim} axes of shape {x.shape}")
    return Permute.apply(x, dims=tuple(d % x.ndim for d in dims))


def transpose(x, dim0=-2, dim1=-1):
    """Swap two axes (default: the last two)."""
    dims = list(range(x.ndim))
    dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
    return Permute.apply(x, dims=tuple(dims))


def flatten(x, start_dim=0, end_dim=-1):
    """Merge axes start_dim..end_dim into one, as torch.flatten."""
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = start_dim % x.ndim, end_dim % x.ndim
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = x.shape[:s] + (int(np.prod(x.shape[s:e + 1])),) + x.shape[e + 1:]
    return Reshape.apply(x, shape=shape)


def as_index(owner, shape, index):
    """(numpy index, the shape it selects): Tensors in the index become their arrays, a list an
    array; an index that does not fit `shape` is an IndexError naming `owner`."""
    if isinstance(index, Tensor):
        index = index.data
    elif isinstance(index, tuple):
        index = tuple(i.data if isinstance(i, Tensor) else i for i in index)
    elif isinstance(index, list):
        index = np.asarray(index)
    try:
        picked = np.empty(shape, np.bool_)[index]
    except IndexError as e:
        raise IndexError(f"{owner}: index {index!r} on a tensor of shape {shape}: {e}") from None
    return index, np.shape(picked)


def getitem(x, index):
    """numpy indexing (ints, slices, None, Ellipsis, integer or boolean arrays)."""
    return GetItem.apply(x, index=as_index("getitem", x.shape, index)[0])


def put_index(shape, index, value):
    """The numpy index of `x[index] = value` on a tensor of `shape`, checked: the index fits and
    the value broadcasts to the part it selects."""
    index, picked = as_index("setitem", shape, index)
    vshape = np.shape(value.data if isinstance(value, Tensor) else value)
    try:
        np.broadcast_to(np.empty(vshape, np.bool_), picked)
    except ValueError:
        raise ValueError(f"setitem: a value of shape {vshape} does not broadcast to the indexed "
                         f"shape {picked}") from None
    return index


def index_put(x, index, value):
    """x with x[index] = value, out of place (what `x[index] = value` records): the gradient
    flows to the unassigned part of x and to a tensor value (summed where it was broadcast)."""
    index = put_index(x.shape, index, value)
    if isinstance(value, Tensor) and value.dtype != x.dtype:
        value = cast(value, x.dtype)
    return SetItem.apply(x, value if isinstance(value, Tensor) else np.asarray(value), index=index)


def flip(x, dims):
    """torch.flip: x reversed along each axis in `dims` (an int or a sequence; a copy)."""
    dims = _ints("flip", "dims", dims)
    axes = tuple(_dim("flip", d, max(x.ndim, 1), "dims") for d in dims)
    if len(set(axes)) != len(axes):
        raise ValueError(f"flip: dim {dims} appears more than once")
    return Flip.apply(x, axes=axes if x.ndim else ())


def repeat(x, *sizes):
    """torch's x.repeat(*sizes): x tiled sizes[i] times along axis i; `sizes` (ints or one
    sequence) has at least x.ndim entries, extra leading ones add axes."""
    reps = _ints("repeat", "sizes", sizes[0] if len(sizes) == 1 and
                 isinstance(sizes[0], (tuple, list)) else sizes)
    if len(reps) < x.ndim:
        raise ValueError(f"repeat: {len(reps)} repeat sizes for a tensor with {x.ndim} dimensions "
                         f"(give at least one per dimension)")
    if any(r < 0 for r in reps):
        raise ValueError(f"repeat: sizes must be >= 0, got {reps}")
    return Repeat.apply(x, reps=reps)


@dims
def cat(tensors, axis=0):
    """Concatenate along an existing `axis` (alias dim, default 0); every other axis must match."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected at least one tensor")
    ref = tensors[0].shape
    ax = axis % len(ref)
    for t in tensors[1:]:
        if len(t.shape) != len(ref) or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref)) if i != ax):
            raise ValueError(f"cat: shapes {ref} and {t.shape} differ outside axis {axis}")
    return Cat.apply(*_one_dtype(tensors), axis=ax)


@dims
def stack(tensors, axis=0):
    """Stack equal-shaped tensors along a new `axis` (alias dim, default 0)."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected at least one tensor")
    for t in tensors[1:]:
        if t.shape != tensors[0].shape:
            raise ValueError(f"stack: shapes {tensors[0].shape} and {t.shape} differ")
    return Stack.apply(*_one_dtype(tensors), axis=axis % (tensors[0].ndim + 1))


def _one_dtype(tensors):
    """cat's and stack's operands in their promoted dtype (torch's: int64 with float32 is
    float32), each cast differentiably where it differs."""
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) == 1:
        return tensors
    dtype = functools.reduce(promote_types, dtypes)
    return [t if t.dtype == dtype else cast(t, dtype) if isinstance(t, Tensor) else
            np.asarray(t, dtype) for t in tensors]


def pad(x, pad, mode="constant", value=0.0):
    """torch.nn.functional.pad: `pad` = (left, right, top, bottom, ...) from the last axis inwards.
    Modes: constant, reflect (no edge repeat), replicate (edge repeat), circular."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"pad: unknown mode {mode!r}; known: constant, reflect, replicate, circular")
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"pad: pad {pad} needs an even length of at most 2*{x.ndim}")
    widths = [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)][::-1]
    for k, (lo, hi) in enumerate(widths):
        n = x.shape[x.ndim - len(widths) + k]
        if lo < 0 or hi < 0:
            raise ValueError(f"pad: negative padding {pad} is not supported (torch crops there; "
                             f"slice the tensor instead)")
        if mode == "reflect" and (lo >= n or hi >= n):
            raise ValueError(f"pad: reflect padding {(lo, hi)} must be smaller than the axis size {n} "
                             f"(shape {x.shape})")
        if mode in ("replicate", "circular") and n == 0:
            raise ValueError(f"pad: {mode} padding of an empty axis (shape {x.shape})")
        if mode == "circular" and (lo > n or hi > n):
            raise ValueError(f"pad: circular padding {(lo, hi)} exceeds the axis size {n}")
    return Pad.apply(x, widths=tuple(widths), mode=mode, value=value)


def _dim(owner, dim, ndim, name="dim"):
    """dim as a non-negative axis of an ndim-dimensional tensor (negative counts from the end)."""
    d = int_arg(owner, name, dim, minimum=None)
    if not -ndim <= d < ndim:
        raise ValueError(f"{owner}: {name} {d} is out of range for a tensor with {ndim} dimensions "
                         f"(expected [{-ndim}, {ndim - 1}])")
    return d % ndim


def _ints(owner, name, value):
    """An int or a non-empty sequence of ints, as a tuple."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not items or not all(is_int(v) for v in items):
        raise ArgumentTypeError(f"{owner}: {name} must be an int or a sequence of ints, got {value!r}")
    return tuple(int(v) for v in items)


def roll(x, shifts, dims=None):
    """torch.roll: shift x's elements by `shifts` along `dims` (ints, or sequences of equal length;
    repeated dims add up), wrapping around. dims=None (default) rolls the flattened tensor by one
    shift and restores the shape."""
    shifts = _ints("roll", "shifts", shifts)
    if dims is None or dims == () or dims == []:
        if len(shifts) != 1:
            raise ValueError(f"roll: without dims, shifts must be one int, got {shifts}")
        return RollFunction.apply(x, shifts=shifts, axes=None)
    dims = _ints("roll", "dims", dims)
    if len(dims) != len(shifts):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    axes = tuple(_dim("roll", d, max(x.ndim, 1), "dims") for d in dims)
    if x.ndim == 0:
        return RollFunction.apply(x, shifts=shifts[:1], axes=None)
    return RollFunction.apply(x, shifts=shifts, axes=axes)


def _split(x, sizes, axis):
    return SplitFunction.apply(x, sizes=tuple(sizes), axis=axis)


def split(x, split_size_or_sections, dim=0):
    """torch.split: a tuple of pieces of x along `dim` (default 0). An int gives pieces of that size
    (the last one smaller when the size does not divide); a list of sizes (summing to the axis
    size) gives one piece per entry. The backward writes each piece's gradient into its slice."""
    if x.ndim == 0:
        raise ValueError("split: a scalar has no dimension to split")
    axis = _dim("split", dim, x.ndim)
    n = x.shape[axis]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = tuple(int_arg("split", "split_size_or_sections", s, minimum=0)
                      for s in split_size_or_sections)
        if sum(sizes) != n:
            raise ValueError(f"split: sections {list(sizes)} must sum to the size {n} of dim {dim} "
                             f"(shape {x.shape})")
        return _split(x, sizes, axis)
    size = int_arg("split", "split_size_or_sections", split_size_or_sections, minimum=0)
    if size == 0 and n != 0:
        raise ValueError(f"split: split size 0 needs an empty dimension, dim {dim} has size {n}")
    count = max(-(-n // size), 1) if size else 1
    return _split(x, [min(size, n - i * size) for i in range(count)], axis)


def chunk(x, chunks, dim=0):
    """torch.chunk: split x along `dim` (default 0) into at most `chunks` pieces of ceil(size /
    chunks) (the last one smaller; fewer pieces when that size leaves none over). A tuple."""
    chunks = int_arg("chunk", "chunks", chunks)
    if x.ndim == 0:
        raise ValueError("chunk: a scalar has no dimension to chunk")
    axis = _dim("chunk", dim, x.ndim)
    n = x.shape[axis]
    if n == 0:
        return _split(x, [0] * chunks, axis)
    return split(x, -(-n // chunks), axis)


def pad_to_multiple(x, multiple: int, mode: str = "reflect", border: int = 0, axes=(-2, -1)):
    """Pad (..., H, W) at the bottom and right so H and W become multiples of `multiple` (what
    SwinIR's and RRDBNet's inference do): mode "reflect" (falls back to "replicate" for an image
    smaller than the padding), "replicate", "constant" (zeros, OmniSR's) or "symmetric" (a
    reflection that repeats the edge row, torch.cat([x, x.flip(-2)], -2)[..., :H', :]: ATD's).
    `border` (default 0) pads that much more on every side in the same pad, as torch's F.pad(x,
    (b, b + pw, b, b + ph), mode) with pw, ph the padding to the multiple (Real-CUGAN's input padding; a reflection of the
    unpadded image, not of the padded one). Undo with crop_to (and a crop of the border).
    axes: the two axes padded, (-2, -1) by default; e.g. (1, 2) for channels-last (B, H, W, C)."""
    multiple = int_arg("pad_to_multiple", "multiple", multiple)
    border = int_arg("pad_to_multiple", "border", border, 0)
    choice("pad_to_multiple", "mode", mode, ("reflect", "replicate", "constant", "symmetric"))
    if x.ndim < 2:
        raise ValueError(f"pad_to_multiple: expected (..., H, W), got shape {x.shape}")
    try:
        raw = tuple(operator.index(a) for a in axes)
    except TypeError:
        raise ValueError(f"pad_to_multiple: axes must be two ints, got {axes!r}") from None
    if len(raw) != 2 or any(not -x.ndim <= a < x.ndim for a in raw) or \
            raw[0] % x.ndim >= raw[1] % x.ndim:
        raise ValueError(f"pad_to_multiple: axes must be two increasing axes of a {x.ndim}-D "
                         f"input, got {axes!r}")
    axes = tuple(a % x.ndim for a in raw)
    if axes == (x.ndim - 2, x.ndim - 1):
        return PadToMultipleFunction.apply(x, multiple=multiple, mode=mode, border=border)
    return PadToMultipleFunction.apply(x, multiple=multiple, mode=mode, border=border, axes=axes)


def pad_to_requirement(x, minimum: int = 1, multiple: int = 1):
    """Pad (..., H, W) at the bottom and right to max(H, minimum) rounded up to `multiple` (W
    alike): by reflection as far as the image allows (H - 1 rows), then by replication (spandrel's
    SizeRequirements(minimum, multiple_of) as its call API pads; Real-CUGAN's and OmniSR's). An
    image that already meets them comes back unchanged (one copy). Undo with crop_to."""
    minimum = int_arg("pad_to_requirement", "minimum", minimum, 1)
    multiple = int_arg("pad_to_requirement", "multiple", multiple, 1)
    if x.ndim < 2:
        raise ValueError(f"pad_to_requirement: expected (..., H, W), got shape {x.shape}")
    return PadToRequirementFunction.apply(x, minimum=minimum, multiple=multiple)


def crop_to(y, reference, scale: int = 1):
    """y[..., :H scale, :W scale] with (H, W) the last two sizes of `reference` (a Tensor, no
    gradient through it): the output of a network that saw pad_to_multiple(reference, ...)."""
    scale = int_arg("crop_to", "scale", scale)
    h, w = reference.shape[-2] * scale, reference.shape[-1] * scale
    if y.shape[-2] < h or y.shape[-1] < w:
        raise ValueError(f"crop_to: {tuple(y.shape)} is smaller than reference {tuple(reference.shape)} "
                         f"times scale {scale}")
    return CropToFunction.apply(y, reference, scale=scale)
