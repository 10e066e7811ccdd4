"""Stand-ins for traiNNer-redux's option templates (the-database/traiNNer-redux,
options/_templates/train/<ARCH>/<ARCH>_{fidelity,OTF_fidelity,gan,OTF_gan}.yml and
options/_templates/test/<ARCH>/<ARCH>.yml), written here from their keys: the same keys, nesting and
list entries as the templates of the 13 architectures srgrad has, with values and comments of our
own (the templates are not copied into this repository). Across architectures the templates differ
only in network_g and in values, so one builder per kind plus each architecture's network_g block
stands for all 52 (and the 13 test templates)."""
from __future__ import annotations

import yaml

# the first template of each architecture folder: its network_g keys (values ours)
ARCHS = {
    "DAT": {"type": "dat", "use_chk": False},
    "ESRGAN": {"type": "esrgan", "use_pixel_unshuffle": True},
    "HAT": {"type": "hat_s", "use_checkpoint": False},
    "OmniSR": {"type": "omnisr"},
    "PLKSR": {"type": "plksr"},
    "RCAN": {"type": "rcan"},
    "RealCUGAN": {"type": "realcugan", "pro": True, "fast": False},
    "RealPLKSR": {"type": "realplksr", "upsampler": "pixelshuffle", "layer_norm": True},
    "SAFMN": {"type": "safmn"},
    "SPAN": {"type": "span", "norm": False},
    "Compact": {"type": "compact"},
    "Swin2SR": {"type": "swin2sr_s"},
    "SwinIR": {"type": "swinir_s"},
}
# the other presets of those folders, and of architectures added since (translated, not trained)
OTHER_PRESETS = ("dat_2", "dat_s", "dat_light", "esrgan_lite", "hat_m", "hat_l", "plksr_tiny",
                 "rcan_unshuffle", "realplksr_tiny", "safmn_l", "span_s", "ultracompact",
                 "superultracompact", "swin2sr_m", "swin2sr_l", "swinir_m", "swinir_l",
                 "rgt", "rgt_s", "craft", "atd", "atd_light")
# the templates that ask for bf16 autocast (amp_bf16: true)
BF16 = ("DAT", "HAT", "RCAN", "Swin2SR", "SwinIR")
KINDS = ("fidelity", "OTF_fidelity", "gan", "OTF_gan")


def _otf_top() -> dict:
    """The top-level on-the-fly degradation keys (values ours)."""
    out = {"high_order_degradation": True, "high_order_degradations_debug": False,
           "high_order_degradations_debug_limit": 10, "lq_usm": False,
           "lq_usm_radius_range": [3, 15], "thicklines_prob": 0.0, "blur_prob": 0.0}
    modes = ["bilinear", "bicubic", "nearest-exact", "lanczos"]
    for n, (resize, span) in (("", ([0.3, 0.5, 0.2], [0.5, 1.4])), ("2", ([0.2, 0.5, 0.3],
                                                                           [0.7, 1.1]))):
        if n:
            out["blur_prob2"] = 0.0
        out.update({f"resize_prob{n}": resize, f"resize_mode_list{n}": modes,
                    f"resize_mode_prob{n}": [0.4, 0.3, 0.2, 0.1], f"resize_range{n}": span,
                    f"gaussian_noise_prob{n}": 0.0, f"noise_range{n}": [0, 0],
                    f"poisson_scale_range{n}": [0, 0], f"gray_noise_prob{n}": 0.0,
                    f"jpeg_prob{n}": 1.0, f"jpeg_range{n}": [80, 95]})
    out.update({"resize_mode_list3": modes, "resize_mode_prob3": [0.1, 0.2, 0.3, 0.4],
                "queue_size": 32})
    return out


def _kernels() -> dict:
    """The OTF training set's kernel keys (values ours)."""
    out = {}
    for n, sigma in (("", [0.2, 1.5]), ("2", [0.2, 0.8])):
        out.update({f"blur_kernel_size{n}": 9, f"kernel_list{n}": ["iso", "aniso"],
                    f"kernel_prob{n}": [0.6, 0.4], f"kernel_range{n}": [7, 9],
                    f"sinc_prob{n}": 0.0, f"blur_sigma{n}": sigma, f"betag_range{n}": [0.5, 3],
                    f"betap_range{n}": [1, 1.5]})
    out.update({"final_sinc_prob": 0.0, "final_kernel_range": [7, 9]})
    return out


def _losses(gan: bool) -> list:
    if not gan:
        return [{"type": "charbonnierloss", "loss_weight": 1.0}]
    return [{"type": "mssimloss", "loss_weight": 0.4},
            {"type": "perceptualloss", "criterion": "charbonnier", "loss_weight": 0.02},
            {"type": "hsluvloss", "criterion": "charbonnier", "loss_weight": 0.5},
            {"type": "ganloss", "gan_type": "vanilla", "loss_weight": 0.05},
            *({"type": t, "loss_weight": 0} for t in ("distsloss", "ldlloss", "ffloss",
                                                     "cosimloss", "fliploss", "sobeledgeloss"))]


def train_template(arch: str, kind: str, hr: str, lr: str, val_hr: str, val_lr: str,
                   lq_size: int = 4) -> dict:
    """The parsed stand-in of `<arch>_<kind>.yml` with data folders hr/lr (training) and
    val_hr/val_lr (validation)."""
    otf, gan = kind.startswith("OTF"), kind.endswith("gan")
    out = {"name": f"x4_{arch}_{kind}", "scale": 4, "use_amp": True, "amp_bf16": arch in BF16,
           "use_channels_last": False, "fast_matmul": False, "use_compile": False,
           "compile_mode": "default", "num_gpu": "auto"}
    if otf:
        out.update(_otf_top())
    train = {"name": "ours", "type": "realesrgandataset" if otf else "pairedimagedataset",
             "dataroot_gt": [hr]}
    if otf:
        train.update(_kernels())
    else:
        train["dataroot_lq"] = [lr]
    train.update({"lq_size": lq_size, "use_hflip": False, "use_rot": True, "num_worker_per_gpu": 2,
                  "batch_size_per_gpu": 2, "accum_iter": 1})
    out["datasets"] = {"train": train, "val": {"name": "ours", "type": "pairedimagedataset",
                                               "dataroot_gt": [val_hr], "dataroot_lq": [val_lr]}}
    out["network_g"] = dict(ARCHS[arch])
    if gan:
        out["network_d"] = {"type": "dunet"}
    out["path"] = {**({"pretrain_network_g": "pretrained/ours.pth"} if gan else {}),
                   "param_key_g": None, "strict_load_g": True, "resume_state": None}
    t = {"ema_decay": 0.99, **({} if gan else {"ema_power": 0.5}), "grad_clip": False,
         "grad_clip_max_norm": 50,
         "optim_g": {"type": "AdamW", "lr": 3e-4, "weight_decay": 0, "betas": [0.9, 0.99]}}
    if gan:
        t["optim_d"] = {"type": "AdamW", "lr": 2e-4, "weight_decay": 0, "betas": [0.9, 0.99]}
    t.update({"scheduler": {"type": "MultiStepLR", "milestones": [100, 200], "gamma": 0.5},
              "total_iter": 300, "warmup_iter": -1, "losses": _losses(gan)})
    if gan:
        t.update({"use_moa": False, "moa_augs": ["none", "mixup"], "moa_probs": [0.5, 0.5],
                  "moa_debug": False, "moa_debug_limit": 10})
    out["train"] = t
    metrics = ({"topiq": {"type": "calculate_topiq"}} if gan else
               {"psnr": {"type": "calculate_psnr", "crop_border": 2, "test_y_channel": False},
                "ssim": {"type": "calculate_ssim", "crop_border": 2, "test_y_channel": False}})
    out["val"] = {"val_enabled": False, "val_freq": 50, "save_img": False, "tile_size": 0,
                  "tile_overlap": 4, "metrics_enabled": True, "metrics": metrics}
    out["logger"] = {"print_freq": 10, "save_checkpoint_freq": 50,
                     "save_checkpoint_format": "safetensors", "use_tb_logger": False}
    return out


def eval_template(arch: str, lr: str, weights: str) -> dict:
    """The parsed stand-in of traiNNer-redux's test template `<arch>.yml`."""
    return {"name": f"x4_{arch}", "scale": 4, "use_amp": True, "amp_bf16": arch in BF16,
            "num_gpu": "auto", "use_channels_last": False,
            "datasets": {"val": {"name": "ours", "type": "singleimagedataset",
                                 "dataroot_lq": [lr], "io_backend": {"type": "disk"}}},
            "network_g": dict(ARCHS[arch]),
            "path": {"pretrain_network_g": weights},
            "val": {"val_enabled": True, "save_img": True, "tile_size": 0, "tile_overlap": 4,
                    "suffix": None, "metrics_enabled": False,
                    "metrics": {"psnr": {"type": "calculate_psnr", "crop_border": 2,
                                         "test_y_channel": True},
                                "ssim": {"type": "calculate_ssim", "crop_border": 2,
                                         "test_y_channel": True},
                                "topiq": {"type": "calculate_topiq"},
                                "lpips": {"type": "calculate_lpips", "better": "lower"},
                                "dists": {"type": "calculate_dists", "better": "lower"}}}}


def dump(options: dict) -> str:
    """YAML text as a template is written (key order kept)."""
    return "# our stand-in of a traiNNer-redux template (keys as its, values ours)\n" + \
        yaml.safe_dump(options, sort_keys=False)
