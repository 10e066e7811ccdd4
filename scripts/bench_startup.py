"""Start-up of the newcomer's first command: `srgrad-train configs/quickstart.yaml` from the command
to its first training step, on an empty numba cache (a fresh install) and on a warm one. Each run is
a fresh process in a temporary folder with its own NUMBA_CACHE_DIR; "first step" is the moment the
trainer prints its first iteration's log line (`log_every: 1`, `--no-progress`).

    cold, compiled as it goes     SRGRAD_PRECOMPILE=0: each kernel compiles on its first call
    cold, srgrad-train default    one precompile child per core first (engine/run/precompile.py)
    after srgrad-precompile       the ahead-of-time route: the command's time is its own row
    warm                          a second run of the same config (the marker skips precompiling)

Run through the harness: `python scripts/benchmark.py --only startup --repeat 3`.
"""
from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from benchmark import Row

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent

TITLE = "Start-up: srgrad-train configs/quickstart.yaml to its first step (torch column unused)"
TARGET_S = 5.0  # issue 19: the quickstart's first step within 5 s of the command

_SETS = ["train.total_iters=1", "train.log_every=1", "train.scheduler.T_max=1", "val.every=1000"]


def _train_cmd(run_root):
    entry = f"import sys; sys.path.insert(0, {str(REPO)!r}); import srgrad_cli; srgrad_cli.train()"
    cmd = [sys.executable, "-c", entry,  # as the installed srgrad-train starts (srgrad_cli.run)
           str(REPO / "configs" / "quickstart.yaml"), "--no-progress", "--set", f"run_root={run_root}"]
    for s in _SETS:
        cmd += ["--set", s]
    return cmd


def _first_step_s(cmd, env) -> float:
    """Seconds from starting `cmd` to its first iteration line ("iter 1/")."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    seen, lines = None, []
    for line in proc.stdout:
        lines.append(line)
        if seen is None and "iter 1/" in line:
            seen = time.perf_counter() - t0
    if proc.wait() != 0 or seen is None:
        raise RuntimeError("srgrad-train failed or printed no first iteration:\n" + "".join(lines[-20:]))
    return seen


def _one_round(threads: int) -> dict:
    """One fresh cache per route; seconds of each row."""
    out = {}
    base = dict(os.environ, OMP_NUM_THREADS=str(threads), NUMBA_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory(prefix="srgrad-startup-") as tmp:
        tmp = pathlib.Path(tmp)
        lazy = dict(base, NUMBA_CACHE_DIR=str(tmp / "lazy"), SRGRAD_PRECOMPILE="0")
        out["lazy"] = _first_step_s(_train_cmd(tmp / "r1"), lazy)
        env = dict(base, NUMBA_CACHE_DIR=str(tmp / "children"), SRGRAD_PRECOMPILE="1")
        out["children"] = _first_step_s(_train_cmd(tmp / "r2"), env)
        out["warm"] = _first_step_s(_train_cmd(tmp / "r3"), env)
        aot = dict(base, NUMBA_CACHE_DIR=str(tmp / "aot"), SRGRAD_PRECOMPILE="1")
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "framework.engine.run.precompile",
                        str(REPO / "configs" / "quickstart.yaml")], env=aot, cwd=REPO, check=True,
                       capture_output=True)
        out["precompile"] = time.perf_counter() - t
        out["after"] = _first_step_s(_train_cmd(tmp / "r4"), aot)
    return out


def run(args) -> list:
    rounds = [_one_round(args.threads) for _ in range(max(1, min(args.repeat, 3)))]
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    ms = {k: 1e3 * v for k, v in med.items()}
    met = lambda s: "met" if s <= TARGET_S else "MISSED"  # noqa: E731
    n = len(rounds)
    return [
        Row("cold cache, compiled as it goes (before issue 19's precompile)", ms["lazy"], None,
            note=f"median of {n}"),
        Row("cold cache, srgrad-train (precompile children, one per core)", ms["children"], None,
            note=f"<= {TARGET_S:.0f} s {met(med['children'])}"),
        Row("srgrad-precompile configs/quickstart.yaml (ahead of time)", ms["precompile"], None),
        Row("first step after srgrad-precompile", ms["after"], None,
            note=f"<= {TARGET_S:.0f} s {met(med['after'])}"),
        Row("warm cache (a second run)", ms["warm"], None),
    ]
