"""`srgrad-eval`: image-quality metrics of a model next to bicubic, and its SR images saved, as
BasicSR's `basicsr/test.py -opt` does. Two ways to name the data:

    srgrad-eval CONFIG [--weights W]                 every set of a file (engine/config/testconfig.py):
        an srgrad test config (datasets.test_1, test_2, ...), a BasicSR test option file
        (options/test/*.yml, translated on the fly with its notes), or a training config (its
        datasets.val); the weights from --weights, else the file's (BasicSR's pretrain_network_g)
    srgrad-eval --weights W --input HR [--lq LR]     one set: HR images, LR made with imresize
        (as in training validation) or read from --lq
    srgrad-eval --weights W --benchmark Set5 B100    the standard sets by name (engine/hub/datasets.py:
        fetched and checked on first use), LR made with imresize from the mod-cropped HR, and a
        summary table (PSNR/SSIM-Y of the model and bicubic per set) also written as Markdown

The SR images go to <results_root>/<name>/visualization/<set>/<image>_<suffix>.png (BasicSR's
layout; results_root `results`, suffix the config's val.suffix or its name; one set: name and suffix
the weights' stem, set the input's name) unless --no-save; the folder is made unique (_2, _3, ...)
unless --overwrite. The scores: a table per set and one CSV in the same folder,
<results>/<name>/metrics.csv (one set: --csv FILE puts it elsewhere), never over an input. One line
at the end names that folder.
"""
from __future__ import annotations

import argparse
import csv
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .bf16_check import bf16_arg
from .args import load_model_from_args, model_args, run_guarded, tta_arg
from .outputs import (Inputs, OutputError, _check_folder, check_output, exists, landing,
                      refuse_input)

__all__ = ["eval_main", "EVAL_METRICS"]

EVAL_METRICS = ("psnr", "ssim")


def eval_main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="srgrad-eval", description="Image-quality metrics (default PSNR and SSIM on the Y "
        "channel, BasicSR conventions) of a model next to bicubic (MATLAB imresize), and its SR "
        "images saved as BasicSR's test.py saves them. Give CONFIG (a test config with several "
        "sets, a BasicSR test option file, or a training config: its validation set) or --input "
        "(one set). LR inputs made from HR images are made exactly as in training validation "
        "(mod-crop, imresize, 8-bit LR), so the numbers and column names match metrics.csv.")
    p.add_argument("options", nargs="?", metavar="CONFIG", help="an srgrad test config "
                   "(datasets.test_1, test_2, ...), a BasicSR test option file (options/test/*.yml; "
                   "translated, with notes) or a training config (its datasets.val)")
    p.add_argument("--weights", help="weights: srgrad's .safetensors, a plain .safetensors or a "
                   "PyTorch .pth/.pt (read safely); default: CONFIG's (weights.path, BasicSR's "
                   "path.pretrain_network_g)")
    from ..hub.models import add_arguments
    add_arguments(p)  # -n NAME, --sha256, -dn, --list-models (engine/hub/models.py)
    model_args(p, weights=False)
    p.add_argument("--input", help="one set: an HR image or a folder of HR images")
    p.add_argument("--benchmark", nargs="+", metavar="SET", help="the standard test sets by name "
                   "(Set5 Set14 B100 Urban100 Manga109, DIV2K: its valid HR; engine/hub/datasets.py "
                   "downloads and checks them on first use, into $SRGRAD_HOME/datasets): PSNR/SSIM "
                   "on Y with crop_border = scale, LR made with MATLAB imresize from the mod-cropped "
                   "HR, a summary table next to bicubic, written beside metrics.csv as "
                   "benchmark.md")
    p.add_argument("--lq", help="with --input: a folder of the matching LR images (paired "
                   "evaluation); default: made from the HR images with imresize")
    p.add_argument("--lq-template", default="{name}", help="with --lq: LR file name (without "
                   "extension) for an HR image called {name}: default {name}, the LR named as its "
                   "HR (BasicSR's filename_tmpl '{}'); DIV2K's own LR files: {name}x{scale}")
    p.add_argument("--metrics", nargs="+", default=None, metavar="NAME",
                   help="registered metrics to measure (default: CONFIG's val.metrics, else psnr "
                   "ssim; a metric registered by an --import module works too); the delta_ column "
                   "is the first's, psnr's when listed")
    p.add_argument("--results", metavar="DIR", help="the results root (default: CONFIG's "
                   "results_root, else results): SR images in DIR/<name>/visualization/<set>/, "
                   "the scores in DIR/<name>/metrics.csv")
    p.add_argument("--no-save", action="store_true", help="do not save the SR images")
    p.add_argument("--csv", help="one set: the scores' CSV here instead of the results folder's "
                   "metrics.csv; never an input, and an existing file only with --overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs (--csv, the "
                   "results folder's images and metrics.csv) instead of making new names")
    p.add_argument("--rgb", action="store_true", help="measure on RGB instead of Y (default: "
                   "CONFIG's val.y_channel, else Y)")
    p.add_argument("--crop-border", type=int, default=None, help="default: CONFIG's, else the "
                   "scale")
    tta_arg(p)
    bf16_arg(p)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.tile == "auto":  # a number keeps the metrics comparable between runs
        p.error("argument -t/--tile: auto is srgrad-infer's; srgrad-eval takes a number of pixels")
    return run_guarded(lambda: _evaluate(args))


# -- what to evaluate -----------------------------------------------------------------------------
@dataclass
class _Job:
    """The sets of one srgrad-eval call, however they were named: `sets` is [(set name, dataset
    spec)] (one set: its spec is None, the data come from --input / --lq), `model` a spec or None,
    then the scoring settings and where the images go."""
    name: str
    sets: list
    model: dict | None
    weights: str
    key: str | None
    metrics: list
    y: bool
    crop: int | None
    baseline: str
    suffix: str
    save: bool
    results_root: str
    tile: int | None
    overlap: int
    tta: bool


def _from_file(args):
    """_Job of `srgrad-eval CONFIG` (its notes printed first)."""
    from ..config.testconfig import read_plan
    if args.input or args.lq or args.csv:
        raise OutputError("give either CONFIG (its sets) or --input (one set), not both; --lq "
                          "and --csv go with --input")
    plan = read_plan(args.options)
    if plan.kind.endswith("option file"):
        print(f"{args.options} is a {plan.kind}: translated as srgrad-convert options does "
              f"({len(plan.notes)} note(s))", file=sys.stderr)
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)
    val = plan.val
    weights = args.weights or plan.weights["path"]
    if weights is None:
        raise OutputError(f"{args.options} names no weights: pass --weights")
    return _Job(
        name=plan.name, sets=plan.sets,
        model={**plan.model, "scale": plan.scale} if plan.model else None, weights=weights,
        key=args.key or (None if args.weights else plan.weights["key"]),
        metrics=list(args.metrics or val["metrics"]), y=val["y_channel"] and not args.rgb,
        crop=args.crop_border if args.crop_border is not None else val["crop_border"],
        baseline=val["baseline"], suffix=val["suffix"] or plan.name,
        save=val["save_images"] and not args.no_save,
        results_root=args.results or plan.results_root,
        tile=args.tile if args.tile is not None else val["tile"],  # --tile brings its overlap
        overlap=args.tile_overlap if args.tile is not None else val["tile_overlap"],
        tta=args.tta or val["self_ensemble"])


def _from_input(args):
    """_Job of `srgrad-eval --weights W --input HR [--lq LR]`: one set, named after the input."""
    if not args.weights and not args.model_name:
        raise OutputError("--weights or -n NAME is required with --input")
    src = Path(args.input)
    if not src.exists():
        raise OutputError(f"--input {src}: no such file or folder")
    if args.lq and not src.is_dir():
        raise OutputError(f"--input {src}: with --lq, --input is a folder of HR images")
    stem = Path(args.weights).stem if args.weights else args.model_name
    return _Job(name=stem, sets=[(src.resolve().stem or "input", None)], model=None,
                weights=args.weights, key=args.key, metrics=list(args.metrics or EVAL_METRICS),
                y=not args.rgb, crop=args.crop_border, baseline="imresize", suffix=stem,
                save=not args.no_save, results_root=args.results or "results", tile=args.tile,
                overlap=args.tile_overlap, tta=args.tta)


def _from_benchmark(args):
    """_Job of `srgrad-eval --benchmark SET ...`: each set fetched (engine/hub/datasets.py) and read as
    HR images, LR made with imresize; named after the weights (or -n NAME)."""
    from ..hub import datasets as datahub
    if not args.weights and not args.model_name:
        raise OutputError("--weights or -n NAME is required with --benchmark")
    if args.lq or args.csv:
        raise OutputError("--lq and --csv go with --input; --benchmark writes metrics.csv and "
                          "benchmark.md in the results folder")
    sets = []
    for name in args.benchmark:
        key, _ = datahub.fetch(name, progress=not args.no_progress)
        role = "hr_valid" if key == "DIV2K" else "hr"
        sets.append((key, {"type": "HRImageDataset", "root": str(datahub.folder_of(key, role))}))
    stem = Path(args.weights).stem if args.weights else args.model_name
    return _Job(name=stem, sets=sets, model=None, weights=args.weights, key=args.key,
                metrics=list(args.metrics or EVAL_METRICS), y=not args.rgb, crop=args.crop_border,
                baseline="imresize", suffix=stem, save=not args.no_save,
                results_root=args.results or "results", tile=args.tile, overlap=args.tile_overlap,
                tta=args.tta)


def benchmark_table(rows, job, scale) -> str:
    """The papers' table as Markdown: one row for the model and one for bicubic, a column of
    "PSNR / SSIM" per set (each set's mean rows)."""
    from ..run.validation import column
    means = {r["set"]: r for r in rows if r["image"] == "mean"}
    first, second = (job.metrics + [None])[:2]
    head = "| method | " + " | ".join(means) + " |"
    lines = [f"x{scale}, {'Y' if job.y else 'RGB'}, crop_border={job.crop}, "
             f"{' / '.join(m for m in (first, second) if m)}"
             f"{' (self-ensemble x8)' if job.tta else ''}", "", head,
             "|---|" + "---:|" * len(means)]
    for label, prefix in ((job.name, ""), ("bicubic", "bicubic_")):
        cells = []
        for r in means.values():
            values = [f"{r[prefix + column(m, job.y)]:.{2 if m == 'psnr' else 4}f}" for m in (first, second) if m]
            cells.append(" / ".join(values))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _one_set_data(args, scale, in_ch):
    from ...data import HRImageDataset, PairedImageDataset
    color = "y" if in_ch == 1 else "rgb"
    src = Path(args.input)
    if args.lq:
        return PairedImageDataset(src, args.lq, scale, filename_tmpl=args.lq_template, color=color)
    return HRImageDataset(src, scale, color=color)


def _build(spec, scale, where):
    from ...io.config import ConfigError
    from ...registry import DATASETS
    try:
        return DATASETS.build(spec, scale=scale)
    except (ValueError, TypeError, OSError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _check_metrics(names) -> None:
    """Every --metrics name registered (after --import ran), else a one-line error listing them."""
    from ...registry import METRICS
    for name in names:
        try:
            METRICS.get(name)
        except KeyError as exc:
            raise OutputError(f"--metrics: {exc.args[0]}") from None


# -- where it writes -------------------------------------------------------------------------------
def _inputs(job, datasets) -> list:
    """(what, path) of everything read: no output may be one of them."""
    items = [("--weights file", job.weights)]
    for set_name, data in datasets:
        for attr in ("paths", "gt_paths", "lq_paths"):
            items += [("input image", p) for p in getattr(data, attr, [])]
    return items


def _listed_inputs(args) -> list:
    """What one-set srgrad-eval reads, as (what, path) pairs, from the file system alone."""
    from ...io.image import list_images
    src = Path(args.input)
    images = list_images(src) if src.is_dir() else [src]
    if args.lq and Path(args.lq).is_dir():
        images += list_images(Path(args.lq))
    return ([("--weights file", args.weights), ("--config file", args.config)]
            + [("input image", f) for f in images])


def _results_folder(job, overwrite: bool) -> Path:
    """<results_root>/<name>, or the first free <name>_2, _3, ... unless `overwrite`."""
    root = Path(job.results_root)
    folder, n = root / job.name, 1
    while exists(folder) and not overwrite and any(landing(folder).iterdir()):
        n += 1
        folder = root / f"{job.name}_{n}"
    return folder


def _plan_images(folder: Path, job, datasets, inputs, overwrite) -> dict:
    """{set name: [image path per item]}, checked: never an input, never an existing file
    without --overwrite (the folder is new unless --overwrite)."""
    plan, inputs = {}, Inputs(inputs)
    for set_name, data in datasets:
        out = folder / "visualization" / set_name
        paths = [out / f"{Path(n).stem}_{job.suffix}.png" for n in data.names]
        if len(set(paths)) != len(paths):
            raise OutputError(f"{set_name}: two images share a name once their extensions are "
                              f"dropped ({out}); rename one")
        for dst in paths:
            refuse_input(dst, inputs)
            if exists(dst) and not overwrite:
                raise OutputError(f"{dst} exists; pass --overwrite to replace it")
        plan[set_name] = paths
    return plan


# -- the run ---------------------------------------------------------------------------------------
def _evaluate(args) -> int:
    from ...io.atomic import clean_partial_writes
    from ...io.config import ConfigError
    from ..inference.upscale import model_in_channels
    if args.options is None and args.input is None and not args.benchmark:
        raise OutputError("give CONFIG (a test config or option file), --input HR (one set) or "
                          "--benchmark SET ...")
    if args.benchmark and (args.options or args.input):
        raise OutputError("--benchmark names the sets: give it without CONFIG or --input")
    job = (_from_benchmark(args) if args.benchmark else _from_file(args) if args.options
           else _from_input(args))
    multi = bool(args.options or args.benchmark)
    args.weights = job.weights
    csv_path = Path(args.csv) if args.csv and not multi else None
    if csv_path is not None:  # before any work: the files a folder of HR images holds, the weights
        check_output(csv_path, "--csv", _listed_inputs(args), args.overwrite)
    model, info = load_model_from_args(args, job.model)
    from ..inference.upscale import capture_inference
    capture_inference(model)  # its tiles through captured graphs (the weights are final here)
    _check_metrics(job.metrics)
    from ...registry import METRICS
    from ..hub.models import fetch_for  # the pretrained files of lpips, dists, ... (before any work)
    fetch_for([(METRICS.get(m), {}) for m in job.metrics], progress=not args.no_progress)
    scale, in_ch = info["scale"], model_in_channels(info)
    if job.crop is None:
        job.crop = scale
    if multi:
        where = args.options or "--benchmark"
        datasets = [(name, _build(spec, scale, f"{where}: datasets ({name})"))
                    for name, spec in job.sets]
    else:
        try:
            datasets = [(job.sets[0][0], _one_set_data(args, scale, in_ch))]
        except (ValueError, OSError) as exc:
            raise ConfigError(f"--input: {exc}") from None
    inputs = [(w, p) for w, p in _inputs(job, datasets) + [("--config file", args.config)] if p]
    # one place for everything, BasicSR's: <results_root>/<name>/ (--csv: the scores elsewhere)
    folder = _results_folder(job, args.overwrite)
    images = _plan_images(folder, job, datasets, inputs, args.overwrite) if job.save else {}
    if csv_path is None:
        csv_path = check_output(folder / "metrics.csv", "the metrics file", inputs, args.overwrite)
    for paths in images.values():
        if paths:
            _check_folder(paths[0].parent, "the images' folder")
            clean_partial_writes(paths[0].parent)  # what a killed run left half-written
    rows = []
    with _precision(args, model, scale, in_ch, datasets, job.tta):
        for set_name, data in datasets:
            rows += _score_set(job, model, scale, in_ch, set_name, data, images.get(set_name),
                               not args.no_progress, multi=multi)
    if rows:
        _write_csv(csv_path, rows, job.tta)
    held = (["the SR images in visualization/"] if images else []) + \
        (["the scores in metrics.csv"] if rows and csv_path.parent == folder else [])
    if args.benchmark and rows:
        from ...io.atomic import write_atomic
        table = benchmark_table(rows, job, scale)
        print(table)
        md = check_output(folder / "benchmark.md", "the benchmark table", inputs, args.overwrite)
        write_atomic(md, (table + "\n").encode())
        held.append("the summary in benchmark.md")
    if held:
        print(f"results: {folder}/ ({', '.join(held[:-1]) + ' and ' if len(held) > 1 else ''}"
              f"{held[-1]})")
    if rows and csv_path.parent != folder:
        print(f"scores: {csv_path}")
    return 0


def _precision(args, model, scale, in_ch, datasets, tta):
    """autocast('bf16') for --bf16, after its measurement on the first LR image (bf16_check),
    else nothing."""
    import contextlib
    from ... import precision
    from .bf16_check import announce
    if not args.bf16:
        return contextlib.nullcontext()
    precision.require_bf16("--bf16")
    first = next(((name, data) for name, data in datasets if len(data)), None)
    if first is not None:
        announce(model, first[1].get(0)["lq"], scale, in_ch, f"the first image of {first[0]}", tta)
    return precision.autocast("bf16")


def _score_set(job, model, scale, in_ch, set_name, data, images, progress, multi) -> list:
    """Rows of one set (each image's scores and the set's mean), printed as a table; SR images
    written to `images` (a path per item) when given. A set without GT is upscaled only."""
    from tqdm.auto import tqdm

    from ...io.image import write_image
    from ..inference.upscale import super_resolve
    from ..run.validation import column, main_metric, score_images

    def sr_of(lq):
        return super_resolve(model, lq, scale, in_ch, job.tile, job.overlap, job.tta)

    has_gt = getattr(data, "has_gt", True)
    if not has_gt or not job.metrics:
        for i in tqdm(range(len(data)), desc=set_name, unit="img", leave=False,
                      disable=not progress):
            sr = sr_of(data.get(i)["lq"])
            if images:
                write_image(images[i], sr)
        why = "no GT" if not has_gt else "no metrics"
        print(f"{set_name}: {len(data)} image(s) upscaled ({why}: nothing measured)")
        return []
    rows, delta = [], main_metric(job.metrics)
    for i, item, sr, _, values in score_images(data, sr_of, scale, job.metrics, job.crop, job.y,
                                               job.baseline, progress=progress, desc=set_name):
        if images:
            write_image(images[i], sr)
        row = {"set": set_name, "image": item["name"]}
        for prefix in ("", "bicubic_"):
            row.update({prefix + column(m, job.y): values[prefix + m] for m in job.metrics})
        row["delta_" + column(delta, job.y)] = values[delta] - values["bicubic_" + delta]
        rows.append(row)
    cols = [c for c in rows[0] if c not in ("set", "image")]
    mean = {"set": set_name, "image": "mean", **{c: float(np.mean([r[c] for r in rows]))
                                                for c in cols}}
    lq_root = getattr(data, "lq_root", None)
    lr_from = f"LR from {lq_root}" if lq_root else f"LR made by {type(data).__name__}"
    lr_from = lr_from.replace("made by HRImageDataset", "made by MATLAB imresize")
    tta = "self-ensemble x8 (--tta)" if job.tta else "no self-ensemble"
    baseline = {"imresize": "MATLAB imresize"}.get(job.baseline, job.baseline)
    _print_table(rows + [mean], cols, (f"{set_name}: " if multi else "") +
                 f"x{scale}, {'Y' if job.y else 'RGB'} channel, crop_border={job.crop}, {lr_from}, "
                 f"bicubic = {baseline} of the LR, {tta}")
    return rows + [mean]


def _write_csv(path, rows, tta) -> None:
    from ...io.atomic import atomic_open
    cols = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    if len({r["set"] for r in rows}) == 1:
        cols.remove("set")  # one set: metrics.csv's columns only
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, cols + ["tta"], extrasaction="ignore")  # tta: 1 for x8 ensembles
    writer.writeheader()
    for r in rows:
        writer.writerow({**{k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()},
                         "tta": int(tta)})
    with atomic_open(path) as fh:
        fh.write(text.getvalue().encode())


def _print_table(rows, cols, title):
    width = max(len(str(r["image"])) for r in rows)
    print(title)
    print(f"{'image':<{width}}  " + "  ".join(f"{c:>16}" for c in cols))
    for r in rows:
        print(f"{r['image']:<{width}}  " + "  ".join(f"{r[c]:>16.4f}" for c in cols))
