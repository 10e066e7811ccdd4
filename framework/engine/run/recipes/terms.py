"""The generator's loss terms as data: one list of typed entries, as traiNNer-redux's
`train.losses`.

A config gives its terms in one of two spellings, and `loss_terms` reads both into one list of
`TermSpec`s (the one spelling every recipe, preflight and the schema's checks read):

- the list (traiNNer-redux's): `train.losses: [{type: L1Loss, loss_weight: 1.0}, {type:
  PerceptualLoss, ..., target: gt_usm}, {type: GANLoss, gan_type: vanilla, loss_weight: 0.1}]`.
  Every entry is a LOSSES block plus `target` (gt, the default, or gt_usm: the USM-sharpened GT,
  BasicSR's l1_gt_usm / percep_gt_usm / gan_gt_usm); an entry with `loss_weight: 0` is off (as in
  traiNNer-redux, whose templates list the optional terms that way). Its metrics.csv column is
  traiNNer-redux's label, `l_g_` + the type in lower case without "loss" (L1Loss: l_g_l1,
  PerceptualLoss: l_g_perceptual, GANLoss: l_g_gan), a repeated label numbered (l_g_l1_2);
- the roles (BasicSR's pixel_opt / perceptual_opt / gan_opt): `train.loss` (the pixel loss) or
  `train.losses.pixel`, `train.losses.perceptual`, `train.losses.gan`, with `train.gt_usm` listing
  the roles whose target is the sharpened GT. Their columns keep BasicSR's names (l_g_pix,
  l_g_percep, l_g_style, l_g_gan).

A term is adversarial when its loss class says so (`is_gan = True`, GANLoss); under the roles, the
`gan` role is. A loss whose forward returns a tuple names its extra parts in `extra_outputs`
(PerceptualLoss: ("style",)), logged as `<column>_<part>` (the roles: l_g_style).
"""
from __future__ import annotations

import dataclasses

from ....registry import LOSSES

__all__ = ["TermSpec", "loss_terms", "is_gan_type", "is_list", "TARGETS", "label"]

TARGETS = ("gt", "gt_usm")
# the roles' metrics.csv names (BasicSR's), kept for the runs and curves written before the list
_ROLE_COLUMNS = {"pixel": "l_g_pix", "perceptual": "l_g_percep", "gan": "l_g_gan"}
_ROLE_EXTRAS = {"perceptual": ("l_g_style",)}


@dataclasses.dataclass(frozen=True)
class TermSpec:
    """One generator loss term. key: its config key (train.loss, train.losses.perceptual,
    train.losses[2]); role: its name among the terms (pixel / perceptual / gan, or the list's
    label stem: l1, perceptual, ...); spec: the LOSSES block (type and keywords); target: gt or
    gt_usm; column: its metrics.csv name; extras: the names of its extra outputs (style); gan:
    whether it judges the discriminator's output; own: a role a recipe added to train.losses
    (a teacher's distill), which that recipe computes itself."""
    key: str
    role: str
    spec: dict
    target: str
    column: str
    extras: tuple
    gan: bool
    own: bool = False


def is_list(train: dict) -> bool:
    """Whether train.losses is given as a list (traiNNer-redux's spelling)."""
    return isinstance(train.get("losses"), list)


def is_gan_type(type_name) -> bool:
    """Whether LOSSES' `type_name` is an adversarial loss: its class has `is_gan = True`."""
    return bool(getattr(LOSSES.get(type_name), "is_gan", False)) if type_name in LOSSES else False


def label(type_name: str) -> str:
    """traiNNer-redux's label stem of a loss type: lower case, without "loss" (L1Loss: l1)."""
    return str(type_name).lower().replace("loss", "")


def _extras(type_name) -> tuple:
    return tuple(getattr(LOSSES.get(type_name), "extra_outputs", ())) if type_name in LOSSES else ()


def loss_terms(train: dict) -> list[TermSpec]:
    """The terms of a validated train section, in order (the roles: pixel, perceptual, then the
    recipes' roles; the list: as written, entries with loss_weight 0 left out)."""
    if is_list(train):
        out, seen = [], {}
        for i, entry in enumerate(train["losses"]):
            spec = {k: v for k, v in entry.items() if k != "target"}
            if spec.get("loss_weight", 1) == 0:
                continue
            stem = label(spec["type"])
            seen[stem] = seen.get(stem, 0) + 1
            role = stem if seen[stem] == 1 else f"{stem}_{seen[stem]}"
            extras = tuple(f"l_g_{role}_{x}" for x in _extras(spec["type"]))
            out.append(TermSpec(f"train.losses[{i}]", role, spec, entry.get("target", "gt"),
                                f"l_g_{role}", extras, is_gan_type(spec["type"])))
        return out
    roles = {"pixel": train.get("loss")} if train.get("loss") is not None else {}
    roles.update((k, v) for k, v in (train.get("losses") or {}).items()
                 if v is not None and k not in roles)
    usm = train.get("gt_usm") or ()
    return [TermSpec("train.loss" if role == "pixel" and train.get("loss") is not None
                     else f"train.losses.{role}", role, spec,
                     "gt_usm" if role in usm else "gt", _ROLE_COLUMNS.get(role, f"l_g_{role}"),
                     _ROLE_EXTRAS.get(role, ()), role == "gan",
                     role not in ("pixel", "perceptual", "gan"))
            for role, spec in roles.items()]
