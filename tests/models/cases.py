"""Shared by the model tests: the configurations under test and the hand-computed parameter counts."""
from __future__ import annotations


import numpy as np

import framework as sg
import models  # noqa: F401  registers every architecture
from framework.card import card
from framework.nn import init
from framework.registry import MODELS

SCALES = {  # the scales each design is tested at
    "SRCNN": (2, 3, 4), "FSRCNN": (2, 3, 4), "ESPCN": (2, 3, 4), "VDSR": (2, 3, 4),
    "EDSR": (2, 3, 4), "UpsampleNet": (2, 3, 4),
    # BasicSR's; RRDBNet (no x3, which test_models.py's round trip builds) is in test_rrdbnet.py.
    "SRVGGNetCompact": (2, 3, 4), "MSRResNet": (2, 3, 4), "RCAN": (2, 3, 4),
    # SwinIR: the pixel-shuffle upsampler (BASE); its default-size torch twin takes seconds to build,
    # so two scales here, the rest in test_swinir.py
    "SwinIR": (2, 4),
    "HAT": (2, 3),  # and x1, x4 in test_hat.py
    "Swin2SR": (2, 4),  # the pixel-shuffle upsampler (BASE); the others in test_swin2sr.py
    "DAT": (2, 3),  # pixelshuffledirect and x4 in test_dat.py
    "ZSSRNet": (2, 3, 4),
}
# Keywords every build of a design gets: SwinIR's default upsampler ("", denoising) is x1 only.
BASE = {"SwinIR": {"upsampler": "pixelshuffle"}, "Swin2SR": {"upsampler": "pixelshuffle"},
        "SAFMN": {"dim": 36},  # SAFMN's dim has no default (the original's); 36: its published x2
        "GRL": {"upsampler": "pixelshuffle"},
        # nor SAFMN-BCIE's: a small one (a restorer at x1, built by the capture test as NAFNet)
        "SAFMNBCIE": {"dim": 8, "n_blocks": 1, "num_layers": 1}}
# Small variants of the two big models for tests that train or differentiate.
SMALL = {"VDSR": {"num_layers": 3, "num_feat": 16}, "ZSSRNet": {"num_layers": 3, "num_feat": 16, "init_variance": 2.0}, "EDSR": {"num_block": 2, "num_feat": 16},
         "SRVGGNetCompact": {"num_conv": 2, "num_feat": 16},
         "MSRResNet": {"num_block": 2, "num_feat": 16},
         "RCAN": {"num_group": 2, "num_block": 2, "num_feat": 16, "squeeze_factor": 4},
         # one RSTB of two blocks (one shifted) on 8x8 tokens: lr_batch's 6x5 pads to img_size
         "PLKSR": {"dim": 8, "n_blocks": 2, "kernel_size": 7},
         "RealPLKSR": {"dim": 8, "n_blocks": 2, "kernel_size": 7, "norm_groups": 2},
         "SAFMN": {"dim": 8, "n_blocks": 1}, "OmniSR": {"num_feat": 8, "window_size": 4},
         "SwinIR": {"embed_dim": 12, "depths": [2], "num_heads": [2], "window_size": 4, "img_size": 8,
                    "mlp_ratio": 2, "drop_path_rate": 0.0},  # 0: deterministic in train()
         "HAT": {"embed_dim": 12, "depths": [2], "num_heads": [2], "window_size": 4, "img_size": 8,
                 "mlp_ratio": 2, "compress_ratio": 3, "squeeze_factor": 4, "drop_path_rate": 0.0},
         "MoSR": {"dim": 8, "n_block": 2, "kernel_size": 5},
         "SwiftSRGAN": {"num_channels": 8, "num_blocks": 2},
         "DRCT": {"embed_dim": 12, "depths": [1], "num_heads": [2], "window_size": 4, "img_size": 8,
                  "mlp_ratio": 2, "gc": 4, "drop_path_rate": 0.0},
         "Swin2SR": {"embed_dim": 12, "depths": [2], "num_heads": [2], "window_size": 4, "img_size": 8,
                     "mlp_ratio": 2, "drop_path_rate": 0.0},
         # a spatial, a channel and a shifted spatial block; 64 features: a 2-wide position-bias
         # MLP (at 32, as DAT-light's 60, it is 1 wide and its LayerNorm makes it a constant)
         "DAT": {"embed_dim": 64, "depth": [3], "num_heads": [2], "split_size": [2, 4], "img_size": 8,
                 "expansion_factor": 2.0, "drop_path_rate": 0.0},
         # four blocks (every window / stripe shift and direction), window 4, stripes 8 x 8, df 2
         "GRL": {"embed_dim": 8, "depths": [4], "num_heads_window": [2], "num_heads_stripe": [2],
                 "window_size": 4, "stripe_size": [8, 8], "anchor_window_down_factor": 2,
                 "stripe_shift": True, "mlp_ratio": 2, "drop_path_rate": 0.0},
         # an L-SA, an RG-SA and a shifted L-SA block (RG-SA needs 16 px: the card's minimum)
         "RGT": {"embed_dim": 32, "depth": [3], "num_heads": [4], "split_size": [2, 4], "img_size": 8,
                 "mlp_ratio": 2.0, "drop_path_rate": 0.0},
         # one CRFB step (an SRWAB, a shifted one, an HFERB, an HFB); window 8 of (2, 4) windows
         "CRAFT": {"embed_dim": 32, "depths": [1], "num_heads": [4], "split_size_0": 2,
                   "split_size_1": 4, "window_size": 8},
         # two blocks (one shifted, the first refining the dictionary), 2 category groups at 8x8
         "ATD": {"embed_dim": 8, "depths": [2], "num_heads": [2], "window_size": 4,
                 "category_size": 32, "num_tokens": 5, "reducted_dim": 3, "mlp_ratio": 2},
         "DITN": {"dim": 8, "ITL_blocks": 1, "SAL_blocks": 1},
         "SeemoRe": {"embedding_dim": 8, "num_layers": 1, "num_experts": 3},
         "DCTLSA": {"nf": 8, "num_head": 2},
         "MoESR": {"dim": 8, "n_blocks": 1, "n_block": 1, "upsample_dim": 8},
         "FDAT": {"embed_dim": 12, "num_groups": 1, "depth_per_group": 1, "num_heads": 2,
                  "window_size": 4, "aim_reduction_ratio": 4, "mid_dim": 8, "drop_path_rate": 0.0}}


def conv(cin, cout, k):
    """Weights + biases of a k x k convolution."""
    return cin * cout * k * k + cout


def expected_parameters(name: str, c: int, s: int) -> int:
    """Parameter counts of the default configurations, written out layer by layer from the papers
    (and BasicSR for EDSR)."""
    if name == "SRCNN":  # 9-5-5, 64/32 features
        return conv(c, 64, 9) + conv(64, 32, 5) + conv(32, c, 5)
    if name == "FSRCNN":  # d=56, s=12, m=4; PReLU: one slope per channel; 9x9 deconv
        prelu = 56 + 12 + 4 * 12 + 56
        return (conv(c, 56, 5) + conv(56, 12, 1) + 4 * conv(12, 12, 3) + conv(12, 56, 1) + prelu
                + conv(56, c, 9))
    if name == "ESPCN":
        return conv(c, 64, 5) + conv(64, 32, 3) + conv(32, c * s * s, 3)
    if name == "VDSR":  # 20 layers
        return conv(c, 64, 3) + 18 * conv(64, 64, 3) + conv(64, c, 3)
    if name == "ZSSRNet":  # 8 layers, 64 features, no biases
        return 9 * (c * 64 + 6 * 64 * 64 + 64 * c)
    if name == "EDSR":  # baseline: 16 blocks x 2 convs, 64 features; x4 = two x2 stages
        up = {2: conv(64, 256, 3), 3: conv(64, 576, 3), 4: 2 * conv(64, 256, 3)}[s]
        return conv(c, 64, 3) + 16 * 2 * conv(64, 64, 3) + conv(64, 64, 3) + up + conv(64, c, 3)
    if name == "UpsampleNet":  # 2 convs, bicubic, 2 convs, 32 features
        return conv(c, 32, 3) + conv(32, 32, 3) + conv(32, 32, 3) + conv(32, c, 3)
    if name == "SRVGGNetCompact":  # 16 convs + first + last, a PReLU (64 slopes) after all but the last
        return conv(c, 64, 3) + 64 + 16 * (conv(64, 64, 3) + 64) + conv(64, c * s * s, 3)
    if name == "MSRResNet":  # 16 blocks; x4 = two (conv 4F, shuffle 2)
        up = {2: conv(64, 256, 3), 3: conv(64, 576, 3), 4: 2 * conv(64, 256, 3)}[s]
        return conv(c, 64, 3) + 16 * 2 * conv(64, 64, 3) + up + conv(64, 64, 3) + conv(64, c, 3)
    if name == "RCAN":  # 10 groups x 16 RCABs (2 convs + attention 64 -> 4 -> 64) + a conv each
        up = {2: conv(64, 256, 3), 3: conv(64, 576, 3), 4: 2 * conv(64, 256, 3)}[s]
        rcab = 2 * conv(64, 64, 3) + conv(64, 4, 1) + conv(4, 64, 1)
        return (conv(c, 64, 3) + 10 * (16 * rcab + conv(64, 64, 3)) + conv(64, 64, 3) + up
                + conv(64, c, 3))
    if name == "SwinIR":  # 4 RSTB x 6 blocks, 96 features, 6 heads, window 7, MLP x4, 64-feature upsampler
        up = {2: conv(64, 256, 3), 3: conv(64, 576, 3), 4: 2 * conv(64, 256, 3)}[s]
        norm, table = 2 * 96, 13 * 13 * 6
        block = norm + table + (96 * 288 + 288) + (96 * 96 + 96) + norm + (96 * 384 + 384) + (384 * 96 + 96)
        return (conv(c, 96, 3) + norm + 4 * (6 * block + conv(96, 96, 3)) + norm + conv(96, 96, 3)
                + conv(96, 64, 3) + up + conv(64, c, 3))
    if name == "HAT":  # SwinIR's default + a CAB per block (96 -> 32 -> 96, attention 96 -> 3 ->
        # 96) and an OCAB per group (window 7, neighbourhood 10: a 16^2-row table)
        up = {2: conv(64, 256, 3), 3: conv(64, 576, 3), 4: 2 * conv(64, 256, 3)}[s]
        norm, mlp, qkv, proj = 2 * 96, (96 * 384 + 384) + (384 * 96 + 96), 96 * 288 + 288, 96 * 96 + 96
        cab = conv(96, 32, 3) + conv(32, 96, 3) + conv(96, 3, 1) + conv(3, 96, 1)
        hab = norm + 13 * 13 * 6 + qkv + proj + cab + norm + mlp
        ocab = 16 * 16 * 6 + norm + qkv + proj + norm + mlp
        return (conv(c, 96, 3) + norm + 4 * (6 * hab + ocab + conv(96, 96, 3)) + norm
                + conv(96, 96, 3) + conv(96, 64, 3) + up + conv(64, c, 3))
    if name == "Swin2SR":  # SwinIR's default with SwinV2 attention: per block a logit scale (6),
        # q and v biases (2 x 96) instead of a qkv bias and a bias table, the cpb MLP (2 -> 512 ->
        # 6, no last bias); a 1x1 patch-embedding conv in the model and in each group
        up = {2: conv(64, 256, 3), 3: conv(64, 576, 3), 4: 2 * conv(64, 256, 3)}[s]
        norm, mlp = 2 * 96, (96 * 384 + 384) + (384 * 96 + 96)
        attn = 6 + 2 * 96 + (2 * 512 + 512) + 512 * 6 + 96 * 288 + (96 * 96 + 96)
        block = norm + attn + norm + mlp
        return (conv(c, 96, 3) + conv(96, 96, 1) + norm + 4 * (6 * block + conv(96, 96, 3)
                + conv(96, 96, 1)) + norm + conv(96, 96, 3) + conv(96, 64, 3) + up + conv(64, c, 3))
    if name == "DAT":  # 4 groups x (a spatial + a channel block), 180 features, 2 heads, split
        # (2, 4), SGFN x4 (720 -> a 360 gate); a spatial half: 90 features, 1 head, a 5-wide
        # position-bias MLP
        up = {2: conv(64, 256, 3), 3: conv(64, 576, 3), 4: 2 * conv(64, 256, 3)}[s]
        norm, qkv, proj = 2 * 180, 180 * 540 + 540, 180 * 180 + 180
        aim = (180 * 9 + 180 + 2 * 180) + (conv(180, 22, 1) + 2 * 22 + conv(22, 180, 1)) + (
            conv(180, 11, 1) + 2 * 11 + conv(11, 1, 1))
        pos = (2 * 5 + 5) + 2 * (2 * 5 + 5 * 5 + 5) + (2 * 5 + 5 * 1 + 1)
        sgfn = (180 * 720 + 720) + 2 * 360 + (360 * 9 + 360) + (360 * 180 + 180)
        spatial = norm + qkv + proj + 2 * pos + aim + sgfn + norm
        channel = norm + 2 + qkv + proj + aim + sgfn + norm
        return (conv(c, 180, 3) + norm + 4 * (spatial + channel + conv(180, 180, 3)) + norm
                + conv(180, 180, 3) + conv(180, 64, 3) + up + conv(64, c, 3))
    raise KeyError(name)


def spec_of(name: str, scale: int, channels: int = 3, small: bool = False, **kw) -> dict:
    """The spec of a design at `scale` on `channels` channels, set through the keywords its card
    names (channel_keys; a model fixed to RGB has none)."""
    spec = {"type": name, "scale": scale, **BASE.get(name, {}), **(SMALL.get(name, {}) if small else {}),
            **kw}
    keys = card(spec).channel_keys
    return {**spec, **{k: channels for k in keys if k not in kw}}


def build(name: str, scale: int, channels: int = 3, seed: int = 0, small: bool = False, **kw):
    """MODELS.build with a fixed seed (construction is reproducible under init.manual_seed)."""
    spec = spec_of(name, scale, channels, small, **kw)
    init.manual_seed(seed)
    return MODELS.build(spec), spec


def lr_batch(channels: int, h: int = 6, w: int = 5, n: int = 1, dtype=np.float32, seed: int = 0):
    """An LR batch in [0, 1]; odd, non-square sizes so a swapped H/W shows."""
    return sg.tensor(np.random.default_rng(seed).uniform(0, 1, (n, channels, h, w)), dtype=dtype)


# Each registered model's cases for the card test (tests/models/test_cards.py): every design of
# SCALES at each scale on 1 and 3 channels (small where SMALL has it), plus these variants (each
# upsampler, layout and keyword that changes the wiring), all small.
VARIANTS = {
    "RRDBNet": [dict(scale=s, num_feat=8, num_block=1, num_grow_ch=4, **kw) for s, kw in (
        (4, {}), (2, {}), (1, {}), (2, {"shuffle_factor": 1, "plus": True}))],
    "RCAN": [dict(scale=1, unshuffle_mod=True, num_feat=8, num_group=1, num_block=1, squeeze_factor=4)],
    "EDSR": [dict(scale=2, num_feat=8, num_block=1, block={"type": "ReLU"})],
    "SPAN": [dict(scale=s, feature_channels=8, num_blocks=1, **kw) for s, kw in (
        (2, {}), (3, {"deploy": True, "norm": False}))],
    "PLKSR": [dict({"scale": 2, "dim": 8, "n_blocks": 1, "kernel_size": 7}, **kw) for kw in (
        {}, {"lk_type": "SparsePLK", "use_max_kernel": True, "ccm_type": "ICCM"},
        {"lk_type": "RectSparsePLK", "ccm_type": "DCCM", "use_ea": False, "kernel_size": 9})],
    "RealPLKSR": [dict(scale=s, dim=8, n_blocks=1, kernel_size=7, norm_groups=2, **kw) for s, kw in (
        (2, {}), (3, {"upsampler": "dysample", "layer_norm": True}), (2, {"upsampler": "dysample"}))],
    "RealCUGAN": [dict(scale=s, **kw) for s, kw in ((2, {}), (3, {}), (4, {"pro": True}),
                                                     (2, {"fast": True}))],
    "SAFMN": [dict(scale=s, dim=8, n_blocks=1, ffn_scale=1.5) for s in (2, 1)],
    "OmniSR": [dict(scale=s, num_feat=8, window_size=4, **kw) for s, kw in (
        (2, {}), (3, {"pe": False, "bias": False}))],
    "SwinIR": [dict(SMALL["SwinIR"], scale=s, upsampler=u) for s, u in (
        (3, "pixelshuffledirect"), (4, "nearest+conv"), (1, ""))],
    "HAT": [dict(SMALL["HAT"], scale=1, resi_connection="identity")],
    "Swin2SR": [dict(SMALL["Swin2SR"], scale=s, upsampler=u) for s, u in (
        (2, "pixelshuffle_aux"), (3, "pixelshuffledirect"), (4, "nearest+conv"), (1, ""))],
    "DAT": [dict(SMALL["DAT"], scale=3, upsampler="pixelshuffledirect", resi_connection="3conv")],
    "NAFNet": [dict(img_channel=c, width=4, middle_blk_num=1, enc_blk_nums=e, dec_blk_nums=d)
               for c, e, d in ((3, [1, 1], [1, 1]), (1, [], []), (3, [0, 2, 1], [1, 0, 1]),
                               (3, [1, 0], [0, 2]))],  # decoders bottom up: the card pairs them so
    "KBNet": [dict(img_channel=c, width=w, middle_blk_num=1, enc_blk_nums=e, dec_blk_nums=d,
                   lightweight=lw, ffn_scale=f)
              for c, w, e, d, lw, f in ((3, 4, [1, 1], [1, 1], False, 2),
                                        (1, 8, [1, 0], [0, 2], True, 1.5))],
    "DRUNet": [dict(in_nc=i, out_nc=o, nc=[4, 6, 8, 10], nb=b, downsample_mode=d, upsample_mode=u)
               for i, o, b, d, u in ((4, 3, 2, "strideconv", "convtranspose"),
                                     (2, 1, 1, "avgpool", "pixelshuffle"),
                                     (4, 3, 1, "strideconv", "upconv"))],
    "SCUNet": [dict(in_nc=c, dim=64, config=k) for c, k in ((3, [1, 0, 0, 1, 0, 0, 1]),
                                                            (1, [0, 2, 0, 0, 0, 0, 0]))],
    "GRL": [dict(SMALL["GRL"], scale=s, upsampler=u, **kw) for s, u, kw in (
        (3, "pixelshuffledirect", {}), (4, "nearest+conv", {"qkv_proj_type": "separable_conv"}),
        (1, "", {"in_channels": 1, "out_channels": 2, "conv_type": "3conv"}),
        (2, "pixelshuffle", {"embed_dim": 36, "local_connection": True, "conv_type": "linear",
                             "anchor_proj_type": "separable_conv", "anchor_one_stage": False}),
        (2, "pixelshuffledirect", {"anchor_proj_type": "patchmerging", "conv_type": "1conv1x1"}),
        (2, "pixelshuffledirect", {"anchor_proj_type": "conv2d", "anchor_window_down_factor": 4,
                                   "stripe_size": [8, None], "stripe_groups": [None, 2],
                                   "window_size": 8}))],
    "DnCNN": [dict(in_nc=i, out_nc=o, nc=6, nb=b, act_mode=a, mode=m)
              for i, o, b, a, m in ((3, 3, 5, "BR", "DnCNN"), (1, 1, 4, "BL", "DnCNN"),
                                    (4, 3, 8, "R", "FDnCNN"))],
    "FBCNN": [dict(in_nc=c, out_nc=c, nc=[4, 4, 4, 512], nb=1, downsample_mode=d, upsample_mode=u)
              for c, d, u in ((3, "strideconv", "convtranspose"), (1, "avgpool", "upconv"))],
    "Uformer": [dict(dd_in=c, in_chans=c, embed_dim=4, depths=[1] * 9, num_heads=[1] * 9, win_size=2,
                     token_projection=p, token_mlp=m, modulator=True)
                for c, p, m in ((3, "linear", "leff"), (1, "conv", "fastleff"))],
    "DITN": [dict(scale=s, dim=8, ITL_blocks=i, SAL_blocks=a, UFONE_blocks=u, **kw)
             for s, i, a, u, kw in ((3, 2, 0, 2, {"bias": True}), (1, 1, 1, 1, {"patch_size": 4}))],
    "SeemoRe": [dict(scale=s, embedding_dim=8, num_layers=1, num_experts=e, **kw) for s, e, kw in (
        (3, 2, {"lr_space": "exp", "use_shuffle": False, "recursive": 1, "topk": 2}),
        (1, 4, {"lr_space": "double", "global_kernel_size": 5, "recursive": 3}))],
    "DCTLSA": [dict(scale=s, nf=6, num_head=3, **kw) for s, kw in ((3, {"out_nc": 1}), (1, {}))],
    "VGGStyleDiscriminator": [dict(num_in_ch=c, num_feat=2, input_size=128) for c in (1, 3)],
    "UNetDiscriminatorSN": [dict(num_in_ch=3, num_feat=4, skip_connection=k) for k in (True, False)],
    "MMRealSR": [dict(scale=4, num_feat=8, num_block=1, num_grow_ch=4, **kw) for kw in (  # x4 only
        {"num_feats": [8, 12], "num_blocks": [1, 1], "downscales": [2, 1]},
        {"num_degradation": 3, "custom_degrees": [0.5, None, 0.0], "num_feats": [4, 6, 6],
         "num_blocks": [1, 0, 1], "downscales": [1, 2, 2]})],
    "KernelGANGenerator": [dict(G_chan=8), dict(G_structure=[5, 3, 1], G_chan=4, scale_factor=0.25)],
    "KernelGANDiscriminator": [dict(D_chan=8), dict(D_chan=4, D_kernel_size=5, D_n_layers=3,
                                                    num_in_ch=1)],
    "RGT": [dict(SMALL["RGT"], scale=s, **kw) for s, kw in (
        (3, {"resi_connection": "3conv", "qkv_bias": False}), (4, {"c_ratio": 0.25}))],
    "CRAFT": [dict(SMALL["CRAFT"], scale=s, **kw) for s, kw in (
        (3, {"resi_connection": "identity", "qkv_bias": False}), (1, {"mlp_ratio": 1.5}))],
    "MoESR": [dict(SMALL["MoESR"], scale=s, upsampler=u) for s, u in (
        (3, "pixelshuffle"), (4, "nearest+conv"), (2, "dysample"), (1, "conv"))],
    "FDAT": [dict(SMALL["FDAT"], scale=s, upsampler_type=u, **kw) for s, u, kw in (
        (4, "transpose+conv", {}), (3, "pa_up", {}), (2, "dysample", {}), (2, "nearest+conv", {}),
        (1, "pixelshuffle", {"unshuffle_mod": True}), (2, "pa_up", {"unshuffle_mod": True}),
        (3, "lda", {"mid_dim": 16}))],
    "SAFMNBCIE": [dict(dim=8, n_blocks=1, num_layers=1, upscaling_factor=u, ffn_scale=f)
                  for u, f in ((2, 2.0), (4, 1.5), (3, 2.0))],
}


def card_cases() -> list[dict]:
    """Every spec of the card test, for every registered model."""
    out = []
    for name in MODELS.names():
        if not MODELS.get(name).__module__.startswith("models."):
            continue  # a model a test registered for itself
        if name in SCALES or name in SMALL:
            for s in SCALES.get(name, (2,)):
                for c in ((1, 3) if card(spec_of(name, s)).channel_keys else (3,)):
                    out.append(spec_of(name, s, c, small=name in SMALL))
        out += [{"type": name, **BASE.get(name, {}), **v} for v in VARIANTS.get(name, ())]
    return out
