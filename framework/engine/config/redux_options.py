"""traiNNer-redux option files (`options/_templates/train/<ARCH>/*.yml`, `.../test/...`) -> srgrad
configs, as basicsr_options.py does for BasicSR's (whose Translation, dataset, scheduler and
metric pieces it reuses): every key translated, dropped with one note saying why, or refused (all
refusals in one ConfigError).

Which file is traiNNer-redux's (`is_redux_options`, a documented rule): a BasicSR-family file
(network_g, none of srgrad's own keys) without `model_type` (BasicSR needs it; traiNNer-redux's
options have no such key) and with any of: `train.losses` as a list; a lowercase
`network_g.type` (traiNNer-redux's registry is lowercase: span, esrgan, dat_2; BasicSR's names
are class names: RRDBNet, SwinIR); a top-level key only traiNNer-redux has (use_amp, amp_bf16,
use_channels_last, fast_matmul, use_compile, compile_mode).

What carries over (traiNNer-redux has no model_type: network_d makes it a GAN run,
high_order_degradation: true an on-the-fly degradation run):
- network_g: its preset (engine/config/redux_archs.py) in srgrad's keywords; network_d -> model_d;
- datasets: lowercase types, lq_size (the LR crop) -> gt_size = lq_size * scale, dataroot lists
  kept (srgrad's datasets read a list of folders; a one-entry list is that folder);
- train.losses (a list of typed entries) -> srgrad's list (recipes/terms.py): l1loss, mseloss,
  charbonnierloss, perceptualloss, ganloss; entries with loss_weight 0 are off in traiNNer-redux
  and dropped; the losses srgrad lacks are dropped and named in one note; ema_decay / ema_power ->
  train.ema_decay / ema_power; grad_clip + grad_clip_max_norm -> train.grad_clip;
- the OTF keys go to srgrad's RealESRGANDataset, which takes Real-ESRGAN's and traiNNer-redux's
  own (blur_prob, jpeg_prob, kernel_range, resize_mode_list, ...); blur_prob2 is its
  second_blur_prob, crop_pad_size is gt_size + 32 as traiNNer-redux's dataset pads;
- use_amp + amp_bf16 -> train.precision: bf16 (refused on a CPU without bfloat16); the GPU switches
  (use_channels_last, fast_matmul, use_compile, num_gpu: auto) are dropped;
- val.val_enabled: false -> no validation; val.tile_size (0: whole images) -> val.tile.
"""
from __future__ import annotations

import math
import numbers

from .basicsr_options import Translation, schedule, schedule_d, val_section
from .redux_archs import DISCRIMINATORS, network

__all__ = ["is_redux_options", "translate_redux", "translate_redux_test", "REDUX_ONLY"]

# top-level keys only traiNNer-redux's files have
REDUX_ONLY = ("use_amp", "amp_bf16", "use_channels_last", "fast_matmul", "use_compile",
              "compile_mode")
_GPU = "a CUDA / torch setting; srgrad runs numpy kernels on the CPU"
_RUNTIME = "set by traiNNer-redux at run time"
_LOADER = "a torch DataLoader setting; srgrad's loader has none"
_DROP_TOP = {
    "num_gpu": "srgrad trains on the CPU (data-parallel runs: srgrad-train under MPI)",
    "use_channels_last": _GPU, "fast_matmul": _GPU, "use_compile": _GPU, "compile_mode": _GPU,
    "detect_anomaly": "a torch autograd debugging switch",
    "deterministic": "srgrad's runs are deterministic always (every draw from the seed)",
    "dist": _RUNTIME, "launcher": _RUNTIME, "rank": _RUNTIME, "world_size": _RUNTIME,
    "is_train": _RUNTIME, "root_path": _RUNTIME, "start_iter": _RUNTIME, "watch": _RUNTIME,
    "switch_iter_per_epoch": _RUNTIME, "contents": _RUNTIME,
    "auto_resume": "use srgrad-train --resume auto", "dist_params": "set up by MPI in srgrad",
    "find_unused_parameters": "a DistributedDataParallel setting",
    "input_pixel_format": "srgrad feeds RGB", "output_pixel_format": "srgrad writes RGB",
    "onnx": "use srgrad-export", "high_order_degradations_debug": "a debugging dump",
    "high_order_degradations_debug_limit": "a debugging dump",
}
_DROP_DATASET = {"name": "a display name", "phase": _RUNTIME, "num_worker_per_gpu": _LOADER,
                 "prefetch_mode": _LOADER, "pin_memory": _LOADER, "persistent_workers": _LOADER,
                 "num_prefetch_queue": _LOADER, "prefetch_factor": _LOADER,
                 "dataset_enlarge_ratio": "srgrad samples by iteration, not by epoch",
                 "meta_info": "srgrad reads every image in the folder"}
# traiNNer-redux loss type -> srgrad's (the perceptual one is built by _perceptual)
_LOSSES = {"l1loss": "L1Loss", "mseloss": "MSELoss", "charbonnierloss": "CharbonnierLoss",
           "ganloss": "GANLoss", "perceptualloss": "PerceptualLoss"}
# traiNNer-redux's PerceptualLoss: VGG19 conv features (before the ReLU) with these weights
_PERCEPTUAL_LAYERS = {"conv1_2": 0.1, "conv2_2": 0.1, "conv3_4": 1.0, "conv4_4": 1.0,
                      "conv5_4": 1.0}
# OTF keys srgrad's RealESRGANDataset takes under the same name (Real-ESRGAN's)
_SAME = tuple(f"{k}{n}" for n in ("", "2") for k in (
    "resize_prob", "resize_range", "gaussian_noise_prob", "noise_range", "poisson_scale_range",
    "gray_noise_prob", "jpeg_range"))
_KERNELS = tuple(f"{k}{n}" for n in ("", "2") for k in (
    "kernel_list", "kernel_prob", "sinc_prob", "blur_sigma", "betag_range", "betap_range")) + \
    ("final_sinc_prob",)
# traiNNer-redux's own OTF keys, which srgrad's RealESRGANDataset takes under the same name
_REDUX_SAME = ("blur_prob", "jpeg_prob", "jpeg_prob2") + tuple(
    f"resize_mode_{k}{n}" for k in ("list", "prob") for n in ("", "2", "3"))


def is_redux_options(data) -> bool:
    """Whether parsed YAML is a traiNNer-redux option file (the rule in the module docstring)."""
    from .basicsr_options import is_basicsr_options
    if not is_basicsr_options(data) or "model_type" in data:
        return False
    train = data.get("train") if isinstance(data.get("train"), dict) else {}
    net = data.get("network_g") if isinstance(data.get("network_g"), dict) else {}
    kind = net.get("type")
    return isinstance(train.get("losses"), list) or any(k in data for k in REDUX_ONLY) or \
        (isinstance(kind, str) and kind == kind.lower() and kind != kind.upper())


def translate_redux(options: dict, source: str = "<options>"):
    """(srgrad config dict, notes) from a traiNNer-redux training option dict. Pure; the config
    still needs schema.validate. ConfigError lists every key that cannot be translated."""
    t, opts = Translation.begin(options, source)
    t.model_type = t.who = "traiNNer-redux"
    cfg, precision = _top(t, opts)
    scale = cfg.get("scale")
    otf = opts.pop("high_order_degradation", False) is True
    cfg["model"] = network(t, t.section(opts.pop("network_g", None), "network_g"), "network_g",
                           scale) or {}
    network_d = t.take(opts, "network_d", "network_d")
    gan = _has_gan(opts)
    if gan and network_d is None:
        t.refuse("network_d", "missing: a ganloss with a loss_weight trains a discriminator "
                              "(traiNNer-redux fails without it)")
    elif gan:
        cfg["model_d"] = _discriminator(t, t.section(network_d, "network_d"))
    elif network_d is not None:
        t.drop("network_d", "no ganloss with a loss_weight: traiNNer-redux builds no "
                            "discriminator then")
    cfg["train"] = {**_train(t, t.section(opts.pop("train", None), "train"), gan), **precision}
    cfg["datasets"] = _datasets(t, t.section(opts.pop("datasets", None), "datasets"), cfg, otf)
    if otf:
        _otf(t, opts, cfg["datasets"].get("train") or {}, scale)
    for key in [k for k in opts if k in _OTF_KEYS]:
        opts.pop(key)
        t.drop(key, "high_order_degradation is not true: the LR images are read as they are")
    _val(t, opts, cfg)
    _logger(t, t.section(opts.pop("logger", None), "logger"), cfg)
    _path(t, t.section(opts.pop("path", None), "path"), cfg["train"], gan)
    return cfg, t.finish(opts)


def _has_gan(opts) -> bool:
    """traiNNer-redux's rule: a GAN run when the first ganloss of train.losses has a loss_weight
    other than 0 (network_d is then required; without one it is ignored)."""
    train = opts.get("train") if isinstance(opts.get("train"), dict) else {}
    losses = train.get("losses") if isinstance(train.get("losses"), list) else []
    gans = [e for e in losses if isinstance(e, dict) and str(e.get("type")).lower() == "ganloss"]
    return bool(gans) and gans[0].get("loss_weight", 0) != 0


def translate_redux_test(options: dict, source: str = "<options>"):
    """(srgrad test config dict, notes) from a traiNNer-redux test option dict (its
    options/_templates/test files), as basicsr_test_options.translate_basicsr_test."""
    from .basicsr_test_options import _path as test_path
    from .basicsr_test_options import _sets
    t, opts = Translation.begin(options, source)
    t.model_type = t.who = "traiNNer-redux"
    cfg, _ = _top(t, opts, training=False)
    if "seed" in cfg:
        del cfg["seed"]
        t.drop("manual_seed", "evaluation draws nothing at random")
    cfg["model"] = network(t, t.section(opts.pop("network_g", None), "network_g"), "network_g",
                           cfg.get("scale")) or {}
    datasets = t.section(opts.pop("datasets", None), "datasets")
    cfg["datasets"] = _sets(t, {k: _dataset_opts(t, t.section(v, f"datasets.{k}"),
                                                  f"datasets.{k}.", cfg.get("scale"))
                                for k, v in datasets.items()})
    val = t.section(opts.pop("val", None), "val")
    suffix = val.pop("suffix", None)
    _val_switches(t, val, cfg)
    cfg["val"] = {**val_section(t, val), **cfg.pop("val", {})}
    cfg["val"].pop("every", None)
    cfg["val"]["suffix"] = None if suffix is None else str(suffix)
    path = t.section(opts.pop("path", None), "path")
    if path.get("param_key_g", "absent") is None:
        del path["param_key_g"]  # the file's own weights (safetensors: no key)
    cfg.update(test_path(t, path))
    if cfg.get("weights", {}).get("key") == "params" and "param_key_g" not in path:
        cfg["weights"]["key"] = None
    return cfg, t.finish(opts)


# -- the parts ----------------------------------------------------------------------------------
def _top(t, opts, training=True):
    """(name, scale and seed; train keys: the precision) from the top-level keys, the GPU
    switches dropped (and the precision, for an evaluation: `training` false)."""
    cfg = {k: opts.pop(k) for k in ("name", "scale") if k in opts}
    if "manual_seed" in opts:
        cfg["seed"] = opts.pop("manual_seed")
    elif "train" in opts:
        t.notes.append("manual_seed: missing: traiNNer-redux then draws a random seed, srgrad "
                       "trains with seed 0 (set seed to change it)")
    for key, why in _DROP_TOP.items():
        if key in opts:
            del opts[key]
            t.drop(key, why)
    amp, bf16 = opts.pop("use_amp", None), opts.pop("amp_bf16", None)
    train = {}
    if not training:
        for key, value in (("use_amp", amp), ("amp_bf16", bf16)):
            if value is not None:
                t.drop(key, "srgrad-eval runs in float32 (srgrad-eval --bf16 asks for bfloat16)")
    elif amp and bf16:  # refused when the config is checked on a CPU without bfloat16
        train["precision"] = "bf16"
        t.notes.append("use_amp -> train.precision: bf16 (with amp_bf16: true: bfloat16 operands, "
                       "float32 accumulation and weights, as traiNNer-redux's amp_bf16)")
        t.notes.append("amp_bf16 -> train.precision: bf16 (see use_amp)")
    elif amp is not None:
        t.drop("use_amp", "fp16 autocast is a CUDA feature: srgrad trains in float32" if amp
               else "false: float32, as srgrad trains")
    if training and bf16 is not None and not (amp and bf16):
        t.drop("amp_bf16", ("true: see use_amp" if bf16 else "false: fp16, see use_amp") if amp
               else "use_amp is false")
    return cfg, train


def _discriminator(t, block) -> dict:
    kind = str(block.pop("type", None)).lower()
    if kind not in DISCRIMINATORS:
        t.refuse("network_d.type", f"{kind!r}: srgrad has UNetDiscriminatorSN and "
                                   f"VGGStyleDiscriminator")
        return {}
    out, why = DISCRIMINATORS[kind]
    out = {**out, **block}
    if why:
        t.notes.append(f"network_d.type: {kind}: {why}")
    return out


def _train(t, opts, gan) -> dict:
    out = {}
    if "total_iter" in opts:
        out["total_iters"] = t.integer(opts.pop("total_iter"), "train.total_iter")
    for key, target in (("optim_g", "optimizer"), ("optim_d", "optimizer_d")):
        block = t.take(opts, key, f"train.{key}")
        if key == "optim_d" and not gan:
            if block is not None:
                t.drop("train.optim_d", "no GAN loss: no discriminator to train")
        elif block is not None:
            out[target] = t.section(block, f"train.{key}")
    scheduler = schedule(t, opts, out, note_off=True)
    if gan:
        schedule_d(t, scheduler, out)
    for key in ("ema_decay", "ema_power"):
        if key in opts:
            value = opts.pop(key)
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                out[key] = float(value)
            else:
                t.refuse(f"train.{key}", f"expected a number, got {value!r}")
    if out.get("ema_decay", 0) == 0 and "ema_power" in out:
        t.drop("train.ema_power", "no EMA (ema_decay 0)")
        del out["ema_power"]
    elif out.get("ema_decay", 0) > 0 and "ema_power" not in out:
        out["ema_power"] = 10.0  # traiNNer-redux's default: steps 1-2 copied, then ema_decay
        t.notes.append("train.ema_power: missing: traiNNer-redux's default 10 (its EMA copies "
                       "the weights at steps 1-2, then averages with ema_decay)")
    _switch(t, opts, "ema_switch_iter", (0, None), "the EMA never replaces the weights")
    _switch(t, opts, "ema_update_after_step", (0,), "the EMA starts with the first step")
    given = "grad_clip" in opts
    clip, norm = opts.pop("grad_clip", False), opts.pop("grad_clip_max_norm", None)
    if clip:  # traiNNer-redux's default max norm: 100
        out["grad_clip"] = float(norm if norm is not None else 100.0)
    else:
        if given:
            t.drop("train.grad_clip", "false: no clipping")
        if norm is not None:
            t.drop("train.grad_clip_max_norm", "grad_clip is false")
    out["losses"] = _losses(t, opts.pop("losses", None) or [], gan)
    _switch(t, opts, "use_moa", (False,), "no mixture of augmentations")
    for key in ("moa_augs", "moa_probs", "moa_debug", "moa_debug_limit"):
        if key in opts:
            del opts[key]
            t.drop(f"train.{key}", "use_moa is false")
    _switch(t, opts, "adaptive_d", (False,), "the discriminator steps every iteration")
    for key in ("adaptive_d_ema_decay", "adaptive_d_threshold"):
        if key in opts:
            del opts[key]
            t.drop(f"train.{key}", "adaptive_d is false")
    eco = opts.pop("eco", None)
    if isinstance(eco, dict) and eco.get("enabled"):
        t.refuse("train.eco", "ECO (traiNNer-redux's) is not in srgrad")
    elif eco is not None:
        t.drop("train.eco", "not enabled")
    t.unknown(opts, "train.")
    return out


def _switch(t, opts, key, off, why):
    """A traiNNer-redux switch srgrad has only off: dropped when off, refused otherwise."""
    if key not in opts:
        return
    value = opts.pop(key)
    if value in off:
        t.drop(f"train.{key}", f"{value}: {why}")
    else:
        t.refuse(f"train.{key}", f"{value!r}: srgrad has no such option ({why} in srgrad)")


def _losses(t, entries, gan) -> list:
    """traiNNer-redux's list -> srgrad's; one note names the losses srgrad lacks."""
    if not isinstance(entries, list):
        t.refuse("train.losses", "expected a list of {type: ..., loss_weight: ...}")
        return []
    out, missing = [], []
    for i, entry in enumerate(entries):
        path = f"train.losses[{i}]"
        entry = t.section(entry, path)
        kind = str(entry.get("type")).lower()
        weight = entry.get("loss_weight")
        if weight == 0:
            t.drop(path, f"{kind} with loss_weight 0 (off in traiNNer-redux)")
            continue
        if isinstance(weight, numbers.Real) and weight < 0:
            t.refuse(f"{path}.loss_weight", f"{weight}: a negative weight (traiNNer-redux: the "
                                            f"term compares with the upscaled LR) is not in srgrad")
            continue
        if kind not in _LOSSES:
            missing.append(kind)
            t.drop(path, f"{kind}: srgrad has no such loss; the run trains without this term")
            continue
        if kind == "ganloss" and any(e["type"] == "GANLoss" for e in out):
            t.drop(path, "a second ganloss: traiNNer-redux trains with the first")
            continue
        if kind == "perceptualloss":
            block = _perceptual(t, entry, path)
        elif kind == "ganloss":
            block = {"type": "GANLoss", **{k: v for k, v in entry.items() if k != "type"}}
        else:
            block = _pixel(t, entry, kind, path)
        if block:
            out.append(block)
    if missing:
        t.notes.append(f"train.losses: the traiNNer-redux losses srgrad lacks, left out of the "
                       f"run: {', '.join(missing)}")
    return out


def _pixel(t, entry, kind, path) -> dict:
    """l1loss / mseloss / charbonnierloss -> srgrad's, keywords as written; Charbonnier's eps,
    inside the square root in traiNNer-redux (sqrt(d^2 + eps), default 1e-12), is squared in
    srgrad's, so it is converted."""
    entry.pop("type")
    out = {"type": _LOSSES[kind]}
    out.update((k, entry.pop(k)) for k in ("loss_weight", "reduction") if k in entry)
    if kind == "charbonnierloss":
        eps = entry.pop("eps", 1e-12)
        out["eps"] = math.sqrt(eps) if isinstance(eps, numbers.Real) and eps > 0 else eps
        t.notes.append(f"{path}.eps: {eps} -> eps {out['eps']}: traiNNer-redux computes "
                       f"sqrt(d^2 + eps), srgrad sqrt(d^2 + eps^2); the loss is the same")
    t.unknown(entry, f"{path}.")
    return out


def _perceptual(t, entry, path) -> dict | None:
    """traiNNer-redux's perceptualloss -> srgrad's PerceptualLoss (BasicSR's) on the same VGG19
    conv layers and weights."""
    criterion = str(entry.pop("criterion", "l1"))
    weight = entry.pop("loss_weight", 1.0)
    layers = entry.pop("layer_weights", None) or dict(_PERCEPTUAL_LAYERS)
    entry.pop("type")
    if criterion not in ("l1", "charbonnier"):
        t.refuse(f"{path}.criterion", f"{criterion!r}: srgrad's PerceptualLoss compares features "
                                      f"with l1, l2 or fro (traiNNer-redux's pd / fd terms are "
                                      f"not in srgrad)")
        return None
    if criterion == "charbonnier":
        t.notes.append(f"{path}.criterion: charbonnier -> l1: srgrad's PerceptualLoss has no "
                       f"Charbonnier (the two differ only near 0)")
    for key in ("w_lambda", "alpha", "num_proj_fd", "use_input_norm", "range_norm"):
        if key in entry:
            entry.pop(key)
            t.drop(f"{path}.{key}", "traiNNer-redux's pd / fd options; srgrad's PerceptualLoss "
                                    "is BasicSR's")
    t.unknown(entry, f"{path}.")
    t.notes.append(f"{path}: perceptualloss -> PerceptualLoss on VGG19 {', '.join(layers)} "
                   f"(traiNNer-redux's layers and weights); srgrad reads torchvision's VGG19 "
                   f"weights from a file: set the entry's weights or SRGRAD_VGG19_WEIGHTS")
    return {"type": "PerceptualLoss", "layer_weights": layers, "perceptual_weight": weight,
            "criterion": "l1"}


def _dataset_opts(t, opts, prefix, scale) -> dict:
    """A traiNNer-redux dataset block in BasicSR's spelling (for basicsr_options.dataset_block):
    the type's case, lq_size -> gt_size, one folder per root, its loader keys dropped."""
    for key, why in _DROP_DATASET.items():
        if key in opts:
            del opts[key]
            t.drop(f"{prefix}{key}", why)
    kind = str(opts.get("type"))
    opts["type"] = {"pairedimagedataset": "PairedImageDataset",
                    "realesrgandataset": "RealESRGANDataset",
                    "singleimagedataset": "SingleImageDataset"}.get(kind.lower(), kind)
    if "lq_size" in opts:
        lq = t.integer(opts.pop("lq_size"), f"{prefix}lq_size")
        if isinstance(lq, int) and isinstance(scale, int):
            opts["gt_size"] = lq * scale
            t.notes.append(f"{prefix}lq_size: {lq} -> gt_size {lq * scale} (the HR crop)")
    for key in ("dataroot_gt", "dataroot_lq"):  # srgrad's datasets take a list of folders too
        if isinstance(opts.get(key), list) and len(opts[key]) == 1:
            opts[key] = opts[key][0]
    accum = opts.pop("accum_iter", None)
    if accum not in (None, 1):
        t.refuse(f"{prefix}accum_iter", f"{accum}: srgrad has no gradient accumulation")
    elif accum is not None:
        t.drop(f"{prefix}accum_iter", "1: no gradient accumulation")
    resize = opts.pop("lq_resize_mode", None)
    if resize is not None:
        t.drop(f"{prefix}lq_resize_mode", "the LR images are read at their size")
    opts.pop("clip_size", None)
    return opts


def _datasets(t, opts, cfg, otf) -> dict:
    from .basicsr_options import dataset_block
    scale, out = cfg.get("scale"), {}
    if "train" in opts:
        train = _dataset_opts(t, t.section(opts.pop("train"), "datasets.train"), "datasets.train.",
                              scale)
        kernels = {k: train.pop(k) for k in list(train) if k in _OTF_DATASET} if otf else {}
        if otf and train.get("type") != "RealESRGANDataset":
            t.refuse("datasets.train.type", f"{train.get('type')!r}: high_order_degradation "
                                            f"degrades HR images: realesrgandataset")
        block, batch = dataset_block(t, train, "datasets.train.", True, otf)
        out["train"] = block
        if block is not None and otf:
            block.update(kernels)  # the crop (from lq_size) and the kernels: _otf reads them
        if batch is not None:
            cfg["train"]["batch_size"] = batch
    if "val" in opts:
        val = _dataset_opts(t, t.section(opts.pop("val"), "datasets.val"), "datasets.val.", scale)
        out["val"] = dataset_block(t, val, "datasets.val.", False, False)[0]
    t.unknown(opts, "datasets.")
    return out


# the OTF keys of traiNNer-redux's datasets.train (kernels) and of its top level (the rest)
_OTF_DATASET = _KERNELS + tuple(f"{k}{n}" for n in ("", "2") for k in ("blur_kernel_size",
                                                                        "kernel_range")) + \
    ("final_kernel_range", "gt_size")
_OTF_KEYS = _SAME + ("blur_prob", "blur_prob2", "jpeg_prob", "jpeg_prob2", "thicklines_prob",
                     "lq_usm", "lq_usm_radius_range", "queue_size", "dataroot_lq_prob") + \
    tuple(f"resize_mode_{k}{n}" for k in ("list", "prob") for n in ("", "2", "3"))


def _otf(t, opts, block, scale) -> None:
    """traiNNer-redux's on-the-fly degradation keys -> srgrad's RealESRGANDataset `block` (at
    the top-level `scale`)."""
    for key in _SAME + _REDUX_SAME:
        if key in opts:
            block[key] = opts.pop(key)
    if "blur_prob2" in opts:
        block["second_blur_prob"] = opts.pop("blur_prob2")
    for n in ("", "2"):  # the sizes come from kernel_range (traiNNer-redux stores, never reads it)
        if block.pop(f"blur_kernel_size{n}", None) is not None:
            t.drop(f"datasets.train.blur_kernel_size{n}", f"traiNNer-redux draws the kernel "
                                                          f"sizes from kernel_range{n}")
    t.notes.append("high_order_degradation: traiNNer-redux's pipeline is Real-ESRGAN's with the "
                   "odds and modes above; its bilinear and bicubic resizes also antialias and "
                   "clamp to [0, 1], srgrad's (Real-ESRGAN's) do not")
    for key, off in (("thicklines_prob", 0), ("lq_usm", False), ("dataroot_lq_prob", 0)):
        if key in opts:
            value = opts.pop(key)
            if value == off:
                t.drop(key, f"{value}: off")
            else:
                t.refuse(key, f"{value!r}: traiNNer-redux's, not in srgrad's degradations")
    if "lq_usm_radius_range" in opts:
        del opts["lq_usm_radius_range"]
        t.drop("lq_usm_radius_range", "lq_usm is off")
    if "queue_size" in opts:
        del opts["queue_size"]
        t.drop("queue_size", "the training-pair pool: srgrad draws every sample from (seed, "
                             "iteration), with no pool")
    gt = block.get("gt_size")
    if isinstance(gt, int):  # srgrad's needs a multiple of the scale: rounded up to one
        pad = -(-(gt + 32) // scale) * scale if isinstance(scale, int) and scale > 0 else gt + 32
        block["crop_pad_size"] = pad
        t.notes.append(f"datasets.train.crop_pad_size: {pad}: traiNNer-redux pads or crops each "
                       f"HR image to gt_size + 32 before degrading it"
                       + ("" if pad == gt + 32 else " (rounded up to a multiple of the scale)"))


def _val_switches(t, opts, cfg) -> None:
    """val_enabled, metrics_enabled, tile_size, tile_overlap, pbar: the keys BasicSR's val lacks."""
    val = cfg.setdefault("val", {})
    tile = opts.pop("tile_size", None)
    if tile:
        val["tile"] = t.integer(tile, "val.tile_size")
    elif tile is not None:
        t.drop("val.tile_size", "0: whole images")
    if "tile_overlap" in opts:
        val["tile_overlap"] = t.integer(opts.pop("tile_overlap"), "val.tile_overlap")
    if opts.pop("metrics_enabled", True) is False:
        opts.pop("metrics", None)
        val["metrics"] = []
        t.notes.append("val.metrics_enabled: false -> val.metrics: [] (no metrics measured)")
    opts.pop("val_enabled", None)


def _val(t, opts, cfg) -> None:
    val = opts.pop("val", None)
    if val is None:
        return
    val = t.section(val, "val")
    if val.get("val_enabled") is False:
        t.drop("val", "val_enabled: false: no validation")
        if cfg["datasets"].get("val") is not None:
            t.drop("datasets.val", "val.val_enabled is false")
            t.paths = [(k, v) for k, v in t.paths if not k.startswith("datasets.val.")]
        cfg["datasets"]["val"] = None
        return
    _val_switches(t, val, cfg)
    cfg["val"] = {**val_section(t, val), **cfg["val"]}


def _logger(t, opts, cfg) -> None:
    from .basicsr_options import _logger as basicsr_logger
    fmt = opts.pop("save_checkpoint_format", None)
    if fmt is not None:
        t.drop("logger.save_checkpoint_format", "srgrad writes safetensors")
    basicsr_logger(t, opts, cfg)


def _path(t, opts, train_cfg, gan) -> None:
    from .basicsr_options import _path as basicsr_path
    for key in ("pretrain_network_g_ema", "pretrain_network_g_teacher", "resume_models",
                "pretrain_network_g_path", "pretrain_network_ae", "pretrain_network_ae_ema",
                "pretrain_network_ae_path", "pretrain_network_ae_decoder",
                "pretrain_network_ae_decoder_ema"):
        if key in opts:
            if opts.pop(key) is not None:
                t.refuse(f"path.{key}", "a network srgrad's translation does not train")
            else:
                t.drop(f"path.{key}", "empty")
    keys = {net: opts.get(f"param_key_{net}", "absent") is None for net in ("g", "d")}
    basicsr_path(t, opts, train_cfg, gan, ema_note=False)
    for net, target in (("g", "pretrained"), ("d", "pretrained_d")):
        if keys[net] and target in train_cfg:
            train_cfg[target]["key"] = None  # param_key: ~ means the file's own weights
