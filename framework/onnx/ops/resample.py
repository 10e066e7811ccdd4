"""Resampling (interpolate, imresize, the average pools: one ResampleFunction) -> Resize / pools,
else MatMul with the weight tables.

A recorded resampling carries `call` = (op, its checked arguments), so the converter knows what it
computes: interpolate's mode, align_corners, antialias and the scale factors that drive its mapping
(None: the output size does), an average pool's kernel, stride and padding. Mapped as

    nearest        Resize mode=nearest, asymmetric, nearest_mode=floor
    nearest-exact  Resize mode=nearest, half_pixel, nearest_mode=round_prefer_ceil
    bilinear       Resize mode=linear, half_pixel or align_corners
    bicubic        Resize mode=cubic, cubic_coeff_a=-0.75, exclude_outside=0, as bilinear
    antialias      (opset 18) antialias=1, exclude_outside=1; bicubic with a=-0.5
    avg / adaptive pools, area     AveragePool / GlobalAveragePool (pool.average_pool)

driven by `scales` when the scale factor drives the mapping (valid at any input size), else by
`sizes`. ONNX Runtime is the judge: each node is run once on a probe image at the traced size and
kept only if it equals srgrad's tables to float rounding. Everything else (lanczos, MATLAB imresize,
divisor_override, an adaptive pool with unequal windows, any case where ORT differs) is exported as
the dense tables, y = T_h x T_w^T, which fix the input size (dynamic axes are then refused).
"""
from __future__ import annotations

import functools

import numpy as np

from ...functional.resample import ResampleFunction
from ..graph import register_converter
from .pool import average_pool

PROBE_TOLERANCE = 2e-5  # |ORT - srgrad| on a [0, 1) probe image: float32 rounding, not a formula

_RESIZE_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")


def _attrs(mode, ac, aa):
    if mode == "nearest":
        return dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    if mode == "nearest-exact":
        return dict(mode="nearest", coordinate_transformation_mode="half_pixel",
                    nearest_mode="round_prefer_ceil")
    attrs = dict(mode="linear" if mode == "bilinear" else "cubic",
                 coordinate_transformation_mode="align_corners" if ac else "half_pixel")
    if mode == "bicubic":
        attrs.update(cubic_coeff_a=-0.5 if aa else -0.75, exclude_outside=int(aa))
    if aa:
        attrs.update(antialias=1, exclude_outside=1)
    return attrs


def _resize_inputs(sfs, in_hw, out_hw, opset):
    """(extra inputs as (kind, array), node attributes) for Resize: scales when the factors drive
    the mapping and ONNX's float32 floor(n * scale) gives the same size, else sizes."""
    if None not in sfs and all(int(np.float32(n) * np.float32(f)) == m
                               for n, m, f in zip(in_hw, out_hw, sfs)):
        return ("scales", np.asarray([1.0, 1.0, *sfs], np.float32)), {}
    return ("sizes", np.asarray(out_hw, np.int64)), {"axes": [2, 3]}


@functools.lru_cache(maxsize=256)
def _probe(op_type, attr_items, extra, th, tw, opset) -> float:
    """max |ORT's one-node graph - srgrad's tables| on a random (1, 1, H, W) image in [0, 1);
    inf when ORT refuses the node. `extra`: None or (kind, tuple of values) for Resize."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    x = np.random.default_rng(0).uniform(0, 1, (1, 1, th.n, tw.n)).astype(np.float32)
    want = th.dense() @ x[0, 0].astype(np.float64) @ tw.dense().T
    inits, ins = [], ["x"]
    if extra is not None:
        kind, values = extra
        arr = np.asarray(values, np.float32 if kind == "scales" else np.int64)
        inits.append(numpy_helper.from_array(arr, kind))
        ins += ["", kind] if kind == "scales" else ["", "", kind]
    node = helper.make_node(op_type, ins, ["y"], **dict(attr_items))
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


def _node_for(g, op, args, tables):
    """(op_type, attrs, extra input or None) of one ONNX node for this call, or (None, reason)."""
    th, tw = tables
    in_hw, out_hw = (th.n, tw.n), (th.m, tw.m)
    if op == "interpolate" and args["mode"] in _RESIZE_MODES:
        if args["antialias"] and g.opset < 18:
            return None, "antialias needs opset 18"
        extra, more = _resize_inputs(args["scale_factors"], in_hw, out_hw, g.opset)
        if extra[0] == "sizes" and g.opset < 18:
            return None, "a size-driven Resize with axes needs opset 18"
        return ("Resize", {**_attrs(args["mode"], args["align_corners"], args["antialias"]), **more},
                (extra[0], tuple(extra[1].tolist()))), None
    if op in ("avg_pool2d", "adaptive_avg_pool2d") or (op == "interpolate" and args["mode"] == "area"):
        pool_args = {"output_size": out_hw} if op == "interpolate" else args
        found = average_pool(g, "adaptive_avg_pool2d" if op == "interpolate" else op, pool_args,
                             in_hw)
        if found is None:
            return None, "no ONNX pool reproduces these windows (divisor_override, or unequal windows)"
        return (found[0], found[1], None), None
    what = {"imresize": "MATLAB imresize", "interpolate": f"interpolate mode {args.get('mode')!r}"}
    return None, f"ONNX has no operator for {what.get(op, op or 'this resampling')}"


def _sizes(g, out_hw):
    """A size-driven Resize's (H, W) read from the Shape of a value that has them when they follow
    the input size (interpolate(size=other.shape[2:])), else None (the numbers hold)."""
    peer = g.peer_call()
    if peer is None:
        return None
    peer_hw = tuple(t.m for t in peer.options["tables"])
    if peer_hw == out_hw:
        return None
    parts = [g.const(np.asarray([n], np.int64)) if n == pn else g.dim_source(n, pn)
             for n, pn in zip(out_hw, peer_hw)]
    return None if None in parts else g.node("Concat", parts, axis=0)


@register_converter(ResampleFunction)
def resample(g, call):  # x (N, C, H, W) -> (N, C, H_out, W_out)
    tables = call.options["tables"]
    op, args = call.options.get("call") or (None, {})
    in_hw, out_hw = (tables[0].n, tables[1].n), (tables[0].m, tables[1].m)
    found, reason = _node_for(g, op, args, tables)
    if found is not None:
        op_type, attrs, extra = found
        err = _probe(op_type, tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                           for k, v in attrs.items())),
                     extra, tables[0], tables[1], g.opset)
        if err <= PROBE_TOLERANCE:
            ins = [g.input(0)]
            if extra is not None:
                kind, values = extra
                const = g.const(np.asarray(values, np.float32 if kind == "scales" else np.int64),
                                dtype=np.float32 if kind == "scales" else None)
                if kind == "sizes":
                    const = _sizes(g, out_hw) or const
                ins += ["", const] if kind == "scales" else ["", "", const]
            return g.node(op_type, ins, **attrs)
        reason = f"ONNX Runtime's {op_type} differs from srgrad by {err:.2g}"
    g.note(f"{op or 'resampling'} {in_hw} -> {out_hw} exported as weight tables: {reason}")
    g.require_static(f"{reason}; exported as its weight tables (MatMul), which hold for a "
                     f"{in_hw[0]}x{in_hw[1]} input only")
    return _tables(g, g.input(0), tables)
