"""What other architectures' state_dicts look like: a few keys that mark each (after spandrel 0.4.2's
detection conditions, shortened), so that a file no model of srgrad fits is named for what it is
("It looks like HAT (it has relative_position_index_SA and ...)") before each model's reason.

Data only. `*` in a key stands for any index. An entry is never shown for an architecture that has
a registered model whose rule was tried (its own reason says more): `names` lists every name such a
model might be registered under. An entry with a `why` is an architecture srgrad does not run by
design (issue 40's "not in scope": face restoration, inpainting, low-light, dehazing, deblurring,
IPT, AuraSR): a file no model fits that has its keys is refused in one line naming it and why
(`out_of_scope`), not with every model's reason.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from .registry import MODELS

__all__ = ["Signature", "SIGNATURES", "looks_like", "out_of_scope"]


class Signature(NamedTuple):
    label: str          # what the message calls it
    keys: tuple         # all present (`*`: any index)
    names: tuple = ()   # model names it may be registered under (default: the label)
    why: str = ""       # what it is and why srgrad does not run it (out of scope by design)


_FACE = ("face restoration: it restores a face cropped and aligned by a face detector, and pasting "
         "it back needs the detector and landmarks too, which srgrad does not have")
_INPAINT = "inpainting: it fills a masked region of an image (an image and a mask in)"
_LOW_LIGHT = "low-light enhancement (brightening a dark photo), not super-resolution or denoising"


SIGNATURES = (
    Signature("HAT", ("relative_position_index_SA",
                      "layers.*.residual_group.overlap_attn.relative_position_bias_table",
                      "layers.*.residual_group.blocks.*.conv_block.cab.0.weight")),
    Signature("ATD", ("relative_position_index_SA", "layers.*.residual_group.td")),
    Signature("DRCT", ("layers.*.swin1.attn.relative_position_bias_table", "layers.*.adjust1.weight")),
    Signature("Swin2SR", ("patch_embed.proj.weight", "layers.*.residual_group.blocks.*.attn.logit_scale",
                          "layers.*.residual_group.blocks.*.attn.cpb_mlp.0.weight")),
    Signature("CRAFT", ("conv_first.weight", "layers.*.residual_group.hf_blocks.*.attn.temperature")),
    Signature("DAT", ("before_RG.1.weight", "layers.*.blocks.*.attn.attns.*.rpe_biases",
                      "layers.*.blocks.*.attn.channel_interaction.1.weight")),
    Signature("RGT", ("before_RG.1.weight", "layers.*.blocks.*.gamma")),
    Signature("GRL", ("norm_start.weight", "layers.*.blocks.*.attn.window_attn.attn_transform.logit_scale")),
    Signature("SRFormer", ("conv_first.weight",
                           "layers.*.residual_group.blocks.*.attn.aligned_relative_position_index")),
    Signature("SPAN", ("block_1.c1_r.eval_conv.weight", "conv_cat.weight")),
    Signature("PLKSR", ("feats.0.weight", "feats.*.channe_mixer.0.weight")),
    Signature("RealPLKSR", ("feats.0.weight", "feats.*.channel_mixer.0.weight")),
    Signature("SAFMN", ("to_feat.weight", "feats.*.safm.mfr.0.weight")),
    Signature("SAFMN-BCIE", ("to_feat.1.weight", "feats.*.layers.*.safm.mfr.0.weight"),
              ("SAFMNBCIE",)),
    Signature("OmniSR", ("input.weight", "residual_layer.*.residual_layer.*.layer.0.fn.0.weight")),
    Signature("Real-CUGAN", ("unet1.conv1.conv.0.weight", "unet2.conv1.conv.0.weight"),
              ("RealCUGAN", "UpCunet2x", "UpCunet3x", "UpCunet4x", "UpCunet2x_fast")),
    Signature("DITN", ("sft.weight", "UFONE.*.ITLs.*.attn.temperature")),
    Signature("DCTLSA", ("fea_conv.weight", "B1.body.*.transformer_body.*.blocks.*.attn.qkv.weight")),
    Signature("SeemoRe", ("conv_1.weight", "body.*.local_block.block.moe_layer.experts.*.conv_1.weight")),
    Signature("MoSR", ("gblocks.0.weight", "gblocks.*.fc1.weight")),
    Signature("MoESR", ("in_to_dim.weight", "upscale.MetaUpsample")),
    Signature("FDAT", ("groups.*.blocks.*.attn.bias", "upsampler.MetaUpsample")),
    Signature("SwiftSRGAN", ("initial.cnn.depthwise.weight", "final_conv.pointwise.weight")),
    Signature("MMRealSR", ("am_list.0.fc.0.weight", "de_net.conv_first.0.weight")),
    Signature("IPT", ("head.0.0.weight", "body.encoder.layers.*.self_attn.in_proj_weight"),
              why="the Image Processing Transformer: a 115M-parameter pretrained multi-task "
                  "transformer (a head and tail per task around one shared body), too large for "
                  "srgrad's CPU scope"),
    Signature("MDSR (EDSR-PyTorch's multi-scale model: per-scale 5x5 pre-processing blocks and "
              "upsamplers)", ("pre_process.0.0.body.0.weight", "upsample.0.0.weight"), ("MDSR",)),
    Signature("DnCNN", ("model.0.weight", "model.2.weight", "model.4.weight", "model.6.weight",
                        "model.8.weight")),
    Signature("DRUNet", ("m_head.weight", "m_down1.0.res.0.weight", "m_body.0.res.0.weight")),
    Signature("FBCNN", ("m_head.weight", "qf_pred.0.res.0.weight")),
    Signature("SCUNet", ("m_head.0.weight", "m_tail.0.weight")),
    Signature("NAFNet", ("intro.weight", "middle_blks.0.sca.1.weight")),
    Signature("KBNet", ("intro.weight", "encoders.0.0.attgamma")),
    Signature("Uformer", ("input_proj.proj.0.weight", "encoderlayer_0.blocks.0.norm1.weight")),
    Signature("GFPGAN", ("toRGB.0.weight", "stylegan_decoder.style_mlp.1.weight"), why=_FACE),
    Signature("RestoreFormer", ("quantize.embedding.weight", "encoder.conv_in.weight"), why=_FACE),
    Signature("CodeFormer", ("position_emb", "idx_pred_layer.1.weight",
                             "ft_layers.*.self_attn.in_proj_weight"), why=_FACE),
    Signature("LaMa", ("model.model.1.bn_l.running_mean",),
              why=_INPAINT),
    Signature("LaMa", ("generator.model.1.bn_l.running_mean",),
              why=_INPAINT),
    Signature("RetinexFormer", ("body.0.estimator.conv1.weight",
                                "body.0.denoiser.embedding.weight"), why=_LOW_LIGHT),
    Signature("HVI-CIDNet", ("HVE_block0.1.weight", "IE_block0.1.weight", "trans.density_k"),
              ("HVICIDNet", "CIDNet"), why=_LOW_LIGHT),
    Signature("MixDehazeNet", ("layer1.blocks.*.conv3_19.weight", "patch_unembed.proj.0.weight"),
              why="dehazing (removing haze from outdoor photos), not super-resolution or "
                  "denoising"),
    Signature("FFTformer", ("encoder_level1.*.ffn.fft", "refinement.*.attn.to_hidden.weight"),
              why="motion deblurring, not super-resolution or denoising"),
    Signature("AuraSR", ("mid_attn.layers.*.*.to_out.weight",
                         "final_res_block.block1.proj.weights"),
              why="a GigaGAN upsampler (a style network driving adaptive convolutions and "
                  "attention), out of srgrad's scope"),
)


def _pattern(key: str):
    return re.compile(re.escape(key).replace(r"\*", r"\d+"))


def _matches(sig: Signature, keys: list) -> bool:
    return all(any(_pattern(k).fullmatch(have) for have in keys) for k in sig.keys)


def out_of_scope(shapes, tried=()) -> str | None:
    """'GFPGAN (it has toRGB.0.weight and ...): face restoration: ...; srgrad does not run it' for
    the first signature with a `why` whose keys `shapes` has, except those of a model in `tried`;
    else None."""
    keys = list(shapes)
    for sig in SIGNATURES:
        if sig.why and not any(n in tried for n in sig.names or (sig.label,)) \
                and _matches(sig, keys):
            shown = " and ".join(sig.keys[:2]) + (" and more" if len(sig.keys) > 2 else "")
            return f"{sig.label} (it has {shown}): {sig.why}; srgrad does not run it"
    return None


def looks_like(shapes, tried=()) -> list[str]:
    """'HAT (it has relative_position_index_SA and ...), an architecture srgrad does not have' for
    every signature all of whose keys `shapes` has, except those of a model in `tried`."""
    keys = list(shapes)
    out = []
    for sig in SIGNATURES:
        names = sig.names or (sig.label,)
        if any(n in tried for n in names):
            continue
        if _matches(sig, keys):
            shown = " and ".join(sig.keys[:2]) + (" and more" if len(sig.keys) > 2 else "")
            have = any(n in MODELS.names() for n in names)
            out.append(f"{sig.label} (it has {shown})"
                       + ("" if have else ", an architecture srgrad does not have"))
    return out
