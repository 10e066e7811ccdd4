"""Data-parallel training over MPI: steps per second with 1 and 2 ranks (1 thread each) on the
quickstart model (configs/quickstart.yaml: ESPCN x2, global batch 16, 64x64 crops, float32), and
the share of each step spent in the gradient Allreduce.

    python scripts/benchmark.py --only mpi [--repeat 5]
    python scripts/bench_mpi.py [--steps 20] [--ranks 1 2]          # the same, standalone

It launches `mpirun -n K ... python scripts/bench_mpi.py --worker` itself (needs mpirun and mpi4py).
Every rank runs real training steps (the trainer's step: forward, backward, Allreduce, Adam) on its
share of the global batch; data loading is outside the timed region. "allreduce" is rank 0's time
inside Allreduce, which includes waiting for the slower rank; "transport" times the same Allreduce
back to back after a barrier: the pure cost of moving the gradients (its minimum is the cost without
interference from other processes on a busy machine).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from framework.engine.run import distributed

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
CONFIG = REPO / "configs" / "quickstart.yaml"

TITLE = ("Data-parallel training over MPI: quickstart ESPCN x2, global batch 16, 1 thread per rank "
         "(torch column unused)")


def _skip_reason():
    return distributed.unavailable_reason()


def launch(ranks: int, steps: int, warmup: int) -> dict:
    """Run the worker under mpirun with `ranks` ranks, 1 thread each; rank 0's measurements."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               NUMBA_NUM_THREADS="1")
    cmd = ["mpirun", "-n", str(ranks), "--oversubscribe", "--allow-run-as-root", "--bind-to",
           "none", sys.executable, str(pathlib.Path(__file__).resolve()), "--worker",
           "--steps", str(steps), "--warmup", str(warmup)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                           f"{proc.stdout}{proc.stderr}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1])


def worker(steps: int, warmup: int) -> None:
    """One rank: train `warmup + steps` steps of the quickstart config, print rank 0's timings."""
    sys.path.insert(0, str(REPO))
    from framework.engine.run import distributed
    from framework.engine.run.trainer import Trainer
    from framework.engine.config.schema import load_config
    comm = distributed.init("mpi")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(CONFIG, [f"run_root={tmp}", "datasets.val=null"])
        trainer = Trainer(cfg, progress=False, comm=comm)
        times = []
        for i in range(warmup + steps):
            batch = trainer.loader.get_batch(i)
            if i == warmup:
                comm.allreduce_seconds = 0.0
            comm.barrier()
            start = time.perf_counter()
            trainer._train_step(batch)
            times.append(time.perf_counter() - start)
        timed = times[warmup:]
        in_allreduce = comm.allreduce_seconds
        # the packed gradient buffer of the step's one Allreduce (one parameter set here)
        buffer = next(iter(comm._flats.values())).buffer if comm.world_size > 1 else None
    transport = []
    for _ in range(steps if buffer is not None else 0):
        comm.barrier()
        start = time.perf_counter()
        comm.allreduce_mean_(buffer)
        transport.append(time.perf_counter() - start)
    if comm.is_root:
        print(json.dumps({
            "ranks": comm.world_size, "step_ms": 1e3 * statistics.median(timed),
            "mean_step_ms": 1e3 * sum(timed) / len(timed),
            "allreduce_share": in_allreduce / sum(timed),
            "transport_ms": 1e3 * statistics.median(transport) if transport else 0.0,
            "transport_min_ms": 1e3 * min(transport) if transport else 0.0,
            "params": sum(p.numel() for p in trainer.model.parameters())}), flush=True)


def run(args) -> list:
    from benchmark import Row
    reason = _skip_reason()
    if reason is not None:
        print(f"mpi section skipped: {reason}")
        return []
    steps = getattr(args, "steps", None) or max(10, 4 * args.repeat)
    results = {k: launch(k, steps, warmup=3) for k in getattr(args, "ranks", (1, 2))}
    base = results.get(1)
    rows = []
    for k, r in results.items():
        speedup = f", {base['mean_step_ms'] / r['mean_step_ms']:.2f}x vs 1 rank" if base else ""
        compute = r["mean_step_ms"] * (1 - r["allreduce_share"])
        note = (f"{1e3 / r['mean_step_ms']:.2f} steps/s{speedup}; Allreduce "
                f"{100 * r['allreduce_share']:.1f}% of step time, the rest {compute:.1f} ms")
        if k > 1:
            note += (f" (transport alone: median {r['transport_ms']:.2f} ms, min "
                     f"{r['transport_min_ms']:.2f} ms for {r['params']} params = "
                     f"{4 * r['params'] / 1e3:.0f} kB)")
        rows.append(Row(f"{k} rank{'s' if k > 1 else ''} x 1 thread, ms/step", r["mean_step_ms"],
                        None, note=note))
    return rows


def main(argv=None):
    from framework import malloc
    malloc.tune()  # as the commands run (srgrad_cli.run)
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.steps, args.warmup)
        return
    sys.path.insert(0, str(HERE))
    from benchmark import machine, table
    print("\n".join(machine()))
    print(table(TITLE, run(args)))


if __name__ == "__main__":
    main()
