"""Issue 39: srgrad's captured step and inference graph against its eager engine, and srgrad's
inference against ONNX Runtime running srgrad's own exported graph (OpenVINO too when installed:
`pip install openvino`, a benchmark-only extra).

Run through the harness: `python scripts/benchmark.py --only capture --threads 2 --repeat 7`;
section options after the harness's own:
    --models EDSR RCAN ...    default: EDSR SRVGGNetCompact MSRResNet RCAN RRDBNet (bench_models'
                              CPU-sized configs and patch sizes)
    --batch 16
    --infer-size 128          the LR side of the one-image inference (0 skips inference)
    --engines / --no-engines  the ONNX Runtime (and OpenVINO) rows (default on)
    --tiny                    the models' small test builds (tests/models/cases.py) on one 4x4 patch
                              and a 16x16 image: the kernels take next to nothing, what is left is
                              the framework's Python per op (the engine, the Adam loop)
    --clock wall|cpu          wall time (default), or this process's CPU time (time.process_time:
                              with --threads 1, a measure that a loaded machine's waits for a
                              core do not inflate; each engine's own threads count too)
    --apart-rounds 0          also each engine and srgrad's captured inference alone in fresh
                              processes (bench_models' children), this many rounds alternating;
                              the engines' children leave glibc's allocator as their users have
                              it, srgrad's tunes it as its commands do (in this process srgrad's
                              setting applies to the engines too)

Rows (the table's "torch ms" column holds the other side named in the row):
- `<model> step: captured vs eager`: one training step (L1 + Adam) replayed from the captured graph
  with the fused Adam, against the eager engine with the per-parameter Adam, in this process,
  alternating run by run (benchmark.time_pair), on two copies of the same model;
- `<model> inference: captured vs eager`: one image, no_grad, the captured inference graph (weights
  folded and packed once) against the eager forward;
- `<model> inference: srgrad captured vs ONNX Runtime` (and `vs OpenVINO`): the same image through
  srgrad's export of the model (framework.onnx.export, float32), each engine on `--threads`
  threads, alternating in this process.

With the harness's `--precision bf16` (issue 41): srgrad's captured inference runs under
framework.autocast("bf16") and OpenVINO at its default precision on a CPU with AMX
(INFERENCE_PRECISION_HINT bf16), ONNX Runtime stays float32 (it has no bf16 CPU kernels); each
engine row's note gives the largest |output - srgrad's float32 output| on the image, srgrad's own
and the engine's, as issue 41 compares them.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from benchmark import Row, time_pair

TITLE = "Captured step and inference graph (issue 39; float32, or bf16 inference under --precision bf16)"
MODELS = ["EDSR", "SRVGGNetCompact", "MSRResNet", "RCAN", "RRDBNet"]


def _options(rest):
    ap = argparse.ArgumentParser(prog="bench_capture")
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--infer-size", type=int, default=128)
    ap.add_argument("--engines", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--apart-rounds", type=int, default=0)
    return ap.parse_known_args(rest)[0]


def _ab(a, b, repeat, clock):
    """Median ms of a() and b(), alternating run by run, by `clock` (benchmark.time_pair's wall
    time, or CPU time)."""
    if clock == "wall":
        return time_pair(a, b, repeat)
    a(), b()
    ta, tb = [], []
    for _ in range(repeat):
        for fn, out in ((a, ta), (b, tb)):
            t = time.process_time()
            fn()
            out.append(time.process_time() - t)
    return 1e3 * statistics.median(ta), 1e3 * statistics.median(tb)


def _case(name, opts):
    """(spec, LR patch side, a function building the model): bench_models' case, or --tiny's."""
    import bench_models as bm
    if not opts.tiny:
        spec, side = bm.CASES[name]
        return spec, side, lambda: bm._ours_model(spec)
    from tests.models.cases import build
    spec = build(name, 2, small=True)[1]
    return spec, 4, lambda: build(name, 2, small=True)[0]


def _step_rows(name, opts, repeat):
    import bench_models as bm
    spec, side, model = _case(name, opts)
    batch = 1 if opts.tiny else opts.batch
    lq, gt = bm._batch(spec, side, batch)
    captured = bm._ours_step(model(), lq, gt, capture=True)
    eager = bm._ours_step(model(), lq, gt, capture=False)
    for _ in range(2):  # the captured step records its first two calls
        captured()
    a, b = _ab(captured, eager, repeat, opts.clock)
    return Row(f"{name} x{spec['scale']} step ({batch},3,{side},{side}): captured vs eager",
               a, b, 1.0, note=f"torch column: srgrad's eager step; {opts.clock} time")


def _infer_rows(name, opts, repeat, threads, precision="fp32"):
    import bench_models as bm
    spec, _, build = _case(name, opts)
    model = build()
    lq = bm._image(16 if opts.tiny else opts.infer_size)
    captured = bm._ours_infer(model, lq, precision, capture=True)
    eager = bm._ours_infer(model, lq, precision, capture=False)
    for _ in range(2):
        captured()
    size = lq.shape[2]
    label = f"{name} x{spec['scale']} inference (1,3,{size},{size}) {precision}"
    a, b = _ab(captured, eager, repeat, opts.clock)
    rows = [Row(f"{label}: captured vs eager", a, b, 1.0, note=f"torch column: srgrad's eager forward; {opts.clock} time")]
    if opts.engines:
        reference = _output(model, lq, "fp32")
        ours = f"srgrad {precision} max error {np.abs(_output(model, lq, precision) - reference).max():.2e}"
        for engine, run in _engines(model, lq, threads, precision):
            a, b = _ab(captured, run, repeat, opts.clock)
            error = np.abs(np.asarray(run()) - reference).max()
            rows.append(Row(f"{label}: srgrad captured vs {engine}", a, b, 1.0,
                            note=f"torch column: {engine} on srgrad's exported graph; "
                                 f"{opts.clock} time; {ours}, {engine}'s {error:.2e}"))
    return rows


def _apart_rows(name, opts, repeat, threads, precision):
    """srgrad's captured inference against each engine, every one alone in fresh child processes
    (bench_models --child), opts.apart_rounds rounds alternating: the medians of every timed run."""
    import bench_models as bm
    engines = ["onnxruntime"]
    try:
        import openvino  # noqa: F401
        engines.append("openvino")
    except ImportError:
        pass
    child_opts = argparse.Namespace(threads=threads, batch=opts.batch, infer_size=opts.infer_size,
                                    precision=precision, capture=True)
    times = {fw: [] for fw in ["ours", *engines]}
    for _ in range(opts.apart_rounds):
        for fw in times:
            times[fw] += bm._child(fw, name, "infer", child_opts, repeat=repeat)["times_s"]
    spec = bm.CASES[name][0]
    size, ours = opts.infer_size, 1e3 * statistics.median(times["ours"])
    # no peak RSS: an engine's child holds srgrad's export of the model too (it traces the image)
    return [Row(f"{name} x{spec['scale']} inference (1,3,{size},{size}) {precision}: srgrad captured vs "
                f"{fw}, separate processes", ours, 1e3 * statistics.median(times[fw]), 1.0,
                note=f"{len(times[fw])} timed runs each; wall time")
            for fw in engines]


def _output(model, lq, precision):
    """srgrad's output of `lq` (an array) under `precision`."""
    import framework as sg
    with sg.no_grad(), sg.autocast(precision):
        return model(sg.tensor(lq)).data


def _engines(model, lq, threads, precision="fp32"):
    """(name, run -> the output array) of ONNX Runtime (float32) and, when installed, OpenVINO
    (at `precision`: bf16 is its default on a CPU with AMX) on srgrad's export of `model`."""
    from framework.onnx import export
    folder = tempfile.mkdtemp(prefix="srgrad-bench-onnx-")
    path = os.path.join(folder, "model.onnx")
    export(model, lq, path, dynamic=False)
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    out = [("ONNX Runtime fp32", lambda: sess.run(None, {name: lq})[0])]
    try:
        import openvino as ov
    except ImportError:
        return out
    core = ov.Core()
    hint = "bf16" if precision == "bf16" else "f32"
    compiled = core.compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": threads,
                                                "INFERENCE_PRECISION_HINT": hint})
    request = compiled.create_infer_request()
    out.append((f"OpenVINO {ov.__version__.split('-')[0]} {hint}",
                lambda: next(iter(request.infer({0: lq}).values()))))
    return out


def run(args) -> list:
    opts = _options(getattr(args, "rest", []))
    rows = []
    precision = getattr(args, "precision", "fp32")
    for name in opts.models:
        if precision == "fp32":  # the captured step's bf16 is the models section's (--precision bf16)
            rows.append(_step_rows(name, opts, args.repeat))
        if opts.infer_size:
            rows += _infer_rows(name, opts, args.repeat, args.threads, precision)
        if opts.infer_size and opts.apart_rounds > 0 and not opts.tiny:
            rows += _apart_rows(name, opts, args.repeat, args.threads, precision)
    return rows


if __name__ == "__main__":
    raise SystemExit("run through the harness: python scripts/benchmark.py --only capture")
