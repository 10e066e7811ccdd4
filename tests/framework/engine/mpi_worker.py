"""Run by tests/framework/engine/test_distributed.py under `mpirun -n 2` (never collected by pytest).

    mpirun -n 2 python tests/framework/engine/mpi_worker.py CONFIG OUT_DIR [--resume] [--fail-at N
                                                      --fail-rank R --fail-how exit|raise]
                                                      [--signal-at N --signal-rank R]
                                                      [--save-delay SECONDS]

Trains CONFIG through the real command line (`srgrad-train CONFIG`: MPI detected from mpirun's
environment, as users run it), then each rank writes what the test compares: OUT_DIR/rank<R>.npy
(its final weights, flattened in model order) and OUT_DIR/rank<R>.json (a hash of its weights
after every step, allreduce calls, numba threads, the default thread count).
`--fail-*` makes rank R fail at its N-th gradient reduction (test-only: injected here by wrapping
the communicator, so the library carries no test hooks): `exit` ends the process at once
(os._exit, as a crash or the OOM killer would), `raise` raises an exception. `--signal-at N`
sends SIGTERM to rank R (alone, as a scheduler may) during its N-th gradient reduction;
`--save-delay` makes every checkpoint write wait that long before its rename (a slow save).
"""
import argparse
import hashlib
import json
import os
import pathlib
import signal
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3]))

import numba  # noqa: E402
import numpy as np  # noqa: E402

from framework.engine.run import distributed  # noqa: E402
from framework.engine.commands import cli
from framework.engine.run import trainer  # noqa: E402


def _flat_weights(model):
    return np.concatenate([p.data.ravel() for p in model.parameters()])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("out_dir")
    ap.add_argument("--fail-at", type=int, default=None)
    ap.add_argument("--fail-rank", type=int, default=1)
    ap.add_argument("--fail-how", choices=("exit", "raise"), default="exit")
    ap.add_argument("--signal-at", type=int, default=None)
    ap.add_argument("--signal-rank", type=int, default=1)
    ap.add_argument("--save-delay", type=float, default=0.0)
    ap.add_argument("--resume", action="store_true", help="srgrad-train --resume auto")
    args = ap.parse_args()
    if args.save_delay:
        replace = os.replace

        def slow_replace(src, dst, *a, **kw):
            if "checkpoints" in os.fspath(src):
                time.sleep(args.save_delay)
            return replace(src, dst, *a, **kw)

        os.replace = slow_replace
    out = pathlib.Path(args.out_dir)
    calls = {"n": 0}

    reduce = distributed.MPICommunicator.average_gradients_

    def counting_reduce(self, params, loss=0.0):
        calls["n"] += 1
        if calls["n"] == args.fail_at and self.rank == args.fail_rank:
            if args.fail_how == "exit":
                os._exit(1)
            raise RuntimeError(f"injected failure at reduction {calls['n']}")
        if calls["n"] == args.signal_at and self.rank == args.signal_rank:
            os.kill(os.getpid(), signal.SIGTERM)
        return reduce(self, params, loss)

    distributed.MPICommunicator.average_gradients_ = counting_reduce

    step = trainer.Trainer._train_step
    hashes = []

    def step_and_hash(self, batch):
        loss = step(self, batch)
        hashes.append(hashlib.sha256(_flat_weights(self.model).tobytes()).hexdigest())
        return loss

    trainer.Trainer._train_step = step_and_hash
    fit = trainer.Trainer.fit

    def fit_and_record(self):
        result = fit(self)
        rank = self.rank
        np.save(out / f"rank{rank}.npy", _flat_weights(self.model))
        (out / f"rank{rank}.json").write_text(json.dumps({
            "world_size": self.world_size, "reductions": calls["n"], "step_hashes": hashes,
            "numba_threads": numba.get_num_threads(),
            "default_threads": distributed.default_threads()}))
        return result

    trainer.Trainer.fit = fit_and_record
    return cli.train_main([args.config, "--no-progress"] + (["--resume", "auto"] if args.resume
                                                             else []))


if __name__ == "__main__":
    sys.exit(main())
