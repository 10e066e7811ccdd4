"""What `srgrad-train` checks before it starts anything (kernel compilation, the run folder): the
files a config names that only training reads. A config is validated without them (schema.py), so
`srgrad-convert options`, `srgrad-eval`, `srgrad-degrade` and `srgrad-infer --config` work on a
machine without, say, the VGG19 weights of a perceptual loss; training without them fails here,
in one message naming the key, not after the kernels compiled:

- a registered class declares such files with a classmethod `check_files(kwargs)` that raises
  FileNotFoundError (or ValueError) saying what is missing and where to get it (PerceptualLoss);
- `check_pretrained`: a new run's train.pretrained weights are read and checked against the model
  (strictly, unless strict: false) as the run will load them.
"""
from __future__ import annotations

from ...io.config import ConfigError
from ...registry import LOSSES, MODELS
from ..run.recipes.terms import loss_terms

__all__ = ["check_training_files", "check_pretrained", "fetch_cached_files"]


def _loss_blocks(cfg: dict):
    """(dotted key, block) of every loss the resolved config trains with."""
    for term in loss_terms(cfg["train"]):
        yield term.key, term.spec


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


def fetch_cached_files(cfg: dict, progress: bool = True) -> None:
    """The pretrained files the run's losses and validation metrics read from srgrad's model cache
    (LPIPS's and DISTS's networks: engine/hub/models.py's AUXILIARY), downloaded and checked now rather
    than failing at the first step or validation."""
    from ...registry import METRICS
    from ..hub.models import fetch_for
    owners = [(LOSSES.get(block["type"]), {k: v for k, v in block.items() if k != "type"})
              for _, block in _loss_blocks(cfg)]
    owners += [(METRICS.get(m), {}) for m in (cfg.get("val") or {}).get("metrics") or ()]
    fetch_for(owners, progress=progress)


# the config key each network of a recipe is built from (Recipe.PRETRAINED names the networks)
_NETWORK_KEYS = {"model": "model", "net_d": "model_d"}


def check_pretrained(cfg: dict, source) -> None:
    """A new run's pretrained weights (train.pretrained, a GAN's train.pretrained_d): each file read
    and, when strict, loaded into a throwaway network built from the config (the framework's random
    stream left as it was), so a mismatch is said before anything starts, not after the kernels
    compiled; ConfigError naming `source` and the key."""
    from ... import random
    from ...registry import RECIPES
    from ...loading import load_into, read
    from ...weights import CheckpointError
    from ..run.recipes import recipe_name
    for name, key in RECIPES.get(recipe_name(cfg)).PRETRAINED.items():
        spec, where = cfg["train"][key], f"train.{key}"
        if spec["path"] is None:
            continue
        net_spec = {**cfg["model"], "scale": cfg["scale"]} if name == "model" else \
            cfg.get(_NETWORK_KEYS.get(name, ""))
        try:
            if not spec["strict"] or net_spec is None:  # what fits is loaded, the rest said
                read(spec["path"], spec["key"], where)
                continue
            with random.fork_rng():
                net = MODELS.build(net_spec)
            load_into(net, spec["path"], spec["key"], strict=True, where=where,
                      spec=net_spec if name == "model" else None)
        except CheckpointError as exc:
            raise ConfigError(f"{source}: {exc}") from None
