"""bfloat16 operands handed from convolution to convolution in an inference graph (a step of fold,
under autocast("bf16") where the CPU has AMX): a convolution on the AMX route reads its input as
bfloat16 planes of channel pairs (_direct_amx.layout: rounded once, padded), and a convolution whose
output only AMX convolutions read writes those planes itself instead of a float32 array
(_direct_amx._put_row_pairs); a ReLU, PReLU or LeakyReLU op between them (RCAN's, SRVGGNetCompact's
blocks, MSRResNet's and RRDBNet's conv_hr) is done by the writer's epilogue with the op's own
formula (the same values).

A group: the AMX convolutions that read the same values, directly or through a channel Cat that
only they read (RRDBNet's dense block: conv_k reads cat(x, x1, ..., x_{k-1})), all with the same
geometry (padding, kernel, sizes). Its values share one arena of planes, each value in its own
region (8 planes for at most 16 channels, else whole blocks of 32 channels), in the order of the
longest Cat: every Cat of the group is then a contiguous span of the arena, read in place (no
concatenation) in whole blocks of 16 planes, the last one ending at the span's end
(_direct_amx.block_starts: RRDBNet's conv_5 reads 32 + 4 x 16 channels in 3 blocks, not 5), and each
reader's weights are packed at its channels' positions there (zeros over a region's padding, whose
planes stay zero, and where a block reads a plane again). Each tile product then sums the pairs the
eager Cat's does (tdpbf16ps does not round pair by pair: a value split over two tile products changes
the bits, docs/numerics.md): a group where a value before a span's end leaves a gap in its region is
not made.
A value that something else reads too (a residual add, the graph's output) keeps its float32 array
and is laid out into its region once, after the op that makes it; with a Cat per reader, the
eager graph rounded it once per reader. A group is rewritten only where that saves work (a value
written as planes, a Cat read in place, a value read twice), and groups of the same structure
whose ops do not interleave (a network's blocks) share one arena.

A convolution whose output only a PixelShuffle reads (an upsampler) stores its output shuffled,
with an activation that alone reads the shuffle's output (MSRResNet's LeakyReLU; the activation
commutes with the permutation): the shuffle's and the activation's ops are dropped. Where only AMX
convolutions read the shuffled value (EDSR's and RCAN's last conv, MSRResNet's conv_hr), the upsampler
writes their planes, shuffled (_direct_amx._put_shuffled_pairs): the float32 array at the output's
resolution is neither written nor laid out.

A nearest upsampling by integer factors (ESRGAN's `interpolate(x, scale_factor=2)` before conv_up)
whose output only one such convolution reads is not made. Where that convolution is 3x3 (padding 1)
and writes planes, it reads the small value's own planes phase by phase (_direct_amx.run's `phases`:
output pixel (h r + a, w r + c) is phase (a, c), whose taps read the small pixels the repetition
would repeat; the same sums, its epilogue writing each phase's pixels of its output): neither the
upsampled float32 array nor planes r^2 times the small value's are made. Otherwise it lays out the
small value, each pair rounded once and repeated (_direct_amx.layout's `repeat`). Where the small
value is an AMX convolution's output that only the upsampling reads (ESRGAN's conv_up1 before
conv_up2), that convolution writes the small value's planes (for a reader in phases) or those of
the upsampling (_direct_amx.run's `repeat`): the small float32 array is not made either.

A convolution that lays out its float32 input x itself because something else reads x too (a
residual chain's next block: EDSR's and MSRResNet's `x + body(x)`) reads planes that x's producer
writes beside x, where that producer is an AMX convolution storing x (its residual add fused:
_direct_amx.run's `keep`, keep_planes, after the fusions of _lower.py): one pass over x fewer.

What each convolution computes is unchanged: the planes hold the bits `layout` makes from the float32
values (the epilogue rounds what it would have stored), and every sum runs in the same order, so
the graph's outputs are the eager bf16 graph's bits (tests/framework/test_capture_planes.py).
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from .. import precision
from ..functional import _direct_amx, conv
from ..functional._direct import _aligned_empty, _blocks
from ..functional.activation import LeakyReLUFunction, PReLUFunction, ReLUFunction
from ..functional.pixel_shuffle import PixelShuffleFunction
from ..functional.resample import ResampleFunction
from ..functional.shape import Cat
from ._kinds import _FIXED, _SLOT


class _Arena:
    """A group's planes (N, planes, S) uint32 of padded rows of Wp, zero at first use, kept per
    thread: a region's borders and padding are never written, so they stay zero from call to call.
    Groups of the same structure (the same regions) whose ops do not interleave share one (the
    blocks of a network one after another): each writes every position it reads before reading it."""

    def __init__(self, shape, Wp):
        self.shape, self.Wp, self._local = shape, Wp, threading.local()

    def get(self):
        a = getattr(self._local, "planes", None)
        if a is None:
            a = self._local.planes = _aligned_empty(self.shape, np.uint32)
            a[...] = 0
        return a


def _amx_conv(op, cls, slot_meta):
    """A Conv2dFunction entry that runs on the AMX route under bf16, as a dict, else None."""
    if cls is not conv.Conv2dFunction:
        return None
    _, spec, kwargs, _, first = op
    if set(kwargs) - {"geo", "relu_slope"} or len(spec) not in (2, 3):
        return None
    (kx, x), (kw, w) = spec[:2]
    kb, b = spec[2] if len(spec) == 3 else (_FIXED, None)
    if kx != _SLOT or kw != _FIXED or kb != _FIXED:
        return None
    shape, dtype = slot_meta[x]
    geo = kwargs["geo"]
    if len(shape) != 4 or np.dtype(dtype) != np.float32 or np.asarray(w).dtype != np.float32:
        return None
    C, O = shape[1], w.shape[0]
    if conv._large_route(geo, C, O) or not conv._amx_route(C) or not (
            conv._direct_route(geo, C, O) or conv._few_outputs_amx(geo, C, O, np.float32)):
        return None
    return {"x": x, "w": np.ascontiguousarray(w), "b": b, "geo": geo, "slope": kwargs.get("relu_slope"),
            "N": shape[0], "O": O, "out": first}


def _channel_cat(op, cls, slot_meta):
    """The input slots of a Cat over the channels of 4-D float32 values, else None."""
    if cls is not Cat:
        return None
    _, spec, kwargs, _, _ = op
    if kwargs.get("axis") not in (1, -3) or not spec or any(kind != _SLOT for kind, _ in spec):
        return None
    metas = [slot_meta[v] for _, v in spec]
    if any(len(s) != 4 or np.dtype(d) != np.float32 for s, d in metas):
        return None
    return [v for _, v in spec]


def _sublist(part, whole):
    """The start of `part` as a contiguous run of `whole`, else None."""
    for i in range(len(whole) - len(part) + 1):
        if whole[i:i + len(part)] == part:
            return i
    return None


def share_planes(ops, classes, graph):
    """(ops, classes) with each group's convolutions reading and writing planes; unchanged outside
    autocast("bf16") on AMX or where no group qualifies."""
    if not precision.bf16_active(np.float32) or not precision.support().amx_bf16:
        return ops, classes
    ops, classes, shuffled = _fold_shuffles(ops, classes, graph)
    meta, outputs = graph.slot_meta, set(graph.outputs.values())
    at = {op[4]: k for k, op in enumerate(ops)}  # an op's first output slot -> op index
    readers = _readers(ops)
    convs = {k: c for k, op in enumerate(ops) if (c := _amx_conv(op, classes[k], meta)) is not None}
    relus = {}  # an activation's output slot -> (its op, the conv whose output only it reads, slope)
    for j, (_, spec, kwargs, _, first) in enumerate(ops):
        slope = _activation(classes[j], spec, kwargs)
        if slope is not None:
            k = at.get(spec[0][1])
            if k in convs and convs[k]["slope"] is None and readers[spec[0][1]] == [j] \
                    and spec[0][1] not in outputs and np.size(slope) in (1, convs[k]["O"]):
                relus[first] = (j, k, slope if np.ndim(slope) == 0 else np.resize(slope, convs[k]["O"]))
    sources, cats = {}, {}  # reader conv -> its value slots; Cat op -> its readers
    for k, c in convs.items():
        j = at.get(c["x"])
        parts = _channel_cat(ops[j], classes[j], meta) if j is not None else None
        if parts is not None and c["x"] not in outputs and all(r in convs for r in readers[c["x"]]) \
                and len(set(parts)) == len(parts):
            sources[k] = parts
            cats.setdefault(j, []).append(k)
        else:
            sources[k] = [c["x"]]
    nearest = {}  # reader conv -> (the small value, rh, rw): a nearest upsampling only it reads
    for k, c in convs.items():
        j = at.get(c["x"])
        rep = _replication(ops[j], classes[j]) if j is not None else None
        if rep is not None and sources[k] == [c["x"]] and readers[c["x"]] == [k] and c["x"] not in outputs:
            nearest[k] = (j, rep)
            del sources[k]
    groups = _groups(sources)
    made = []  # (span of op indices, structure, group, plan)
    for group in groups:
        plan = _plan(group, sources, convs, cats, readers, outputs, at, meta, relus)
        if plan is not None:
            structure, place, writers, lay = plan
            ends = [*group, *(k for k, _, _ in writers.values()), *(_producer(ops, v, graph) for v, *_ in lay)]
            made.append(((min(ends), max(ends)), structure, group, plan))
    plans, drop, extra = {}, set(), []  # conv -> its new forward parts; Cats dropped; layouts added
    pool = {}  # structure -> [[arena, the last op using it]]: groups one after another share one
    for (start, end), structure, group, (_, place, writers, lay) in sorted(made, key=lambda m: m[0]):
        free = [e for e in pool.setdefault(structure, []) if e[1] < start]
        if free:
            free[0][1] = end
            arena = free[0][0]
        else:
            arena = _Arena(*structure[:2])
            pool[structure].append([arena, end])
        for k in group:
            plans.setdefault(k, {})["read"] = (arena, place[k])
        for v, (k, dgeo, relu) in writers.items():
            plans.setdefault(k, {})["write"] = (arena, dgeo)
            if relu is not None:  # the activation done by the conv's epilogue (the op's values)
                plans[k]["slope"] = relu[1]
                drop.add(relu[0])
        for v, region, pad, count in lay:
            extra.append((v, arena, region, pad, count))
        drop.update(j for j in cats if all(r in group for r in cats[j]))
    ops = list(ops)
    for k, c in convs.items():  # the conv stores its output shuffled (and activated): _fold_shuffles
        if c["out"] in shuffled:
            plans.setdefault(k, {})["shuffle"] = shuffled[c["out"]][0]
            if shuffled[c["out"]][1] is not None:
                plans[k]["slope"] = shuffled[c["out"]][1]
    for k, (j, rep) in sorted(nearest.items(), reverse=True):  # the conv lays out the small value, upsampled
        ops[k] = (ops[k][0], ((_SLOT, rep[0]), *ops[k][1][1:]), *ops[k][2:])
        drop.add(j)
        writer = _repeat_writer(rep[0], j, convs, relus, readers, outputs, at, plans, shuffled)
        c = convs[k]
        same = c["geo"].kernel == (3, 3) and tuple(c["geo"].padding) == (1, 1) and \
            tuple(c["geo"].features) == tuple(c["geo"].image)  # a 3x3 "same" conv: phases of the small value's pixels
        phased = same and plans.get(k, {}).get("write") is not None and plans[k].get("shuffle", 1) == 1 \
            and "write_repeat" not in plans[k]  # (the readers after it first: its writer's own read may be in phases)
        if phased:
            plans[k]["phases"] = rep[1:]  # it reads the small value's own planes, phase by phase
        if writer is None:
            if not phased:
                plans.setdefault(k, {})["repeat"] = rep[1:]
            continue
        p, relu = writer  # the small value's conv writes its planes (read in phases) or its upsampling's
        Wp, _, S = _direct_amx.plane_geometry(convs[p]["geo"].features if phased else c["geo"].features,
                                              c["geo"].kernel)
        arena = _Arena((c["N"], _blocks(convs[p]["O"], 32) * _direct_amx.TILE, S), Wp)
        dgeo = np.array([0, c["geo"].padding[0], c["geo"].padding[1], Wp], np.int64)
        plans.setdefault(p, {})["write"] = (arena, dgeo)
        if not phased:
            plans[p]["write_repeat"] = rep[1:]
        if relu is not None:
            plans[p]["slope"] = relu[1]
            drop.add(relu[0])
        plans.setdefault(k, {})["read"] = (arena, (0, _direct_amx.pack_weight(c["w"]), None))
    for k in convs:  # every other AMX conv: its weights packed once, and keep_planes can feed it
        plans.setdefault(k, {})
    if not plans:
        return ops, classes
    after = {}
    for s, arena, region, pad, count in extra:
        after.setdefault(_producer(ops, s, graph), []).append(_layout_op(graph, s, arena, region, pad, count))
    new_ops, new_classes = [], []
    for j in after.get(-1, []):  # regions of the graph's inputs
        new_ops.append(j)
        new_classes.append(None)
    for k, op in enumerate(ops):
        if k in drop:
            continue
        if k in plans:
            op = (_conv_forward(convs[k], plans[k]), *op[1:])
        new_ops.append(op)
        new_classes.append(classes[k])
        for j in after.get(k, []):
            new_ops.append(j)
            new_classes.append(None)
    return new_ops, new_classes


def _repeat_writer(v, j, convs, relus, readers, outputs, at, plans, shuffled):
    """(the AMX conv that makes the value v, the activation op it would do or None) where v's only
    reader is the nearest upsampling j and that conv writes nothing else: it can write the planes of
    the upsampling itself (_direct_amx.run's `repeat`), else None."""
    if v in outputs or readers.get(v) != [j]:
        return None
    relu = None
    if v in relus:  # an activation of the conv's output: the conv writes it, activated
        a, p, slope = relus[v]
        relu = (a, slope)
    else:
        p = at.get(v)
    if p not in convs or convs[p]["out"] in shuffled or any(key in plans.get(p, {}) for key in ("write", "slope")):
        return None
    return p, relu


def _readers(ops):
    """{slot: [the ops that read it]}."""
    readers = {}
    for k, (_, spec, _, _, _) in enumerate(ops):
        for kind, v in spec:
            if kind == _SLOT:
                readers.setdefault(v, []).append(k)
    return readers


def _fold_shuffles(ops, classes, graph):
    """(ops, classes, {conv output slot: (r, activation slope or None)}): each AMX conv whose output
    only a PixelShuffle reads (EDSR's, RCAN's, MSRResNet's upsamplers) stores that shuffle itself, and
    with it an activation that alone reads the shuffle's output where the conv has none (MSRResNet's
    LeakyReLU; a PReLU's per-channel weights repeated over each channel's r^2 outputs): those ops
    are dropped and their readers read the conv's slot, whose meta becomes theirs."""
    meta, outputs = graph.slot_meta, set(graph.outputs.values())
    readers, found, renamed, drop = _readers(ops), {}, {}, set()
    for k, op in enumerate(ops):
        c = _amx_conv(op, classes[k], meta)
        j = readers.get(c["out"], []) if c is not None else []
        if len(j) != 1 or classes[j[0]] is not PixelShuffleFunction or c["out"] in outputs \
                or set(ops[j[0]][2]) != {"r"} or c["O"] % ops[j[0]][2]["r"] ** 2:
            continue
        j, r = j[0], ops[j[0]][2]["r"]
        final, slope, drops = ops[j][4], None, [j]
        after = readers.get(final, [])
        if len(after) == 1 and final not in outputs and c["slope"] is None:
            a = after[0]
            slope = _activation(classes[a], ops[a][1], ops[a][2])
            if slope is not None and np.size(slope) in (1, c["O"] // (r * r)):
                final, drops = ops[a][4], [j, a]
                slope = slope if np.ndim(slope) == 0 else np.repeat(np.resize(slope, c["O"] // (r * r)), r * r)
            else:
                slope = None
        found[c["out"]] = (r, slope)
        drop.update(drops)
        renamed[final] = c["out"]
        meta[c["out"]] = meta[final]
    if not found:
        return ops, classes, found
    kept = [k for k in range(len(ops)) if k not in drop]
    ops = [(f, tuple((kind, renamed.get(v, v)) if kind == _SLOT else (kind, v) for kind, v in spec), kw, needs, first)
           for f, spec, kw, needs, first in (ops[k] for k in kept)]
    graph.outputs = {name: renamed.get(v, v) for name, v in graph.outputs.items()}
    return ops, [classes[k] for k in kept], found


def _activation(cls, spec, kwargs):
    """The slope of a ReLU (0.0) or PReLU (its weight array, one per channel or one shared) op on a
    slot, as _direct_amx.run takes it; a LeakyReLU's as a PReLU's single weight (its formula, x if
    x > 0 else slope x, is PReLU's for every value); else None."""
    if not spec or spec[0][0] != _SLOT:
        return None
    if cls is LeakyReLUFunction and len(spec) == 1 and set(kwargs) == {"negative_slope"}:
        return np.array([kwargs["negative_slope"]], np.float32)
    if kwargs:
        return None
    if cls is ReLUFunction and len(spec) == 1:
        return 0.0
    if cls is PReLUFunction and len(spec) == 2 and spec[1][0] == _FIXED:
        w = np.asarray(spec[1][1])
        return np.ascontiguousarray(w, np.float32).reshape(-1) if w.dtype == np.float32 else None
    return None


def _replication(op, cls):
    """(input slot, rh, rw) of a ResampleFunction op that is a nearest upsampling by integer factors
    (each axis table one tap of weight 1 at index o // r: its output is its input's values
    repeated), else None."""
    if cls is not ResampleFunction or len(op[1]) != 1 or op[1][0][0] != _SLOT:
        return None
    factors = []
    for table in op[2].get("tables", ()):
        r = table.m // table.n
        if table.index.shape[1] != 1 or table.m != r * table.n or r < 1 \
                or not (table.weight == 1).all() or not (table.index[:, 0] == np.arange(table.m) // r).all():
            return None
        factors.append(r)
    return (op[1][0][1], *factors) if len(factors) == 2 else None


def _producer(ops, v, graph):
    """The index of the op that makes slot v (-1: a graph input); ops number their slots in order."""
    if v < graph.n_inputs:
        return -1
    return int(np.searchsorted([op[4] for op in ops], v, side="right")) - 1


def _groups(sources):
    """Reader convs grouped by the values they share (union-find over the value slots)."""
    parent = {}

    def root(v):
        while parent.setdefault(v, v) != v:
            v = parent[v]
        return v

    for parts in sources.values():
        for v in parts[1:]:
            parent[root(v)] = root(parts[0])
    by = {}
    for k, parts in sources.items():
        by.setdefault(root(parts[0]), []).append(k)
    return list(by.values())


def _plan(group, sources, convs, cats, readers, outputs, at, meta, relus):
    """(structure: the arena's shape, row length and regions; {reader: (first plane, packed
    weight)}, {value: (writer conv, dgeo, the ReLU op it does or None)}, [(value, first plane,
    padding)] layouts) for one group, or None where its readers differ in geometry,
    no order makes every reader's values a contiguous run, or nothing would be saved (no value
    written as planes, no Cat read in place, no value read twice)."""
    geo0 = convs[group[0]]["geo"]
    key = (convs[group[0]]["N"], geo0.kernel, geo0.padding, geo0.image, geo0.features)
    if any((convs[k]["N"], convs[k]["geo"].kernel, convs[k]["geo"].padding, convs[k]["geo"].image,
            convs[k]["geo"].features) != key for k in group):
        return None
    order = max((sources[k] for k in group), key=len)
    starts = {k: _sublist(sources[k], order) for k in group}
    if any(s is None for s in starts.values()) or len(set(order)) != len(order):
        return None
    size = {v: _direct_amx.out_blocks(meta[v][0][1]) // 2 for v in order}  # 8 planes for <= 16 channels
    for k in group:  # a reader of less than a block: its values in whole blocks (block_starts)
        if sum(size[v] for v in sources[k]) < _direct_amx.TILE:
            size.update((v, _blocks(meta[v][0][1], 32) * _direct_amx.TILE) for v in sources[k])
    if any(2 * size[v] != meta[v][0][1] for k in group for v in sources[k][:-1]):
        return None  # a value that does not fill its region before a span's end: not the eager Cat's blocks
    planes, offset = {}, 0
    for v in order:
        planes[v] = offset
        offset += size[v]
    N, kernel, padding, _, features = key
    Wp, _, S = _direct_amx.plane_geometry(features, kernel)
    structure = ((N, offset, S), Wp, tuple((planes[v], size[v]) for v in order))
    place = {}
    for k in group:
        parts = sources[k]
        pin = planes[parts[0]]
        blocks = _direct_amx.block_starts(planes[parts[-1]] + size[parts[-1]] - pin)
        positions = np.concatenate([_direct_amx.block_positions(blocks, planes[v] - pin + np.arange(
            _blocks(meta[v][0][1], 2)))[:meta[v][0][1]] for v in parts])  # an odd count: its last pair's low half
        c = convs[k]
        wa = _direct_amx.pack_weight(c["w"], positions, 32 * len(blocks))
        place[k] = (pin, wa, blocks)
    group_cats = {j for j in cats if all(r in group for r in cats[j])}
    in_group = set(group) | group_cats
    writers, lay = {}, []
    for v in order:
        k, relu = at.get(v), None
        if v in relus:  # an activation of a conv's output: the conv writes it, activated
            j, k, slope = relus[v]
            relu = (j, slope)
        if k in convs and v not in outputs and all(r in in_group for r in readers[v]):
            writers[v] = (k, np.array([planes[v], padding[0], padding[1], Wp], np.int64), relu)
        else:
            lay.append((v, planes[v], padding, size[v]))
    shared = any(sum(v in sources[k] for k in group) > 1 for v in order)
    if not (writers or group_cats or shared):
        return None  # each value laid out once for its one reader: what the op does itself
    return structure, place, writers, lay


def _conv_forward(c, plan):
    """A convolution's forward reading its planes (plan["read"]) or laying out its float32 input,
    writing the next convolutions' planes (plan["write"]) or its float32 output."""
    geo, slope, O, shuffle = c["geo"], plan.get("slope", c["slope"]), c["O"], plan.get("shuffle", 1)
    read, write, keep = plan.get("read"), plan.get("write"), plan.get("keep")
    starts = None
    if read is None:
        wa = _direct_amx.pack_weight(c["w"])
    else:
        arena_in, (pin, wa, starts) = read
    bias = np.zeros(wa.shape[2], np.float32)
    if c["b"] is not None:
        bias[:O] = c["b"]
    phases = tuple(plan.get("phases", (1, 1)))  # reading a nearest upsampling from the small value's planes
    Wp, _, S = _direct_amx.plane_geometry((geo.features[0] // phases[0], geo.features[1] // phases[1]), geo.kernel)

    prepared = {}  # (the planes', the output planes' and the residual's shapes) -> _direct_amx.prepare's call

    def tiles(xp, first, dst, dgeo, residual, residual_scale, **opts):
        key = (xp.shape, None if dst is None else dst.shape, None if residual is None else residual.shape,
               float(residual_scale))
        go = prepared.get(key)
        if go is None:
            go = prepared[key] = _direct_amx.prepare(
                xp.shape, first, wa, bias, O, geo.features, geo.kernel, slope, key[1], dgeo, key[2],
                residual_scale=residual_scale, starts=starts, **opts)
        return go(xp, conv._workers(), dst, residual)

    def forward(ctx, x, *args, residual=None, residual_scale=1.0, **kwargs):
        if not precision.bf16_active(np.float32):  # the capture's key holds the precision
            raise RuntimeError("a graph of bfloat16 planes replayed outside autocast('bf16')")
        if read is None:
            xp = _aligned_empty((x.shape[0], wa.shape[1] * _direct_amx.TILE, S), np.uint32)
            _direct_amx.layout(x, xp, 0, geo.padding, Wp, plan.get("repeat", (1, 1)))
            first = 0
        else:
            xp, first = arena_in.get(), pin
        if write is None and keep is not None:  # the float32 output, and its planes for a reader
            return tiles(xp, first, keep[0].get(), keep[1], residual, residual_scale, keep=True)
        if write is None:
            return tiles(xp, first, None, None, residual, residual_scale, shuffle=shuffle)
        arena_out, dgeo = write
        tiles(xp, first, arena_out.get(), dgeo, None, 1.0, shuffle=shuffle, repeat=plan.get("write_repeat", (1, 1)),
              phases=phases)
        return _WRITTEN

    forward.planes = (c, plan)  # what keep_planes remakes it from
    if write is None:  # an Add of its output (or of its product by a number: _lower._fuse_residual_adds)
        def fused(ctx, x, *args, **kwargs):
            return forward(ctx, x, *args[:-1], residual=args[-1], **kwargs)
        fused.planes, fused.is_fused = forward.planes, True
        forward.fused = fused
        forward.shuffle = shuffle  # > 1: the residual may be the small value a nearest upsampling repeats
        if keep is None and shuffle == 1:  # keep_planes: the output stored and written as planes too
            for f in (forward, fused):
                f.with_planes = functools.partial(_kept, f)
    return forward


def _kept(f, arena, dgeo):
    return _remake(f, keep=(arena, dgeo))


def _remake(f, **changes):
    """The forward `f` (a _conv_forward's, or its fused variant) with its plan changed."""
    c, plan = f.planes
    g = _conv_forward(c, {**plan, **changes})
    return g.fused if getattr(f, "is_fused", False) else g


def keep_planes(ops, graph):
    """ops with each AMX convolution that lays out its float32 input x itself (x read by something
    else too: a residual chain's next block, EDSR's and MSRResNet's `x + body(x)`, RCAN's) reading
    planes that x's producer writes beside x, where that producer can (`with_planes(arena, dgeo)`: an
    AMX convolution storing a float32 output, its fused residual add included, _direct_amx.run's
    `keep`; a scale_add, RCAN's block end, _direct_amx.scale_add_pairs): the same bits (the planes are
    _pair_plane's from the stored values), one pass over x fewer. Run after the adds are fused (the
    producer's stored value is then x). Pairs of the same geometry share an arena where their spans
    (producer to reader) do not overlap."""
    at = {op[4]: k for k, op in enumerate(ops)}
    ops, pool = list(ops), {}
    for k, (f, spec, _, _, _) in enumerate(ops):
        info = getattr(f, "planes", None)
        if info is None or info[1].get("read") is not None or info[1].get("repeat", (1, 1)) != (1, 1) or \
                info[1].get("phases", (1, 1)) != (1, 1) or \
                not spec or spec[0][0] != _SLOT:
            continue
        c, x = info[0], spec[0][1]
        p = at.get(x)
        make = getattr(ops[p][0], "with_planes", None) if p is not None else None
        if make is None or tuple(graph.slot_meta[x][0]) != (c["N"], c["w"].shape[1], *c["geo"].image):
            continue
        geo = c["geo"]
        Wp, _, S = _direct_amx.plane_geometry(geo.features, geo.kernel)
        structure = ((c["N"], _blocks(c["w"].shape[1], 32) * _direct_amx.TILE, S), Wp)
        free = [e for e in pool.setdefault(structure, []) if e[1] < p]
        if free:
            arena, free[0][1] = free[0][0], k
        else:
            arena = _Arena(*structure)
            pool[structure].append([arena, k])
        dgeo = np.array([0, geo.padding[0], geo.padding[1], Wp], np.int64)
        ops[p] = (make(arena, dgeo), *ops[p][1:])
        ops[k] = (_remake(f, read=(arena, (0, _direct_amx.pack_weight(c["w"]), None))), *ops[k][1:])
    return ops


_WRITTEN = np.zeros(0, np.float32)  # the output of a convolution that wrote planes: nothing reads it


def _layout_op(graph, v, arena, region, padding, planes):
    """A graph entry laying the float32 value in slot v into its region (`planes` from `region`) of
    the arena."""

    def lay(ctx, x):
        _direct_amx.layout(x, arena.get(), region, padding, arena.Wp, planes=planes)
        return _WRITTEN

    slot = graph.n_slots
    graph.n_slots += 1
    graph.slot_meta.append(((0,), "float32"))
    return lay, ((_SLOT, v),), {}, (False,), slot
