"""Compile a run's kernels before its first step, on every core.

numba compiles a kernel once per argument-type signature, on its first call, one signature after
another (its compiler holds a process-wide lock). On a fresh install that is most of the wait before
a run's first step (docs/benchmarks.md, "Start-up"). Here:

1. each of `jobs` child processes dry-runs the config: a fresh trainer fetches batch 0 (its dataset
   and degradations), then takes its recipe's dry step (every branch of one training step) and one
   single-image forward, with every kernel call recorded and skipped (`_jit.recording`): the
   (kernel, signature) list the run will compile. A dataset that uses a kernel's result in Python
   (RealESRGANDataset) fails on what a skipped call returns: its batch is then fetched again with
   its kernels running (compiled in each child, as the run would, before the rest is shared out);
2. the children compile that list together into numba's on-disk cache, each claiming one signature
   at a time (an O_EXCL file per signature), parallel kernels (the slowest to compile) first;
3. the run then loads each kernel from the cache on its first call.

The children end with their parent: a parent that dies (SIGTERM before its trainer handles
signals, kill -9, a crash) sends them SIGTERM (Linux: prctl's PR_SET_PDEATHSIG; elsewhere, and for
a parent already gone when a child starts, a thread that watches the child's parent PID), on
which a child stops and removes the claims folder (its dry run works inside it), so neither a
compiler nor a temporary folder outlives the run. The parent's own `cancel()` kills them and
removes the folder.

A marker per (kernel sources, the config's model/recipe/data/loss sections) skips all of it next
time. Nothing here can change a result: the cache holds the same machine code the run would
compile, and a failure only costs time (the run compiles whatever is missing itself, as before;
the report says what was skipped and why).

    srgrad-precompile configs/quickstart.yaml [--set KEY=VALUE] [--jobs N]   (ahead of time)
    srgrad-train runs `ensure` itself before building its trainer.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from ... import _jit

MARKERS = "srgrad_precompiled"


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def _marker(cfg: dict) -> Path | None:
    """The marker file of cfg's kernels in this installation's cache, or None when the cache folder
    is not writable (the marker is only a shortcut). Keyed by what decides the kernels' signatures:
    the kernel sources, the model(s), dtype, scale, the datasets' types and the losses (not paths,
    lengths, batch size, logging, optimizers or schedules); of the recipe's own keys, its
    top-level ones (gan: model_d)."""
    from ...registry import RECIPES
    from .recipes import recipe_name
    datasets = {k: (v or {}).get("type") for k, v in (cfg.get("datasets") or {}).items()}
    train = cfg.get("train") or {}
    recipe = recipe_name(cfg)
    own = {k: cfg.get(k) for k in RECIPES.get(recipe).SCHEMA if k != "train"}
    keep = {"scale": cfg.get("scale"), "dtype": cfg.get("dtype"), "model": cfg.get("model"),
            "recipe": recipe, "recipe_keys": own, "datasets": datasets,
            "train": {k: train.get(k) for k in ("loss", "losses", "gt_usm", "ema_decay")}}
    key = hashlib.sha256((_jit.source_stamp() + json.dumps(keep, sort_keys=True, default=str)).encode())
    # where numba caches (its own order): $NUMBA_CACHE_DIR, else beside the sources, else the user's
    from numba.misc.appdirs import AppDirs
    roots = [os.environ["NUMBA_CACHE_DIR"]] if os.environ.get("NUMBA_CACHE_DIR") else [
        Path(_jit.__file__).parent / "__pycache__", AppDirs(appname="numba", appauthor=False).user_cache_dir]
    for root in roots:
        folder = Path(root) / MARKERS
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK):
            return folder / key.hexdigest()[:32]
    return None


def ensure(config, overrides, cfg: dict, jobs: int | None = None, say=print) -> "Pending | None":
    """Start precompiling cfg's kernels unless its marker says it was done or $SRGRAD_PRECOMPILE is
    0 (the test suite's setting). The caller builds its trainer meanwhile, then calls `.wait()`
    (which writes the marker) before the first step, or `.cancel()`."""
    if os.environ.get("SRGRAD_PRECOMPILE", "1") == "0":
        return None
    marker = _marker(cfg)
    if marker is None or marker.exists():
        return None
    return Pending(config, overrides, jobs, say, marker)


def run(config, overrides, jobs: int | None = None, say=print) -> list[dict]:
    """Dry-run and compile `config` (+ `--set` overrides) in `jobs` child processes; their reports
    ({"signatures", "compiled", "seconds"} or {"error"})."""
    return Pending(config, overrides, jobs, say).wait()


# The child starts with SIGTERM blocked, before any import: a thread started by an import
# (OpenBLAS's pool) inherits the mask, so the signal cannot land in a thread without Python's
# handler and end the child before it removes its claims (_stop_on_sigterm takes it instead).
_CHILD = ("import runpy, signal\n"
          "if hasattr(signal, 'pthread_sigmask'):\n"
          "    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
          "runpy.run_module('framework.engine.run.precompile', run_name='__main__', alter_sys=True)\n")


class Pending:
    """`jobs` child processes dry-running and compiling `config`, started on construction."""

    def __init__(self, config, overrides, jobs=None, say=print, marker=None):
        self.jobs, self.say, self.marker = jobs or default_jobs(), say, marker
        self.t0 = time.perf_counter()
        say(f"compiling this run's kernels on {self.jobs} processes (once per machine and config)")
        # (ignore_cleanup_errors: a child stopping on its own may be removing it too)
        self.claims = tempfile.TemporaryDirectory(prefix="srgrad-precompile-",
                                                  ignore_cleanup_errors=True)
        cmd = [sys.executable, "-c", _CHILD, "--child", self.claims.name,
               "--parent", str(os.getpid()), str(config)]
        for o in overrides:
            cmd += ["--set", o]
        self.children = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True) for _ in range(self.jobs)]

    def cancel(self):
        for c in self.children:
            if c.poll() is None:
                c.kill()
            c.communicate()
        self.claims.cleanup()

    def wait(self) -> list[dict]:
        try:
            outputs = [c.communicate() for c in self.children]
        finally:
            self.cancel()
        reports = []
        for c, (out, err) in zip(self.children, outputs):
            try:
                reports.append(json.loads(out.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                reports.append({"error": (err.strip().splitlines() or [f"exit code {c.returncode}"])[-1]})
        errors = [r["error"] for r in reports if "error" in r]
        compiled = sum(r.get("compiled", 0) for r in reports)
        total = max((r.get("signatures", 0) for r in reports), default=0)
        note = f"; skipped, the run compiles as it goes: {errors[0]}" if errors else ""
        self.say(f"compiled {compiled} of {total} kernel signatures in "
                 f"{time.perf_counter() - self.t0:.1f} s{note}")
        if self.marker is not None and not errors:
            try:
                self.marker.touch()
            except OSError:
                pass
        return reports


# -- the child ------------------------------------------------------------------------------------
def _dry_run(cfg: dict, folder: str | None = None) -> list:
    """[(kernel, signature)] that cfg's first batch, its recipe's dry step and a single-image
    forward call, deduplicated, parallel kernels first. The dry run's run folder goes into a
    temporary folder inside `folder` (default: the system's)."""
    import numpy as np

    from ...autograd import no_grad
    from ...precision import autocast
    from ...tensor import Tensor
    from .trainer import Trainer

    with tempfile.TemporaryDirectory(prefix="srgrad-dry-run-", dir=folder) as tmp:
        trainer = Trainer(cfg, run_dir=Path(tmp) / "run", progress=False)
        recipe = trainer.recipe
        # (the pool threads' numpy ignores errstate, which is per thread: silence the warnings too)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with _jit.recording() as data_calls:
                    batch = trainer.loader.get_batch(0)
            except Exception:  # whatever the garbage makes the dataset's own code raise
                # a dataset that uses a kernel's result in Python (RealESRGANDataset's noise) fails
                # on what a skipped call returns: the batch for real, its kernels compiled here
                with _jit.recording(run=True) as data_calls:
                    batch = trainer.loader.get_batch(0)
            # recorded kernels leave garbage in their outputs: the dry step checks nothing
            # the kernels of the run's precision (train.precision: bf16's are others)
            with _jit.recording() as step_calls, autocast(cfg["train"]["precision"]):
                recipe.dry_step(batch)
                recipe.model.eval()
                with no_grad():
                    recipe.model(Tensor(np.asarray(batch["lq"][:1], dtype=recipe.dtype)))
    calls = data_calls + step_calls
    seen, items = set(), []
    for disp, sig in calls:
        if (id(disp), sig) not in seen:
            seen.add((id(disp), sig))
            items.append((disp, sig))
    items.sort(key=lambda item: not item[0].targetoptions.get("parallel"))
    return items


def _claim(folder: str, disp, sig) -> bool:
    # a factory's kernels share a qualname and may share a signature (_direct.py's 16- and 32-channel
    # variants): their closure's constants tell them apart, as in numba's own cache key
    cells = tuple(c.cell_contents for c in disp.py_func.__closure__ or ()
                  if isinstance(c.cell_contents, (bool, int, float, str)))
    name = hashlib.sha256(f"{disp.py_func.__module__}.{disp.py_func.__qualname__}{cells}{sig}".encode())
    try:
        os.close(os.open(os.path.join(folder, name.hexdigest()), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def _stop_on_sigterm(claims: str) -> None:
    """On SIGTERM, remove the claims folder and exit at once, whatever the main thread is doing.

    A Python signal handler runs in the main thread between bytecodes only: not during a long
    llvmlite call, and an exception it raises inside a ctypes callback or a __del__ is printed and
    dropped (the child then compiled on to its end and left the folder). So SIGTERM is blocked in
    every thread (threads started later inherit the mask) and one thread takes it with sigwait;
    the compile releases the GIL in LLVM, so that thread runs at once. Without pthread_sigmask
    (Windows) SIGTERM ends the process outright, and the parent's cancel() cleans up. The mask
    was set before the child's first import (_CHILD); setting it here again keeps a child started
    some other way correct from this point on."""
    if not hasattr(signal, "pthread_sigmask"):
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def wait():
        signal.sigwait({signal.SIGTERM})
        for _ in range(5):  # the main thread may create a claim meanwhile
            shutil.rmtree(claims, ignore_errors=True)
            if not os.path.exists(claims):
                break
        os._exit(128 + signal.SIGTERM)
    threading.Thread(target=wait, daemon=True, name="sigterm").start()


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _end_with_parent(parent: int) -> None:
    """SIGTERM to this process when `parent` is no longer its parent: at once through the kernel
    on Linux, else (and for a parent that died before this ran) from a thread watching getppid."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
        except (OSError, AttributeError):
            pass

    def watch():
        while os.getppid() == parent:
            time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def child_main(argv) -> int:
    ap = argparse.ArgumentParser(prog="precompile --child")
    ap.add_argument("claims")
    ap.add_argument("config")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--parent", type=int, default=None)
    a = ap.parse_args(argv)
    _stop_on_sigterm(a.claims)  # before the watch, which may fire at once
    if a.parent is not None:
        _end_with_parent(a.parent)
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    try:
        from ..config.schema import load_config
        items = _dry_run(load_config(a.config, a.overrides), a.claims)
        compiled = 0
        for disp, sig in items:
            if _claim(a.claims, disp, sig):
                disp.compile(sig)
                compiled += 1
    except Exception as exc:  # reported to the parent, which goes on without precompiling
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps({"signatures": len(items), "compiled": compiled,
                      "seconds": round(time.perf_counter() - t0, 2)}))
    return 0


def main(argv=None) -> int:
    """srgrad-precompile: compile the kernels of each config ahead of its first run."""
    ap = argparse.ArgumentParser(prog="srgrad-precompile", description=main.__doc__)
    ap.add_argument("configs", nargs="+", help="YAML configs (as srgrad-train takes them)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: the usable cores)")
    a = ap.parse_args(argv)
    from ...io.config import ConfigError
    from ..config.schema import load_config
    failed = 0
    for config in a.configs:
        try:
            cfg = load_config(config, a.overrides)
        except ConfigError as exc:
            print(f"srgrad-precompile: {exc}", file=sys.stderr)
            return 2
        # the marker too, so that srgrad-train does not start children for this config again
        reports = Pending(config, a.overrides, a.jobs, lambda m, c=config: print(f"{c}: {m}"),
                          _marker(cfg)).wait()
        failed += any("error" in r for r in reports)
    return 1 if failed else 0


def cli() -> None:  # console-script entry point
    sys.exit(main())


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child_main(sys.argv[2:]))
    sys.exit(main())
