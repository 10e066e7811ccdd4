"""Command lines: `srgrad-train`, `srgrad-infer` (its body in engine/commands/infer.py), `srgrad-eval`
(framework/engine/commands/evaluate.py; and scripts/train.py, infer.py, evaluate.py, which call these), and
the options that say which model (model_args, load_model_from_args; srgrad-eval, -export and
-convert take them too). Each `*_main(argv)` returns the process exit code:
0 done, 1 error (message printed, no traceback), 2 bad config / arguments, 130 interrupted."""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import tempfile
import traceback
from pathlib import Path

from ..._check import clip_message
from .args import error, run_guarded
from .outputs import OutputError

__all__ = ["train_main", "infer_main", "eval_main", "train", "infer", "evaluate"]


# -- train ----------------------------------------------------------------------------------------
def train_main(argv=None) -> int:
    from ..run import distributed
    # Under mpirun, each rank's numba/BLAS thread default (cores // ranks on this machine) must be
    # in place before the first kernel runs: this is the first thing the entry point does.
    distributed.configure_threads()
    p = argparse.ArgumentParser(
        prog="srgrad-train", description="Train a super-resolution model from a YAML config. Paths "
        "in the config are relative to the current directory. A config's imports: runs Python "
        "modules: only use configs you trust.")
    p.add_argument("config", nargs="?", help="YAML config (optional with --resume RUN_DIR: the run "
                   "folder's config.yaml is used); a BasicSR training option file is translated "
                   "on the fly, as srgrad-convert options does, its notes printed first (BasicSR's "
                   "-opt X.yml --auto_resume is read as X.yml --resume auto)")
    p.add_argument("--resume", metavar="auto|RUN_DIR|CHECKPOINT",
                   help="auto: continue from the newest checkpoint of the run folder that loads "
                   "(start fresh if there is none); RUN_DIR: the same in that run folder; or a "
                   "checkpoint file (exactly that one)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set train.total_iters=100 (repeatable; "
                   "the value is YAML, and text YAML cannot parse is taken as a string: --set "
                   "datasets.train.filename_tmpl={name}x2)")
    p.add_argument("--fit-schedule", action="store_true", help="with --set train.total_iters=N: "
                   "scale the schedulers' iteration counts (milestones, periods, T_max, "
                   "step_size, warmup_iters) by N / the config's total_iters, so the schedule "
                   "keeps its shape (each change said in a note)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--distributed", choices=distributed.MODES, default=None,
                   help="data-parallel over MPI (see docs/scale-out.md): auto (default, or "
                   "$SRGRAD_DISTRIBUTED) = MPI when started by mpirun; mpi = require it; none")
    args = p.parse_args(_basicsr_flags(sys.argv[1:] if argv is None else argv))
    try:
        comm = distributed.init(args.distributed)
    except distributed.DistributedError as exc:
        return error(str(exc), 2)
    if comm.world_size == 1:
        return _train(args, comm)
    # A rank that stops alone leaves the others blocked in their next Allreduce: end them all. A
    # stop signal is not that: every rank stopped at the same iteration after rank 0's checkpoint
    # and exits 128 + the signal, as one process does (a rank stopped alone aborted in _train).
    try:
        code = _train(args, comm)
    except KeyboardInterrupt:
        comm.abort("interrupted", 128 + signal.SIGINT)
    except BaseException as exc:
        traceback.print_exc()
        comm.abort(f"{type(exc).__name__}: {exc}")
    if code != 0 and code not in (128 + signal.SIGINT, 128 + signal.SIGTERM):
        comm.abort(f"srgrad-train failed with exit code {code}")
    return code


def _train(args, comm) -> int:
    from ..run import distributed
    from ...weights import CheckpointError
    from ...io.config import ConfigError
    from ..config.preflight import check_pretrained, check_training_files, fetch_cached_files
    from ..config.schema import load_config
    from ..run.runfolder import adoption_problem
    from ..run.runlog import RunLockedError
    from ..run.trainer import Trainer, TrainingError, TrainingInterrupted

    run_dir, resume, config, fitting = None, args.resume, args.config, False
    if resume and resume != "auto":
        path = Path(resume)
        if path.is_dir():  # its newest checkpoint that loads, as --resume auto
            run_dir, resume = path, "auto"
            config = config or path / "config.yaml"
        elif not path.is_file():
            return error(f"--resume {resume}: no such run folder or checkpoint file", 2)
    if config is None:
        return error("give a CONFIG (or --resume RUN_DIR)", 2)
    try:
        notes: list = []
        cfg = load_config(config, args.overrides, notes=notes, fit_schedule=args.fit_schedule)
        if comm.rank == 0:
            _say_notes(notes)
        _check_tensorboard(cfg, config)
        if comm.rank == 0:  # a folder of the user's is refused before anything starts
            problem = adoption_problem(run_dir or Path(cfg["run_root"]) / cfg["name"])
            if problem:
                return error(problem)
        if comm.rank == 0:  # LPIPS / DISTS files into the model cache, once for every rank
            fetch_cached_files(cfg, progress=not args.no_progress)
        comm.barrier()
        check_training_files(cfg, config)  # e.g. a perceptual loss's VGG weights
        if not _resumes(cfg, run_dir, resume):  # a resumed run has its own weights
            check_pretrained(cfg, config)
        # the resume hint printed on Ctrl-C repeats the overrides: they may name the run folder
        shown = " ".join(shlex.quote(str(a)) for a in [config, *(
            x for o in args.overrides for x in ("--set", o))])
        pending = None
        if comm.world_size == 1:  # (under MPI every rank would compile the same list)
            from ..run import precompile
            pending = precompile.ensure(config, args.overrides, cfg)  # children start compiling
        try:
            trainer = Trainer(cfg, run_dir=run_dir, resume=resume, progress=not args.no_progress,
                              config_path=shown, comm=comm)
        except ConfigError as exc:  # a constructor's check, named by its config key
            if pending is not None:
                pending.cancel()
            raise ConfigError(f"{config}: {exc}") from None
        except BaseException:
            if pending is not None:
                pending.cancel()
            raise
        if pending is not None:
            pending.wait()  # before the first step, which then loads every kernel from the cache
        fitting = True
        result = trainer.fit()
    except ConfigError as exc:
        return error(str(exc), 2)
    except TrainingInterrupted as exc:  # the trainer said what was saved and how to resume
        if not exc.saved and comm.world_size > 1:  # stopped at once, alone: end the other ranks
            comm.abort("stopped at once by a second signal", 128 + exc.signum)
        return 128 + exc.signum
    except KeyboardInterrupt:  # before the trainer took over the signals, or as it handed back
        print("interrupted" if fitting else "interrupted before training started (nothing "
              "written)", file=sys.stderr)
        if comm.world_size > 1:
            comm.abort("interrupted before training started", 128 + signal.SIGINT)
        return 128 + signal.SIGINT
    except (TrainingError, RunLockedError, CheckpointError, OSError,
            distributed.DistributedError) as exc:
        return error(str(exc))
    if not trainer.is_main:
        return 0
    run = Path(result["run_dir"])
    print(f"done: {result['iteration']} iterations. Run folder: {run}")
    for name in ("net_best.safetensors", "net_latest.safetensors", "metrics.csv", "curves.png",
                 "images"):
        if (run / name).exists():
            print(f"  {run / name}")
    if result["best"].get("value") is not None:
        print(f"  best {result['best']['metric']}: {result['best']['value']:.4f} at iteration "
              f"{result['best']['iteration']}")
    return 0


def _resumes(cfg, run_dir, resume) -> bool:
    """Whether this srgrad-train continues from a checkpoint (--resume CHECKPOINT, or auto / a run
    folder that holds one), so train.pretrained is not loaded."""
    if resume is None:
        return False
    if resume != "auto":
        return True
    folder = Path(run_dir) if run_dir else Path(cfg["run_root"]) / cfg["name"]
    return any((folder / "checkpoints").glob("*.safetensors"))


def _say_notes(notes) -> None:
    """What load_config did beyond reading the file (a BasicSR option file translated: said first,
    with the translation's notes; the run folder's config.yaml then holds srgrad's config), once."""
    for note in notes:
        print(f"note: {note}", file=sys.stderr)


def _basicsr_flags(argv: list) -> list:
    """BasicSR's `train.py -opt X.yml --auto_resume` spelled as srgrad-train's `X.yml --resume
    auto`, said once."""
    argv, said = list(argv), []
    if "-opt" in argv:
        i = argv.index("-opt")
        if i + 1 < len(argv):
            said.append(f"-opt {argv[i + 1]} -> {argv[i + 1]}")
            argv[i:i + 2] = [argv[i + 1]]
    if "--auto_resume" in argv:
        said.append("--auto_resume -> --resume auto")
        argv[argv.index("--auto_resume"):argv.index("--auto_resume") + 1] = ["--resume", "auto"]
    if said:
        print(f"note: BasicSR's flags, read as srgrad-train's: {'; '.join(said)}", file=sys.stderr)
    return argv


def _check_tensorboard(cfg, config) -> None:
    """train.tensorboard needs tensorboardX (an optional extra): a ConfigError naming it before
    anything starts. Only training writes event files: other commands read such a config fine."""
    from ...io.config import ConfigError
    from ..run.tensorboard import tensorboardx
    if cfg["train"]["tensorboard"]:
        try:
            tensorboardx()
        except ModuleNotFoundError as exc:
            raise ConfigError(f"{config}: train.tensorboard: {exc}; or set it to false") from None


# -- which model (srgrad-infer, -eval, -export, -convert) ----------------------------------------


def infer_main(argv=None) -> int:
    """srgrad-infer (engine/commands/infer.py)."""
    from .infer import main
    return main(argv)


# -- evaluate: framework/engine/commands/evaluate.py --------------------------------------------------------
def eval_main(argv=None) -> int:
    from .evaluate import eval_main as main
    return main(argv)


# console-script entry points (pyproject [project.scripts])
def train() -> None:
    sys.exit(train_main())


def infer() -> None:
    sys.exit(infer_main())


def evaluate() -> None:
    sys.exit(eval_main())
