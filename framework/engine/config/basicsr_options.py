"""BasicSR / Real-ESRGAN option files (`options/train/*/*.yml`) -> srgrad configs (test files,
`options/test/`: basicsr_test_options.py). `is_basicsr_options` tells such a file from an srgrad
config: srgrad-train, srgrad-eval and the other commands that read a config translate it on the fly.

`translate_options(options, source)` maps a parsed option dict to an srgrad config dict (to validate
with framework.engine.config.schema.validate) plus notes. Every key is translated, or dropped with one note
line saying why (it has no meaning here: GPUs, loaders, loggers; or BasicSR's model_type ignores
it), or refused: keys srgrad cannot honour (LDL's loss, LMDB, datasets, losses and schedulers it
lacks, restarts) are collected and raised together in one ConfigError, each with its dotted key.

model_type decides what is read, as in BasicSR: SRModel / SwinIRModel train one network with
pixel_opt and/or perceptual_opt; SRGANModel / ESRGANModel add network_d -> model_d, optim_d ->
train.optimizer_d, gan_opt (-> train.losses with the other terms), net_d_iters, net_d_init_iters,
path.pretrain_network_d -> train.pretrained_d; RealESRNetModel / RealESRGANModel (Real-ESRGAN)
train on RealESRGANDataset: the kernel keys of Real-ESRGAN's datasets.train block and the
resize/noise/JPEG keys of its top level (its model degrades on the GPU) all become keywords of
srgrad's datasets.train, the top-level gt_size is the crop, and gt_usm / l1_gt_usm / percep_gt_usm /
gan_gt_usm become `datasets.train.gt_usm: true` plus the list train.gt_usm. Keys a model_type does
not read (network_d under SRModel, degradation keys outside Real-ESRGAN) are dropped with a note.

Semantics carried over, not only names: BasicSR's default filename template '{}' (LR named as HR)
becomes an explicit '{name}' (srgrad's default is '{name}x{scale}'); metrics default to RGB in
BasicSR and to Y in srgrad, so y_channel is always written; BasicSR's Charbonnier eps sits inside
the square root, srgrad's is squared, so the value is converted; BasicSR's one scheduler block
drives every optimizer, so a GAN run gets it as scheduler and scheduler_d. Differences that remain
are noted (ESRGANModel's relativistic GAN, where the EMA copy starts, the VGG19 weights file).
BASICSR_SPELLINGS maps BasicSR key names to srgrad's dotted keys, for error messages about configs
written the BasicSR way.
"""
from __future__ import annotations

import copy
import math
import numbers
import string

from ...io.config import ConfigError

__all__ = ["translate_basicsr", "BASICSR_SPELLINGS", "is_basicsr_options", "is_test_options",
           "PathsNote",
           "Translation", "dataset_block", "val_section"]

# BasicSR key (where srgrad spells it differently) -> srgrad's dotted key
BASICSR_SPELLINGS: dict[str, str] = {
    "network_g": "model", "upscale": "model.scale", "upscaling_factor": "model.scale",
    "manual_seed": "seed",
    "total_iter": "train.total_iters", "warmup_iter": "train.scheduler.warmup_iters",
    "optim_g": "train.optimizer", "pixel_opt": "train.loss",
    "batch_size_per_gpu": "train.batch_size", "dataroot_gt": "datasets.*.gt_root",
    "dataroot_lq": "datasets.*.lq_root", "use_hflip": "datasets.*.use_flip",
    "val_freq": "val.every", "save_img": "val.save_images", "test_y_channel": "val.y_channel",
    "crop_border": "val.crop_border", "print_freq": "train.log_every",
    "save_checkpoint_freq": "checkpoint.every", "pretrain_network_g": "train.pretrained.path",
    "pretrain_model_g": "train.pretrained.path", "param_key_g": "train.pretrained.key",
    "strict_load_g": "train.pretrained.strict", "strict_load": "train.pretrained.strict",
    "network_d": "model_d", "optim_d": "train.optimizer_d", "gan_opt": "train.losses.gan",
    "perceptual_opt": "train.losses.perceptual", "pretrain_network_d": "train.pretrained_d.path",
    "param_key_d": "train.pretrained_d.key", "strict_load_d": "train.pretrained_d.strict",
    "l1_gt_usm": "train.gt_usm", "percep_gt_usm": "train.gt_usm", "gan_gt_usm": "train.gt_usm",
    "gt_size": "datasets.train.gt_size",
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
    "val": {"pbar": "srgrad-train has its own progress bar", "suffix": "file names are fixed"},
    "logger": {"wandb": "srgrad writes metrics.csv (and TensorBoard files with train.tensorboard)"},
}
_REFUSE = {"train": {"ldl_opt": "LDL's artifact loss, which srgrad does not have"}}

# model_type -> (trains a discriminator, degrades HR images on the fly: Real-ESRGAN)
_MODEL_TYPES = {"SRModel": (False, False), "SwinIRModel": (False, False),
                "SRGANModel": (True, False), "ESRGANModel": (True, False),
                "RealESRNetModel": (False, True), "RealESRGANModel": (True, True)}
_GAN_READERS = "SRGANModel, ESRGANModel and RealESRGANModel"
_REAL_READERS = "RealESRNetModel and RealESRGANModel"
# Real-ESRGAN's degradation keys: its dataset draws the kernels (keys in datasets.train), its model
# applies the rest on the GPU (keys at the top level); srgrad's RealESRGANDataset takes them all
_DATASET_DEGRADATION = tuple(f"{key}{order}" for order in ("", "2") for key in (
    "blur_kernel_size", "kernel_list", "kernel_prob", "blur_sigma", "betag_range", "betap_range",
    "sinc_prob")) + ("final_sinc_prob",)
_MODEL_DEGRADATION = ("resize_prob", "resize_range", "gaussian_noise_prob", "noise_range",
                      "poisson_scale_range", "gray_noise_prob", "jpeg_range", "second_blur_prob",
                      "resize_prob2", "resize_range2", "gaussian_noise_prob2", "noise_range2",
                      "poisson_scale_range2", "gray_noise_prob2", "jpeg_range2")
_USM_FLAGS = (("l1_gt_usm", "pixel"), ("percep_gt_usm", "perceptual"), ("gan_gt_usm", "gan"))
# Real-ESRGAN's top-level keys, read by its two models only
_REAL_TOP = _MODEL_DEGRADATION + ("gt_size", "queue_size", "gt_usm", "high_order_degradation") + \
    tuple(flag for flag, _ in _USM_FLAGS)
_LOSSES = ("L1Loss", "MSELoss", "CharbonnierLoss")
# BasicSR's PerceptualLoss and GANLoss keywords (srgrad's take the same)
_PERCEPTUAL = ("layer_weights", "vgg_type", "use_input_norm", "range_norm", "perceptual_weight",
               "style_weight", "criterion")
_GAN = ("gan_type", "real_label_val", "fake_label_val", "loss_weight")
_METRICS = {"calculate_psnr": "psnr", "calculate_ssim": "ssim", "calculate_niqe": "niqe",
            "calculate_lpips": "lpips", "calculate_dists": "dists"}
_ONE_CHANNEL_KIND = {"niqe", "lpips", "dists"}  # measured on Y (NIQE) or RGB (the others) only
_VGG_NOTE = ("srgrad's PerceptualLoss reads torchvision's VGG19 weights (vgg19-dcbb9e9d.pth) from "
             "a file, where BasicSR downloads them: set train.losses.perceptual.weights or the "
             "SRGRAD_VGG19_WEIGHTS environment variable to its path (srgrad-train checks it when "
             "it starts)")


class PathsNote(str):
    """The note listing the paths a translation used as written; `paths`: [(srgrad key, value)].
    `overridden(overrides)` says it again for the `--set KEY=VALUE` assignments that replace some
    of them (a path set on the command line is not one "used as written")."""

    def __new__(cls, paths):
        listed = ", ".join(f"{k}={v}" for k, v in paths)
        note = super().__new__(cls, "paths used as written (relative to the current folder, edit "
                                    "them to your data): " + listed)
        note.paths = list(paths)
        return note

    def overridden(self, overrides) -> str | None:
        """The note with the keys `overrides` sets left out (and named as --set's), or None when
        --set gives every path."""
        given = {a.partition("=")[0].strip(): a.partition("=")[2].strip() for a in overrides}
        kept = [(k, v) for k, v in self.paths if k not in given]
        if len(kept) == len(self.paths):
            return str(self)
        if not kept:
            return None
        return (f"{PathsNote(kept)} (--set gives "
                f"{', '.join(k for k, _ in self.paths if k in given)})")


class Translation:
    """One translation's state: the source's name, its notes, errors (refused keys) and the
    paths it used as written; helpers that drop, refuse and take keys (shared with
    basicsr_test_options.py)."""

    def __init__(self, source):
        self.source, self.notes, self.errors, self.paths = source, [], [], []
        self.model_type, self.who = "SRModel", "BasicSR"  # who: whose file, in the notes

    @classmethod
    def begin(cls, options, source):
        """(a Translation, a copy of `options` with the keys every file may hold dropped);
        ConfigError when `options` is not a mapping."""
        if not isinstance(options, dict):
            raise ConfigError(f"{source}: BasicSR options are a mapping, got "
                              f"{type(options).__name__}")
        t = cls(source)
        opts = copy.deepcopy(options)
        t.common(opts, "", "")
        return t, opts

    def drop(self, path, why):
        self.notes.append(f"{path}: dropped, {why}")

    def refuse(self, path, why):
        self.errors.append(f"{path}: {why}")

    def ignored(self, path, readers):
        """A key BasicSR reads only under other model types."""
        self.drop(path, f"{self.model_type} does not read it (only {readers} do): BasicSR "
                        f"ignores it")

    def section(self, opts, path):
        """The mapping at `path` (a copy), or {} after an error when it is not a mapping."""
        if isinstance(opts, dict):
            return dict(opts)
        if opts is not None:
            self.refuse(path, f"expected a mapping, got {type(opts).__name__}")
        return {}

    def take(self, opts, key, path):
        """opts.pop(key), noting an explicit `key: ~` (nothing asked for)."""
        if key in opts and opts[key] is None:
            self.drop(path, "empty")
        return opts.pop(key, None)

    def common(self, opts, kind, prefix):
        """Drop and refuse `opts`' keys listed for `kind`; the rest is left for the caller."""
        for key in list(opts):
            path = f"{prefix}{key}"
            if key in _DROP.get(kind, {}):
                self.drop(path, _DROP[kind][key])
                del opts[key]
            elif key in _REFUSE.get(kind, {}):
                if opts[key] is None:  # `ldl_opt: ~`: nothing asked for
                    self.drop(path, "empty")
                else:
                    self.refuse(path, _REFUSE[kind][key])
                del opts[key]

    def unknown(self, opts, prefix):
        for key in opts:
            self.refuse(f"{prefix}{key}", f"not a {self.who} option srgrad knows how to translate")

    def finish(self, opts) -> list:
        """`opts`' keys left untranslated refused; ConfigError listing every refused key; else
        the notes (with the paths used as written)."""
        self.unknown(opts, "")
        if self.errors:
            raise ConfigError(f"{self.source}: cannot translate these {self.who} options:\n  " +
                              "\n  ".join(self.errors))
        if self.paths:
            self.notes.append(PathsNote(self.paths))
        return self.notes

    def integer(self, value, path):
        """BasicSR writes counts as `!!float 5e3`: an integral number -> int."""
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and \
                math.isfinite(value) and value == int(value):
            return int(value)
        self.refuse(path, f"expected a whole number, got {value!r}")
        return value


# top-level keys of every BasicSR option file that an srgrad config never has, and srgrad's own
# keys, which no BasicSR file has (a config holding both is an srgrad config with a BasicSR
# spelling: the schema's errors point at srgrad's key)
_MARKERS = ("network_g", "model_type")
_SRGRAD_TOP = ("model", "model_d", "seed", "run_root", "checkpoint", "imports", "dtype", "recipe")
_SRGRAD_TRAIN = ("total_iters", "optimizer", "batch_size", "loss", "losses")


def is_basicsr_options(data) -> bool:
    """Whether parsed YAML is a BasicSR / Real-ESRGAN / traiNNer-redux option file rather than an
    srgrad config: it has `network_g` or `model_type` and none of srgrad's own keys (model, seed,
    run_root, ..., train.total_iters, train.optimizer, ...)."""
    if not isinstance(data, dict) or not any(key in data for key in _MARKERS):
        return False
    train = data.get("train") if isinstance(data.get("train"), dict) else {}
    # a list of losses is traiNNer-redux's spelling (redux_options.is_redux_options) as well as
    # srgrad's: with network_g and no other srgrad key, the file is traiNNer-redux's
    srgrad_train = [k for k in _SRGRAD_TRAIN
                    if not (k == "losses" and isinstance(train.get(k), list))]
    return not any(key in data for key in _SRGRAD_TOP) and \
        not any(key in train for key in srgrad_train)


def is_test_options(data) -> bool:
    """Whether BasicSR options are a test file (options/test/*.yml, for basicsr/test.py): no
    train section and no datasets.train, only test (or val) sets."""
    datasets = data.get("datasets") if isinstance(data, dict) else None
    return is_basicsr_options(data) and "train" not in data and \
        not (isinstance(datasets, dict) and "train" in datasets)


def translate_basicsr(options: dict, source: str = "<options>"):
    """(srgrad config dict, notes) from a BasicSR option dict (as yaml.safe_load gives it). Which
    translator a file needs (BasicSR's or traiNNer-redux's) is engine/config/options.py's choice.

    Pure: `options` is not modified and nothing is read. The config still needs
    framework.engine.config.schema.validate (model, loss and optimizer types and their keywords are checked
    there). Raises ConfigError listing every key that cannot be translated, with its dotted path and
    why.
    """
    t, opts = Translation.begin(options, source)
    cfg: dict = {}
    for key, target in (("name", "name"), ("scale", "scale"), ("manual_seed", "seed")):
        if key in opts:
            cfg[target] = opts.pop(key)
    gan, real = _model_type(t, opts.pop("model_type", None))
    top = {key: opts.pop(key) for key in _REAL_TOP if key in opts}
    if real and "high_order_degradation" in top:
        if top.pop("high_order_degradation") is False:
            real = False  # paired fine-tuning: the model takes the dataset's LR as it is
            _paired_real(t, top, gan)
        else:
            t.drop("high_order_degradation", "true is what srgrad's RealESRGANDataset does")
    network = t.section(opts.pop("network_g", None), "network_g")
    for key in ("upscale", "upscaling_factor"):  # BasicSR's, SAFMN's
        if key in network:
            network["scale"] = network.pop(key)
    cfg["model"] = network
    network_d = t.take(opts, "network_d", "network_d")
    if gan:
        cfg["model_d"] = t.section(network_d, "network_d")
        if network_d is None:
            t.refuse("network_d", f"missing: {t.model_type} trains a discriminator (BasicSR "
                                  f"fails without it)")
    elif network_d is not None:
        t.ignored("network_d", _GAN_READERS)
    cfg["datasets"] = {}  # before train, for the key order of the written config
    cfg["train"] = _train(t, t.section(opts.pop("train", None), "train"), gan)
    cfg["datasets"] = _datasets(t, t.section(opts.pop("datasets", None), "datasets"), cfg["train"],
                                real)
    if real:
        _real(t, top, cfg)
    for key in top:
        t.ignored(key, _REAL_READERS)
    val = opts.pop("val", None)
    if val is not None:
        cfg["val"] = val_section(t, t.section(val, "val"))
    elif cfg["datasets"].get("val") is not None:
        t.drop("datasets.val", "the options have no val section, so BasicSR never validates")
        cfg["datasets"]["val"] = None
    _logger(t, t.section(opts.pop("logger", None), "logger"), cfg)
    _path(t, t.section(opts.pop("path", None), "path"), cfg["train"], gan)
    return cfg, t.finish(opts)


def _model_type(t, model_type):
    """(trains a discriminator, degrades on the fly) for BasicSR's model_type, with its notes."""
    if model_type is None:
        return False, False
    if model_type not in _MODEL_TYPES:
        t.refuse("model_type", f"{model_type!r}: srgrad translates BasicSR's "
                               f"{', '.join(_MODEL_TYPES)}")
        return False, False
    t.model_type = model_type
    gan, real = _MODEL_TYPES[model_type]
    t.drop("model_type", f"{model_type}: srgrad trains " +
           ("a generator against model_d" if gan else "one network") +
           (" on Real-ESRGAN's degradations (RealESRGANDataset)" if real else ""))
    if model_type == "ESRGANModel":
        t.notes.append("model_type: ESRGANModel trains a relativistic average GAN (each prediction "
                       "judged against the mean of the other side's); srgrad's schema has no "
                       "such option, so the run uses the standard GAN loss of SRGANModel and "
                       "RealESRGANModel")
    return gan, real


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


def dataset_block(t, opts, prefix, train, real):
    """(srgrad dataset block or None, batch_size_per_gpu or None). `real`: the training set of a
    Real-ESRGAN model, which must be a RealESRGANDataset."""
    t.common(opts, "dataset", prefix)
    batch = opts.pop("batch_size_per_gpu", None)
    if batch is not None and not train:
        t.drop(f"{prefix}batch_size_per_gpu", "validation runs image by image")
    kind = opts.pop("type", None)
    if kind == "RealESRGANDataset" and real:
        return _realesrgan_dataset(t, opts, prefix), batch
    if kind == "PairedImageDataset" and not real:
        return _paired_dataset(t, opts, prefix, train), batch
    if kind == "RealESRGANDataset":
        why = ("validation needs LR images: PairedImageDataset" if not train else
               f"it gives HR images only, which BasicSR degrades in RealESRNetModel / "
               f"RealESRGANModel, not in {t.model_type}")
    elif kind == "PairedImageDataset":
        why = (f"{t.model_type} degrades HR images on the fly: its training set is "
               f"RealESRGANDataset (BasicSR fails without the kernels it draws)")
    else:
        why = ("srgrad translates BasicSR's PairedImageDataset (HR + LR folders) and, for "
               "RealESRNetModel / RealESRGANModel, RealESRGANDataset (HR folder)")
    t.refuse(f"{prefix}type", f"{kind!r}: {why}")
    return None, batch


def _io_backend(t, opts, prefix):
    if "io_backend" not in opts:  # BasicSR's files always give it; traiNNer-redux's may not
        return
    backend = t.section(opts.pop("io_backend", None), f"{prefix}io_backend")
    if backend.get("type", "disk") == "disk":
        t.drop(f"{prefix}io_backend", "srgrad reads image files from disk")
    else:
        t.refuse(f"{prefix}io_backend", f"type {backend.get('type')!r}: srgrad reads image "
                                        f"folders, not LMDB")


def _augment(t, opts, prefix, out, train, keys):
    for key, target in keys:
        if key in opts and train:
            out[target] = opts.pop(key)
        elif key in opts:
            t.drop(f"{prefix}{key}", "validation uses whole images, unaugmented")
            del opts[key]


def _paired_dataset(t, opts, prefix, train):
    out = {"type": "PairedImageDataset"}
    for key, target in (("dataroot_gt", "gt_root"), ("dataroot_lq", "lq_root")):
        if key in opts:
            out[target] = opts.pop(key)
            t.paths.append((f"{prefix}{target}", out[target]))
    out["filename_tmpl"] = _template(t, opts.pop("filename_tmpl", "{}"), f"{prefix}filename_tmpl")
    _io_backend(t, opts, prefix)
    for key in ("mean", "std"):
        if opts.pop(key, None) is not None:
            t.refuse(f"{prefix}{key}", "srgrad feeds images in [0, 1]; models normalise inside "
                                       "(EDSR's rgb_mean / img_range)")
    if "color" in opts:  # BasicSR converts to Y for 'y' and reads RGB otherwise
        out["color"] = "y" if opts.pop("color") == "y" else "rgb"
    _augment(t, opts, prefix, out, train, (("gt_size", "gt_size"), ("use_hflip", "use_flip"),
                                           ("use_flip", "use_flip"), ("use_rot", "use_rot")))
    t.unknown(opts, prefix)
    return out


def _realesrgan_dataset(t, opts, prefix):
    """Real-ESRGAN's datasets.train block: HR root, kernel keys, augmentation; the model-side keys
    and the crop size come from the top level (`_real`)."""
    out = {"type": "RealESRGANDataset"}
    if "dataroot_gt" in opts:
        out["root"] = opts.pop("dataroot_gt")
        t.paths.append((f"{prefix}root", out["root"]))
    if "meta_info" in opts:
        t.drop(f"{prefix}meta_info", "srgrad reads every image directly inside root (not in "
                                     "subfolders: Real-ESRGAN's DF2K+OST list spans several, so "
                                     "gather the images it lists into one folder)")
        del opts["meta_info"]
    _io_backend(t, opts, prefix)
    for key in _DATASET_DEGRADATION:
        if key in opts:
            out[key] = opts.pop(key)
    for key in [k for k in opts if k in _MODEL_DEGRADATION]:
        t.drop(f"{prefix}{key}", "Real-ESRGAN's model reads it from the top level of the options "
                                 "and ignores this copy")
        del opts[key]
    if "gt_size" in opts:
        t.drop(f"{prefix}gt_size", "BasicSR's RealESRGANDataset does not read it (the model crops "
                                   "to the top-level gt_size)")
        del opts["gt_size"]
    for key in ("dataroot_lq", "filename_tmpl", "color"):
        if key in opts:
            t.drop(f"{prefix}{key}", "BasicSR's RealESRGANDataset reads HR images only, in RGB")
            del opts[key]
    _augment(t, opts, prefix, out, True, (("use_hflip", "use_flip"), ("use_flip", "use_flip"),
                                          ("use_rot", "use_rot")))
    t.unknown(opts, prefix)
    return out


def _datasets(t, opts, train_cfg, real):
    out = {}
    if "train" in opts:
        train = t.section(opts.pop("train"), "datasets.train")
        out["train"], batch = dataset_block(t, train, "datasets.train.", True, real)
        if batch is not None:
            train_cfg["batch_size"] = batch
    vals = [k for k in opts if str(k).startswith("val")]
    if vals:
        first = "val" if "val" in vals else vals[0]
        out["val"] = dataset_block(t, t.section(opts.pop(first), f"datasets.{first}"),
                              f"datasets.{first}.", False, False)[0]
        for other in vals:
            if other != first:
                t.drop(f"datasets.{other}", "srgrad validates on one set during training; "
                                            "evaluate the others with srgrad-eval")
                del opts[other]
    t.unknown(opts, "datasets.")
    return out


def _has_term(train_cfg, term):
    return (term == "pixel" and "loss" in train_cfg) or term in train_cfg.get("losses", {})


def _real(t, top, cfg):
    """Real-ESRGAN's top-level keys into datasets.train (a RealESRGANDataset) and train.gt_usm."""
    block = cfg["datasets"].get("train")
    block = block if isinstance(block, dict) else {}  # refused already: keep collecting errors
    for key in _MODEL_DEGRADATION:
        if key in top:
            block[key] = top.pop(key)
    if "gt_size" in top:
        block["gt_size"] = t.integer(top.pop("gt_size"), "gt_size")
    else:
        t.refuse("gt_size", f"missing: {t.model_type} crops its training pairs to the top-level "
                            f"gt_size (BasicSR fails without it)")
    if "queue_size" in top:
        t.drop("queue_size", "Real-ESRGAN's training-pair pool: srgrad draws each batch as a pure "
                             "function of (seed, iteration), with every degradation drawn per "
                             "sample, so no pool is needed")
        del top["queue_size"]
    terms = []
    if t.model_type == "RealESRNetModel":
        sharp = top.pop("gt_usm", None)
        if sharp is None:
            t.notes.append("gt_usm: missing (BasicSR needs it): taken as false")
        elif sharp is not True:  # BasicSR tests `is True`
            sharp = False
        terms = ["pixel", "perceptual"] if sharp else []
        for flag, _ in _USM_FLAGS:
            if flag in top:
                t.drop(flag, "RealESRNetModel reads gt_usm (the sharpened GT is every target)")
                del top[flag]
    else:  # RealESRGANModel degrades the sharpened GT always; the flags pick each term's target
        sharp = True
        if "gt_usm" in top:
            t.drop("gt_usm", "RealESRGANModel always degrades the sharpened GT; l1_gt_usm, "
                             "percep_gt_usm and gan_gt_usm pick each term's target")
            del top["gt_usm"]
        for flag, term in _USM_FLAGS:
            if flag not in top:
                t.notes.append(f"{flag}: missing (BasicSR needs it): the sharpened GT, as "
                               f"BasicSR's code uses unless the flag is false")
            if top.pop(flag, None) is not False:  # BasicSR tests `is False`
                terms.append(term)
    for flag, term in _USM_FLAGS:  # a target for a term that is not there
        if term in terms and not _has_term(cfg["train"], term):
            terms.remove(term)
            if t.model_type == "RealESRGANModel":
                t.drop(flag, f"there is no {term} loss")
    block["gt_usm"] = sharp
    if terms:
        cfg["train"]["gt_usm"] = terms


def _paired_real(t, top, gan):
    """high_order_degradation: false: Real-ESRGAN's model trains on the dataset's LR images; its
    sharpened targets (RealESRGANModel: unless a flag is false) would be the paired GT sharpened,
    which srgrad does not do."""
    for flag, _ in _USM_FLAGS if gan else ():
        if top.pop(flag, None) is not False:
            t.refuse(flag, "a sharpened target with paired data (high_order_degradation: false): "
                           "srgrad's sharpened GT comes from RealESRGANDataset only")
        else:
            t.drop(flag, "false: the target is the dataset's GT, as srgrad's is")
    for key in list(top):
        del top[key]
        t.drop(key, "unused with high_order_degradation: false (the dataset's LR images are used "
                    "as they are)")


def _train(t, opts, gan):
    t.common(opts, "train", "train.")
    out = {}
    if "total_iter" in opts:
        out["total_iters"] = t.integer(opts.pop("total_iter"), "train.total_iter")
    optim = t.section(opts.pop("optim_g", None), "train.optim_g")
    if optim:
        out["optimizer"] = optim  # Adam/AdamW/SGD keep their torch keywords
    scheduler = schedule(t, opts, out)
    _losses(t, opts, out, gan)
    if "ema_decay" in opts:
        decay = opts.pop("ema_decay")
        if isinstance(decay, numbers.Real) and not isinstance(decay, bool):
            out["ema_decay"] = float(decay)
        else:
            t.refuse("train.ema_decay", f"expected a number, got {decay!r}")
    if gan:
        optim_d = t.take(opts, "optim_d", "train.optim_d")
        if optim_d is None:
            t.refuse("train.optim_d", f"missing: {t.model_type} trains its discriminator with it "
                                      f"(BasicSR fails without it)")
        out["optimizer_d"] = t.section(optim_d, "train.optim_d")
        schedule_d(t, scheduler, out)
        for key in ("net_d_iters", "net_d_init_iters"):
            if key in opts:
                out[key] = t.integer(opts.pop(key), f"train.{key}")
    else:
        for key in ("optim_d", "net_d_iters", "net_d_init_iters"):
            if key in opts:
                if t.take(opts, key, f"train.{key}") is not None:
                    t.ignored(f"train.{key}", _GAN_READERS)
    t.unknown(opts, "train.")
    return out


def schedule(t, opts, out, note_off=False):
    """train.scheduler and train.warmup_iter (BasicSR's and traiNNer-redux's) -> out["scheduler"]
    (a warm-up alone: LinearWarmupLR); returns it (or None). `note_off`: note warmup_iter -1."""
    scheduler = _scheduler(t, t.section(opts.pop("scheduler", None), "train.scheduler"))
    given = opts.pop("warmup_iter", None)
    warmup = -1 if given is None else t.integer(given, "train.warmup_iter")
    if isinstance(warmup, int) and warmup > 0:
        scheduler = scheduler or {"type": "LinearWarmupLR"}
        scheduler["warmup_iters"] = warmup
        t.notes.append(f"train.warmup_iter -> train.scheduler.warmup_iters: srgrad scales the "
                       f"schedule during warm-up, {t.who} replaces it (the same while it is flat)")
    elif given is not None and note_off:
        t.drop("train.warmup_iter", f"{given}: no warm-up")
    if scheduler:
        out["scheduler"] = scheduler
        t.notes.append(f"train.scheduler: {t.who} moves its scheduler before each iteration, "
                       f"srgrad (as torch) after it, so each lr change comes one iteration later")
    return scheduler


def schedule_d(t, scheduler, out) -> None:
    """The discriminator's copy of the one scheduler block (BasicSR and traiNNer-redux give each
    optimizer its own)."""
    if scheduler:
        out["scheduler_d"] = copy.deepcopy(scheduler)
        t.notes.append(f"train.scheduler -> train.scheduler and train.scheduler_d: {t.who} "
                       f"gives each optimizer its own copy of the one scheduler block")


def _losses(t, opts, out, gan):
    """pixel_opt alone -> train.loss; with perceptual_opt or gan_opt, all under train.losses."""
    pixel = t.take(opts, "pixel_opt", "train.pixel_opt")
    perceptual = t.take(opts, "perceptual_opt", "train.perceptual_opt")
    gan_opt = t.take(opts, "gan_opt", "train.gan_opt")
    if gan_opt is not None and not gan:
        t.ignored("train.gan_opt", _GAN_READERS)
        gan_opt = None
    elif gan_opt is None and gan:
        t.refuse("train.gan_opt", f"missing: {t.model_type} trains with a GAN loss (BasicSR fails "
                                  f"without it)")
    several = perceptual is not None or gan_opt is not None
    losses = {}
    if pixel is not None:
        target = "train.losses.pixel" if several else "train.loss"
        losses["pixel"] = _pixel_loss(t, t.section(pixel, "train.pixel_opt"), target)
    if perceptual is not None:
        losses["perceptual"] = _typed(t, t.section(perceptual, "train.perceptual_opt"),
                                      "train.perceptual_opt", ("PerceptualLoss",), _PERCEPTUAL)
        t.notes.append(f"train.perceptual_opt -> train.losses.perceptual: {_VGG_NOTE}")
    if gan_opt is not None:
        losses["gan"] = _typed(t, t.section(gan_opt, "train.gan_opt"), "train.gan_opt",
                               ("GANLoss",), _GAN)
    if several:
        out["losses"] = losses
    elif pixel is not None:
        out["loss"] = losses["pixel"]


def _typed(t, opts, path, kinds, keys):
    """A `{type: ..., **keys}` block whose type is one of `kinds`, keywords passed as written."""
    kind = opts.pop("type", None)
    if kind not in kinds:
        t.refuse(f"{path}.type", f"{kind!r}: srgrad's are {', '.join(kinds)}")
        return None
    out = {"type": kind}
    out.update((k, opts.pop(k)) for k in keys if k in opts)
    t.unknown(opts, f"{path}.")
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


def _pixel_loss(t, opts, target):
    charbonnier = opts.get("type") == "CharbonnierLoss"
    eps = opts.pop("eps", 1e-12) if charbonnier else None  # BasicSR's default
    out = _typed(t, opts, "train.pixel_opt", _LOSSES, ("loss_weight", "reduction"))
    if charbonnier:
        out["eps"] = math.sqrt(eps) if isinstance(eps, numbers.Real) and eps > 0 else eps
        t.notes.append(f"train.pixel_opt.eps: {eps} -> {target}.eps {out['eps']}: BasicSR "
                       f"computes sqrt(d^2 + eps), srgrad sqrt(d^2 + eps^2); the loss is the same")
    return out


def val_section(t, opts):
    """BasicSR's val section (val_freq, save_img, metrics) -> srgrad's val section."""
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
        kind = spec.get("type")
        if kind not in _METRICS:  # TOPIQ, ...: validation goes on with the others
            t.drop(path, f"{kind!r} is not among srgrad's metrics (calculate_psnr, calculate_ssim, "
                         f"calculate_niqe, calculate_lpips and calculate_dists translate; others "
                         f"register in METRICS)")
            continue
        del spec["type"]
        names.append(_METRICS[kind])
        if _METRICS[kind] in _ONE_CHANNEL_KIND:  # its channels are its own: no test_y_channel
            if spec.get("crop_border") is not None:
                borders.add(spec.pop("crop_border"))
            spec.pop("crop_border", None)
        else:
            borders.add(spec.pop("crop_border", None))
            ys.add(bool(spec.pop("test_y_channel", False)))  # BasicSR's default: RGB
        if "better" in spec:
            t.drop(f"{path}.better", "srgrad knows each metric's direction (higher_is_better)")
            del spec["better"]
        t.unknown(spec, f"{path}.")
    if len(borders) > 1 or len(ys) > 1:
        t.refuse("val.metrics", "srgrad uses one crop_border and one test_y_channel for all "
                                "metrics; these differ")
    if metrics and not names:
        t.notes.append("val.metrics: none srgrad has, so validation measures srgrad's default "
                       "psnr and ssim")
        names = None
    if names is not None:
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
    if "use_tb_logger" in opts:
        tb = opts.pop("use_tb_logger")
        if not isinstance(tb, bool):
            t.refuse("logger.use_tb_logger", f"expected true or false, got {tb!r}")
        else:
            cfg["train"]["tensorboard"] = tb
    t.unknown(opts, "logger.")


def _path(t, opts, train_cfg, gan, ema_note=True):
    """Pretrained weights of the generator (g) and, in a GAN run, the discriminator (d);
    `ema_note`: say where BasicSR's EMA copy starts (traiNNer-redux's starts as srgrad's)."""
    t.common(opts, "path", "path.")
    for net, target in (("g", "pretrained"), ("d", "pretrained_d")):
        keys = (f"pretrain_network_{net}", f"param_key_{net}", f"strict_load_{net}")
        keys += ("pretrain_model_g", "strict_load") if net == "g" else ()
        values = {k: opts.pop(k) for k in keys if k in opts}
        weights = values.get(keys[0], values.get("pretrain_model_g"))
        if net == "d" and not gan:
            for name in values:
                t.ignored(f"path.{name}", _GAN_READERS)
        elif weights is None:
            for name in values:
                t.drop(f"path.{name}", "no pretrained weights: training starts from scratch")
        else:
            # BasicSR loads "params" unless told otherwise (falling back to it when the key is
            # missing)
            strict = values.get(keys[2], values.get("strict_load", True))
            train_cfg[target] = {"path": weights, "key": values.get(keys[1]) or "params",
                                 "strict": bool(strict)}
            t.paths.append((f"train.{target}.path", weights))
    pretrained = train_cfg.get("pretrained")
    if ema_note and train_cfg.get("ema_decay", 0) > 0 and pretrained and \
            pretrained["key"] != "params_ema":
        t.notes.append(f"train.ema_decay: BasicSR starts its EMA copy from the pretrained file's "
                       f"params_ema, srgrad from the weights it loads (train.pretrained.key: "
                       f"{pretrained['key']})")
    t.unknown(opts, "path.")
