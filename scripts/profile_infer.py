"""Where one-image inference's time goes, srgrad against ONNX Runtime on srgrad's own export of the
same model (issue 39's inference miss): srgrad's eager forward with every autograd Function's
forward timed (as scripts/profile_step.py times a step), ONNX Runtime's own per-node profile
(`SessionOptions.enable_profiling`), both summed into the same categories, in CPU-independent
wall milliseconds per image (median of the runs' totals; categories from the same runs).

    python scripts/profile_infer.py MSRResNet RCAN [--size 128] [--threads 1] [--repeat 5]

Categories: conv (ONNX Runtime's Conv and FusedConv: on the CPU it folds a following activation,
and for some graphs an Add, into the convolution, so its conv row includes what srgrad counts under
activations and adds), activations, elementwise (add, mul, ...), pixel shuffle / resize, concat and
ONNX Runtime's layout conversions (ReorderInput/Output: NCHW to its blocked NCHWc and back), other, and
the rest (srgrad: the framework's Python between Functions; ONNX Runtime: the session outside
its nodes). Models and sizes: bench_models.CASES (each model's CPU-sized config).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CATEGORIES = ("conv", "activations", "elementwise", "shuffle/resize", "concat/layout", "other", "rest")
_ORT = {"Conv": "conv", "FusedConv": "conv", "ConvTranspose": "conv", "NchwcConv": "conv",
        "Relu": "activations", "LeakyRelu": "activations", "PRelu": "activations",
        "Sigmoid": "activations", "Gelu": "activations", "Tanh": "activations",
        "Add": "elementwise", "Mul": "elementwise", "Sub": "elementwise", "Div": "elementwise",
        "Sum": "elementwise", "DepthToSpace": "shuffle/resize", "Resize": "shuffle/resize",
        "Upsample": "shuffle/resize", "Concat": "concat/layout",
        "ReorderInput": "concat/layout", "ReorderOutput": "concat/layout"}
_OURS = {"Conv2dFunction": "conv", "ConvTranspose2dFunction": "conv",
         "PixelShuffleFunction": "shuffle/resize", "ResampleFunction": "shuffle/resize",
         "Cat": "concat/layout"}


def ours(model, lq, repeat: int) -> tuple[float, dict]:
    """(median ms per image, {category: ms per image}) of srgrad's eager no_grad forward."""
    import framework as sg
    from framework.functional import activation, elementwise
    from profile_step import _functions
    acts = {c for c in _functions() if c.__module__ == activation.__name__}
    elem = {c for c in _functions() if c.__module__ == elementwise.__name__}
    spent, totals, originals = defaultdict(float), [], {}

    def timed(cls, fn):
        key = _OURS.get(cls.__name__) or ("activations" if cls in acts else
                                          "elementwise" if cls in elem else "other")

        def run(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - t
        return staticmethod(run)

    x = sg.tensor(lq)
    model.eval()
    with sg.no_grad():
        model(x)  # compile and warm up, untimed
    for cls in _functions():
        originals[cls] = cls.__dict__["forward"]
        cls.forward = timed(cls, cls.forward)
    try:
        with sg.no_grad():
            for _ in range(repeat):
                t = time.perf_counter()
                model(x)
                totals.append(time.perf_counter() - t)
    finally:
        for cls, fwd in originals.items():
            cls.forward = fwd
    return _split(totals, spent, repeat)


def onnxruntime(model, lq, threads: int, repeat: int) -> tuple[float, dict, str]:
    """(median ms, {category: ms}, version) of ONNX Runtime on srgrad's fixed-size export."""
    import onnxruntime as ort
    from framework.onnx import export
    with tempfile.TemporaryDirectory(prefix="srgrad-profile-onnx-") as folder:
        return _onnxruntime(model, lq, threads, repeat, folder, ort, export)


def _onnxruntime(model, lq, threads, repeat, folder, ort, export):
    path = os.path.join(folder, "model.onnx")
    export(model, lq, path, dynamic=False)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    warm = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = warm.get_inputs()[0].name
    warm.run(None, {name: lq})
    so.enable_profiling, so.profile_file_prefix = True, os.path.join(folder, "profile")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    sess.run(None, {name: lq})  # its first run (allocations): not counted
    spent, totals = defaultdict(float), []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, {name: lq})
        totals.append(time.perf_counter() - t)
    with open(sess.end_profiling()) as fh:
        events = json.load(fh)
    # the timed runs' nodes: those from the first timed run's "model_run" event on
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    cut = runs[-repeat]["ts"] if len(runs) >= repeat else 0
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["ts"] >= cut:
            op = e.get("args", {}).get("op_name", "")
            spent[_ORT.get(op, "other")] += e["dur"] * 1e-6
    return (*_split(totals, spent, repeat), ort.__version__)


def _split(totals, spent, repeat):
    total = statistics.median(totals)
    cats = {k: 1e3 * spent.get(k, 0.0) / repeat for k in CATEGORIES[:-1]}
    cats["rest"] = 1e3 * sum(totals) / repeat - sum(cats.values())
    return 1e3 * total, cats


def main(argv=None) -> int:
    import bench_models as bm
    ap = argparse.ArgumentParser(prog="profile_infer.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", choices=list(bm.CASES))
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    import framework as sg
    from benchmark import machine
    sg.set_num_threads(args.threads)
    print("\n".join(machine()))
    lq = bm._image(args.size)
    print(f"one {args.size}x{args.size} image, {args.threads} thread(s), ms per image "
          f"(srgrad eager / ONNX Runtime)")
    print("| model | total | " + " | ".join(CATEGORIES) + " |")
    print("|---|---:|" + "---:|" * len(CATEGORIES))
    for name in args.models:
        spec, _ = bm.CASES[name]
        model = bm._ours_model(spec)
        a_total, a = ours(model, lq, args.repeat)
        b_total, b, version = onnxruntime(model, lq, args.threads, args.repeat)
        print(f"| {name} x{spec['scale']} | {a_total:.1f} / {b_total:.1f} | "
              + " | ".join(f"{a[c]:.1f} / {b[c]:.1f}" for c in CATEGORIES) + " |", flush=True)
    print(f"(ONNX Runtime {version}; its rows from its per-node profile)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
