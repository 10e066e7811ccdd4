"""BasicSR option files (`options/train/*/*.yml`) -> srgrad configs.

`translate_options(options, source)` maps a parsed BasicSR option dict to an srgrad config dict (to
validate with framework.engine.schema.validate) plus notes. Every BasicSR key is translated, or dropped
with one note line saying why (it has no meaning here: GPUs, loaders, loggers), or refused: keys
srgrad cannot honour (a GAN's discriminator, perceptual losses, online degradations, datasets and
losses it lacks) are collected and raised together in one ConfigError, each with its dotted key.

Semantics carried over, not only names: BasicSR's default filename template '{}' (LR named as
HR) becomes an explicit '{name}' (srgrad's default is '{name}x{scale}'); metrics default to RGB in
BasicSR and to Y in srgrad, so y_channel is always written; BasicSR's Charbonnier eps sits inside
the square root, srgrad's is squared, so the value is converted. BASICSR_SPELLINGS maps BasicSR key
names to srgrad's dotted keys, for error messages about configs written the BasicSR way.
"""
from __future__ import annotations

import copy
import math
import numbers
import string

from .config import ConfigError

__all__ = ["translate_options", "BASICSR_SPELLINGS"]

# BasicSR key (where srgrad spells it differently) -> srgrad's dotted key
BASICSR_SPELLINGS: dict[str, str] = {
    "network_g": "model", "upscale": "model.scale", "manual_seed": "seed",
    "total_iter": "train.total_iters", "warmup_iter": "train.scheduler.warmup_iters",
    "optim_g": "train.optimizer", "pixel_opt": "train.loss",
    "batch_size_per_gpu": "train.batch_size", "dataroot_gt": "datasets.*.gt_root",
    "dataroot_lq": "datasets.*.lq_root", "use_hflip": "datasets.*.use_flip",
    "val_freq": "val.every", "save_img": "val.save_images", "test_y_channel": "val.y_channel",
    "crop_border": "val.crop_border", "print_freq": "train.log_every",
    "save_checkpoint_freq": "checkpoint.every", "pretrain_network_g": "train.pretrained.path",
    "pretrain_model_g": "train.pretrained.path", "param_key_g": "train.pretrained.key",
    "strict_load_g": "train.pretrained.strict", "strict_load": "train.pretrained.strict",
}

# keys without meaning in srgrad: dropped, one note each
_RUNTIME = "set by BasicSR at run time"
_LOADER = "a torch DataLoader setting; srgrad's loader has none"
_DROP = {
    "": {"num_gpu": "srgrad trains on the CPU (data-parallel runs: srgrad-train under MPI)",
         "dist_params": "srgrad's data-parallel runs are set up by MPI, not the config",
         "dist": _RUNTIME, "rank": _RUNTIME, "world_size": _RUNTIME, "is_train": _RUNTIME,
         "root_path": _RUNTIME, "auto_resume": "use srgrad-train --resume auto",
         "find_unused_parameters": "a DistributedDataParallel setting",
         "cudnn_benchmark": "a CUDA setting"},
    "dataset": {"name": "a display name", "phase": _RUNTIME, "scale": "the top-level scale",
                "num_worker_per_gpu": _LOADER,
                "use_shuffle": "srgrad always shuffles training data",
                "dataset_enlarge_ratio": "srgrad samples by iteration, not by epoch",
                "prefetch_mode": _LOADER, "pin_memory": _LOADER, "persistent_workers": _LOADER,
                "meta_info_file": "srgrad reads every image in gt_root (BasicSR's DIV2K meta "
                                  "files list the whole folder)"},
    "path": {"resume_state": "use srgrad-train --resume auto|RUN_DIR",
             "experiments_root": "runs go to run_root/name", "root": _RUNTIME,
             "results_root": _RUNTIME, "models": _RUNTIME, "training_states": _RUNTIME,
             "log": _RUNTIME, "visualization": _RUNTIME,
             "ignore_resume_networks": "use srgrad-train --resume"},
    "train": {"ema_decay": "srgrad keeps no EMA copy of the weights: it trains, validates and "
                           "saves the weights themselves (BasicSR validates net_g_ema)"},
    "val": {"pbar": "srgrad-train has its own progress bar", "suffix": "file names are fixed"},
    "logger": {"use_tb_logger": "srgrad writes metrics.csv", "wandb": "srgrad writes metrics.csv"},
}
_GAN = "GAN training, which srgrad does not do (it trains with a pixel loss)"
_DEGRADATION = "a Real-ESRGAN degradation setting (srgrad has no on-the-fly degradation)"
_REFUSE = {
    "": {"network_d": _GAN, **{k: _DEGRADATION for k in (
        "gt_usm resize_prob resize_range gaussian_noise_prob noise_range poisson_scale_range "
        "gray_noise_prob jpeg_range second_blur_prob resize_prob2 resize_range2 "
        "gaussian_noise_prob2 noise_range2 poisson_scale_range2 gray_noise_prob2 jpeg_range2 "
        "gt_size queue_size l1_gt_usm percep_gt_usm gan_gt_usm").split()}},
    "train": {"perceptual_opt": "a perceptual (VGG) loss, which srgrad does not have",
              "gan_opt": _GAN, "optim_d": _GAN, "net_d_iters": _GAN, "net_d_init_iters": _GAN,
              "ldl_opt": "LDL's artifact loss, which srgrad does not have"},
    "path": {"pretrain_network_d": _GAN, "param_key_d": _GAN, "strict_load_d": _GAN},
}
_MODEL_TYPES = ("SRModel", "SwinIRModel")  # single-image SR with a pixel loss
_LOSSES = ("L1Loss", "MSELoss", "CharbonnierLoss")
_METRICS = {"calculate_psnr": "psnr", "calculate_ssim": "ssim"}


class _Translation:
    def __init__(self, source):
        self.source, self.notes, self.errors, self.paths = source, [], [], []

    def drop(self, path, why):
        self.notes.append(f"{path}: dropped, {why}")

    def refuse(self, path, why):
        self.errors.append(f"{path}: {why}")

    def section(self, opts, path):
        """The mapping at `path` (a copy), or {} after an error when it is not a mapping."""
        if isinstance(opts, dict):
            return dict(opts)
        if opts is not None:
            self.refuse(path, f"expected a mapping, got {type(opts).__name__}")
        return {}

    def common(self, opts, kind, prefix):
        """Drop and refuse `opts`' keys listed for `kind`; the rest is left for the caller."""
        for key in list(opts):
            path = f"{prefix}{key}"
            if key in _DROP.get(kind, {}):
                self.drop(path, _DROP[kind][key])
                del opts[key]
            elif key in _REFUSE.get(kind, {}):
                if opts[key] is None:  # `perceptual_opt: ~`: nothing asked for
                    self.drop(path, "empty")
                else:
                    self.refuse(path, _REFUSE[kind][key])
                del opts[key]

    def unknown(self, opts, prefix):
        for key in opts:
            self.refuse(f"{prefix}{key}", "not a BasicSR option srgrad knows how to translate")

    def integer(self, value, path):
        """BasicSR writes counts as `!!float 5e3`: an integral number -> int."""
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and \
                math.isfinite(value) and value == int(value):
            return int(value)
        self.refuse(path, f"expected a whole number, got {value!r}")
        return value


def translate_options(options: dict, source: str = "<options>"):
    """(srgrad config dict, notes) from a BasicSR option dict (as yaml.safe_load gives it).

    Pure: `options` is not modified and nothing is read. The config still needs
    framework.engine.schema.validate (model and optimizer types and their keywords are checked there).
    Raises ConfigError listing every key that cannot be translated, with its dotted path and why.
    """
    if not isinstance(options, dict):
        raise ConfigError(f"{source}: BasicSR options are a mapping, got {type(options).__name__}")
    t = _Translation(source)
    opts = copy.deepcopy(options)
    t.common(opts, "", "")
    cfg: dict = {}
    for key, target in (("name", "name"), ("scale", "scale"), ("manual_seed", "seed")):
        if key in opts:
            cfg[target] = opts.pop(key)
    model_type = opts.pop("model_type", None)
    if model_type in _MODEL_TYPES:
        t.drop("model_type", f"{model_type}: srgrad trains single-image SR models this way")
    elif model_type is not None:
        t.refuse("model_type", f"{model_type!r}: srgrad trains single-image SR with a pixel loss "
                               f"(BasicSR's {' / '.join(_MODEL_TYPES)})")
    network = t.section(opts.pop("network_g", None), "network_g")
    if "upscale" in network:
        network["scale"] = network.pop("upscale")
    cfg["model"] = network
    train = t.section(opts.pop("train", None), "train")
    cfg["train"] = _train(t, train)
    cfg["datasets"] = _datasets(t, t.section(opts.pop("datasets", None), "datasets"), cfg["train"])
    val = opts.pop("val", None)
    if val is not None:
        cfg["val"] = _val(t, t.section(val, "val"))
    elif cfg["datasets"].get("val") is not None:
        t.drop("datasets.val", "the options have no val section, so BasicSR never validates")
        cfg["datasets"]["val"] = None
    _logger(t, t.section(opts.pop("logger", None), "logger"), cfg)
    _path(t, t.section(opts.pop("path", None), "path"), cfg["train"])
    t.unknown(opts, "")
    if t.errors:
        raise ConfigError(f"{source}: cannot translate these BasicSR options:\n  " +
                          "\n  ".join(t.errors))
    if t.paths:
        t.notes.append("paths used as written (relative to the current folder, edit them to your "
                       "data): " + ", ".join(f"{k}={v}" for k, v in t.paths))
    return cfg, t.notes


def _template(t, tmpl, path):
    """BasicSR's `str.format` template of the LR stem ('{}', '{}x2') in srgrad's '{name}' form."""
    out, fields = [], 0
    try:
        for literal, field, spec, conversion in string.Formatter().parse(str(tmpl)):
            out.append(literal.replace("{", "{{").replace("}", "}}"))
            if field is not None:
                fields += 1
                if field not in ("", "0") or spec or conversion or fields > 1:
                    raise ValueError(field)
                out.append("{name}")
    except ValueError:
        t.refuse(path, f"{tmpl!r}: BasicSR formats it with one value, the HR file's stem: "
                       f"expected one '{{}}'")
    return "".join(out)


def _dataset(t, opts, prefix, train):
    """(srgrad dataset block or None, batch_size_per_gpu or None)."""
    t.common(opts, "dataset", prefix)
    batch = opts.pop("batch_size_per_gpu", None)
    if batch is not None and not train:
        t.drop(f"{prefix}batch_size_per_gpu", "validation runs image by image")
    kind = opts.pop("type", None)
    if kind != "PairedImageDataset":
        t.refuse(f"{prefix}type", f"{kind!r}: srgrad has PairedImageDataset (HR + LR folders) and "
                                  f"HRImageDataset (LR made by imresize), nothing else BasicSR has")
        return None, batch
    out = {"type": "PairedImageDataset"}
    for key, target in (("dataroot_gt", "gt_root"), ("dataroot_lq", "lq_root")):
        if key in opts:
            out[target] = opts.pop(key)
            t.paths.append((f"{prefix}{target}", out[target]))
    out["filename_tmpl"] = _template(t, opts.pop("filename_tmpl", "{}"), f"{prefix}filename_tmpl")
    backend = t.section(opts.pop("io_backend", None), f"{prefix}io_backend")
    if backend.get("type", "disk") == "disk":
        t.drop(f"{prefix}io_backend", "srgrad reads image files from disk")
    else:
        t.refuse(f"{prefix}io_backend", f"type {backend.get('type')!r}: srgrad reads image "
                                        f"folders, not LMDB")
    for key in ("mean", "std"):
        if opts.pop(key, None) is not None:
            t.refuse(f"{prefix}{key}", "srgrad feeds images in [0, 1]; models normalise inside "
                                       "(EDSR's rgb_mean / img_range)")
    if "color" in opts:  # BasicSR converts to Y for 'y' and reads RGB otherwise
        out["color"] = "y" if opts.pop("color") == "y" else "rgb"
    for key, target in (("gt_size", "gt_size"), ("use_hflip", "use_flip"), ("use_flip", "use_flip"),
                        ("use_rot", "use_rot")):
        if key in opts and train:
            out[target] = opts.pop(key)
        elif key in opts:
            t.drop(f"{prefix}{key}", "validation uses whole images, unaugmented")
            del opts[key]
    t.unknown(opts, prefix)
    return out, batch


def _datasets(t, opts, train_cfg):
    out = {}
    if "train" in opts:
        train = t.section(opts.pop("train"), "datasets.train")
        out["train"], batch = _dataset(t, train, "datasets.train.", True)
        if batch is not None:
            train_cfg["batch_size"] = batch
    vals = [k for k in opts if str(k).startswith("val")]
    if vals:
        first = "val" if "val" in vals else vals[0]
        out["val"] = _dataset(t, t.section(opts.pop(first), f"datasets.{first}"),
                              f"datasets.{first}.", False)[0]
        for other in vals:
            if other != first:
                t.drop(f"datasets.{other}", "srgrad validates on one set during training; "
                                            "evaluate the others with srgrad-eval")
                del opts[other]
    t.unknown(opts, "datasets.")
    return out


def _train(t, opts):
    t.common(opts, "train", "train.")
    out = {}
    if "total_iter" in opts:
        out["total_iters"] = t.integer(opts.pop("total_iter"), "train.total_iter")
    optim = t.section(opts.pop("optim_g", None), "train.optim_g")
    if optim:
        out["optimizer"] = optim  # Adam/AdamW/SGD keep their torch keywords
    scheduler = _scheduler(t, t.section(opts.pop("scheduler", None), "train.scheduler"))
    warmup = opts.pop("warmup_iter", None)
    warmup = -1 if warmup is None else t.integer(warmup, "train.warmup_iter")
    if isinstance(warmup, int) and warmup > 0:
        scheduler = scheduler or {"type": "LinearWarmupLR"}
        scheduler["warmup_iters"] = warmup
        t.notes.append("train.warmup_iter -> train.scheduler.warmup_iters: srgrad scales the "
                       "schedule during warm-up, BasicSR replaces it (the same while it is flat)")
    if scheduler:
        out["scheduler"] = scheduler
        t.notes.append("train.scheduler: BasicSR moves its scheduler before each iteration, "
                       "srgrad (as torch) after it, so each lr change comes one iteration later")
    loss = opts.pop("pixel_opt", None)
    if loss is not None:
        out["loss"] = _loss(t, t.section(loss, "train.pixel_opt"))
    t.unknown(opts, "train.")
    return out


def _scheduler(t, opts):
    if not opts:
        return None
    kind = opts.pop("type", None)
    if kind in ("MultiStepLR", "MultiStepRestartLR"):
        restarts, weights = list(opts.pop("restarts", [0])), list(opts.pop("restart_weights", [1]))
        if restarts != [0] or weights != [1]:
            t.refuse("train.scheduler.restarts", f"restarts {restarts}: srgrad's MultiStepLR "
                                                 f"does not restart")
        out = {"type": "MultiStepLR"}
        keys = ("milestones", "gamma")
    elif kind == "CosineAnnealingRestartLR":
        out, keys = {"type": kind}, ("periods", "restart_weights", "eta_min")
    else:
        t.refuse("train.scheduler.type", f"{kind!r}: srgrad has BasicSR's MultiStepLR and "
                                         f"CosineAnnealingRestartLR")
        return None
    out.update((k, opts.pop(k)) for k in keys if k in opts)
    t.unknown(opts, "train.scheduler.")
    return out


def _loss(t, opts):
    kind = opts.pop("type", None)
    if kind not in _LOSSES:
        t.refuse("train.pixel_opt.type", f"{kind!r}: srgrad's pixel losses are "
                                         f"{', '.join(_LOSSES)}")
        return None
    out = {"type": kind}
    out.update((k, opts.pop(k)) for k in ("loss_weight", "reduction") if k in opts)
    if kind == "CharbonnierLoss":
        eps = opts.pop("eps", 1e-12)  # BasicSR's default
        out["eps"] = math.sqrt(eps) if isinstance(eps, numbers.Real) and eps > 0 else eps
        t.notes.append(f"train.pixel_opt.eps: {eps} -> train.loss.eps {out['eps']}: BasicSR "
                       f"computes sqrt(d^2 + eps), srgrad sqrt(d^2 + eps^2); the loss is the same")
    t.unknown(opts, "train.pixel_opt.")
    return out


def _val(t, opts):
    t.common(opts, "val", "val.")
    out = {}
    if "val_freq" in opts:
        out["every"] = t.integer(opts.pop("val_freq"), "val.val_freq")
    if "save_img" in opts:
        out["save_images"] = bool(opts.pop("save_img"))
    metrics = t.section(opts.pop("metrics", None), "val.metrics")
    names, borders, ys = [], set(), set()
    for label, spec in metrics.items():
        spec, path = t.section(spec, f"val.metrics.{label}"), f"val.metrics.{label}"
        kind = spec.pop("type", None)
        if kind not in _METRICS:
            t.refuse(f"{path}.type", f"{kind!r}: srgrad validates with calculate_psnr and "
                                     f"calculate_ssim")
            continue
        names.append(_METRICS[kind])
        borders.add(spec.pop("crop_border", None))
        ys.add(bool(spec.pop("test_y_channel", False)))  # BasicSR's default: RGB
        if "better" in spec:
            t.drop(f"{path}.better", "PSNR and SSIM are higher-is-better")
            del spec["better"]
        t.unknown(spec, f"{path}.")
    if len(borders) > 1 or len(ys) > 1:
        t.refuse("val.metrics", "srgrad uses one crop_border and one test_y_channel for all "
                                "metrics; these differ")
    out["metrics"] = names
    out["crop_border"] = next(iter(borders), None)
    out["y_channel"] = next(iter(ys), False)  # always written: srgrad's default is Y
    t.unknown(opts, "val.")
    return out


def _logger(t, opts, cfg):
    t.common(opts, "logger", "logger.")
    if "print_freq" in opts:
        cfg["train"]["log_every"] = t.integer(opts.pop("print_freq"), "logger.print_freq")
    if "save_checkpoint_freq" in opts:
        cfg["checkpoint"] = {"every": t.integer(opts.pop("save_checkpoint_freq"),
                                                "logger.save_checkpoint_freq")}
    t.unknown(opts, "logger.")


def _path(t, opts, train_cfg):
    t.common(opts, "path", "path.")
    given = [k for k in ("pretrain_network_g", "pretrain_model_g", "param_key_g", "strict_load_g",
                         "strict_load") if k in opts]
    values = {k: opts.pop(k) for k in given}
    weights = values.get("pretrain_network_g", values.get("pretrain_model_g"))
    if weights is None:
        for name in given:
            t.drop(f"path.{name}", "no pretrained weights: training starts from scratch")
    else:
        # BasicSR loads "params" unless told otherwise (falling back to it when the key is missing)
        strict = values.get("strict_load_g", values.get("strict_load", True))
        train_cfg["pretrained"] = {"path": weights, "key": values.get("param_key_g") or "params",
                                   "strict": bool(strict)}
        t.paths.append(("train.pretrained.path", weights))
    t.unknown(opts, "path.")
