"""`srgrad-degrade`: see what Real-ESRGAN's degradation makes of HR images, the draws for draws what
srgrad-train would get.

    srgrad-degrade --config C --input HR --output OUT [--set KEY=VALUE ...] [--size train|N]
                   [--count N] [--seed S] [--overwrite] [--no-progress]

C is a training config whose datasets.train is a RealESRGANDataset, read and validated as
srgrad-train reads it (its `imports:` run too; `--set` overrides as srgrad-train's); its root is
replaced by HR, a folder of HR images or one image. Sample k is position k of the training stream:
BatchLoader's generator for that position (seed: --seed, else the config's; shuffled epochs), i.e.
row k % batch_size of iteration k // batch_size had datasets.train.root been HR. Its size:
- default: the whole degraded square (crop_pad_size), of which training takes a gt_size crop (the
  degradation's draws are the same: the crop comes last);
- `--size train`: exactly the training sample (the gt_size crop);
- `--size N`: crop_pad_size = gt_size = N (a multiple of the scale), a larger view: the draws of a
  training set with that crop.
Default: one sample per image (the first epoch); --count N cycles through further epochs. Written
to the folder OUT: <stem>_<k>_lq.png, <stem>_<k>_gt.png (and <stem>_<k>_gt_usm.png with gt_usm),
8-bit PNGs (lq is on 8-bit levels, so exact; gt_usm is rounded), and degradations.csv, one row of
draws per sample (framework.data.realesrgan.TRACE_KEYS). Nothing is written until every output has
been checked: never into the input folder or over an input, never over an existing file without
--overwrite.
"""
from __future__ import annotations

import argparse
import csv
import io
import shutil
import sys
import tempfile
from pathlib import Path

from .args import run_guarded
from .outputs import Inputs, OutputError, _check_folder, exists, is_input, refuse_input

__all__ = ["main"]

CSV_NAME = "degradations.csv"
_KINDS = ("lq", "gt", "gt_usm")


class _Traced:
    """The dataset as BatchLoader sees it (len, get(index, rng)), keeping each sample's trace: the
    loader's own sample(position) then picks the image and the generator, as in training."""

    def __init__(self, dataset):
        self.dataset, self.trace = dataset, {}

    def __len__(self) -> int:
        return len(self.dataset)

    def get(self, index, rng=None):
        self.trace = {}
        return self.dataset.get(index, rng, trace=self.trace)


def _inputs(src: Path) -> list[Path]:
    from ...io.image import IMAGE_EXTENSIONS, list_images
    if src.is_dir():
        try:
            return list_images(src)
        except (ValueError, OSError) as exc:
            raise OutputError(f"--input {src}: {exc}") from None
    if not src.is_file():
        raise OutputError(f"--input {src}: no such file or folder")
    if src.suffix.lower() not in IMAGE_EXTENSIONS:
        raise OutputError(f"--input {src}: not an image file ({', '.join(IMAGE_EXTENSIONS)})")
    return [src]


def _dataset(cfg: dict, config: str, root: Path, size):
    """datasets.train of `cfg` with its root replaced and its crop set by --size (None: the whole
    crop_pad_size square; "train": as the config says; N: N), built as the trainer builds it."""
    from ...data import RealESRGANDataset
    from ...io.config import ConfigError
    from ...registry import DATASETS
    spec = dict(cfg["datasets"]["train"])
    if not issubclass(DATASETS.get(spec["type"]), RealESRGANDataset):
        raise ConfigError(f"{config}: datasets.train is a {spec['type']}; srgrad-degrade shows the "
                          f"degradations of a RealESRGANDataset (or a subclass)")
    spec["root"] = str(root)
    if size is None:
        spec["gt_size"] = spec.get("crop_pad_size", _default(spec["type"], "crop_pad_size"))
    elif size != "train":
        spec["gt_size"] = spec["crop_pad_size"] = size
    try:
        return DATASETS.build(spec, scale=cfg["scale"])
    except (ValueError, TypeError, OSError) as exc:
        sized = "" if size is None or size == "train" else f", crop and gt_size: --size {size}"
        raise ConfigError(f"{config}: datasets.train (root: the --input images{sized}): "
                          f"{exc}") from exc


def _default(kind: str, key: str):
    import inspect
    from ...registry import DATASETS
    return inspect.signature(DATASETS.get(kind)).parameters[key].default


def _size(text):
    """--size: "train" or a whole number >= 1 (argparse's type)."""
    if text == "train":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'train' or a whole number, got {text!r}") \
            from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _plan(out: Path, names: list[str], usm: bool, inputs: list[Path], folder, overwrite: bool):
    """[{kind: path}] per sample and the CSV path, checked: OUT is not the input folder, can be
    written, and no output is an input or (without overwrite) an existing file."""
    if folder is not None and is_input(out, folder):
        raise OutputError(f"--output {out} is the --input folder: choose another folder (the "
                          f"samples would mix with the HR images)")
    _check_folder(out, "--output")
    kinds = _KINDS if usm else _KINDS[:2]
    plan = [{kind: out / f"{Path(name).stem}_{k}_{kind}.png" for kind in kinds}
            for k, name in enumerate(names)]
    table = out / CSV_NAME
    every = [table] + [path for files in plan for path in files.values()]
    read = Inputs(("input", i) for i in inputs)
    for dst in every:
        refuse_input(dst, read)
    existing = [dst for dst in every if exists(dst)]
    if existing and not overwrite:
        more = f" (and {len(existing) - 1} more of this run's outputs)" if len(existing) > 1 else ""
        raise OutputError(f"--output: {existing[0]} exists{more}; pass --overwrite to replace it")
    return plan, table


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _run(args) -> int:
    from tqdm.auto import tqdm

    from ...data import BatchLoader
    from ...data.realesrgan import TRACE_KEYS
    from ...io.atomic import clean_partial_writes, write_atomic
    from ...io.image import write_image
    from ..config.schema import load_config
    if args.count is not None and args.count < 1:
        raise OutputError(f"--count must be >= 1, got {args.count}")
    if args.seed is not None and args.seed < 0:
        raise OutputError(f"--seed must be >= 0, got {args.seed}")
    src, out = Path(args.input), Path(args.output)
    inputs = _inputs(src)
    cfg = load_config(args.config, args.overrides)
    seed = cfg["seed"] if args.seed is None else args.seed
    batch = cfg["train"]["batch_size"]
    with tempfile.TemporaryDirectory(prefix="srgrad-degrade-") as tmp:
        root = src
        if not src.is_dir():  # a dataset reads a folder: one holding a copy of the file
            root = Path(tmp)
            shutil.copyfile(src, root / src.name)
        ds = _dataset(cfg, args.config, root, args.size)
        traced = _Traced(ds)
        loader = BatchLoader(traced, batch, seed=seed, shuffle=True)
        count = len(ds) if args.count is None else args.count
        n = len(ds)  # position p: epoch p // n visits image order(epoch)[p % n] (BatchLoader)
        names = [ds.names[int(loader.order(k // n)[k % n])] for k in range(count)]
        plan, table = _plan(out, names, ds.gt_usm, inputs, src if src.is_dir() else None,
                            args.overwrite)
        clean_partial_writes(out, keep=inputs)  # what a killed run left half-written
        rows = []
        for k in tqdm(range(count), desc="degrade", unit="sample", disable=args.no_progress):
            sample = loader.sample(k)
            assert sample["name"] == names[k], (sample["name"], names[k])  # the planned image
            for kind, dst in plan[k].items():
                write_image(dst, sample[kind])
            rows.append([k, k // batch, k % batch, sample["name"]]
                        + [_cell(traced.trace[key]) for key in TRACE_KEYS])
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["sample", "iteration", "row", "image", *TRACE_KEYS])
    writer.writerows(rows)
    write_atomic(table, text.getvalue().encode())
    print(f"{count} sample(s) of {n} image(s), seed {seed} -> {out} (draws: {table.name})")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="srgrad-degrade", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="a training config whose datasets.train is a "
                   "RealESRGANDataset (its imports: run Python modules: use configs you trust)")
    p.add_argument("--input", required=True, help="an HR image or a folder of HR images (in place "
                   "of datasets.train.root)")
    p.add_argument("--output", required=True, help="the folder to write the samples and "
                   f"{CSV_NAME} to (created if needed; never the --input folder)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, as srgrad-train's --set (repeatable), e.g. "
                   "--set datasets.train.sinc_prob=0")
    p.add_argument("--size", type=_size, default=None, metavar="train|N", help="default: the "
                   "whole degraded square (datasets.train.crop_pad_size), of which training takes "
                   "a gt_size crop; train: exactly that crop; N: crop_pad_size = gt_size = N (a "
                   "multiple of the scale) for a larger view")
    p.add_argument("--count", type=int, help="how many samples (default: one per image); more "
                   "cycle over the images epoch after epoch, as training does")
    p.add_argument("--seed", type=int, help="the training seed (default: the config's)")
    p.add_argument("--overwrite", action="store_true", help="replace outputs that exist (an input "
                   "is never replaced)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    return run_guarded(lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
