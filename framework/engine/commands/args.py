"""The argument helpers every command shares, in one place: which model (model_args,
load_model_from_args: --weights / -n, --model, --model-arg, --config, --import, --tile), --tta, and
the commands' error contract (run_guarded, error). Each command module (cli.py's srgrad-train,
infer.py, evaluate.py, export.py, convert.py, degrade.py, prepare.py, zeroshot/zssr.py) imports
them from here, so no command imports another."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

from ..._check import clip_message
from .outputs import OutputError

__all__ = ["error", "run_guarded", "model_args", "load_model_from_args", "tta_arg"]


def error(msg: str, code: int = 1) -> int:
    """Print `error: msg` on stderr, bounded (a message may quote a value from the input); return
    the exit code (1: failed, 2: bad config/arguments)."""
    print(f"error: {clip_message(msg)}", file=sys.stderr)
    return code


def run_guarded(body) -> int:
    """body() -> exit code, with the commands' error contract: a ConfigError or an argument problem
    is exit 2, any other ValueError/OSError exit 1, one line each, never a traceback; Ctrl-C 130."""
    from ...io.config import ConfigError
    try:
        return body()
    except (ConfigError, OutputError) as exc:
        return error(str(exc), 2)
    except (ValueError, OSError) as exc:
        return error(str(exc))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def model_args(p, tiles: bool = True, weights: bool = True):
    """The options that say which model: --weights (unless the command takes it positionally),
    --key, --config, --model/--model-arg/--scale, --import; and --tile/--tile-overlap."""
    if weights:
        from ..hub.models import add_arguments
        p.add_argument("--weights", "--model_path", dest="weights", help="weights: srgrad's "
                       ".safetensors (net_*, a checkpoint), a plain .safetensors, or a PyTorch "
                       ".pth/.pt (read safely); --model_path is Real-ESRGAN's name for it")
        add_arguments(p)  # -n NAME, --sha256, -dn, --list-models (engine/hub/models.py)
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
    largest tile a memory budget allows, engine/inference/autotile.py)."""
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
    """(model, info) from model_args' options: --weights or -n NAME (engine/hub/models.py), then
    --model/--model-arg, --config, --import (framework.engine.inference.loading.load_model). --model-arg
    without --model gives keywords to the detection, or replaces them in the file's stored spec
    (or the config's, or -n NAME's). `fallback`: a model spec used when the weights carry none
    (srgrad-eval's CONFIG model), in place of --config's."""
    from ...io.config import import_modules, parse_scalar
    from ..hub.models import weights_from_args
    from ..inference.loading import load_model
    from ..config.schema import load_config
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


def tta_arg(p):
    p.add_argument("--tta", action="store_true", help="self-ensemble x8 (EDSR+/RCAN+): average "
                   "the model's outputs on the 8 flips/transposes of each tile (8x the time)")
