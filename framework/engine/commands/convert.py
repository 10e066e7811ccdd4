"""`srgrad-convert`: bring weights and option files in, hand weights out.

    srgrad-convert weights IN OUT [--key params_ema] [--plain] [--model T --scale S --model-arg k=v]
    srgrad-convert options train_EDSR_Mx2.yml -o edsr.yaml

weights: IN is any file srgrad reads weights from (a PyTorch .pth/.pt, read safely; srgrad's or a
plain safetensors file); OUT by its extension: `.safetensors`, srgrad's weights file carrying the
model spec (detected when IN names none), so srgrad-infer needs no config; with --plain, the bare
state_dict a torch user loads with `safetensors.torch.load_file` + `load_state_dict`; `.pth`/`.pt`,
torch.save's format as BasicSR writes it, `{"params": ..., "params_ema": ...}` (bare with --plain),
written without torch or pickle (framework/weights/pth_write.py). The weights are loaded into the model
they belong to first (strictly): a conversion that would not load is refused.

options: a BasicSR option file -> an srgrad config (framework/engine/config/basicsr_options.py): a training
file (options/train/) to a training config for srgrad-train, a test file (options/test/, for
basicsr/test.py) to a test config for srgrad-eval (basicsr_test_options.py); dropped keys are listed,
untranslatable ones are an error, the result is validated.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .args import load_model_from_args, model_args, run_guarded
from .outputs import OutputError, check_output

__all__ = ["main"]


def _weights(args) -> int:
    import numpy as np
    from ...loading import load_into
    from ...weights import CheckpointError, load_weights, save_weights, write_pth

    src, out = Path(args.weights), Path(args.output)
    ext = out.suffix.lower()
    if ext not in (".safetensors", ".pth", ".pt"):
        raise OutputError(f"{out}: the output must end in .safetensors, .pth or .pt")
    check_output(out, "OUT", [("input", src)], args.overwrite)
    model, info = load_model_from_args(args)  # strict: the weights fit the model they belong to
    groups = {}
    if args.key is None and not args.plain:  # both the weights and their EMA, when the file has both
        for name in ("params", "params_ema"):
            try:
                state, group_info = load_weights(src, name)
            except CheckpointError:  # the file has no such entry
                continue
            # in the model's keys (a published layout mapped), strictly
            load_into(model, src, state=state, info=group_info, spec=info["model"])
            groups[name] = {k: np.array(v, copy=True) for k, v in model.state_dict().items()}
    if not groups:
        groups = {"params": model.state_dict()}
    spec = info["model"]
    if ext == ".safetensors" and args.plain:
        import safetensors.numpy
        from ...io.atomic import write_atomic
        write_atomic(out, safetensors.numpy.save({k: v.copy() for k, v in groups["params"].items()}))
    elif ext == ".safetensors":
        save_weights(out, groups["params"], ema_state=groups.get("params_ema"), model=spec,
                     scale=spec["scale"], converted_from=str(src))
    else:  # torch.save's format: BasicSR's {"params": ..., "params_ema": ...}, or bare with --plain
        write_pth(out, groups["params"] if args.plain else groups)
    what = " + params_ema" if "params_ema" in groups else ""
    print(f"{src} -> {out}: {spec['type']} x{spec['scale']}, {len(groups['params'])} tensors{what}")
    return 0


def _options(args) -> int:
    from ...io.atomic import write_atomic
    from ..config.options import translate_any
    from ...io.config import dump_config, read_yaml
    from ..config.schema import validate
    from ..config.testconfig import validate_test_config
    from ..inference.zoo import load_zoo
    src, out = Path(args.input), Path(args.output)
    if out.suffix.lower() not in (".yaml", ".yml"):
        raise OutputError(f"{out}: the output must end in .yaml or .yml")
    check_output(out, "--output", [("input", src)], args.overwrite)
    from ..config.options import options_kind
    data = read_yaml(src)
    whose = options_kind(data)
    cfg, notes, kind = translate_any(data, str(src))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    load_zoo()
    # the translation must be a valid config (paths are checked at run time)
    (validate if kind == "train" else validate_test_config)(cfg, str(out))
    use = f"train with: srgrad-train {out}" if kind == "train" else f"evaluate with: srgrad-eval {out}"
    header = (f"# Translated from the {whose} option file {src} by srgrad-convert options.\n"
              f"# Check the data paths; {use}\n")
    write_atomic(out, (header + dump_config(cfg)).encode())
    print(f"{src} -> {out} ({len(notes)} note(s) above)")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="srgrad-convert", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    w = sub.add_parser("weights", help="convert weights (.pth <-> .safetensors)")
    w.add_argument("weights", metavar="IN", help="a .pth/.pt or .safetensors weights file")
    w.add_argument("output", metavar="OUT", help="a .safetensors, .pth or .pt file to write")
    w.add_argument("--plain", action="store_true", help="bare keys, no srgrad metadata (for "
                   "torch's load_state_dict)")
    w.add_argument("--overwrite", action="store_true")
    model_args(w, tiles=False, weights=False)  # --model etc.: when IN names no model
    o = sub.add_parser("options", help="translate a BasicSR or traiNNer-redux option file into an "
                       "srgrad config (a training file for srgrad-train, a test file for srgrad-eval)")
    o.add_argument("input", metavar="OPTIONS_YML")
    o.add_argument("-o", "--output", required=True, metavar="CONFIG_YAML")
    o.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    return run_guarded(lambda: _weights(args) if args.what == "weights" else _options(args))


if __name__ == "__main__":
    sys.exit(main())
