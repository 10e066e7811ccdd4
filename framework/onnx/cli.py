"""`srgrad-export`: weights (+ config or --model) -> model.onnx, checked against srgrad's own output.

    srgrad-export --weights net_best.safetensors --output model.onnx [--opset 18]
                  [--dynamic | --static] [--input-size 64 64] [--fp16] [--overwrite]

Exit codes as the other commands: 0 written, 1 error (nothing written, message printed), 2 bad
arguments or config.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np

from ..engine.cli import model_args

__all__ = ["main"]


def _parser():
    p = argparse.ArgumentParser(
        prog="srgrad-export", description="Export a trained model to ONNX, run it once in ONNX "
        "Runtime and compare with srgrad's own output (docs/export.md).")
    model_args(p, tiles=False)  # --weights, --key, --config, --model, --model-arg, --scale, --import
    p.add_argument("--output", required=True, help="the .onnx file to write")
    p.add_argument("--opset", type=int, default=18, help="ONNX opset (default 18, at least 17)")
    axes = p.add_mutually_exclusive_group()
    axes.add_argument("--dynamic", dest="dynamic", action="store_const", const=True,
                      help="require dynamic batch/height/width (error if the graph depends on the "
                      "size); default: dynamic when possible, else a warning and --input-size")
    axes.add_argument("--static", dest="dynamic", action="store_const", const=False,
                      help="fix the input size to --input-size")
    p.add_argument("--input-size", type=int, nargs=2, default=(64, 64), metavar=("H", "W"),
                   help="the example's LR size (default 64 64): the fixed size of a static export")
    p.add_argument("--fp16", action="store_true", help="float16 weights and activations (the "
                   "model still takes and returns float32)")
    p.add_argument("--tolerance", type=float, default=None, help="max |ONNX Runtime - srgrad| "
                   "accepted (default 1e-4; with --fp16 1e-2 x max(1, max |output|))")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    return p


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from ..engine.cli import error as _error, load_model_from_args as _load
    from ..io.config import ConfigError
    from . import export
    from .export import ExportError
    from .graph import ConversionError
    from .trace import TraceError

    out = args.output
    for what, path in (("--weights", args.weights), ("--config", args.config)):
        if path and Path(path).exists() and _same_file(out, path):
            return _error(f"--output {out} is the {what} file: choose another name", 2)
    if os.path.exists(out) and not args.overwrite:
        return _error(f"--output {out} exists (pass --overwrite to replace it)", 2)
    h, w = args.input_size
    if h < 1 or w < 1:
        return _error(f"--input-size must be positive, got {h} {w}", 2)
    try:
        from ..engine.inference import model_in_channels
        model, info = _load(args)
        x = np.random.default_rng(0).uniform(0, 1, (1, model_in_channels(info), h, w))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = export(model, x.astype(np.float32), out, opset=args.opset,
                            dynamic=args.dynamic, fp16=args.fp16, overwrite=args.overwrite,
                            tolerance=args.tolerance)
        for c in caught:
            print(f"warning: {c.message}", file=sys.stderr)
    except ConfigError as exc:
        return _error(str(exc), 2)
    except (ExportError, ConversionError, TraceError, ImportError, ValueError, TypeError,
            OSError) as exc:
        return _error(str(exc))
    except KeyboardInterrupt:
        return 130
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
