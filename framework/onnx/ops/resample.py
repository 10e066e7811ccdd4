"""interpolate / imresize (the Resample Function) -> Resize, or MatMul with the weight tables.

A recorded Resample holds only its two axis Tables, so the converter first finds which interpolate
call built them: every (mode, align_corners, antialias, scale factor) that ONNX's Resize can express
is rebuilt with resample.axis_table and compared with the recorded tables, exactly. A match becomes a
Resize node:

    nearest        mode=nearest, asymmetric, nearest_mode=floor
    nearest-exact  mode=nearest, half_pixel, nearest_mode=round_prefer_ceil  (floor((i + 0.5) n / m))
    bilinear       mode=linear, half_pixel (pytorch_half_pixel maps a 1-pixel output to 0; torch
                   samples the centre, as half_pixel does), or align_corners
    bicubic        mode=cubic, cubic_coeff_a=-0.75, exclude_outside=0, as bilinear
    antialias      (opset 18) antialias=1, exclude_outside=1; bicubic with a=-0.5

driven by `scales` when torch's scale factor drives the mapping (valid at any input size), else by
`sizes`. ONNX Runtime is the judge: the node is run once on a probe image at the traced sizes and kept
only if it equals srgrad's tables to float rounding. Everything else (lanczos, area, MATLAB imresize,
a factor ONNX cannot express, or any case where ORT differs) is exported as the dense tables,
y = T_h x T_w^T, which fix the input size (dynamic axes are then refused).
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from ...functional.resample import Resample, axis_table
from ..graph import register_converter

# (mode, align_corners, antialias) in the order tried: the simplest node first (nearest with
# asymmetric coordinates is the one every runtime has). At some sizes several settings build the same
# tables (an integer nearest upscale, an odd-factor downscale, align_corners to 2 pixels); the
# dynamic-axes check then prefers the one that also holds at its other size (_candidates).
# Antialias needs opset 18.
_CONFIGS = [("nearest", False, False), ("nearest-exact", False, False),
            ("bilinear", False, False), ("bilinear", True, False),
            ("bicubic", False, False), ("bicubic", True, False),
            ("bilinear", False, True), ("bilinear", True, True),
            ("bicubic", False, True), ("bicubic", True, True)]

PROBE_TOLERANCE = 2e-5  # |ORT - srgrad| on a [0, 1) probe image: float32 rounding, not a formula


def _same(a, b) -> bool:
    return a is b or (a.n == b.n and a.index.shape == b.index.shape
                      and np.array_equal(a.index, b.index) and np.array_equal(a.weight, b.weight))


def _factors(n, m):
    """Scale factors a user may have typed for n -> m (int(n * f) = m): the simplest fraction
    (2, 3/2, 1/2, 1/3, ...), then the shortest decimals (0.3, 0.45); None last (the output size
    drives the mapping). Tried in this order, so the same factor is found at every input size."""
    out = []
    for q in range(1, 65):  # the simplest fraction p/q in [m/n, (m+1)/n)
        p = -(-m * q // n)
        if p * n < (m + 1) * q:
            out.append(p / q)
            break
    for digits in (1, 2, 3):
        q = 10 ** digits
        p = -(-m * q // n)
        if p * n < (m + 1) * q:
            out.append(p / q)
    # ONNX shape inference computes floor(n * scale) in float32: the factor must give m there too
    return [f for i, f in enumerate(out) if f > 0 and int(n * f) == m and f not in out[:i]
            and int(np.float32(n) * np.float32(f)) == m] + [None]


def matches(tables, opset):
    """Yield every (mode, align_corners, antialias, (sf_h, sf_w)) whose interpolate tables equal
    `tables`, in order of preference."""
    for mode, ac, aa in _CONFIGS:
        if aa and opset < 18:
            continue
        per_axis = []
        for t in tables:
            per_axis.append([f for f in _factors(t.n, t.m)
                             if _same(axis_table(mode, t.n, t.m, f, ac, aa), t)])
            if not per_axis[-1]:
                break
        else:
            for sfs in itertools.product(*per_axis):
                yield mode, ac, aa, sfs


def _node_key(match, out_hw):
    """What the emitted Resize depends on: the output size only when `sizes` drive it."""
    return match + ((out_hw,) if None in match[3] else ())


def _candidates(g, tables, out_hw):
    """The matches, those that also match the same call in the other trace of the dynamic-axes check
    first: where modes coincide at one size, the one valid at both sizes is chosen."""
    found = list(matches(tables, g.opset))
    peer = g.peer_call()
    if peer is not None and found:
        other = peer.options["tables"]
        shared = {_node_key(m, (other[0].m, other[1].m)) for m in matches(other, g.opset)}
        found.sort(key=lambda m: _node_key(m, out_hw) not in shared)
    return found


def _attrs(mode, ac, aa):
    coord = "align_corners" if ac else "half_pixel"
    if mode == "nearest":
        return dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    if mode == "nearest-exact":
        return dict(mode="nearest", coordinate_transformation_mode="half_pixel",
                    nearest_mode="round_prefer_ceil")
    attrs = dict(mode="linear" if mode == "bilinear" else "cubic",
                 coordinate_transformation_mode=coord)
    if mode == "bicubic":
        attrs.update(cubic_coeff_a=-0.5 if aa else -0.75, exclude_outside=int(aa))
    if aa:
        attrs.update(antialias=1, exclude_outside=1)
    return attrs


def _resize(g, x, rank, attrs, sfs, out_hw):
    axes = [rank - 2, rank - 1]
    if None not in sfs:
        scales = g.const(np.asarray([1.0] * (rank - 2) + list(sfs), np.float32), dtype=np.float32)
        return g.node("Resize", [x, "", scales], **attrs)
    if g.opset >= 18:
        return g.node("Resize", [x, "", "", g.const(np.asarray(out_hw, np.int64))], axes=axes,
                      **attrs)
    sizes = list(g.shape(0)[:-2]) + list(out_hw)
    return g.node("Resize", [x, "", "", g.const(np.asarray(sizes, np.int64))], **attrs)


@functools.lru_cache(maxsize=256)
def probe(mode, ac, aa, sfs, in_hw, out_hw, opset) -> float:
    """max |ORT's Resize - srgrad's tables| on a random (1, 1, H, W) image in [0, 1)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    th, tw = (axis_table(mode, n, m, f, ac, aa) for n, m, f in zip(in_hw, out_hw, sfs))
    x = np.random.default_rng(0).uniform(0, 1, (1, 1) + tuple(in_hw)).astype(np.float32)
    want = th.dense() @ x[0, 0].astype(np.float64) @ tw.dense().T
    inits = []
    if None not in sfs:
        inits.append(numpy_helper.from_array(np.asarray([1, 1, *sfs], np.float32), "scales"))
        ins, extra = ["x", "", "scales"], {}
    else:
        inits.append(numpy_helper.from_array(np.asarray(out_hw, np.int64), "sizes"))
        ins, extra = ["x", "", "", "sizes"], {"axes": [2, 3]}
    node = helper.make_node("Resize", ins, ["y"], **_attrs(mode, ac, aa), **extra)
    graph = helper.make_graph([node], "probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", max(opset, 18))])
    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 3  # a disagreement is an answer here, not a warning to print
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        got = sess.run(None, {"x": x})[0]
    except Exception:  # noqa: BLE001  ORT refusing the node is a disagreement too
        return float("inf")
    if got.shape[2:] != want.shape:
        return float("inf")
    return float(np.abs(got[0, 0] - want).max())


def _tables(g, x, tables):
    """y = T_h x T_w^T with dense tables; an identity axis is skipped."""
    th, tw = tables
    if not (th.m == th.n and np.array_equal(th.dense(), np.eye(th.n))):
        x = g.node("MatMul", [g.const(th.dense()), x])
    if not (tw.m == tw.n and np.array_equal(tw.dense(), np.eye(tw.n))):
        x = g.node("MatMul", [x, g.const(tw.dense().T)])
    return x if x != g.input(0) else g.node("Identity", [x])


@register_converter(Resample)
def resample(g, call):  # x (..., H, W) -> (..., H_out, W_out)
    tables, shape = call.options["tables"], g.shape(0)
    in_hw, out_hw = (tables[0].n, tables[1].n), (tables[0].m, tables[1].m)
    found = _candidates(g, tables, out_hw)
    for mode, ac, aa, sfs in found:
        if probe(mode, ac, aa, sfs, in_hw, out_hw, g.opset) <= PROBE_TOLERANCE:
            return _resize(g, g.input(0), len(shape), _attrs(mode, ac, aa), sfs, out_hw)
    if found:
        what = "; ".join(f"{m}, align_corners={ac}, antialias={aa}, scale_factor={sfs}: "
                         f"{probe(m, ac, aa, sfs, in_hw, out_hw, g.opset):.2g}"
                         for m, ac, aa, sfs in found)
        reason = f"ONNX Runtime's Resize differs from srgrad ({what})"
    else:
        reason = ("no ONNX Resize reproduces these resampling tables (lanczos, area, MATLAB "
                  "imresize, or a scale factor not found)")
    g.note(f"resampling {in_hw} -> {out_hw} exported as weight tables: {reason}")
    g.require_static(f"{reason}; exported as its weight tables (MatMul), which hold for a "
                     f"{in_hw[0]}x{in_hw[1]} input only")
    return _tables(g, g.input(0), tables)
