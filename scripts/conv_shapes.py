"""Each convolution of one training step, op by op: srgrad's forward, input gradient and weight
gradient as they ran inside the step, against torch's same op on the same shapes in its own process
(aten.convolution / convolution_backward with only that gradient), ms per step and GFLOP/s. The
bound of issue 29's misses: a row where torch's rate is above srgrad's is a kernel to beat; the
step's time outside all convolutions is the last line.

    python scripts/conv_shapes.py SRVGGNetCompact RCAN [--batch 16] [--threads 2] [--repeat 5]
    python scripts/conv_shapes.py EDSR --precision bf16   (srgrad's step under framework.autocast;
        torch's ops on bfloat16 tensors, as its CPU autocast runs conv2d and its backward)

Models and shapes: bench_models.CASES (each model's CPU-sized config). srgrad's times are medians
over `--repeat` warm steps (each op summed over its calls in a step); torch's, medians of 15 runs of
the op alone, warm, with the same threads. Run with the OpenBLAS variables unset, as the benchmarks.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def record(name: str, batch: int, repeat: int, precision: str = "fp32"):
    """{(kind, x shape, w shape, geometry): [seconds per step, ...]} and the step times."""
    import bench_models as bm
    from framework.functional import conv
    spec, side = bm.CASES[name]
    model = bm._ours_model(spec)
    lq, gt = bm._batch(spec, side, batch)
    step = bm._ours_step(model, lq, gt, precision)
    step()
    step()
    calls = []
    fwd0, wg0, adj0 = conv.Conv2dFunction.forward, conv._weight_grad, conv._correlate_adjoint
    depth = [0]

    def key(kind, x_shape, w_shape, geo):
        return (kind, tuple(x_shape), tuple(w_shape),
                (geo.kernel, geo.stride, geo.padding, geo.dilation, geo.groups, geo.features))

    def fwd(ctx, x, w, b=None, *, geo, relu_slope=None):
        depth[0] += 1  # a forward through the flipped adjoint is not an input gradient
        t = time.perf_counter()
        try:
            return fwd0(ctx, x, w, b, geo=geo, relu_slope=relu_slope)
        finally:
            depth[0] -= 1
            calls.append((key("fwd", x.shape, w.shape, geo), time.perf_counter() - t))

    def weight_grad(x, y, geo, w_shape):
        depth[0] += 1
        t = time.perf_counter()
        try:
            return wg0(x, y, geo, w_shape)
        finally:
            depth[0] -= 1
            if depth[0] == 0:  # the flipped kernel's gradient calls it again: count the outer call
                calls.append((key("dW", x.shape, w_shape, geo), time.perf_counter() - t))

    def adjoint(y, w, geo, c_out, bias=None):
        t = time.perf_counter()
        x = adj0(y, w, geo, c_out, bias)
        if depth[0] == 0:  # conv2d's input gradient (conv_transpose2d's forward is one too)
            calls.append((key("dx", x.shape, w.shape, geo), time.perf_counter() - t))
        return x

    per_step, steps = defaultdict(list), []
    conv.Conv2dFunction.forward = staticmethod(fwd)
    conv._weight_grad, conv._correlate_adjoint = weight_grad, adjoint
    try:
        for _ in range(repeat):
            calls.clear()
            t = time.perf_counter()
            step()
            steps.append(time.perf_counter() - t)
            summed = defaultdict(float)
            for k, s in calls:
                summed[k] += s
            for k, s in summed.items():
                per_step[k].append((s, sum(1 for c, _ in calls if c == k)))
    finally:
        conv.Conv2dFunction.forward = staticmethod(fwd0)
        conv._weight_grad, conv._correlate_adjoint = wg0, adj0
    return per_step, steps


def torch_times(keys, threads, precision="fp32"):
    """In this process (the child): torch's time of each op alone, median of 15 warm runs (bf16:
    on bfloat16 tensors, the operands torch's CPU autocast gives conv2d and its backward)."""
    import torch
    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    out = []
    for kind, xs, ws, (k, s, p, d, g, _) in keys:
        x, w = torch.randn(*xs, dtype=dtype), torch.randn(*ws, dtype=dtype)
        gy = torch.randn_like(torch.nn.functional.conv2d(x, w, None, s, p, d, g))
        mask = {"fwd": None, "dx": [True, False, False], "dW": [False, True, False]}[kind]

        def op():
            if mask is None:
                return torch.nn.functional.conv2d(x, w, None, s, p, d, g)
            return torch.ops.aten.convolution_backward(gy, x, w, None, s, p, d, False, [0, 0], g, mask)
        for _ in range(3):
            op()
        times = []
        for _ in range(15):
            t = time.perf_counter()
            op()
            times.append(time.perf_counter() - t)
        out.append(statistics.median(times))
    return out


def main(argv=None) -> int:
    import bench_models as bm
    from framework import malloc
    malloc.tune()  # as the commands run (srgrad_cli.run)
    ap = argparse.ArgumentParser(prog="conv_shapes.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", metavar="MODEL", help=f"of {', '.join(bm.CASES)}")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--torch-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.torch_child:
        keys = [(k[0], tuple(k[1]), tuple(k[2]), tuple(tuple(v) if isinstance(v, list) else v for v in k[3]))
                for k in json.loads(Path(args.torch_child).read_text())]
        print(json.dumps(torch_times(keys, args.threads, args.precision)))
        return 0
    if not args.models or set(args.models) - set(bm.CASES):
        ap.error(f"give one or more MODEL of {', '.join(bm.CASES)}")
    import tempfile
    import framework as sg
    from benchmark import machine
    sg.set_num_threads(args.threads)
    print("\n".join(machine()))
    print(f"batch {args.batch}, {args.threads} threads, {args.precision}; ms per training step (an op's calls summed), "
          "GFLOP/s = 2 x multiply-adds / time")
    print("| model | op | input (image side) | weight | stride, padding | calls | srgrad ms | torch ms "
          "| ratio | srgrad GFLOP/s | torch GFLOP/s |")
    print("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for name in args.models:
        per_step, steps = record(name, args.batch, args.repeat, args.precision)
        keys = list(per_step)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(keys, f)
        child = subprocess.run([sys.executable, __file__, "--torch-child", f.name, "--threads",
                                str(args.threads), "--precision", args.precision],
                               capture_output=True, text=True, check=True)
        Path(f.name).unlink()
        theirs = json.loads(child.stdout.strip().splitlines()[-1])
        total_ours = total_theirs = 0.0
        for k, t_op in zip(keys, theirs):
            kind, xs, ws, (kern, s, p, _, _, out) = k
            ours = statistics.median(v for v, _ in per_step[k])
            calls = per_step[k][0][1]
            flop = 2 * xs[0] * ws[0] * ws[1] * kern[0] * kern[1] * out[0] * out[1] * calls
            total_ours, total_theirs = total_ours + ours, total_theirs + t_op * calls
            print(f"| {name} | {kind} | {xs} | {ws} | {s}, {p} | {calls} | {1e3 * ours:.2f} | "
                  f"{1e3 * t_op * calls:.2f} | {ours / (t_op * calls):.2f}x | {flop / ours / 1e9:.0f} | "
                  f"{flop / (t_op * calls) / 1e9:.0f} |")
        step = statistics.median(steps)
        print(f"| {name} | all convolutions | | | | | {1e3 * total_ours:.1f} | {1e3 * total_theirs:.1f} | "
              f"{total_ours / total_theirs:.2f}x | | |")
        print(f"| {name} | the rest of the step | | | | | {1e3 * (step - total_ours):.1f} | | | | |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
