"""Where a captured graph's time goes: each op of srgrad's captured inference graph (or training step)
timed one by one, in one process.

    python scripts/profile_ops.py RCAN                      # one 128x128 image, bf16 inference graph
    python scripts/profile_ops.py RCAN --step               # a training step (bench_models' batch)
    python scripts/profile_ops.py EDSR --size 256 --precision fp32 --top 15

The models and shapes are scripts/bench_models.py's CASES (its `_ours_infer` / `_ours_step`, as
srgrad-infer and srgrad-train run them: the graph captured after two recorded calls, the allocator
tuned). Each row: the op's index in the graph, its forward (a lowered op shows its lowering's name:
`_conv_forward` reads or writes bfloat16 planes, `_conv2d` is a float32 direct conv with its packed
weights), the shapes of its first array arguments and of its output, and its time per call (forward;
with --step also its backward). The rows' sum is below the whole call's time: the graph's own Python,
the gradient sums and the optimizer are not in any row (the header gives both). Wrapping each op
costs ~1-3 us; the figures are for finding the large items, not for tables: benchmarks compare
separate processes (scripts/benchmark.py). Unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE first, as
for any benchmark.

    python scripts/profile_ops.py RRDBNet --openvino        # OpenVINO's own per-layer counters

`--openvino`: the peer's side of the same comparison, OpenVINO (a benchmark-only extra) on srgrad's
fixed-size ONNX export of the same model, its precision hint bf16 or f32, with its PERF_COUNT
counters: each executed layer's time and the primitive that ran it (brgconv_avx512_amx_bf16 is
oneDNN's AMX convolution), in the order it ran them. (scripts/profile_step.py and profile_infer.py time the eager engine's Functions;
this one the captured graph's entries, lowerings included.)
"""
from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import bench_models as bm  # noqa: E402


def _shapes(args, out):
    shown = " ".join(str(a.shape).replace(" ", "") for a in args[1:4] if hasattr(a, "shape"))
    return f"{shown} -> {str(getattr(out, 'shape', '?')).replace(' ', '')}"


def _graph(call):
    """The Graph that the Capture inside bench_models' closure `call` compiled last."""
    from framework.capture import Capture
    caps = [c.cell_contents for c in call.__closure__ or () if isinstance(c.cell_contents, Capture)]
    if not caps or not caps[0].graphs:
        raise SystemExit("no captured graph: the model did not capture"
                         + (f" ({caps[0].status()})" if caps else ""))
    return caps[0].graphs[-1]


def breakdown(model, step=False, size=128, precision="bf16", repeat=10):
    """(ms a call, {op index: (forward name, shapes, forward ms, backward ms)}) of `model`'s captured
    inference graph (or training step, with `step`), each op timed over `repeat` calls."""
    from framework import malloc
    malloc.tune()
    spec, side = bm.CASES[model]
    net = bm._ours_model(spec)
    if step:
        lq, gt = bm._batch(spec, side, 16)
        call = bm._ours_step(net, lq, gt, precision, capture=True)
    else:
        call = bm._ours_infer(net, bm._image(size), precision, capture=True)
    for _ in range(4):  # two recorded calls, then replays
        call()
    graph = _graph(call)
    fwd, bwd, what = collections.defaultdict(float), collections.defaultdict(float), {}
    for k, (forward, spec_k, kwargs, needs, first) in enumerate(list(graph.forward)):
        def timed(*args, _f=forward, _k=k, **kw):
            t = time.perf_counter()
            out = _f(*args, **kw)
            fwd[_k] += time.perf_counter() - t
            what[_k] = (getattr(_f, "__qualname__", str(_f)), _shapes(args, out))
            return out
        graph.forward[k] = (timed, spec_k, kwargs, needs, first)

    class _Timed:  # a class's backward, timed (the graph calls classes[k].backward)
        def __init__(self, cls, k):
            self.cls, self.k = cls, k

        def backward(self, ctx, *grads):
            t = time.perf_counter()
            out = self.cls.backward(ctx, *grads)
            bwd[self.k] += time.perf_counter() - t
            return out

    if step:
        graph.classes = [None if c is None else _Timed(c, k) for k, c in enumerate(graph.classes)]
    t = time.perf_counter()
    for _ in range(repeat):
        call()
    total = (time.perf_counter() - t) / repeat * 1e3
    return total, {k: (*what[k], fwd[k] / repeat * 1e3, bwd[k] / repeat * 1e3) for k in what}


def openvino_layers(model, size=128, precision="bf16", repeat=20, threads=2):
    """(ms a call, [(layer, its type, the primitive that ran it, ms)]) of OpenVINO on srgrad's export of
    `model` at size x size, on `threads` threads, its counters averaged over `repeat` calls."""
    import os
    import tempfile

    import numpy as np
    import openvino as ov

    from framework.onnx import export
    spec, _ = bm.CASES[model]
    image = bm._image(size)
    path = os.path.join(tempfile.mkdtemp(prefix="srgrad-profile-onnx-"), "model.onnx")
    export(bm._ours_model(spec), image, path, dynamic=False)
    compiled = ov.Core().compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": threads, "PERF_COUNT": True,
                                                     "INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32"})
    request = compiled.create_infer_request()
    for _ in range(3):
        request.infer({0: image})
    times, layers = [], collections.defaultdict(float)
    for _ in range(repeat):
        t = time.perf_counter()
        request.infer({0: image})
        times.append(time.perf_counter() - t)
        for info in request.get_profiling_info():
            layers[(info.node_name, info.node_type, info.exec_type)] += info.real_time.total_seconds()
    rows = [(*key, ms / repeat * 1e3) for key, ms in layers.items() if ms > 0]
    return float(np.median(times)) * 1e3, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=sorted(bm.CASES))
    ap.add_argument("--step", action="store_true", help="a training step instead of one image's inference")
    ap.add_argument("--size", type=int, default=128, help="the inference image's side (default 128)")
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--top", type=int, default=0, help="only the N slowest ops (default: all, in order)")
    ap.add_argument("--openvino", action="store_true",
                    help="OpenVINO's per-layer counters on srgrad's export instead (inference only)")
    a = ap.parse_args(argv)
    if a.openvino:
        if a.step:
            ap.error("--openvino: inference only")
        total, rows = openvino_layers(a.model, a.size, a.precision, a.repeat)
        print(f"{a.model} inference {a.size}x{a.size} on OpenVINO ({a.precision} hint): {total:.2f} ms a call; "
              f"its layers {sum(r[3] for r in rows):.2f} ms")
        order = sorted(range(len(rows)), key=lambda k: -rows[k][3]) if a.top else range(len(rows))
        for k in list(order)[:a.top or None]:
            name, kind, primitive, ms = rows[k]
            print(f"{k:4d} {kind[:14]:14s} {primitive[:28]:28s} {ms:7.3f} ms  {name[:60]}")
        return
    total, rows = breakdown(a.model, a.step, a.size, a.precision, a.repeat)
    kind = "training step" if a.step else f"inference {a.size}x{a.size}"
    back = f", backwards {sum(r[3] for r in rows.values()):.2f} ms" if a.step else ""
    print(f"{a.model} {kind} ({a.precision}): {total:.2f} ms a call; the ops' forwards "
          f"{sum(r[2] for r in rows.values()):.2f} ms{back}")
    order = sorted(rows, key=lambda k: -(rows[k][2] + rows[k][3])) if a.top else sorted(rows)
    for k in order[:a.top or None]:
        name, shapes, f, b = rows[k]
        print(f"{k:4d} {name[:34]:34s} {f:7.3f} ms" + (f" backward {b:7.3f}" if a.step else "") + f"  {shapes}")


if __name__ == "__main__":
    main()
