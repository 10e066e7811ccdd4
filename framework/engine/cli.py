"""Command lines: `srgrad-train`, `srgrad-infer`, `srgrad-eval` (and scripts/train.py, infer.py,
evaluate.py, which call these). Each `*_main(argv)` returns the process exit code:
0 done, 1 error (message printed, no traceback), 2 bad config / arguments, 130 interrupted."""
from __future__ import annotations

import argparse
import csv
import os
import shlex
import sys
import traceback
from pathlib import Path

import numpy as np

__all__ = ["train_main", "infer_main", "eval_main", "train", "infer", "evaluate"]


def _error(msg: str, code: int = 1) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return code


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
                   help="auto: continue from the latest checkpoint of the run folder (start fresh "
                   "if there is none); RUN_DIR: that run folder; or a checkpoint file")
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
        return _error(str(exc), 2)
    if comm.world_size == 1:
        return _train(args, comm)
    # A rank that stops alone leaves the others blocked in their next Allreduce: end them all.
    try:
        code = _train(args, comm)
    except BaseException as exc:
        traceback.print_exc()
        comm.abort(f"{type(exc).__name__}: {exc}")
    if code != 0:
        comm.abort(f"srgrad-train failed with exit code {code}")
    return code


def _train(args, comm) -> int:
    from . import distributed
    from ..io.checkpoint import CheckpointError
    from ..io.config import ConfigError
    from .schema import load_config
    from .runlog import RunLockedError
    from .trainer import Trainer, TrainingError, TrainingInterrupted, find_latest_checkpoint

    run_dir, resume, config = None, args.resume, args.config
    if resume and resume != "auto":
        path = Path(resume)
        if path.is_dir():
            run_dir = path
            resume = find_latest_checkpoint(path) or "auto"
            config = config or path / "config.yaml"
        elif not path.is_file():
            return _error(f"--resume {resume}: no such run folder or checkpoint file", 2)
    if config is None:
        return _error("give a CONFIG (or --resume RUN_DIR)", 2)
    try:
        cfg = load_config(config, args.overrides)
        # the resume hint printed on Ctrl-C repeats the overrides: they may name the run folder
        shown = " ".join(shlex.quote(str(a)) for a in [config, *(
            x for o in args.overrides for x in ("--set", o))])
        try:
            trainer = Trainer(cfg, run_dir=run_dir, resume=resume, progress=not args.no_progress,
                              config_path=shown, comm=comm)
        except ConfigError as exc:  # a constructor's check, named by its config key
            raise ConfigError(f"{config}: {exc}") from None
        result = trainer.fit()
    except ConfigError as exc:
        return _error(str(exc), 2)
    except TrainingInterrupted:
        return 130
    except KeyboardInterrupt:
        print("interrupted (no checkpoint written by this second Ctrl-C)", file=sys.stderr)
        return 130
    except (TrainingError, RunLockedError, CheckpointError, OSError,
            distributed.DistributedError) as exc:
        return _error(str(exc))
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


# -- infer ----------------------------------------------------------------------------------------
def _model_args(p):
    p.add_argument("--weights", required=True, help="net_*.safetensors or a checkpoint")
    p.add_argument("--config", help="the training config: its imports: are imported, and its "
                   "model: is used when the weights carry no model spec")
    p.add_argument("--model", help="model type, overriding the weights' spec (with --scale)")
    p.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="constructor keyword for --model (repeatable)")
    p.add_argument("--scale", type=int, help="upscaling factor (default: from the weights)")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module that registers a custom model/layer (searched on "
                   "sys.path and the current directory)")
    p.add_argument("--tile", type=int, default=None, help="tile size in LR pixels (bounded "
                   "memory for large images); default: whole image")
    p.add_argument("--tile-overlap", type=int, default=16, help="LR pixels of context around "
                   "each tile (default 16)")


def _load(args):
    from ..io.config import import_modules, parse_scalar
    from .inference import load_model
    from .schema import load_config
    spec = fallback = None
    if args.imports:
        import_modules(args.imports, os.getcwd(), "--import")
    if args.config:  # imports its modules; its model: is used when the weights carry no spec
        cfg = load_config(args.config)
        fallback = {**cfg["model"], "scale": cfg["scale"]}
    if args.model:
        spec = {"type": args.model}
        for kv in args.model_arg:
            key, _, value = kv.partition("=")
            spec[key] = parse_scalar(value)
        if args.scale:
            spec["scale"] = args.scale
    return load_model(args.weights, spec, args.scale, fallback)


def infer_main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="srgrad-infer", description="Upscale an image or a folder "
                                "of images (PNG, JPEG, BMP, TIFF; RGB, gray, RGBA; 8/16-bit).")
    _model_args(p)
    p.add_argument("--input", required=True, help="an image file or a folder of images")
    p.add_argument("--output", required=True, help="output file (for one input file) or folder")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    from tqdm.auto import tqdm
    from ..io.config import ConfigError
    from ..io.image import list_images
    from .inference import upscale_file
    try:
        model, info = _load(args)
        src = Path(args.input)
        if src.is_dir():
            files = list_images(src)
            if not files:
                return _error(f"no images in {src}")
            pairs = [(f, Path(args.output) / f.name) for f in files]
        elif src.is_file():
            out = Path(args.output)
            pairs = [(src, out / src.name if out.is_dir() else out)]
        else:
            return _error(f"--input {src}: no such file or folder", 2)
        for f, dst in tqdm(pairs, desc="upscale", unit="img", disable=args.no_progress):
            shape = upscale_file(model, info, f, dst, args.tile, args.tile_overlap)
            tqdm.write(f"{f} -> {dst} ({shape[2]}x{shape[1]})")
    except ConfigError as exc:
        return _error(str(exc), 2)
    except (ValueError, OSError) as exc:
        return _error(str(exc))
    except KeyboardInterrupt:
        return 130
    return 0


# -- evaluate -------------------------------------------------------------------------------------
def eval_main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="srgrad-eval", description="PSNR/SSIM (Y channel, BasicSR "
                                "conventions) of a model on HR images, next to bicubic (MATLAB "
                                "imresize). The LR inputs are made exactly as in training "
                                "validation (HRImageDataset: mod-crop, imresize, 8-bit LR; gray "
                                "images replicated to RGB), so the numbers match metrics.csv.")
    _model_args(p)
    p.add_argument("--input", required=True, help="folder of HR images")
    p.add_argument("--csv", help="CSV output (default: eval_<folder>.csv beside the weights)")
    p.add_argument("--rgb", action="store_true", help="measure on RGB instead of Y")
    p.add_argument("--crop-border", type=int, default=None, help="default: the scale")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    from tqdm.auto import tqdm
    from ..data import HRImageDataset
    from ..metrics import measure
    from ..io.config import ConfigError
    from .inference import bicubic, model_in_channels, super_resolve
    try:
        model, info = _load(args)
        scale = info["scale"]
        if not Path(args.input).is_dir():
            return _error(f"--input {args.input}: not a folder of HR images", 2)
        in_ch = model_in_channels(info)
        data = HRImageDataset(args.input, scale, color="y" if in_ch == 1 else "rgb")
        if len(data) == 0:
            return _error(f"--input {args.input}: no images found", 2)
        crop = scale if args.crop_border is None else args.crop_border
        y = not args.rgb
        tag = "Y" if y else "RGB"
        rows = []
        for i in tqdm(range(len(data)), desc="evaluate", unit="img", disable=args.no_progress):
            item = data.get(i)
            lq, hr = item["lq"], item["gt"]
            sr = super_resolve(model, lq, scale, in_ch, args.tile, args.tile_overlap)
            bic = bicubic(lq, scale, "imresize")
            row = {"image": item["name"]}
            for prefix, image in (("", sr), ("bicubic_", bic)):
                row.update({f"{prefix}{m}_{tag}": v
                            for m, v in measure(image, hr, ("psnr", "ssim"), crop, y).items()})
            rows.append(row)
    except ConfigError as exc:
        return _error(str(exc), 2)
    except (ValueError, OSError) as exc:
        return _error(str(exc))
    except KeyboardInterrupt:
        return 130
    cols = list(rows[0])
    mean = {"image": "mean", **{c: float(np.mean([r[c] for r in rows])) for c in cols[1:]}}
    _print_table(rows + [mean], cols, f"x{scale}, {tag} channel, crop_border={crop}, bicubic = "
                 f"MATLAB imresize")
    out = Path(args.csv) if args.csv else \
        Path(args.weights).parent / f"eval_{Path(args.input).resolve().name}.csv"
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, cols)
        writer.writeheader()
        for r in rows + [mean]:
            writer.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})
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
