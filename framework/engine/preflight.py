"""What `srgrad-train` checks before it starts anything (kernel compilation, the run folder): the
files a config names that only training reads. A config is validated without them (schema.py), so
`srgrad-convert options`, `srgrad-eval`, `srgrad-degrade` and `srgrad-infer --config` work on a
machine without, say, the VGG19 weights of a perceptual loss; training without them fails here,
in one message naming the key, not after the kernels compiled.

A registered class declares such files with a classmethod `check_files(kwargs)` that raises
FileNotFoundError (or ValueError) saying what is missing and where to get it (PerceptualLoss).
"""
from __future__ import annotations

from ..io.config import ConfigError
from ..registry import LOSSES

__all__ = ["check_training_files"]


def _loss_blocks(cfg: dict):
    """(dotted key, block) of every loss the resolved config trains with."""
    train = cfg["train"]
    if train.get("loss") is not None:
        yield "train.loss", train["loss"]
    for role, block in (train.get("losses") or {}).items():
        if block is not None:
            yield f"train.losses.{role}", block


def check_training_files(cfg: dict, source) -> None:
    """ConfigError naming `source` and the key of each block whose class's check_files refuses
    (all of them, one line each)."""
    errors = []
    for key, block in _loss_blocks(cfg):
        check = getattr(LOSSES.get(block["type"]), "check_files", None)
        if check is None:
            continue
        try:
            check({k: v for k, v in block.items() if k != "type"})
        except (FileNotFoundError, ValueError) as exc:
            errors.append(f"{source}: {key}: {exc}")
    if errors:
        raise ConfigError("\n".join(errors))
