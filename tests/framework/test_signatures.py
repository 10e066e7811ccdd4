"""framework/signatures.py and detect's refusal: a file of an architecture srgrad does not have is
named for what it is, after "no architecture srgrad has matches" and before each model's reason
(a HAT, SPAN, Swin2SR or Real-CUGAN file ended with VDSR's "convolutions at body.[] are not ...");
never for an architecture whose registered model's rule was tried."""
from __future__ import annotations

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework.detect import DetectError, identify
from framework.registry import MODELS
from framework.signatures import SIGNATURES, looks_like


def state_of(keys) -> dict:
    """A state_dict with those keys (`*` -> 0), tiny arrays."""
    return {k.replace("*", "0"): np.zeros((2, 2, 1, 1), np.float32) for k in keys}


UNREGISTERED = [s for s in SIGNATURES if not s.why
                and not any(n in MODELS.names() for n in (s.names or (s.label,)))]


@pytest.mark.parametrize("sig", UNREGISTERED, ids=lambda s: s.label.split()[0])
def test_each_signature_names_its_architecture_first(sig):
    with pytest.raises(DetectError) as err:
        identify(state_of(sig.keys))
    lines = str(err.value).splitlines()
    assert lines[0].startswith("detect: no architecture srgrad has matches this state_dict (")
    hints = [line for line in lines[1:] if line.startswith("It looks like ")]
    assert f"It looks like {sig.label} (it has {sig.keys[0]}" in hints[0], lines
    assert hints[0].endswith(", an architecture srgrad does not have."), lines
    reasons = lines.index("Why each of srgrad's models does not fit:")
    assert reasons > lines.index(hints[0]) and lines[reasons + 1].startswith("  "), lines
    assert {line.split(":")[0].strip() for line in lines[reasons + 1:]} >= {"EDSR", "VDSR", "SwinIR"}


@pytest.mark.parametrize("label,keys", [
    ("HAT", ["relative_position_index_SA", "conv_first.weight", "conv_after_body.weight",
             "layers.0.residual_group.blocks.0.norm1.weight",
             "layers.0.residual_group.blocks.0.conv_block.cab.0.weight",
             "layers.0.residual_group.overlap_attn.relative_position_bias_table"]),
    ("SPAN", ["conv_1.sk.weight", "block_1.c1_r.sk.weight", "block_1.c1_r.eval_conv.weight",
              "conv_cat.weight", "upsampler.0.weight"]),
    ("Swin2SR", ["conv_first.weight", "patch_embed.proj.weight",
                 "layers.0.residual_group.blocks.0.attn.logit_scale",
                 "layers.0.residual_group.blocks.0.attn.cpb_mlp.0.weight",
                 "layers.0.residual_group.blocks.0.attn.relative_position_index"]),
    ("Real-CUGAN", ["unet1.conv1.conv.0.weight", "unet1.conv1_down.weight",
                    "unet2.conv1.conv.0.weight", "unet2.conv_bottom.weight"]),
])
def test_the_issue_s_files_are_named(label, keys):
    """The four the issue names (where srgrad has no such model yet: each arrives with its own rule,
    and the hint gives way to it)."""
    sig = next(s for s in SIGNATURES if s.label == label)
    if any(n in MODELS.names() for n in (sig.names or (label,))):
        pytest.skip(f"{label} is a registered model now: its rule answers")
    with pytest.raises(DetectError) as err:
        identify(state_of(keys))
    first, second = str(err.value).splitlines()[:2]
    assert "no architecture srgrad has matches" in first and "VDSR" not in first
    assert second.startswith(f"It looks like {label} (it has ")


def test_a_hint_is_never_shown_for_a_model_whose_rule_was_tried():
    span = next(s for s in SIGNATURES if s.label == "SPAN")
    shapes = {k.replace("*", "0"): (1,) for k in span.keys}
    assert [h for h in looks_like(shapes) if h.startswith("SPAN")]
    assert not [h for h in looks_like(shapes, tried=["SPAN"]) if h.startswith("SPAN")]
    cugan = next(s for s in SIGNATURES if s.label == "Real-CUGAN")
    shapes = {k: (1,) for k in cugan.keys}
    assert not looks_like(shapes, tried=["UpCunet2x"])  # any name it may be registered under


def test_wildcards_stand_for_indices_only():
    hat = next(s for s in SIGNATURES if s.label == "HAT")
    shapes = {k.replace("*", "3"): (1,) for k in hat.keys}
    assert looks_like(shapes)[0].startswith("HAT (it has relative_position_index_SA and ")
    shapes = {k.replace("*", "x"): (1,) for k in hat.keys}
    assert not looks_like(shapes)


# -- issue 40's "not in scope": refused in one line naming what the file is and why -----------------
def _spandrel_state(name: str, **kw) -> dict:
    """The state_dict of spandrel 0.4.2's own `name` network at a tiny size (its keys as spandrel
    reads them: its own detection accepts it)."""
    pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture(name)
    cls = vars(module)[name]
    arch = next(v for k, v in vars(module).items() if k.endswith("Arch") and isinstance(v, type))()
    state = cls(**kw).state_dict()
    assert arch.detect(state), f"spandrel's own {name} rule refuses the tiny build"
    return state


OUT_OF_SCOPE = [  # (label, the word of its why, spandrel's class and tiny keywords | key list)
    ("GFPGAN", "face restoration", ("GFPGAN", dict(out_size=32, num_style_feat=16,
                                                   channel_multiplier=1, narrow=0.125))),
    # RestoreFormer and LaMa import torchvision, which does not import beside torch 2.13 here:
    # spandrel's detect keys; CodeFormer is in spandrel_extra_arches, not 0.4.2: its detect keys
    ("RestoreFormer", "face restoration", [
        "quantize.embedding.weight", "encoder.conv_in.weight", "quant_conv.weight",
        "encoder.down.0.block.0.norm1.weight", "encoder.conv_out.weight",
        "decoder.conv_out.weight"]),
    ("CodeFormer", "face restoration", ["position_emb", "idx_pred_layer.1.weight",
                                        "quantize.embedding.weight",
                                        "ft_layers.0.self_attn.in_proj_weight",
                                        "encoder.blocks.0.weight"]),
    ("LaMa", "inpainting", ["model.model.1.bn_l.running_mean", "model.model.1.bn_l.weight"]),
    ("LaMa", "inpainting", ["generator.model.1.bn_l.running_mean"]),
    ("RetinexFormer", "low-light", ("RetinexFormer", dict(n_feat=8, stage=1))),
    ("HVI-CIDNet", "low-light", ("HVICIDNet", dict(channels=[4, 4, 4, 4], heads=[1, 1, 1, 1]))),
    ("MixDehazeNet", "dehazing", ("MixDehazeNet", dict(embed_dims=[4, 8, 16, 8, 4],
                                                       depths=[1, 1, 1, 1, 1]))),
    ("FFTformer", "deblurring", ("FFTformer", dict(dim=8, num_blocks=[1, 1, 1, 1],
                                                   num_refinement_blocks=1))),
    ("IPT", "115M-parameter", ("IPT", dict(patch_size=8, n_feats=8, num_heads=2, num_layers=1,
                                          patch_dim=2))),
    ("AuraSR", "GigaGAN", ("AuraSR", dict(dim=4, image_size=16, input_image_size=4,
                                          style_network=dict(dim_in=8, dim_out=8, depth=1),
                                          up_dim_mults=(1, 2), down_dim_mults=(2,)))),
]


@pytest.mark.parametrize("label,word,source", OUT_OF_SCOPE, ids=[c[0] for c in OUT_OF_SCOPE])
def test_out_of_scope_files_are_refused_in_one_line(label, word, source):
    state = _spandrel_state(source[0], **source[1]) if isinstance(source, tuple) else \
        state_of(source)
    with pytest.raises(DetectError) as err:
        identify(state)
    message = str(err.value)
    assert "\n" not in message, message
    assert message.startswith(f"detect: this state_dict is {label} (it has "), message
    assert word in message and message.endswith("; srgrad does not run it"), message


def test_srgrad_infer_refuses_an_out_of_scope_file_in_one_line(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from PIL import Image
    from framework.engine.commands.cli import infer_main
    state = _spandrel_state("RetinexFormer", n_feat=8, stage=1)
    torch.save({"params": state}, str(tmp_path / "retinexformer.pth"))
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "in.png")
    assert infer_main(["--weights", str(tmp_path / "retinexformer.pth"), "-i",
                       str(tmp_path / "in.png"), "-o", str(tmp_path / "out.png"),
                       "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "RetinexFormer (it has " in err[0] and "low-light" in err[0], err
    assert not (tmp_path / "out.png").exists()
