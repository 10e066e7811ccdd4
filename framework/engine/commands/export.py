"""`srgrad-export`: weights (+ config or --model) -> model.onnx (or ncnn's .param + .bin), checked
against srgrad's own output.

    srgrad-export --weights net_best.safetensors --output model.onnx [--opset 18]
                  [--dynamic | --static] [--input-size 64 64] [--fp16] [--overwrite]
    srgrad-export --weights net_best.safetensors --format ncnn --output model.param

Exit codes as the other commands: 0 written, 1 error (nothing written, message printed), 2 bad
arguments or config.
"""
from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np

from .args import error, load_model_from_args, model_args, run_guarded
from .outputs import check_output

__all__ = ["main"]


def _parser():
    p = argparse.ArgumentParser(
        prog="srgrad-export", description="Export a trained model to ONNX, run it once in ONNX "
        "Runtime and compare with srgrad's own output (docs/export.md).")
    model_args(p, tiles=False)  # --weights, --key, --config, --model, --model-arg, --scale, --import
    p.add_argument("--output", required=True, help="the .onnx file to write (--format ncnn: the "
                   ".param, with the .bin beside it)")
    p.add_argument("--format", choices=("onnx", "ncnn"), default="onnx", help="onnx (default), or "
                   "ncnn: .param + .bin for realesrgan-ncnn-vulkan, upscayl and chaiNNer (input "
                   "blob data, output blob output; checked with ncnn's Python runtime, the ncnn "
                   "extra)")
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


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    return run_guarded(lambda: _export(args))


def _export(args) -> int:
    from ...io.config import ConfigError
    from ...onnx import ConversionError, ExportError, TraceError, export
    from ..inference.upscale import fixed_onnx_reason, model_in_channels

    inputs = [("--weights file", args.weights), ("--config file", args.config)]
    out = check_output(args.output, "--output", inputs, args.overwrite)
    h, w = args.input_size
    if args.format == "ncnn":
        return _export_ncnn(args, out, inputs, h, w)
    if h < 1 or w < 1:
        return error(f"--input-size must be positive, got {h} {w}", 2)
    try:
        model, info = load_model_from_args(args)
        x = np.random.default_rng(0).uniform(0, 1, (1, model_in_channels(info), h, w))
        dynamic, fixed = args.dynamic, fixed_onnx_reason(info)
        if fixed is not None:  # the card knows what the traces at two sizes may not show
            name = (info.get("model") or {}).get("type", "the model")
            if dynamic:
                return error(f"--dynamic: a {name} graph holds for one input size only ({fixed}); "
                             f"export at the size you will run (--input-size H W)")
            if dynamic is None:
                print(f"warning: a {name} graph holds for one input size only ({fixed}): "
                      f"exporting for {h}x{w} (--input-size H W)", file=sys.stderr)
            dynamic = False
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = export(model, x.astype(np.float32), out, opset=args.opset,
                            dynamic=dynamic, fp16=args.fp16, overwrite=args.overwrite,
                            tolerance=args.tolerance)
        for c in caught:
            print(f"warning: {c.message}", file=sys.stderr)
    except ConfigError:
        raise
    except (ExportError, ConversionError, TraceError, ImportError, ValueError, TypeError,
            OSError) as exc:
        return error(str(exc))
    print(report)
    return 0


def _export_ncnn(args, out, inputs, h, w) -> int:
    """--format ncnn: the .param at --output, its .bin beside it (framework/onnx/ncnn.py)."""
    import os

    from ...onnx.ncnn import NcnnError, export_ncnn
    from ..inference.upscale import model_in_channels
    if args.dynamic is not None or args.fp16 or args.opset != 18 or args.tolerance is not None:
        return error("--dynamic/--static, --fp16, --opset and --tolerance are ONNX options (an "
                     "ncnn net takes any size, in float32)", 2)
    check_output(os.path.splitext(str(out))[0] + ".bin", "--output's .bin", inputs, args.overwrite)
    if h < 1 or w < 1:
        return error(f"--input-size must be positive, got {h} {w}", 2)
    from ...io.config import ConfigError
    try:
        model, info = load_model_from_args(args)
        x = np.random.default_rng(0).uniform(0, 1, (1, model_in_channels(info), h, w))
        report = export_ncnn(model, x.astype(np.float32), out, overwrite=args.overwrite)
    except ConfigError:
        raise
    except (NcnnError, ValueError, TypeError, OSError) as exc:
        return error(str(exc))
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
