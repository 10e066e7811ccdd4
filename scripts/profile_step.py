"""Where a training step's time goes, Function by Function: one step (forward, L1 loss, backward,
Adam) of a bench_models case, with every autograd Function's forward and backward timed separately
(each class's static methods wrapped for the timed step only). Prints ms and % of the step, largest
first; the gap to the step's total is the framework's own Python and the optimizer.

    python scripts/profile_step.py SwinIR [--batch 4] [--threads 1] [--top 16]
    python scripts/profile_step.py --summary ESPCN EDSR ... [--batch 16 --threads 2]
    python scripts/profile_step.py EDSR --precision bf16   (the step under framework.autocast)

`--summary`: one markdown row per model in issue 19's categories: conv forward, conv input gradient,
conv weight gradient, resampling, activations, the other Functions, the optimizer step, and the
framework (the step's time outside all of these: autograd's engine, Tensor wrappers, the loss
reduction's Python). Models and shapes: bench_models.CASES (each model's CPU-sized config).
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _functions():
    from framework.autograd import Function
    stack, seen = [Function], []
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if "forward" in sub.__dict__:
                seen.append(sub)
    return seen


def breakdown(name: str, batch: int, precision: str = "fp32") -> tuple[float, dict]:
    """(step seconds, {(Function name, "fwd"|"bwd"): seconds}) for one warm step of CASES[name];
    two more keys: ("conv weight grad", "bwd") (inside Conv2dFunction's and ConvTranspose2dFunction's
    backward) and ("optimizer", "step")."""
    import bench_models as bm
    from framework.functional import conv
    from framework.optim.optimizer import Optimizer
    spec, side = bm.CASES[name]
    model = bm._ours_model(spec)
    lq, gt = bm._batch(spec, side, batch)
    step = bm._ours_step(model, lq, gt, precision)
    step()  # compile and warm up, untimed
    times = defaultdict(float)
    originals = {}

    def timed(cls, kind, fn):
        def run(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                times[(cls.__name__, kind)] += time.perf_counter() - t
        return staticmethod(run)

    def timed_fn(key, fn):
        depth = [0]  # _weight_grad calls itself for the flipped kernel (O < C): time the outer call only

        def run(*args, **kwargs):
            t = time.perf_counter()
            depth[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    times[key] += time.perf_counter() - t
        return run

    for cls in _functions():
        originals[cls] = (cls.__dict__["forward"], cls.__dict__.get("backward"))
        cls.forward = timed(cls, "fwd", cls.forward)
        if "backward" in cls.__dict__:
            cls.backward = timed(cls, "bwd", cls.backward)
    weight_grad, opt_step = conv._weight_grad, Optimizer.step
    conv._weight_grad = timed_fn(("conv weight grad", "bwd"), weight_grad)
    Optimizer.step = timed_fn(("optimizer", "step"), opt_step)
    try:
        t = time.perf_counter()
        step()
        total = time.perf_counter() - t
    finally:
        conv._weight_grad, Optimizer.step = weight_grad, opt_step
        for cls, (fwd, bwd) in originals.items():
            cls.forward = fwd
            if bwd is not None:
                cls.backward = bwd
    return total, dict(times)


CATEGORIES = ("conv fwd", "conv dx", "conv dW", "resample", "activations", "other ops", "optimizer",
              "framework")


def categories(total: float, times: dict) -> dict:
    """The breakdown's seconds in CATEGORIES (they add up to `total`)."""
    from framework.functional import activation
    acts = {c.__name__ for c in _functions() if c.__module__ == activation.__name__}
    convs = {"Conv2dFunction", "ConvTranspose2dFunction"}
    out = dict.fromkeys(CATEGORIES, 0.0)
    for (fn, kind), s in times.items():
        if fn in convs:
            out["conv fwd" if kind == "fwd" else "conv dx"] += s
        elif fn == "conv weight grad":
            out["conv dx"] -= s  # it ran inside the conv backward, timed there too
            out["conv dW"] += s
        elif fn == "ResampleFunction":
            out["resample"] += s
        elif fn in acts:
            out["activations"] += s
        elif fn == "optimizer":
            out["optimizer"] += s
        else:
            out["other ops"] += s
    out["framework"] = total - sum(out.values())
    return out


def main(argv=None) -> int:
    import bench_models as bm
    from framework import malloc
    malloc.tune()  # as the commands run (srgrad_cli.run)
    ap = argparse.ArgumentParser(prog="profile_step.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", choices=list(bm.CASES))
    ap.add_argument("--summary", nargs="+", choices=list(bm.CASES), metavar="MODEL",
                    help="one row per model in issue 19's categories")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=16)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="the step under "
                    "framework.autocast(precision) (default fp32)")
    args = ap.parse_args(argv)
    import framework as sg
    from benchmark import machine
    sg.set_num_threads(args.threads)
    print("\n".join(machine()))
    if args.summary:
        print(f"one step, batch {args.batch}, {args.threads} thread(s); % of the step")
        print("| model | step ms | " + " | ".join(CATEGORIES) + " |")
        print("|---|---:|" + "---:|" * len(CATEGORIES))
        for name in args.summary:
            total, times = breakdown(name, args.batch, args.precision)
            cats = categories(total, times)
            print(f"| {name} | {1e3 * total:.0f} | "
                  + " | ".join(f"{100 * cats[c] / total:.1f}" for c in CATEGORIES) + " |", flush=True)
        return 0
    if args.model is None:
        ap.error("give a MODEL or --summary MODEL ...")
    total, times = breakdown(args.model, args.batch, args.precision)
    inside = sum(times.values())
    print(f"{args.model}: one step, batch {args.batch}, {args.threads} thread(s): {1e3 * total:.0f} ms, "
          f"{100 * inside / total:.0f}% inside Functions")
    for (fn, kind), s in sorted(times.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {fn:28s} {kind}  {1e3 * s:9.1f} ms  {100 * s / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
