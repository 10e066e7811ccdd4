"""What a `--set` override changes beyond its own value, each change said in a note:

- a loss nulled (`--set train.losses.perceptual=null`, as the Real-ESRGAN stage-2 config's comment
  says to do without VGG weights) also leaves train.gt_usm, which lists the roles trained against
  the sharpened GT: a role whose loss the override removed is dropped from it;
- `srgrad-train --fit-schedule`: with `--set train.total_iters=N`, every
  iteration count of train.scheduler and train.scheduler_d (milestones, periods, T_max,
  step_size, warmup_iters) is scaled by N / the config's total_iters, so the schedule keeps its
  shape over the shorter or longer run (rounded to whole iterations, periods and T_max at least 1).

Both work on the plain config dict, after the overrides and before validation (schema._resolve).
"""
from __future__ import annotations

import numbers

__all__ = ["drop_nulled_gt_usm", "fit_schedules", "SCHEDULE_COUNTS"]

# the iteration counts of the registered schedulers' keywords: (key, smallest value)
SCHEDULE_COUNTS = {"milestones": 0, "periods": 1, "T_max": 1, "step_size": 1, "warmup_iters": 0}


def _nulled_roles(overrides) -> set:
    """The loss roles an override sets to null: train.losses.<role>=null, train.loss=null."""
    from ...io.config import parse_scalar
    roles = set()
    for assignment in overrides:
        key, _, value = assignment.partition("=")
        parts = key.strip().split(".")
        if value.strip() and parse_scalar(value) is not None:
            continue
        if parts[:2] == ["train", "losses"] and len(parts) == 3:
            roles.add(parts[2])
        elif parts == ["train", "loss"]:
            roles.add("pixel")
    return roles


def drop_nulled_gt_usm(cfg: dict, overrides) -> list[str]:
    """Remove from cfg's train.gt_usm the roles whose loss an override nulled; the notes."""
    train = cfg.get("train") if isinstance(cfg.get("train"), dict) else {}
    usm = train.get("gt_usm")
    if not isinstance(usm, list):
        return []
    losses = train.get("losses") if isinstance(train.get("losses"), dict) else {}
    gone = [role for role in _nulled_roles(overrides) if role in usm and losses.get(role) is None
            and not (role == "pixel" and train.get("loss") is not None)]
    train["gt_usm"] = [role for role in usm if role not in gone]
    return [f"train.gt_usm: {role!r} dropped, its loss train.{'losses.' + role} was set to null"
            for role in gone]


def _scaled(value, ratio, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return value  # not a count: the schema reports it
    return max(low, round(value * ratio))


def fit_schedules(cfg: dict, old_total) -> list[str]:
    """Scale cfg's train.scheduler(_d) iteration counts by cfg's total_iters / `old_total` (the
    config file's, before --set); the notes, one per changed key."""
    train = cfg.get("train") if isinstance(cfg.get("train"), dict) else {}
    new_total = train.get("total_iters")
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0
               for v in (old_total, new_total)) or old_total == new_total:
        return []
    ratio, notes = new_total / old_total, []
    for name in ("scheduler", "scheduler_d"):
        block = train.get(name)
        if not isinstance(block, dict):
            continue
        for key, low in SCHEDULE_COUNTS.items():
            if key not in block:
                continue
            old = block[key]
            new = [_scaled(v, ratio, low) for v in old] if isinstance(old, list) else \
                _scaled(old, ratio, low)
            if new != old:
                block[key] = new
                notes.append(f"train.{name}.{key}: {old} -> {new} (--fit-schedule: x{ratio:.4g}, "
                             f"total_iters {old_total} -> {new_total})")
    return notes
