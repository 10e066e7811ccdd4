"""ncnn export: a traced srgrad model -> ncnn's `.param` (text) + `.bin` (weights), the files
realesrgan-ncnn-vulkan, upscayl and chaiNNer's ncnn backend load, checked with ncnn's own Python
runtime (the optional `ncnn` extra) against srgrad before they are written.

    from framework.onnx.ncnn import export_ncnn
    report = export_ncnn(model, example, "model.param")     # and model.bin beside it

Written directly from the trace (framework/onnx/trace.py), one small writer per Function: the conv
families' ops map one to one onto ncnn layers (Convolution / ConvolutionDepthWise, ReLU with its
slope, PReLU, Sigmoid, TanH, Clip, PixelShuffle, BinaryOp of two blobs or a blob and a scalar,
Interp nearest / bilinear by an integer factor, Concat of channels). Any other op is refused,
naming it. The input blob is `data` and the output `output` (the names the Real-ESRGAN ncnn
apps use), one image (C, H, W) at a time, any size; values in [0, 1] as the model takes them.

The .bin layout: for each Convolution, a 4-byte zero tag (float32 raw data) then the weights
(O, C/g, kh, kw), then the bias; PReLU's slopes raw; nothing else has weights.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

from ..tensor import Tensor
from .trace import Const, Param, Value, trace

__all__ = ["export_ncnn", "NcnnReport", "NcnnError", "TOLERANCE", "unavailable_reason"]

TOLERANCE = 1e-4  # max |ncnn - srgrad| accepted
_MAGIC = 7767517


class NcnnError(ValueError):
    """The model cannot be written as ncnn layers (naming the op), or ncnn disagrees with srgrad."""


def unavailable_reason() -> str | None:
    try:
        import ncnn  # noqa: F401
    except ImportError as exc:
        return f"checking an ncnn export needs ncnn's Python runtime (pip install 'srgrad[ncnn]'): {exc}"
    return None


@dataclass
class NcnnReport:
    param: str
    bin: str
    layers: int
    max_abs_diff: float
    checked_sizes: list

    def __str__(self):
        sizes = ", ".join(f"{h}x{w}" for h, w in self.checked_sizes)
        return (f"wrote {self.param} and {self.bin}: {self.layers} ncnn layers, input blob data, "
                f"output blob output\nmax |ncnn - srgrad| = {self.max_abs_diff:.3g} at {sizes} "
                f"(tolerance {TOLERANCE:g})")


class _Writer:
    """Layers (type, name, inputs, outputs, params) and the weights, call by call."""

    def __init__(self):
        self.layers, self.weights, self.blobs, self._n = [], [], {}, 0

    def blob(self, r) -> str:
        if isinstance(r, Value) and id(r) in self.blobs:
            return self.blobs[id(r)]
        what = "a model parameter" if isinstance(r, Param) else "a constant"
        raise NcnnError(f"ncnn export: {what} is used as an image-sized input (ncnn's layers take "
                        "constants as weights only)")

    def add(self, kind: str, inputs, params: dict, outputs: int = 1, weights=()):
        self._n += 1
        name = f"{kind.lower()}_{self._n}"
        outs = [f"{name}_out{i}" if outputs > 1 else name for i in range(outputs)]
        self.layers.append([kind, name, list(inputs), outs, params])
        self.weights += list(weights)
        return outs if outputs > 1 else outs[0]


def _scalar(r):
    if isinstance(r, (Const, Param)) and np.asarray(r.array).size == 1:
        return float(np.asarray(r.array).reshape(()))
    return None


def _conv(w, call):
    from ..functional.conv import Conv2dFunction  # noqa: F401
    from .ops.conv import _end_pad
    geo = call.options["geo"]
    weight = np.asarray(call.args[1].array, np.float32)
    bias = call.args[2] if len(call.args) > 2 else None
    ends = [_end_pad(n, o, k, s, d, p) for n, o, k, s, d, p in
            zip(geo.image, geo.features, geo.kernel, geo.stride, geo.dilation, geo.padding)]
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = geo.kernel, geo.stride, geo.dilation, geo.padding
    params = {0: weight.shape[0], 1: kw, 11: kh, 2: dw, 12: dh, 3: sw, 13: sh, 4: pw, 15: ends[1],
              14: ph, 16: ends[0], 5: int(bias is not None), 6: weight.size}
    kind = "Convolution"
    if geo.groups > 1:
        kind, params[7] = "ConvolutionDepthWise", geo.groups
    blobs = [struct.pack("<I", 0) + weight.tobytes()]
    if bias is not None:
        blobs.append(np.asarray(bias.array, np.float32).tobytes())
    return w.add(kind, [w.blob(call.args[0])], params, weights=blobs)


_BINARY_OPS = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3, "Maximum": 4, "Minimum": 5}
_REVERSED = {1: 7, 3: 8}  # scalar - x: rsub, scalar / x: rdiv


def _binary(w, call):
    op = _BINARY_OPS[call.fn.__name__]
    a, b = call.args[:2]
    if isinstance(a, Value) and isinstance(b, Value):
        small = [v.array.shape for v in (a, b)]
        if (a.array.shape != b.array.shape and a.array.ndim == b.array.ndim == 4
                and any(s[2:] == (1, 1) for s in small) and small[0][:2] == small[1][:2]):
            return w.add("BinaryOp", [w.blob(a), w.blob(b)], {0: op})  # per channel (RCAN's CA)
        if a.array.shape != b.array.shape:
            raise NcnnError(f"ncnn export: {call.describe()} broadcasts {a.array.shape} with "
                            f"{b.array.shape}: only equal shapes or a scalar are written")
        return w.add("BinaryOp", [w.blob(a), w.blob(b)], {0: op})
    if isinstance(a, Value) and _scalar(b) is not None:
        return w.add("BinaryOp", [w.blob(a)], {0: op, 1: 1, 2: _scalar(b)})
    if isinstance(b, Value) and _scalar(a) is not None:
        return w.add("BinaryOp", [w.blob(b)], {0: _REVERSED.get(op, op), 1: 1, 2: _scalar(a)})
    value, const = (a, b) if isinstance(a, Value) else (b, a)
    arr = np.asarray(const.array, np.float32)
    rank = value.array.ndim
    if (isinstance(value, Value) and rank == 4 and arr.ndim <= 4 and arr.size > 1
            and arr.reshape((1,) * (4 - arr.ndim) + arr.shape)[:, :, 0, 0].size == arr.size
            and arr.size == value.array.shape[1]):  # one value per channel (EDSR's mean shift)
        data = w.add("MemoryData", [], {0: 1, 1: 1, 2: arr.size}, weights=[arr.tobytes()])
        ins = [w.blob(value), data] if value is a else [data, w.blob(value)]
        return w.add("BinaryOp", ins, {0: op})
    raise NcnnError(f"ncnn export: {call.describe()} takes a constant of shape {arr.shape} (ncnn's "
                    "BinaryOp is written for two blobs, a blob and a number, or one per channel)")


def _deconv(w, call):
    geo = call.options["geo"]  # image = the output size, features = the input size
    weight = np.asarray(call.args[1].array, np.float32)  # (C, O/g, kh, kw)
    if geo.groups != 1:
        raise NcnnError(f"ncnn export: {call.describe()}: a grouped transposed convolution")
    bias = call.args[2] if len(call.args) > 2 else None
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = geo.kernel, geo.stride, geo.dilation, geo.padding
    out_pad = [o - ((i - 1) * s - 2 * p + d * (k - 1) + 1) for o, i, s, p, d, k in
               zip(geo.image, geo.features, geo.stride, geo.padding, geo.dilation, geo.kernel)]
    data = np.ascontiguousarray(weight.transpose(1, 0, 2, 3))  # ncnn: (O, C, kh, kw)
    params = {0: data.shape[0], 1: kw, 11: kh, 2: dw, 12: dh, 3: sw, 13: sh, 4: pw, 15: pw,
              14: ph, 16: ph, 18: out_pad[1], 19: out_pad[0], 5: int(bias is not None),
              6: data.size}
    blobs = [struct.pack("<I", 0) + data.tobytes()]
    if bias is not None:
        blobs.append(np.asarray(bias.array, np.float32).tobytes())
    return w.add("Deconvolution", [w.blob(call.args[0])], params, weights=blobs)


def _interp(w, call):
    op, args = call.options.get("call") or (None, {})
    if op == "adaptive_avg_pool2d" and tuple(args.get("output_size", ())) == (1, 1):
        # adaptive average to 1 x 1: the blob stays (C, 1, 1), as the 1 x 1 convs after it expect
        return w.add("Pooling", [w.blob(call.args[0])], {0: 1, 7: 1, 8: 1, 18: 1})
    if op == "avg_pool2d" or op == "adaptive_avg_pool2d":
        raise NcnnError(f"ncnn export: {call.describe()}: only a global average pool is written")
    sfs = args.get("scale_factors") if op == "interpolate" else None
    mode = args.get("mode")
    if (op != "interpolate" or mode not in ("nearest", "bilinear") or not sfs or None in sfs
            or any(float(f) != int(f) for f in sfs) or args.get("antialias")):
        raise NcnnError(f"ncnn export: {call.describe()} is not an interpolate by an integer "
                        "factor, nearest or bilinear (what ncnn's Interp is written for)")
    return w.add("Interp", [w.blob(call.args[0])],
                 {0: 1 if mode == "nearest" else 2, 1: float(sfs[0]), 2: float(sfs[1]),
                  6: int(bool(args.get("align_corners")))})


def _writers():
    from ..functional import activation as A
    from ..functional import elementwise as E
    from ..functional import logistic as L
    from ..functional import shape as S
    from ..functional.conv import Conv2dFunction, ConvTranspose2dFunction
    from ..functional.pixel_shuffle import PixelShuffleFunction
    from ..functional.resample import ResampleFunction

    def unary(kind, params=lambda call: {}):
        return lambda w, call: w.add(kind, [w.blob(call.args[0])], params(call))

    def prelu(w, call):
        slope = np.asarray(call.args[1].array, np.float32).reshape(-1)
        return w.add("PReLU", [w.blob(call.args[0])], {0: slope.size}, weights=[slope.tobytes()])

    def split(w, call):
        if int(call.options["axis"]) not in (1, -3):
            raise NcnnError(f"ncnn export: {call.describe()} splits along an axis other than the "
                            "channels")
        sizes = [int(s) for s in call.options["sizes"]]
        return w.add("Slice", [w.blob(call.args[0])], {-23300: sizes, 1: 0}, outputs=len(sizes))

    def cat(w, call):
        if int(call.options["axis"]) not in (1, -3):
            raise NcnnError(f"ncnn export: {call.describe()} concatenates along an axis other "
                            "than the channels")
        return w.add("Concat", [w.blob(a) for a in call.args], {0: 0})

    def clamp(w, call):
        lo, hi = call.options.get("min"), call.options.get("max")
        return w.add("Clip", [w.blob(call.args[0])],
                     {0: -3.4e38 if lo is None else float(lo), 1: 3.4e38 if hi is None else float(hi)})
    table = {Conv2dFunction: _conv, A.ReLUFunction: unary("ReLU"),
             A.LeakyReLUFunction: unary("ReLU", lambda c: {0: float(c.options["negative_slope"])}),
             A.PReLUFunction: prelu, A.SigmoidFunction: unary("Sigmoid"),
             A.TanhFunction: unary("TanH"), E.Clamp: clamp, S.Cat: cat, S.SplitFunction: split,
             PixelShuffleFunction: unary("PixelShuffle", lambda c: {0: int(c.options["r"])}),
             ResampleFunction: _interp, ConvTranspose2dFunction: _deconv,
             A.GELUExact: unary("GELU"), L.MishFunction: unary("Mish"),
             L.SiLUFunction: unary("Swish")}
    table.update({getattr(E, n): _binary for n in _BINARY_OPS})
    return table


def _convert(tr) -> _Writer:
    w = _Writer()
    w.blobs[id(tr.input)] = "data"
    w.layers.append(["Input", "data", [], ["data"], {}])
    table = _writers()
    for call in tr.live_calls():
        fn = table.get(call.fn)
        if fn is None:
            raise NcnnError(f"ncnn export: no ncnn layer is written for {call.describe()} "
                            f"({call.fn.__name__}); models made of convolutions, activations, "
                            "pixel shuffles, sums and integer upsampling export")
        out = fn(w, call)
        for v, name in zip(call.outputs, out if isinstance(out, list) else [out]):
            w.blobs[id(v)] = name
    final = w.blobs[id(tr.outputs[0])]
    for layer in w.layers:  # the output blob's public name
        layer[2] = ["output" if b == final else b for b in layer[2]]
        layer[3] = ["output" if b == final else b for b in layer[3]]
    _splits(w)
    return w


def _splits(w):
    """ncnn needs a Split layer for a blob read by several layers: one output per reader."""
    readers = {}
    for i, layer in enumerate(w.layers):
        for j, b in enumerate(layer[2]):
            readers.setdefault(b, []).append((i, j))
    out = []
    for i, layer in enumerate(w.layers):
        out.append(layer)
        for b in layer[3]:
            users = readers.get(b, [])
            if len(users) > 1:
                names = [f"{b}_split{k}" for k in range(len(users))]
                out.append(["Split", f"split_{b}", [b], names, {}])
                for (li, lj), name in zip(users, names):
                    w.layers[li][2][lj] = name
    w.layers = out


def _param_text(w) -> str:
    blobs = {b for layer in w.layers for b in layer[3]}
    lines = [str(_MAGIC), f"{len(w.layers)} {len(blobs)}"]
    for kind, name, ins, outs, params in w.layers:
        values = " ".join(f"{k}={_fmt(v)}" for k, v in params.items())
        lines.append(f"{kind:<24}{name:<24}{len(ins)} {len(outs)} {' '.join(ins + outs)}"
                     + (f" {values}" if values else ""))
    return "\n".join(lines) + "\n"


def _fmt(v):
    if isinstance(v, (list, tuple)):  # an array parameter (its key is -23300 - id): n,v1,v2,...
        return ",".join(str(int(x)) for x in [len(v), *v])
    return f"{v:.9e}" if isinstance(v, float) else str(int(v))


def _ncnn_run(param_path, bin_path, x: np.ndarray) -> np.ndarray:
    import ncnn
    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.use_fp16_packed = net.opt.use_fp16_storage = net.opt.use_fp16_arithmetic = False
    net.opt.use_bf16_storage = False
    if net.load_param(str(param_path)) != 0 or net.load_model(str(bin_path)) != 0:
        raise NcnnError(f"ncnn export: ncnn could not load {param_path}")
    ex = net.create_extractor()
    ex.input("data", ncnn.Mat(np.ascontiguousarray(x[0])))
    ret, out = ex.extract("output")
    if ret != 0:
        raise NcnnError("ncnn export: ncnn failed to run the exported net")
    return np.array(out)[None]


def export_ncnn(model, example, path, overwrite: bool = False, check: bool = True) -> NcnnReport:
    """Write `path` (.param) and its .bin beside it; ncnn runs them on the example and two other
    sizes (an odd and an even) against srgrad within TOLERANCE before anything is written."""
    import tempfile

    from ..io.atomic import write_atomic
    path = os.fspath(path)
    bin_path = os.path.splitext(path)[0] + ".bin"
    for p in (path, bin_path):
        if os.path.exists(p) and not overwrite:
            raise FileExistsError(f"ncnn export: {p} exists (pass overwrite=True to replace it)")
    x = np.asarray(example.data if isinstance(example, Tensor) else example, np.float32)
    if x.ndim != 4 or x.shape[0] != 1:
        raise NcnnError(f"ncnn export: the example must be one image (1, C, H, W), got {x.shape}")
    tr = trace(model, x)
    if len(tr.outputs) != 1:
        raise NcnnError("ncnn export: the model has several outputs; ncnn's apps take one")
    w = _convert(tr)
    text, weights = _param_text(w).encode(), b"".join(w.weights)
    worst, sizes = 0.0, []
    if check:
        if unavailable_reason():
            raise NcnnError(unavailable_reason())
        from .export import _run_model
        with tempfile.TemporaryDirectory() as tmp:
            p, b = os.path.join(tmp, "m.param"), os.path.join(tmp, "m.bin")
            with open(p, "wb") as f:
                f.write(text)
            with open(b, "wb") as f:
                f.write(weights)
            rng = np.random.default_rng(5)
            h, w_ = x.shape[2:]
            for shape in ((h, w_), (h + 3, w_ + 6), (max(h // 2, 1) | 1, max(w_ // 2, 1))):
                inp = x if shape == (h, w_) else rng.uniform(0, 1, (1, x.shape[1], *shape)).astype(
                    np.float32)
                want = _run_model(model, inp)
                if want is None:
                    continue
                got = _ncnn_run(p, b, inp)
                diff = float(np.abs(got - want[0]).max()) if got.shape == want[0].shape else np.inf
                if not diff <= TOLERANCE:
                    raise NcnnError(f"ncnn export: ncnn differs from srgrad by {diff:.3g} at "
                                    f"{shape[0]}x{shape[1]} (tolerance {TOLERANCE:g}); nothing "
                                    "written")
                worst, sizes = max(worst, diff), sizes + [shape]
    write_atomic(bin_path, weights)
    write_atomic(path, text)
    return NcnnReport(path, bin_path, len(w.layers), worst, sizes)
