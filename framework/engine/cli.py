"""Command lines: `srgrad-train`, `srgrad-infer`, `srgrad-eval` (and scripts/train.py, infer.py,
evaluate.py, which call these). Each `*_main(argv)` returns the process exit code:
0 done, 1 error (message printed, no traceback), 2 bad config / arguments, 130 interrupted."""
from __future__ import annotations

import argparse
import csv
import io
import os
import shlex
import signal
import sys
import traceback
from pathlib import Path

import numpy as np

from .._check import clip_message
from .outputs import OutputError, check_output

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
                   "folder's config.yaml is used)")
    p.add_argument("--resume", metavar="auto|RUN_DIR|CHECKPOINT",
                   help="auto: continue from the newest checkpoint of the run folder that loads "
                   "(start fresh if there is none); RUN_DIR: the same in that run folder; or a "
                   "checkpoint file (exactly that one)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set train.total_iters=100 (repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--distributed", choices=distributed.MODES, default=None,
                   help="data-parallel over MPI (see docs/scale-out.md): auto (default, or "
                   "$SRGRAD_DISTRIBUTED) = MPI when started by mpirun; mpi = require it; none")
    args = p.parse_args(argv)
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
    from .schema import load_config
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
        cfg = load_config(config, args.overrides)
        _check_tensorboard(cfg, config)
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


# -- infer ----------------------------------------------------------------------------------------
def model_args(p, tiles: bool = True, weights: bool = True):
    """The options that say which model: --weights (unless the command takes it positionally),
    --key, --config, --model/--model-arg/--scale, --import; and --tile/--tile-overlap."""
    if weights:
        p.add_argument("--weights", required=True, help="weights: srgrad's .safetensors (net_*, a "
                       "checkpoint), a plain .safetensors, or a PyTorch .pth/.pt (read safely)")
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
        p.add_argument("--tile", type=int, default=None, help="tile size in LR pixels (bounded "
                       "memory for large images); default: whole image")
        p.add_argument("--tile-overlap", type=int, default=16, help="LR pixels of context around "
                       "each tile (default 16)")


def load_model_from_args(args):
    """(model, info) from model_args' options: --weights, then --model/--model-arg, --config,
    --import (framework.engine.loading.load_model). --model-arg without --model gives keywords to
    the detection, or replaces them in the file's stored spec (or the config's)."""
    from ..io.config import import_modules, parse_scalar
    from .loading import load_model
    from .schema import load_config
    spec = fallback = None
    if args.imports:
        import_modules(args.imports, os.getcwd(), "--import")
    if args.config:  # imports its modules; its model: is used when the weights carry no spec
        cfg = load_config(args.config)
        fallback = {**cfg["model"], "scale": cfg["scale"]}
    known = {}
    for kv in args.model_arg:
        key, eq, value = kv.partition("=")
        if not key or not eq:
            raise OutputError(f"--model-arg {kv!r}: expected KEY=VALUE")
        known[key] = parse_scalar(value, f"--model-arg {key}")
    if args.model:
        spec = {"type": args.model, **known}
        known = {}
        if args.scale:
            spec["scale"] = args.scale
    return load_model(args.weights, spec, args.scale, fallback, key=getattr(args, "key", None),
                      known=known)


def infer_main(argv=None) -> int:
    from .inference import OUTSCALE_MODES
    p = argparse.ArgumentParser(prog="srgrad-infer", description="Upscale an image or a folder "
                                "of images (PNG, JPEG, BMP, TIFF; RGB, gray, RGBA; 8/16-bit).")
    model_args(p)
    p.add_argument("--input", required=True, help="an image file or a folder of images")
    p.add_argument("--output", required=True, help="output file (for one input file) or folder")
    p.add_argument("--suffix", default="_x{scale}", help="added to each output's name (default "
                   "_x{scale}: photo.png -> photo_x4.png; '' keeps the name in another folder)")
    p.add_argument("--ext", default="auto", choices=("auto", "png", "jpg", "webp", "tif"),
                   help="output format (default auto: the input's)")
    p.add_argument("--overwrite", action="store_true", help="replace outputs that exist (an "
                   "input is never replaced); without it a folder run skips them, a file run stops")
    tta_arg(p)
    p.add_argument("--outscale", metavar="F", help="final size F x the input's, floor(F*h) x "
                   "floor(F*w) as Real-ESRGAN (default: the model's scale, no resize); {scale} in "
                   "--suffix becomes F")
    p.add_argument("--outscale-mode", default="bicubic", choices=OUTSCALE_MODES,
                   help="resampling for --outscale (default bicubic; bicubic, bilinear and lanczos "
                   "are antialiased when shrinking)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    return run_guarded(lambda: _infer(args))


def tta_arg(p):
    p.add_argument("--tta", action="store_true", help="self-ensemble x8 (EDSR+/RCAN+): average "
                   "the model's outputs on the 8 flips/transposes of each tile (8x the time)")


def _outscale(args):
    """--outscale as a finite float > 0 (None when absent), else a one-line error naming it."""
    from .inference import check_outscale
    if args.outscale is None:
        return None
    try:
        value = float(args.outscale)
    except ValueError:
        raise OutputError(f"--outscale must be a number > 0, got {args.outscale!r}") from None
    try:
        return check_outscale(value, "--outscale")
    except ValueError as exc:
        raise OutputError(str(exc)) from None


def _check_outscale_sizes(files, outscale) -> None:
    """Every output within the pixel limit and at least 1x1, from the image headers, before any
    work (a one-line error naming --outscale)."""
    from ..io.image import image_size
    from .inference import checked_outscale_size
    for f in files:
        w, h = image_size(f)
        try:
            checked_outscale_size((h, w), outscale, "--outscale", f)
        except ValueError as exc:
            raise OutputError(str(exc)) from None


def _infer(args) -> int:
    from tqdm.auto import tqdm
    from ..io.atomic import clean_partial_writes
    from ..io.image import list_images
    from .inference import upscale_file
    from .outputs import plan_outputs
    src = Path(args.input)
    if src.is_dir():
        files = list_images(src)
    elif src.is_file():
        files = [src]
    else:
        return error(f"--input {src}: no such file or folder", 2)
    outscale = _outscale(args)
    model, info = load_model_from_args(args)
    # {scale} in --suffix names the output's scale: 3 for --outscale 3, 1.5 for --outscale 1.5
    shown = int(info["scale"]) if outscale is None else \
        (int(outscale) if outscale.is_integer() else outscale)
    todo, skipped = plan_outputs(files, args.output, src.is_dir(), args.suffix, args.ext,
                                 args.overwrite, shown)
    for folder in {dst.parent for _, dst in todo + skipped}:  # what a killed run left half-written
        clean_partial_writes(folder, keep=files)
    for f, dst in skipped:
        print(f"skipped {f}: {dst} exists (--overwrite replaces it)", file=sys.stderr)
    if outscale is not None:
        _check_outscale_sizes([f for f, _ in todo], outscale)
    for f, dst in tqdm(todo, desc="upscale", unit="img", disable=args.no_progress):
        shape = upscale_file(model, info, f, dst, args.tile, args.tile_overlap, args.tta,
                             outscale, args.outscale_mode)
        tqdm.write(f"{f} -> {dst} ({shape[2]}x{shape[1]})")
    return 0


# -- evaluate -------------------------------------------------------------------------------------
EVAL_METRICS = ("psnr", "ssim")


def eval_main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="srgrad-eval", description="Image-quality metrics (default "
                                "PSNR and SSIM on the Y channel, BasicSR conventions) of a model on "
                                "HR images, next to bicubic (MATLAB imresize). The LR inputs are "
                                "made exactly as in training validation (HRImageDataset: mod-crop, "
                                "imresize, 8-bit LR; gray images replicated to RGB), so the numbers "
                                "and the column names match metrics.csv.")
    model_args(p)
    p.add_argument("--input", required=True, help="an HR image or a folder of HR images")
    p.add_argument("--lq", help="a folder of the matching LR images (paired evaluation, DIV2K "
                   "layout: LR of 0001.png is <lq>/0001x<scale>.*, see --lq-template); default: "
                   "made from the HR images with imresize, as in training validation")
    p.add_argument("--lq-template", default="{name}x{scale}", help="LR file name (without "
                   "extension) for an HR image called {name} (default {name}x{scale})")
    p.add_argument("--metrics", nargs="+", default=list(EVAL_METRICS), metavar="NAME",
                   help="registered metrics to measure (default: psnr ssim; a metric registered "
                   "by an --import module works too); the delta_ column is the first's, psnr's "
                   "when listed")
    p.add_argument("--csv", help="CSV output (default: eval_<weights>_<input>.csv beside the "
                   "weights, made unique with _2, _3, ...); never an input, and an existing file "
                   "only with --overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --csv file")
    p.add_argument("--rgb", action="store_true", help="measure on RGB instead of Y")
    p.add_argument("--crop-border", type=int, default=None, help="default: the scale")
    tta_arg(p)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    return run_guarded(lambda: _evaluate(args))


def _eval_data(args, scale, in_ch):
    from ..data import HRImageDataset, PairedImageDataset
    color = "y" if in_ch == 1 else "rgb"
    src = Path(args.input)
    if args.lq:
        return PairedImageDataset(src, args.lq, scale, filename_tmpl=args.lq_template, color=color)
    return HRImageDataset(src, scale, color=color)


def _eval_inputs(args) -> list:
    """What srgrad-eval reads, as (what, path) pairs: its --csv may be none of them."""
    from ..io.image import list_images
    src = Path(args.input)
    if not src.exists():
        raise OutputError(f"--input {src}: no such file or folder")
    if args.lq and not src.is_dir():
        raise OutputError(f"--input {src}: with --lq, --input is a folder of HR images")
    images = list_images(src) if src.is_dir() else [src]
    if args.lq and Path(args.lq).is_dir():
        images += list_images(Path(args.lq))
    return ([("--weights file", args.weights), ("--config file", args.config)]
            + [("input image", f) for f in images])


def _csv_path(args) -> Path:
    """--csv, else eval_<weights stem>_<input name>[_tta].csv beside the weights, made unique: a
    default name never replaces another evaluation's file."""
    if args.csv:
        return Path(args.csv)
    folder = Path(args.weights).resolve().parent
    base = f"eval_{Path(args.weights).stem}_{Path(args.input).resolve().stem}"
    base += "_tta" if args.tta else ""
    path, n = folder / f"{base}.csv", 1
    while path.exists():
        n += 1
        path = folder / f"{base}_{n}.csv"
    return path


def _check_metrics(names) -> None:
    """Every --metrics name registered (after --import ran), else a one-line error listing them."""
    from ..registry import METRICS
    for name in names:
        try:
            METRICS.get(name)
        except KeyError as exc:
            raise OutputError(f"--metrics: {exc.args[0]}") from None


def _evaluate(args) -> int:
    from ..io.atomic import atomic_open
    from .inference import model_in_channels, super_resolve
    from .validation import column, main_metric, score_images
    inputs = _eval_inputs(args)
    out = _csv_path(args)
    if args.csv:
        check_output(out, "--csv", inputs, args.overwrite)
    model, info = load_model_from_args(args)
    _check_metrics(args.metrics)
    scale, in_ch = info["scale"], model_in_channels(info)
    data = _eval_data(args, scale, in_ch)
    crop = scale if args.crop_border is None else args.crop_border
    y = not args.rgb
    metrics = list(dict.fromkeys(args.metrics))  # each once, in the order given
    delta = main_metric(metrics)
    rows = []
    for _, item, _, _, values in score_images(
            data, lambda lq: super_resolve(model, lq, scale, in_ch, args.tile, args.tile_overlap,
                                           args.tta),
            scale, metrics, crop, y, progress=not args.no_progress, desc="evaluate"):
        row = {"image": item["name"]}
        for prefix in ("", "bicubic_"):
            row.update({prefix + column(m, y): values[prefix + m] for m in metrics})
        row["delta_" + column(delta, y)] = values[delta] - values["bicubic_" + delta]
        rows.append(row)
    cols = list(rows[0])
    mean = {"image": "mean", **{c: float(np.mean([r[c] for r in rows])) for c in cols[1:]}}
    lr_from = f"LR from {args.lq}" if args.lq else "LR made by MATLAB imresize"
    tta = "self-ensemble x8 (--tta)" if args.tta else "no self-ensemble"
    _print_table(rows + [mean], cols, f"x{scale}, {'Y' if y else 'RGB'} channel, crop_border={crop}, "
                 f"{lr_from}, bicubic = MATLAB imresize of the LR, {tta}")
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, cols + ["tta"])  # tta: 1 when the SR columns are x8 ensembles
    writer.writeheader()
    for r in rows + [mean]:
        writer.writerow({**{k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()},
                         "tta": int(args.tta)})
    with atomic_open(out) as fh:
        fh.write(text.getvalue().encode())
    print(f"written: {out}")
    return 0


def _print_table(rows, cols, title):
    width = max(len(str(r["image"])) for r in rows)
    print(title)
    print(f"{'image':<{width}}  " + "  ".join(f"{c:>16}" for c in cols[1:]))
    for r in rows:
        print(f"{r['image']:<{width}}  " + "  ".join(f"{r[c]:>16.4f}" for c in cols[1:]))


# console-script entry points (pyproject [project.scripts])
def train() -> None:
    sys.exit(train_main())


def infer() -> None:
    sys.exit(infer_main())


def evaluate() -> None:
    sys.exit(eval_main())
