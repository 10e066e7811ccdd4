"""Command lines: `srgrad-train`, `srgrad-infer` (its body in engine/infer.py), `srgrad-eval`
(framework/engine/evaluate.py; and scripts/train.py, infer.py, evaluate.py, which call these), and
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

from .._check import clip_message
from .outputs import OutputError

__all__ = ["train_main", "infer_main", "eval_main", "train", "infer", "evaluate"]


def error(msg: str, code: int = 1) -> int:
    """Print `error: msg` on stderr, bounded (a message may quote a value from the input); return
    the exit code (1: failed, 2: bad config/arguments)."""
    print(f"error: {clip_message(msg)}", file=sys.stderr)
    return code


def run_guarded(body) -> int:
    """body() -> exit code, with the commands' error contract: a ConfigError or an argument problem
    is exit 2, any other ValueError/OSError exit 1, one line each, never a traceback; Ctrl-C 130."""
    from ..io.config import ConfigError
    try:
        return body()
    except (ConfigError, OutputError) as exc:
        return error(str(exc), 2)
    except (ValueError, OSError) as exc:
        return error(str(exc))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


# -- train ----------------------------------------------------------------------------------------
def train_main(argv=None) -> int:
    from . import distributed
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
    from . import distributed
    from ..weights import CheckpointError
    from ..io.config import ConfigError
    from .preflight import check_pretrained, check_training_files, fetch_cached_files
    from .schema import load_config
    from .runfolder import adoption_problem
    from .runlog import RunLockedError
    from .trainer import Trainer, TrainingError, TrainingInterrupted

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
            from . import precompile
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
    from ..io.config import ConfigError
    from .tensorboard import tensorboardx
    if cfg["train"]["tensorboard"]:
        try:
            tensorboardx()
        except ModuleNotFoundError as exc:
            raise ConfigError(f"{config}: train.tensorboard: {exc}; or set it to false") from None


# -- which model (srgrad-infer, -eval, -export, -convert) ----------------------------------------
def model_args(p, tiles: bool = True, weights: bool = True):
    """The options that say which model: --weights (unless the command takes it positionally),
    --key, --config, --model/--model-arg/--scale, --import; and --tile/--tile-overlap."""
    if weights:
        from .hub import add_arguments
        p.add_argument("--weights", "--model_path", dest="weights", help="weights: srgrad's "
                       ".safetensors (net_*, a checkpoint), a plain .safetensors, or a PyTorch "
                       ".pth/.pt (read safely); --model_path is Real-ESRGAN's name for it")
        add_arguments(p)  # -n NAME, --sha256, -dn, --list-models (engine/hub.py)
    p.add_argument("--key", help="which weights of the file: params or params_ema (default: "
                   "params_ema when the file has one, as Real-ESRGAN), or another key of a .pth")
    p.add_argument("--config", help="the training config: its imports: are imported, and its "
                   "model: is used when the weights carry no model spec")
    p.add_argument("--model", help="model type, overriding the weights' spec (with --scale)")
    p.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="constructor keyword (repeatable): for --model, or, without it, one the "
                   "weights cannot tell (it replaces the detected or stored value)")
    p.add_argument("--scale", type=int, help="upscaling factor (default: from the weights)")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module that registers a custom model/layer (searched on "
                   "sys.path and the current directory)")
    if tiles:
        p.add_argument("-t", "--tile", type=_tile_size, default=None, help="tile size in LR "
                       "pixels, to bound memory on large images; 0: the whole image; auto "
                       "(srgrad-infer's default): the whole image when its run fits --max-memory, "
                       "else the largest tile that does (srgrad-eval's default: the whole image). A "
                       "tile also runs its context: an inner tile of T px computes (T + 2 x "
                       "overlap)^2 pixels, with overlap 16 2.25x its own at T=64, 1.56x at 128, "
                       "1.27x at 256, and costs about that much more time. Tiles smaller than "
                       "256x256 px with their context run a few at a time (memory: at most "
                       "256x256 px of them)")
        p.add_argument("--tile-overlap", "--tile_pad", dest="tile_overlap", type=int, default=16,
                       help="LR pixels of context around each tile (default 16; --tile_pad is "
                       "Real-ESRGAN's name, whose default is 10)")


def _tile_size(text: str):
    """--tile: an int >= 0; 0 is no tiling (Real-ESRGAN's -t 0), None; "auto" (srgrad-infer: the
    largest tile a memory budget allows, engine/autotile.py)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of pixels or auto, got "
                                         f"{text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (0: no tiling), got {value}")
    return value or None


def load_model_from_args(args, fallback=None):
    """(model, info) from model_args' options: --weights or -n NAME (engine/hub.py), then
    --model/--model-arg, --config, --import (framework.engine.loading.load_model). --model-arg
    without --model gives keywords to the detection, or replaces them in the file's stored spec
    (or the config's, or -n NAME's). `fallback`: a model spec used when the weights carry none
    (srgrad-eval's CONFIG model), in place of --config's."""
    from ..io.config import import_modules, parse_scalar
    from .hub import weights_from_args
    from .loading import load_model
    from .schema import load_config
    if args.imports:
        import_modules(args.imports, os.getcwd(), "--import")
    if args.config:  # imports its modules; its model: is used when the weights carry no spec
        cfg = load_config(args.config)
        fallback = fallback or {**cfg["model"], "scale": cfg["scale"]}
    known = {}
    for kv in args.model_arg:
        key, eq, value = kv.partition("=")
        if not key or not eq:
            raise OutputError(f"--model-arg {kv!r}: expected KEY=VALUE")
        known[key] = parse_scalar(value, f"--model-arg {key}")
    with tempfile.TemporaryDirectory(prefix="srgrad-") as work:
        weights, spec = weights_from_args(args, work, not getattr(args, "no_progress", False))
        if args.model:  # --model replaces -n NAME's spec
            spec = {"type": args.model, **known}
            known = {}
            if args.scale:
                spec["scale"] = args.scale
        return load_model(weights, spec, args.scale, fallback, key=getattr(args, "key", None),
                          known=known)


def infer_main(argv=None) -> int:
    """srgrad-infer (engine/infer.py)."""
    from .infer import main
    return main(argv)


def tta_arg(p):
    p.add_argument("--tta", action="store_true", help="self-ensemble x8 (EDSR+/RCAN+): average "
                   "the model's outputs on the 8 flips/transposes of each tile (8x the time)")


# -- evaluate: framework/engine/evaluate.py --------------------------------------------------------
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
