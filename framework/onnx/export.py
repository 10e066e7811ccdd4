"""export(): trace -> convert -> (dynamic axes?) -> check -> run in ONNX Runtime and compare -> write.

Dynamic axes: the model is traced twice, at the example's size and at a second one (one more
image in the batch, 33 more rows and 65 more columns), and both traces are converted. When the two ONNX graphs are the
same node for node (attributes and constants included), nothing in the graph depends on the size, and
the export declares batch, height and width dynamic. Otherwise the first difference names the op
(a Reshape to numbers taken from the size, a slice or pad computed from it, a weight-table
resampling, ...): dynamic=True is then an error, dynamic=None (the default) a warning and a
fixed-size export.

Two equal graphs do not prove that the graph holds at every size: Python control flow that takes
the same branch at both traced sizes (a minimum size padded up to, a parity) is invisible to them.
So a dynamic graph is then run in ONNX Runtime against srgrad at sizes of every residue class of
the size rules its converters declared (`Graph.size_rule`: pad multiples, windows, strides,
unshuffle factors; always parity), once on small images (below the minimum sizes models pad up to)
and once just above the example (`check_sizes`). A difference at any of them is an ExportError
with dynamic=True, a warning and a fixed-size export with dynamic=None.
"""
from __future__ import annotations

import math
import os
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .._check import flag, int_arg
from ..tensor import Tensor
from .graph import ConversionError, Graph, converter_for
from .trace import Value, trace

__all__ = ["export", "ExportReport", "ExportError", "build_graph", "MIN_OPSET", "TOLERANCE"]

MIN_OPSET = 17
TOLERANCE = 1e-4  # max |ORT - srgrad| accepted for a float32 export
FP16_TOLERANCE = 1e-2  # float16: times max(1, max |srgrad output|)
_SECOND_SIZE_STEPS = (1, 2, 4, 8)  # the second trace adds this many pixels (the first size that runs)
# ... plus these: a size padded up to a multiple of up to 32 (a window, a grid) still differs
# between the traces, and the width differs by 32 more than the height, so a square example gives
# a second trace whose padded width and height differ too: a size the graph reads from a Shape
# (ops/shape.py) can be told from a number, and the width from the height.
_SECOND_EXTRA = (32, 64)
# Residue classes checked just above the example: all of them up to this period, else parity only
# (each check runs the model at the example's size; the small band always covers every class).
_LARGE_BAND_PERIOD = 16


class ExportError(ValueError):
    """The model cannot be exported as asked (dynamic axes refused, ORT disagrees with srgrad, ...)."""


@dataclass
class ExportReport:
    """What export() wrote. `dynamic` is False with `reason` saying why; `max_abs_diff` is
    max |ONNX Runtime - srgrad| over the example and a second input."""

    path: str
    opset: int
    nodes: int
    initializers: int
    ops: dict
    dynamic: bool
    reason: str | None
    max_abs_diff: float
    tolerance: float
    fp16: bool
    input_shape: list
    output_shapes: list
    notes: list = field(default_factory=list)
    checked_sizes: list = field(default_factory=list)  # (H, W) the dynamic graph was run at

    def __str__(self):
        shape = (lambda dims: "x".join(str(d) for d in dims))
        outs = ", ".join(shape(s) for s in self.output_shapes)
        lines = [f"wrote {self.path}: opset {self.opset}, {self.nodes} nodes, {self.initializers} "
                 f"initializers, input {shape(self.input_shape)} -> {outs}"
                 + (" (float16 inside)" if self.fp16 else ""),
                 "dynamic batch/height/width" if self.dynamic else self._fixed(),
                 f"max |ONNX Runtime - srgrad| = {self.max_abs_diff:.3g} (tolerance {self.tolerance:.3g})"]
        if self.checked_sizes:
            lines.append(f"checked at {len(self.checked_sizes)} sizes: "
                         + ", ".join(f"{h}x{w}" for h, w in self.checked_sizes))
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


    def _fixed(self) -> str:
        # what a user of the file must know: the one input size it runs at
        n, _, h, w = self.input_shape
        return (f"fixed size: {self.reason}: this file takes {h}x{w} (height x width) inputs only, "
                f"{n} image{'s' if n != 1 else ''} at a time")


def _require():
    try:
        import onnx
        import onnxruntime
    except ImportError as exc:
        raise ImportError(f"framework.onnx needs onnx and onnxruntime ({exc}); install them with "
                          "pip install 'srgrad[export]'") from None
    return onnx, onnxruntime


def _onnx_type(dtype) -> int:
    from onnx import helper
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


# -- conversion -----------------------------------------------------------------------------------
def build_graph(tr, opset: int, fp16: bool = False, input_name: str = "input",
                output_names=("output",), peer=None) -> Graph:
    """Convert a Trace into a Graph whose input and outputs carry the given names; `peer` is the
    trace at the other size of the dynamic-axes check."""
    g = Graph(opset, np.float16 if fp16 else np.float32, tr, peer)
    g._taken.update(tr.params.values())
    g.reserve(input_name)
    for name in output_names:
        g.reserve(name)
    live = tr.live_calls()
    g.used_values = {id(a) for c in live for a in c.args if isinstance(a, Value)}
    g.used_values.update(id(v) for v in tr.outputs)
    x = input_name
    if fp16:
        x = g.node("Cast", [input_name], to=_onnx_type(np.float16))
    g.bind(tr.input, x)
    for call in live:
        g.call = call
        conv = converter_for(call.fn)
        try:
            out = conv(g, call)
        except ConversionError:
            raise
        except Exception as exc:  # a converter bug or an unexpected option: name the call
            raise ConversionError(f"{call.describe()}: its converter failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(outs) != len(call.outputs):
            raise ConversionError(f"{call.describe()}: the converter returned {len(outs)} names for "
                                  f"{len(call.outputs)} outputs")
        for v, name in zip(call.outputs, outs):
            if name is not None:
                g.bind(v, name)
    g.call = None
    _name_outputs(g, tr, input_name, output_names, fp16)
    return g


def _name_outputs(g, tr, input_name, output_names, fp16):
    if len(output_names) != len(tr.outputs):
        raise ValueError(f"export: {len(output_names)} output names for {len(tr.outputs)} model "
                         f"outputs")
    produced, public_of = g.produced(), {}
    for v, public in zip(tr.outputs, output_names):
        src = g.ref(v)
        if fp16 and v.array.dtype.kind == "f":
            node = g.node("Cast", [public_of.get(src, src)], to=_onnx_type(np.float32))
        elif src in produced and src not in public_of and src != input_name:
            node = src  # the node that computes it names it
        else:  # the input itself, or a value that already is another output
            node = g.node("Identity", [public_of.get(src, src)])
        g.rename(node, public)
        public_of.setdefault(src, public)
    g.prune(output_names)


def _difference(ga, ta, gb, tb) -> str | None:
    """Why the graphs of two traces at different sizes differ (None when they are the same)."""
    size = (lambda t: "x".join(map(str, t.input.array.shape)))
    if gb.static_reasons:
        return gb.static_reasons[0]
    if len(ga.nodes) != len(gb.nodes) or len(ta.calls) != len(tb.calls):
        return (f"the traced graph changes with the input size ({len(ta.calls)} Function calls at "
                f"{size(ta)}, {len(tb.calls)} at {size(tb)}): Python control flow depends on it")
    first_use = {}
    for k, (node, _) in enumerate(ga.nodes):
        for name in node.input:
            first_use.setdefault(name, k)
    bad = None
    for k, ((na, ia), (nb, ib)) in enumerate(zip(ga.nodes, gb.nodes)):
        if na.SerializeToString() != nb.SerializeToString():
            bad = k
            break
    for name, arr in ga.initializers.items():
        if name in ga.param_names:
            continue
        other = gb.initializers.get(name)
        if other is None or other.shape != arr.shape or not np.array_equal(other, arr):
            k = first_use.get(name, 0)
            bad = k if bad is None else min(bad, k)
    if bad is None:
        return None
    ia, ib = ga.nodes[bad][1], gb.nodes[bad][1]
    ca = ta.calls[ia].describe() if ia is not None else "the graph"
    cb = tb.calls[ib].describe() if ib is not None else "the graph"
    return (f"{ca} at input {size(ta)} becomes {cb} at {size(tb)}: its ONNX node "
            f"{_summary(ga, ga.nodes[bad][0])} becomes {_summary(gb, gb.nodes[bad][0])}, which "
            "depends on the input size")


def _summary(g, node) -> str:
    """`Op(attr=value, ..., [small constant inputs])` for messages."""
    from onnx import helper
    value = (lambda v: v.decode() if isinstance(v, bytes) else v)
    parts = [f"{a.name}={value(helper.get_attribute_value(a))}" for a in node.attribute]
    for name in node.input:
        arr = g.initializers.get(name)
        if arr is not None and name not in g.param_names and arr.size <= 8:
            parts.append(str(arr.ravel().tolist()))
    text = f"{node.op_type}({', '.join(parts)})"
    return text if len(text) <= 200 else text[:197] + "..."


# -- the public entry ------------------------------------------------------------------------------
def _random_like(x: np.ndarray, shape, seed: int) -> np.ndarray:
    """Values uniform in the example's range, in its dtype."""
    lo, hi = float(x.min()), float(x.max())
    hi = hi if hi > lo else lo + 1.0
    rng = np.random.default_rng(7919 + seed)  # not a seed an example is likely to come from
    return rng.uniform(lo, hi, shape).astype(x.dtype)


def _second_input(x: np.ndarray, step: int) -> np.ndarray:
    n, c, h, w = x.shape
    return _random_like(x, (n + 1, c, h + step + _SECOND_EXTRA[0], w + step + _SECOND_EXTRA[1]), step)


def check_sizes(h: int, w: int, multiples) -> list:
    """The (H, W) a dynamic graph traced at h x w is verified at: with p = lcm(2, multiples), p
    small images (3 .. p + 2 pixels: H through every residue mod p, W through every one backwards,
    so that H != W) and as many just above the example (parity only when p > 16)."""
    period = math.lcm(2, *(int(m) for m in multiples if m and m > 1))
    small = [(3 + r, 2 + period - r) for r in range(period)]
    runs = period if period <= _LARGE_BAND_PERIOD else 2
    large = [(h + 1 + r, w + period - r) for r in range(runs)]
    return list(dict.fromkeys(s for s in small + large if s != (h, w)))


def _run_model(model, x: np.ndarray) -> list | None:
    """srgrad's outputs on x in eval mode under no_grad (modes restored), or None when the model
    refuses x (a size it does not take: nothing to compare there)."""
    from ..autograd import no_grad
    from .trace import _set_modes
    modes = [m.training for m in model.modules()] if hasattr(model, "modules") else []
    try:
        if hasattr(model, "eval"):
            model.eval()
        with no_grad():
            out = model(Tensor(x))
    except Exception:  # noqa: BLE001  the model's own refusal of this size
        return None
    finally:
        _set_modes(model, modes)
    return [np.asarray(o.data) for o in (out if isinstance(out, (tuple, list)) else (out,))]


def _size_check(ort, data, input_name, model, x, multiples, limit):
    """(None, sizes checked) when ONNX Runtime agrees with srgrad within `limit` at every
    check_sizes size, else (why not, sizes)."""
    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # a size ORT refuses is reported below, not logged to stderr
    sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    checked = []
    for k, (h, w) in enumerate(check_sizes(x.shape[2], x.shape[3], multiples)):
        inp = _random_like(x, (1, x.shape[1], h, w), 100 + k)
        want = _run_model(model, inp)
        if want is None:
            continue
        try:
            got = sess.run(None, {input_name: inp})
        except Exception as exc:  # noqa: BLE001  ORT refuses a size srgrad takes
            return (f"ONNX Runtime fails at {h}x{w}, where srgrad runs ({type(exc).__name__}: "
                    f"{str(exc)[:200]})"), checked
        diff = max(float(np.abs(np.asarray(a, np.float64) - b).max(initial=0)) if a.shape == b.shape
                   else np.inf for a, b in zip(got, want))
        if not diff <= limit:
            return (f"the graph traced at {x.shape[2]}x{x.shape[3]} differs from srgrad by "
                    f"{diff:.3g} at {h}x{w} (more than {limit:.3g}): the model computes something "
                    "from the size that the traces do not show (a minimum size or a parity "
                    "decided in Python)"), checked
        checked.append((h, w))
    return None, checked


def _second_trace(model, x):
    """(trace, None) at the first larger size the model accepts, or (None, why not)."""
    errors = []
    for step in _SECOND_SIZE_STEPS:
        try:
            return trace(model, _second_input(x, step)), None
        except Exception as exc:  # noqa: BLE001  any refusal: try the next size
            errors.append(f"+{step}: {type(exc).__name__}: {exc}")
    return None, "the model did not run at a second input size (" + "; ".join(errors)[:400] + ")"


def _dims(shape_a, shape_b, names):
    if shape_b is None:
        return list(shape_a)
    return [a if a == b else names[i] for i, (a, b) in enumerate(zip(shape_a, shape_b))]


def _assemble(g, opset, input_name, output_names, in_dims, out_dims, out_dtypes):
    from onnx import helper, numpy_helper

    from .. import __version__
    inits = [numpy_helper.from_array(np.ascontiguousarray(a) if a.ndim else a, name)
             for name, a in g.initializers.items()]
    graph = helper.make_graph(
        [n for n, _ in g.nodes], "srgrad",
        [helper.make_tensor_value_info(input_name, _onnx_type(np.float32), in_dims)],
        [helper.make_tensor_value_info(n, _onnx_type(d), dims)
         for n, d, dims in zip(output_names, out_dtypes, out_dims)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             producer_name="srgrad", producer_version=__version__)


def _max_diff(got, want) -> float:
    return max(float(np.abs(np.asarray(a, np.float64) - np.asarray(b.array, np.float64)).max(initial=0))
               for a, b in zip(got, want))


def _verify(ort, data: bytes, input_name, checks, tolerance, fp16):
    """(max |ORT - srgrad| over the checks, the tolerance used); ExportError above it. Each check is
    (description, input, srgrad's output Values)."""
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    diffs, limit = [], tolerance
    for what, inp, want in checks:
        got = sess.run(None, {input_name: inp})
        if limit is None:
            scale = max(1.0, max(float(np.abs(w.array).max(initial=0)) for w in want))
            limit = FP16_TOLERANCE * scale if fp16 else TOLERANCE
        diffs.append((what, _max_diff(got, want)))
    worst = max(d for _, d in diffs)
    if worst > limit:
        detail = "; ".join(f"{d:.3g} on {what}" for what, d in diffs)
        hint = ""
        if diffs[0][1] <= limit:
            hint = (" The example matches but another input does not: the model computes something "
                    "from the input's values outside any Function (a comparison such as x > 0, "
                    ".data or .numpy()), which the trace keeps as a constant, or its graph changes "
                    "with the size in a way the two traces did not show (export at a fixed size).")
        raise ExportError(f"export: ONNX Runtime differs from srgrad by more than {limit:.3g} "
                          f"({detail}); nothing written.{hint}")
    return worst, float(limit)


def export(model, example, path, opset: int = 18, dynamic=None, fp16: bool = False,
           input_names=("input",), output_names=None, overwrite: bool = False,
           tolerance: float | None = None) -> ExportReport:
    """Export `model` to ONNX at `path`; returns an ExportReport.

    example: the model input, a float32 Tensor or array, e.g. (1, 3, 64, 64) in [0, 1].
    opset: 17 or more (default 18: Resize antialias). dynamic: None (default) declares batch,
    height and width dynamic when the graph allows and otherwise warns and fixes the example's size;
    True requires dynamic axes (ExportError naming the op that prevents them); False fixes the size.
    fp16: weights and activations in float16; the model still takes and returns float32 (a Cast at
    each end), compared with a looser tolerance (1e-2 x max(1, max |output|)).
    input_names / output_names: the graph's names (default "input", "output" or output_0, ...).
    overwrite: replace an existing file (default False: FileExistsError).
    tolerance: max |ONNX Runtime - srgrad| accepted (default 1e-4 float32); above it ExportError
    and nothing is written. The file is written atomically (temporary file + os.replace)."""
    onnx, ort = _require()
    from ..io.atomic import write_atomic
    opset = int_arg("export", "opset", opset, MIN_OPSET)
    if opset > onnx.defs.onnx_opset_version():
        raise ValueError(f"export: opset {opset} is newer than onnx {onnx.__version__} knows "
                         f"({onnx.defs.onnx_opset_version()})")
    if dynamic is not None:
        dynamic = flag("export", "dynamic", dynamic)
    fp16 = flag("export", "fp16", fp16)
    path = os.fspath(path)
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"export: {path} exists (pass overwrite=True to replace it)")
    x = np.asarray(example.data if isinstance(example, Tensor) else example)
    if x.dtype != np.float32:
        raise TypeError(f"export: the example must be float32 (as the model's weights), got {x.dtype}")
    for key, arr in (model.state_dict().items() if hasattr(model, "state_dict") else ()):
        if arr.dtype.kind == "f" and arr.dtype != np.float32:
            raise TypeError(f"export: {key} is {arr.dtype}; export a float32 model (model.float())")
    input_name = list(input_names)[0] if not isinstance(input_names, str) else input_names

    ta = trace(model, x)
    if output_names is None:
        output_names = ["output"] if len(ta.outputs) == 1 else [f"output_{i}" for i in
                                                                range(len(ta.outputs))]
    output_names = [output_names] if isinstance(output_names, str) else list(output_names)
    tb, reason = None, None
    if dynamic is False:
        reason = "a fixed size was asked"
    elif x.ndim != 4:
        reason = f"dynamic axes need a 4-D (N, C, H, W) input, got shape {x.shape}"
    else:
        tb, reason = _second_trace(model, x)
    ga = build_graph(ta, opset, fp16, input_name, output_names, peer=tb)
    if tb is not None:
        reason = ga.static_reasons[0] if ga.static_reasons else _difference(
            ga, ta, build_graph(tb, opset, fp16, input_name, output_names, peer=ta), tb)
    is_dynamic = reason is None
    if dynamic and not is_dynamic:
        raise ExportError(f"export: dynamic axes are impossible: {reason}. Export at a fixed size "
                          "(dynamic=False / --static, with the deployment size as the example)")
    if dynamic is None and not is_dynamic:
        warnings.warn(f"export: fixed-size export at {x.shape}: {reason}", stacklevel=2)
    data, dims, worst, limit = _checked_proto(onnx, ort, ga, ta, tb if is_dynamic else None, model,
                                              x, opset, input_name, output_names, tolerance, fp16)
    checked = []
    if is_dynamic:  # every residue class of the graph's size rules (the module docstring)
        reason, checked = _size_check(ort, data, input_name, model, x, ga.size_multiples, limit)
        if reason is not None:
            if dynamic:
                raise ExportError(f"export: dynamic axes are impossible: {reason}; nothing "
                                  "written. Export at a fixed size (dynamic=False / --static, "
                                  "with the deployment size as the example)")
            warnings.warn(f"export: fixed-size export at {x.shape}: {reason}", stacklevel=2)
            is_dynamic, checked = False, []
            ga = build_graph(ta, opset, fp16, input_name, output_names)
            data, dims, worst, limit = _checked_proto(onnx, ort, ga, ta, None, model, x, opset,
                                                      input_name, output_names, tolerance, fp16)
    write_atomic(path, data)
    ops = Counter(n.op_type for n, _ in ga.nodes)
    return ExportReport(path=path, opset=opset, nodes=len(ga.nodes),
                        initializers=len(ga.initializers), ops=dict(ops), dynamic=is_dynamic,
                        reason=reason, max_abs_diff=worst, tolerance=limit, fp16=fp16,
                        input_shape=dims[0], output_shapes=dims[1], notes=list(ga.notes),
                        checked_sizes=checked)


def _checked_proto(onnx, ort, ga, ta, tb, model, x, opset, input_name, output_names, tolerance,
                   fp16):
    """The serialized model of graph `ga` (dynamic when the second trace `tb` is given), checked by
    onnx.checker and by ONNX Runtime on the example and a second input (tb's, or new values at the
    example's size): (bytes, (input dims, output dims), max diff, tolerance used)."""
    names = ("batch", "channels", "height", "width")
    in_dims = _dims(x.shape, tb.input.array.shape if tb is not None else None, names)
    out_dims = [_dims(v.array.shape, w.array.shape if tb is not None else None,
                      [f"{o}_{n}" if n != "batch" else n for n in names] + ["d4", "d5", "d6"])
                for o, v, w in zip(output_names, ta.outputs, (tb or ta).outputs)]
    proto = _assemble(ga, opset, input_name, output_names, in_dims, out_dims,
                      [v.array.dtype for v in ta.outputs])
    onnx.checker.check_model(proto, full_check=True)
    data = proto.SerializeToString()
    checks = [("the example", x, ta.outputs)]
    if tb is not None:
        checks.append((f"a second input of shape {tb.input.array.shape}", tb.input.array, tb.outputs))
    else:
        x2 = _random_like(x, x.shape, 0)
        checks.append(("a second input of the same shape", x2, trace(model, x2).outputs))
    worst, limit = _verify(ort, data, input_name, checks, tolerance, fp16)
    return data, (in_dims, out_dims), worst, limit
