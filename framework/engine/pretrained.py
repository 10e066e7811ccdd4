"""Start a run from published weights: `train.pretrained: {path, key, strict}` (BasicSR's
path.pretrain_network_g, param_key_g, strict_load_g), and `train.pretrained_d` for a discriminator.

Any file load_weights reads: srgrad's safetensors, a plain safetensors file, a PyTorch `.pth` read
without running code. Strict (the default) needs every key and shape to match and says, when they do
not, which architecture the file holds; `strict: false` loads what matches and lists the rest.
"""
from __future__ import annotations

import os

from ..weights import CheckpointError, check_state_matches, load_weights

__all__ = ["load_pretrained"]


def load_pretrained(model, path, key=None, strict: bool = True, where: str = "train.pretrained",
                    say=print, scale: int | None = None) -> dict:
    """Load `path` into `model` (built, before the first step). Returns the file's info. Raises
    CheckpointError naming `where`, the file and every mismatching key with both shapes (and the
    architecture the file holds, detected at `scale`, when models/detect.py recognises it)."""
    source = os.fspath(path)
    if not os.path.isfile(source):
        raise CheckpointError(f"{where}.path: {source} does not exist (or is not a file)")
    try:
        state, info = load_weights(source, key)
    except CheckpointError as exc:
        raise CheckpointError(f"{where}: {exc}") from None
    if strict:
        try:
            check_state_matches(model, state, source)
        except CheckpointError as exc:
            raise CheckpointError(f"{where}: {exc}{_what_it_holds(state, scale)} (or set {where}.strict: "
                                  f"false to load only the matching weights)") from None
        model.load_state_dict(state)
    else:
        own = model.state_dict()
        fits = {k: v for k, v in state.items() if k in own and tuple(v.shape) == own[k].shape}
        skipped = ([f"{k} (not in the file)" for k in own if k not in state]
                   + [f"{k} (not in the model)" for k in state if k not in own]
                   + [f"{k} (file {tuple(v.shape)} vs model {own[k].shape})"
                      for k, v in state.items() if k in own and k not in fits])
        model.load_state_dict(fits, strict=False)
        say(f"{where}: loaded {len(fits)} of {len(own)} tensors from {source}"
            + (f"; skipped {len(skipped)}: {', '.join(skipped)}" if skipped else ""))
    return info


def _what_it_holds(state, scale) -> str:
    """'. The file holds RRDBNet(...)' when models/detect.py recognises it, else ''."""
    from .inference import _show_spec
    try:
        from models.detect import detect
        return f". The file holds {_show_spec(detect(state, **({'scale': scale} if scale else {})))}: set model: to that"
    except (ImportError, ValueError):
        return ""
