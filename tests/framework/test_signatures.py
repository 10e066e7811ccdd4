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


UNREGISTERED = [s for s in SIGNATURES if not any(n in MODELS.names() for n in (s.names or (s.label,)))]


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
