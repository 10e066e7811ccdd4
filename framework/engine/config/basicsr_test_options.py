"""BasicSR test option files (`options/test/*/*.yml`, read by `basicsr/test.py -opt`) -> srgrad
test configs (framework/engine/config/testconfig.py: what `srgrad-eval CONFIG` evaluates).

`translate_basicsr_test(options, source)` -> (test config dict, notes), in the manner of
basicsr_options.translate_basicsr (whose pieces it shares: datasets, metrics, model_type): every key
translated, dropped with a note, or refused (all refusals in one ConfigError). What carries over:
network_g -> model; every entry of `datasets` is a test set (BasicSR tests them all, sorted by
key), keeping its `name` (the folder of its images); PairedImageDataset as in training files,
SingleImageDataset (LR only: images, no metrics); path.pretrain_network_g / param_key_g (default
params, as BasicSR) -> weights; path.results_root -> results_root; val.save_img / suffix / metrics
-> val.save_images / suffix / metrics. engine/config/options.py picks the translator a file needs.
"""
from __future__ import annotations

from .basicsr_options import Translation, _io_backend, dataset_block, val_section

__all__ = ["translate_basicsr_test"]

_EVAL = "srgrad-eval runs the generator only"
# top-level keys BasicSR's test pipeline does not read (RCAN's test file has some)
_TOP_IGNORED = ("suffix", "crop_border", "save_img")


def translate_basicsr_test(options: dict, source: str = "<options>"):
    """(srgrad test config dict, notes) from a BasicSR test option dict (yaml.safe_load's). Pure;
    the config still needs testconfig.validate_test_config. ConfigError lists every key that
    cannot be translated. (engine/config/options.py chooses between this and traiNNer-redux's.)"""
    t, opts = Translation.begin(options, source)
    cfg: dict = {}
    for key in ("name", "scale"):
        if key in opts:
            cfg[key] = opts.pop(key)
    if "model_type" in opts:
        t.drop("model_type", f"{opts.pop('model_type')}: {_EVAL} (network_g), whatever the "
                             f"model type")
    if "manual_seed" in opts:
        del opts["manual_seed"]
        t.drop("manual_seed", "evaluation draws nothing at random")
    for key in _TOP_IGNORED:
        if key in opts:
            del opts[key]
            t.drop(key, f"BasicSR reads val.{key if key != 'crop_border' else 'metrics'} "
                        f"(it ignores this top-level copy)")
    network = t.section(opts.pop("network_g", None), "network_g")
    if "upscale" in network:
        network["scale"] = network.pop("upscale")
    cfg["model"] = network
    if opts.pop("network_d", None) is not None:
        t.drop("network_d", _EVAL)
    cfg["datasets"] = _sets(t, t.section(opts.pop("datasets", None), "datasets"))
    val = t.section(opts.pop("val", None), "val")
    suffix = val.pop("suffix", None)
    cfg["val"] = val_section(t, val)
    cfg["val"].pop("every", None)
    if cfg["val"].get("metrics") == []:
        t.notes.append("val.metrics: none, so srgrad-eval measures nothing (as BasicSR) and saves "
                       "the images")
    cfg["val"]["suffix"] = None if suffix is None else str(suffix)
    cfg.update(_path(t, t.section(opts.pop("path", None), "path")))
    return cfg, t.finish(opts)


def _sets(t, opts) -> dict:
    """Every dataset entry, sorted by key as basicsr/test.py takes them, with its name kept."""
    out = {}
    for key in sorted(opts, key=str):
        spec, prefix = t.section(opts[key], f"datasets.{key}"), f"datasets.{key}."
        name = spec.pop("name", None)
        if spec.get("type") == "SingleImageDataset":
            block = _single(t, spec, prefix)
        else:
            block = dataset_block(t, spec, prefix, False, False)[0]
        if block is not None:
            out[key] = {**({"name": str(name)} if name is not None else {}), **block}
    if not out and not t.errors:
        t.refuse("datasets", "no test set")
    return out


def _single(t, opts, prefix) -> dict:
    """BasicSR's SingleImageDataset (LR images only) -> srgrad's."""
    t.common(opts, "dataset", prefix)
    del opts["type"]
    out = {"type": "SingleImageDataset"}
    if "dataroot_lq" in opts:
        out["lq_root"] = opts.pop("dataroot_lq")
        t.paths.append((f"{prefix}lq_root", out["lq_root"]))
    _io_backend(t, opts, prefix)
    if "color" in opts:
        out["color"] = "y" if opts.pop("color") == "y" else "rgb"
    for key in ("mean", "std"):
        if opts.pop(key, None) is not None:
            t.refuse(f"{prefix}{key}", "srgrad feeds images in [0, 1]; models normalise inside")
    t.unknown(opts, prefix)
    return out


def _path(t, opts) -> dict:
    """path.pretrain_network_g / param_key_g -> weights; results_root kept; the rest dropped."""
    out = {}
    weights = opts.pop("pretrain_network_g", opts.pop("pretrain_model_g", None))
    key = opts.pop("param_key_g", None)
    for name in ("strict_load_g", "strict_load"):
        if name not in opts:
            continue
        if opts.pop(name) is False:
            t.refuse(f"path.{name}", "false: srgrad-eval loads the weights strictly")
        else:
            t.drop(f"path.{name}", "srgrad-eval loads the weights strictly, as asked")
    if weights is not None:
        out["weights"] = {"path": weights, "key": key or "params"}  # BasicSR's default key
        t.paths.append(("weights.path", weights))
    if "results_root" in opts and opts["results_root"] is not None:
        out["results_root"] = opts.pop("results_root")
    for key in [k for k in opts if k.endswith("_d")]:
        del opts[key]
        t.drop(f"path.{key}", _EVAL)
    t.common(opts, "path", "path.")
    t.unknown(opts, "path.")
    return out
