"""Where a training step's time goes, Function by Function: one step (forward, L1 loss, backward,
Adam) of a bench_models case, with every autograd Function's forward and backward timed separately
(each class's static methods wrapped for the timed step only). Prints ms and % of the step, largest
first; the gap to the step's total is the framework's own Python and the optimizer.

    python scripts/profile_step.py SwinIR [--batch 4] [--threads 1] [--top 16]

Models and shapes: bench_models.CASES (each model's CPU-sized config).
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


def breakdown(name: str, batch: int) -> tuple[float, dict]:
    """(step seconds, {(Function name, "fwd"|"bwd"): seconds}) for one warm step of CASES[name]."""
    import bench_models as bm
    spec, side = bm.CASES[name]
    model = bm._ours_model(spec)
    lq, gt = bm._batch(spec, side, batch)
    step = bm._ours_step(model, lq, gt)
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

    for cls in _functions():
        originals[cls] = (cls.__dict__["forward"], cls.__dict__.get("backward"))
        cls.forward = timed(cls, "fwd", cls.forward)
        if "backward" in cls.__dict__:
            cls.backward = timed(cls, "bwd", cls.backward)
    try:
        t = time.perf_counter()
        step()
        total = time.perf_counter() - t
    finally:
        for cls, (fwd, bwd) in originals.items():
            cls.forward = fwd
            if bwd is not None:
                cls.backward = bwd
    return total, dict(times)


def main(argv=None) -> int:
    import bench_models as bm
    ap = argparse.ArgumentParser(prog="profile_step.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=list(bm.CASES))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=16)
    args = ap.parse_args(argv)
    import framework as sg
    sg.set_num_threads(args.threads)
    total, times = breakdown(args.model, args.batch)
    inside = sum(times.values())
    print(f"{args.model}: one step, batch {args.batch}, {args.threads} thread(s): {1e3 * total:.0f} ms, "
          f"{100 * inside / total:.0f}% inside Functions")
    for (fn, kind), s in sorted(times.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {fn:28s} {kind}  {1e3 * s:9.1f} ms  {100 * s / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
