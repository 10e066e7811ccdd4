"""traiNNer-redux's generator and discriminator names (`network_g: {type: span}`) -> srgrad's model
blocks, for engine/config/redux_options.py.

traiNNer-redux registers lowercase names, many of them presets: a function whose defaults size the
network (`span` is SPAN with feature_channels 52 and norm false, `hat_s` HAT with embed_dim 144,
`esrgan_lite` ESRGAN with 32 filters in 12 blocks). `PRESETS` holds each preset's defaults in
srgrad's keywords, read from traiNNer-redux's traiNNer/archs/*_arch.py; `RENAMED` maps its keyword
spellings (spandrel's or the original code's) to srgrad's; `DROPPED` lists the keywords that only
steer memory or speed, with why. Lookup is case-insensitive (`type: SPAN` works there too).
"""
from __future__ import annotations

__all__ = ["PRESETS", "RENAMED", "DROPPED", "DISCRIMINATORS", "network"]

_SIX, _NINE, _TWELVE = [6] * 6, [6] * 9, [6] * 12
_CHECKPOINTING = "gradient checkpointing, a GPU-memory setting (srgrad keeps every activation)"
_GRL = {"img_size": 64, "window_size": 8, "stripe_size": [8, None], "stripe_groups": [None, 4],
        "stripe_shift": True, "mlp_ratio": 2.0, "anchor_window_down_factor": 4}

# traiNNer-redux name -> (srgrad type, the preset's defaults in srgrad's keywords)
PRESETS: dict[str, tuple[str, dict]] = {
    "span": ("SPAN", {"feature_channels": 52, "num_blocks": 6, "norm": False}),
    "span_s": ("SPAN", {"feature_channels": 48, "num_blocks": 6, "norm": False}),
    "span_f32": ("SPAN", {"feature_channels": 32, "num_blocks": 6, "norm": False}),
    "span_f64": ("SPAN", {"feature_channels": 64, "num_blocks": 6, "norm": False}),
    "span_f96": ("SPAN", {"feature_channels": 96, "num_blocks": 6, "norm": False}),
    "compact": ("SRVGGNetCompact", {"num_feat": 64, "num_conv": 16, "act_type": "prelu"}),
    "ultracompact": ("SRVGGNetCompact", {"num_feat": 64, "num_conv": 8, "act_type": "prelu"}),
    "superultracompact": ("SRVGGNetCompact", {"num_feat": 24, "num_conv": 8, "act_type": "prelu"}),
    "esrgan": ("RRDBNet", {"num_feat": 64, "num_block": 23}),
    "esrgan_lite": ("RRDBNet", {"num_feat": 32, "num_block": 12}),
    "plksr": ("PLKSR", {"dim": 64, "n_blocks": 28, "ccm_type": "DCCM", "kernel_size": 17,
                        "split_ratio": 0.25, "lk_type": "PLK", "use_ea": True}),
    "plksr_tiny": ("PLKSR", {"dim": 64, "n_blocks": 12, "ccm_type": "DCCM", "kernel_size": 13,
                             "split_ratio": 0.25, "lk_type": "PLK", "use_ea": False}),
    "realplksr": ("RealPLKSR", {"dim": 64, "n_blocks": 28, "kernel_size": 17, "use_ea": True,
                                "upsampler": "pixelshuffle", "layer_norm": True}),
    "realplksr_tiny": ("RealPLKSR", {"dim": 64, "n_blocks": 12, "kernel_size": 13, "use_ea": False,
                                     "upsampler": "pixelshuffle", "layer_norm": True}),
    "realplksr_large": ("RealPLKSR", {"dim": 96, "n_blocks": 28, "kernel_size": 17, "use_ea": True,
                                      "upsampler": "pixelshuffle", "layer_norm": True}),
    "safmn": ("SAFMN", {"dim": 36, "n_blocks": 8, "ffn_scale": 2.0}),
    "safmn_l": ("SAFMN", {"dim": 128, "n_blocks": 16, "ffn_scale": 2.0}),
    "omnisr": ("OmniSR", {"num_feat": 64, "block_num": 1, "pe": True, "window_size": 8,
                          "res_num": 5, "bias": True}),
    "realcugan": ("RealCUGAN", {"pro": False, "fast": False}),
    # traiNNer-redux's RCAN normalises only with norm: true (the DIV2K mean, times rgb_range)
    "rcan": ("RCAN", {"num_group": 10, "num_block": 20, "num_feat": 64, "squeeze_factor": 16,
                      "res_scale": 1.0, "img_range": 1.0, "rgb_mean": [0.0, 0.0, 0.0]}),
    "rcan_unshuffle": ("RCAN", {"num_group": 10, "num_block": 20, "num_feat": 64,
                                "squeeze_factor": 16, "res_scale": 1.0, "img_range": 1.0,
                                "rgb_mean": [0.0, 0.0, 0.0], "unshuffle_mod": True}),
    "dat": ("DAT", {"img_size": 64, "split_size": [8, 32], "depth": _SIX, "embed_dim": 180,
                    "num_heads": _SIX, "expansion_factor": 4, "resi_connection": "1conv"}),
    "dat_s": ("DAT", {"img_size": 64, "split_size": [8, 16], "depth": _SIX, "embed_dim": 180,
                      "num_heads": _SIX, "expansion_factor": 2, "resi_connection": "1conv"}),
    "dat_2": ("DAT", {"img_size": 64, "split_size": [8, 32], "depth": _SIX, "embed_dim": 180,
                      "num_heads": _SIX, "expansion_factor": 2, "resi_connection": "1conv"}),
    "dat_light": ("DAT", {"img_size": 64, "split_size": [8, 32], "depth": [18], "embed_dim": 60,
                          "num_heads": [6], "expansion_factor": 2, "resi_connection": "3conv"}),
    "hat_s": ("HAT", {"embed_dim": 144, "depths": _SIX, "num_heads": _SIX, "window_size": 16,
                      "compress_ratio": 24, "squeeze_factor": 24, "mlp_ratio": 2.0,
                      "upsampler": "pixelshuffle", "resi_connection": "1conv", "num_feat": 64}),
    "hat_m": ("HAT", {"embed_dim": 180, "depths": _SIX, "num_heads": _SIX, "window_size": 16,
                      "compress_ratio": 3, "squeeze_factor": 30, "mlp_ratio": 2.0,
                      "upsampler": "pixelshuffle", "resi_connection": "1conv", "num_feat": 64}),
    "hat_l": ("HAT", {"embed_dim": 180, "depths": _TWELVE, "num_heads": _TWELVE,
                      "window_size": 16, "compress_ratio": 3, "squeeze_factor": 30,
                      "mlp_ratio": 2.0, "upsampler": "pixelshuffle", "resi_connection": "1conv",
                      "num_feat": 64}),
    "swinir_s": ("SwinIR", {"img_size": 64, "embed_dim": 60, "depths": [6] * 4,
                            "num_heads": [6] * 4, "window_size": 8, "mlp_ratio": 2.0,
                            "upsampler": "pixelshuffledirect", "resi_connection": "1conv"}),
    "swinir_m": ("SwinIR", {"img_size": 48, "embed_dim": 180, "depths": _SIX, "num_heads": _SIX,
                            "window_size": 8, "mlp_ratio": 2.0, "upsampler": "pixelshuffle",
                            "resi_connection": "1conv"}),
    "swinir_l": ("SwinIR", {"img_size": 64, "embed_dim": 240, "depths": _NINE,
                            "num_heads": [8] * 9, "window_size": 8, "mlp_ratio": 2.0,
                            "upsampler": "nearest+conv", "resi_connection": "3conv"}),
    "swin2sr_s": ("Swin2SR", {"img_size": 64, "embed_dim": 60, "depths": [6] * 4,
                              "num_heads": [6] * 4, "window_size": 8, "mlp_ratio": 2.0,
                              "upsampler": "pixelshuffledirect", "resi_connection": "1conv"}),
    "swin2sr_m": ("Swin2SR", {"img_size": 64, "embed_dim": 180, "depths": _SIX,
                              "num_heads": _SIX, "window_size": 8, "mlp_ratio": 2.0,
                              "upsampler": "pixelshuffle", "resi_connection": "1conv"}),
    "swin2sr_l": ("Swin2SR", {"img_size": 64, "embed_dim": 240, "depths": _NINE,
                              "num_heads": [8] * 9, "window_size": 8, "mlp_ratio": 2.0,
                              "upsampler": "nearest+conv", "resi_connection": "3conv"}),
    # GRL's presets share window 8, stripes (8, a quarter of the padded width), df 4
    "grl_b": ("GRL", {"embed_dim": 180, "depths": [4, 4, 8, 8, 8, 4, 4], "num_heads_window": [3] * 7,
                      "num_heads_stripe": [3] * 7, "upsampler": "pixelshuffle",
                      "local_connection": True, **_GRL}),
    "grl_s": ("GRL", {"embed_dim": 128, "depths": [4] * 4, "num_heads_window": [2] * 4,
                      "num_heads_stripe": [2] * 4, "upsampler": "pixelshuffle", **_GRL}),
    "grl_t": ("GRL", {"embed_dim": 64, "depths": [4] * 4, "num_heads_window": [2] * 4,
                      "num_heads_stripe": [2] * 4, "upsampler": "pixelshuffledirect", **_GRL}),
    "rgt": ("RGT", {"img_size": 64, "embed_dim": 180, "depth": [6] * 8, "num_heads": [6] * 8,
                    "mlp_ratio": 2.0, "split_size": [8, 32], "c_ratio": 0.5,
                    "resi_connection": "1conv"}),
    "rgt_s": ("RGT", {"img_size": 64, "embed_dim": 180, "depth": _SIX, "num_heads": _SIX,
                      "mlp_ratio": 2.0, "split_size": [8, 32], "c_ratio": 0.5,
                      "resi_connection": "1conv"}),
    "craft": ("CRAFT", {"window_size": 16, "embed_dim": 48, "depths": [2] * 4, "num_heads": [6] * 4,
                        "split_size_0": 4, "split_size_1": 16, "mlp_ratio": 2.0,
                        "resi_connection": "1conv"}),
    "atd": ("ATD", {"img_size": 96, "embed_dim": 210, "depths": _SIX, "num_heads": _SIX,
                    "window_size": 16, "category_size": 256, "num_tokens": 128,
                    "reducted_dim": 20, "convffn_kernel_size": 5, "img_range": 1.0,
                    "mlp_ratio": 2, "upsampler": "pixelshuffle", "resi_connection": "1conv"}),
    "atd_light": ("ATD", {"img_size": 64, "embed_dim": 48, "depths": [6] * 4,
                          "num_heads": [4] * 4, "window_size": 16, "category_size": 128,
                          "num_tokens": 64, "reducted_dim": 8, "convffn_kernel_size": 7,
                          "img_range": 1.0, "mlp_ratio": 1, "upsampler": "pixelshuffledirect",
                          "resi_connection": "1conv"}),
    # FDAT's presets (traiNNer/archs/fdat_arch.py): transpose+conv, window 8, aim ratio 8
    "fdat_tiny": ("FDAT", {"embed_dim": 96, "num_groups": 2, "depth_per_group": 2, "num_heads": 3,
                           "ffn_expansion_ratio": 1.5, "drop_path_rate": 0.05}),
    "fdat_light": ("FDAT", {"embed_dim": 108, "num_groups": 3, "depth_per_group": 2,
                            "num_heads": 4, "ffn_expansion_ratio": 2.0, "drop_path_rate": 0.08}),
    "fdat_medium": ("FDAT", {"embed_dim": 120, "num_groups": 4, "depth_per_group": 3,
                             "num_heads": 4, "ffn_expansion_ratio": 2.0, "drop_path_rate": 0.1}),
    "fdat_large": ("FDAT", {"embed_dim": 180, "num_groups": 4, "depth_per_group": 4,
                            "num_heads": 6, "ffn_expansion_ratio": 2.0, "drop_path_rate": 0.1}),
    "fdat_xl": ("FDAT", {"embed_dim": 180, "num_groups": 6, "depth_per_group": 6, "num_heads": 6,
                         "ffn_expansion_ratio": 2.0, "drop_path_rate": 0.1}),
}

# srgrad type -> {traiNNer-redux keyword: srgrad keyword}
RENAMED: dict[str, dict[str, str]] = {
    "RRDBNet": {"in_nc": "num_in_ch", "out_nc": "num_out_ch", "num_filters": "num_feat",
                "num_blocks": "num_block"},
    "RCAN": {"n_resgroups": "num_group", "n_resblocks": "num_block", "n_feats": "num_feat",
             "reduction": "squeeze_factor"},
}

# srgrad type -> {keyword: why it is dropped}; a value other than the listed one is refused
DROPPED: dict[str, dict[str, tuple]] = {
    "DAT": {"use_chk": (None, _CHECKPOINTING), "unshuffle_mod": (False, "false: none")},
    "HAT": {"use_checkpoint": (None, _CHECKPOINTING)},
    "SwinIR": {"use_checkpoint": (None, _CHECKPOINTING),
               "start_unshuffle": (1, "1: the input is not pixel-unshuffled (srgrad's SwinIR)")},
    "Swin2SR": {"use_checkpoint": (None, _CHECKPOINTING)},
    "RGT": {"use_chk": (None, _CHECKPOINTING)},
    "CRAFT": {"norm_layer": (None, "a Python class, not a config value (nn.LayerNorm)")},
    "ATD": {"use_checkpoint": (None, _CHECKPOINTING)},
    "SRVGGNetCompact": {"learn_residual": (True, "true: srgrad's SRVGGNetCompact adds the "
                                                 "upsampled input, as Real-ESRGAN's")},
    "RCAN": {"kernel_size": (3, "3: RCAN's convolutions"), "act_mode": ("relu", "relu: RCAN's"),
             "conv": (None, "a Python callable, not a config value")},
}

# traiNNer-redux discriminator -> (srgrad block, why, when it is a substitute)
DISCRIMINATORS: dict[str, tuple[dict, str | None]] = {
    "unetdiscriminatorsn": ({"type": "UNetDiscriminatorSN", "num_in_ch": 3}, None),
    "vggstylediscriminator": ({"type": "VGGStyleDiscriminator", "num_in_ch": 3}, None),
    "dunet": ({"type": "UNetDiscriminatorSN", "num_in_ch": 3},
              "srgrad has no DUnet: UNetDiscriminatorSN (Real-ESRGAN's, the template's listed "
              "alternative) trains in its place, so the adversarial term differs"),
    "metagan2": ({"type": "UNetDiscriminatorSN", "num_in_ch": 3},
                 "srgrad has no MetaGan2: UNetDiscriminatorSN (Real-ESRGAN's, the template's "
                 "listed alternative) trains in its place, so the adversarial term differs"),
}


def network(t, block: dict, path: str, scale):
    """srgrad's model block for traiNNer-redux's `block` (network_g) through Translation `t`, or
    None after refusing. Keywords: the preset's defaults, then the file's (renamed); `scale` is
    the top-level one (a network_g.scale that agrees is dropped)."""
    kind = block.pop("type", None)
    name = str(kind).lower()
    if name not in PRESETS:
        known = sorted(PRESETS)
        t.refuse(f"{path}.type", f"{kind!r}: not among the traiNNer-redux architectures srgrad "
                                 f"has ({', '.join(known)})")
        return None
    srgrad_type, preset = PRESETS[name]
    out = {"type": srgrad_type, **{k: list(v) if isinstance(v, list) else v
                                   for k, v in preset.items()}}
    if "scale" in block:
        if block.pop("scale") != scale:
            t.refuse(f"{path}.scale", "disagrees with the top-level scale")
        else:
            t.drop(f"{path}.scale", "the top-level scale")
    renamed, dropped = RENAMED.get(srgrad_type, {}), DROPPED.get(srgrad_type, {})
    for key in list(block):
        value = block.pop(key)
        if key in dropped:
            keep, why = dropped[key]
            if keep is None or value == keep:
                t.drop(f"{path}.{key}", why)
            else:
                t.refuse(f"{path}.{key}", f"{value!r}: srgrad's {srgrad_type} has only {keep!r}")
        else:
            out[renamed.get(key, key)] = value  # the schema checks it against the constructor
    _special(t, out, path, scale)
    return out


def _special(t, out, path, scale):
    """Keywords whose meaning changes on the way: RCAN's norm / n_colors / rgb_range, ESRGAN's
    use_pixel_unshuffle."""
    if out["type"] == "RCAN":
        colors = out.pop("n_colors", None)
        if colors is not None:
            out["num_in_ch"] = out["num_out_ch"] = colors
        rgb_range = out.pop("rgb_range", 255)
        if out.pop("norm", False):
            out["img_range"], out["rgb_mean"] = float(rgb_range), [0.4488, 0.4371, 0.4040]
    if out["type"] == "RRDBNet" and "use_pixel_unshuffle" in out:
        unshuffle = out.pop("use_pixel_unshuffle")
        if scale not in (1, 2):
            t.drop(f"{path}.use_pixel_unshuffle", f"no effect at scale {scale} (traiNNer-redux "
                                                  f"unshuffles at scales 1 and 2 only)")
        elif unshuffle:
            t.drop(f"{path}.use_pixel_unshuffle", "true: srgrad's RRDBNet pixel-unshuffles at "
                                                  "scales 1 and 2, as traiNNer-redux's then")
        else:
            t.refuse(f"{path}.use_pixel_unshuffle", "false: srgrad's RRDBNet always "
                                                    "pixel-unshuffles at scales 1 and 2")
