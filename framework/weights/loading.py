"""Put a weights file into a built model: `load_into(model, path)`, the one path from a file into a
model (srgrad-infer and the other commands through engine/loading.py's load_model,
train.pretrained, --resume, srgrad-convert).

Any file load_weights reads (srgrad's safetensors, a plain safetensors file, a PyTorch .pth read
without running code) goes in strictly (every key and shape; the error names each mismatch and
what the file holds) or, with strict=False, what fits. A file in another published layout of the
model (the original ESRGAN repository's `model.N` keys, EDSR-PyTorch's, ...: the `layouts` beside
the model's detect rule, framework/detect.py) is mapped to the model's keys first.
"""
from __future__ import annotations

import inspect
import os
import sys

from ..detect import NoMatch, _same, check, describe, identify
from ..registry import MODELS
from .checkpoint import check_state_matches, load_weights
from .errors import CheckpointError

__all__ = ["load_into"]


def read(path, key=None, where: str = ""):
    """(state_dict, info) of a weights file (load_weights), errors prefixed with `where`."""
    source = os.fspath(path)
    if not os.path.isfile(source):
        raise CheckpointError(f"{where + '.path: ' if where else ''}{source} does not exist (or "
                              f"is not a file)")
    try:
        return load_weights(source, key)
    except CheckpointError as exc:
        raise CheckpointError(f"{where}: {exc}" if where else str(exc)) from None


def model_defaults(name: str) -> dict:
    """The constructor defaults of the registered model `name`."""
    params = inspect.signature(MODELS.get(name)).parameters
    return {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}


def _to_model_keys(model, state: dict, spec: dict | None, source: str, where: str):
    """`state` in `model`'s keys: as it is when the key sets agree, else through the layout of the
    model's detect rule the file is in (its implied keywords checked against `spec`)."""
    name = (spec or {}).get("type") or type(model).__name__
    own = model.state_dict()
    if set(state) == set(own) or name not in MODELS.names() \
            or not callable(getattr(MODELS.get(name), "detect", None)):
        return state, None
    given = {k: v for k, v in (spec or {}).items() if k != "type"}
    try:
        match = check(state, {"type": name, **given})
    except NoMatch as err:
        if any(r[0] is not None for r in err.reasons):  # the file is in one of its layouts
            raise CheckpointError(f"{where + ': ' if where else ''}{source} does not fit the "
                                  f"model {name}: {err}") from None
        return state, None
    if match.layout is None:
        return state, None
    defaults = model_defaults(name)
    differ = [f"{k}={v!r} (the model: {given.get(k, defaults.get(k))!r})"
              for k, v in match.implied.items() if not _same(v, given.get(k, defaults.get(k)))]
    if differ:
        raise CheckpointError(f"{where + ': ' if where else ''}{source} is in {match.layout.name}, "
                              f"whose weights say {', '.join(differ)}: set them in the model's spec")
    return match.convert(state), match


def load_into(model, path, key: str | None = None, *, strict: bool = True, spec: dict | None = None,
              where: str = "", say=None, state: dict | None = None, info: dict | None = None) -> dict:
    """Load the weights file `path` into the built `model`; returns the file's info (with
    "layout": the name of the layout its keys were mapped from, when they were).

    Args:
        key: which weights of the file (params / params_ema / a .pth entry; default as
            load_weights: params_ema when there is one).
        strict: every key and shape must match (default); False loads what matches and says
            through `say` what it skipped.
        spec: the model's spec {"type": ..., **keywords} (a config's model:), against which a
            layout's implied keywords (a MeanShift's mean, ...) are checked.
        where: the config key or option that named the file, for messages ("train.pretrained").
        state, info: the file's state_dict and info when already read (the file is not read again).

    Raises:
        CheckpointError naming `where`, the file and every mismatching key with both shapes (and
        the architecture the file holds, when framework.detect recognises it).
    """
    source = os.fspath(path)
    if state is None:
        state, info = read(source, key, where)
    info = dict(info or {})
    say = say or (lambda msg: print(msg, file=sys.stderr))
    state, match = _to_model_keys(model, state, spec, source, where)
    if match is not None:
        info["layout"] = match.layout.name
    if strict:
        try:
            check_state_matches(model, state, source)
        except CheckpointError as exc:
            raise CheckpointError(f"{where + ': ' if where else ''}{exc}{_what_it_holds(state, spec)}"
                                  + (f" (or set {where}.strict: false to load only the matching "
                                     f"weights)" if where else "")) from None
        model.load_state_dict(state)
        return info
    own = model.state_dict()
    fits = {k: v for k, v in state.items() if k in own and tuple(v.shape) == own[k].shape}
    skipped = ([f"{k} (not in the file)" for k in own if k not in state]
               + [f"{k} (not in the model)" for k in state if k not in own]
               + [f"{k} (file {tuple(v.shape)} vs model {own[k].shape})"
                  for k, v in state.items() if k in own and k not in fits])
    model.load_state_dict(fits, strict=False)
    say(f"{where + ': ' if where else ''}loaded {len(fits)} of {len(own)} tensors from {source}"
        + (f"; skipped {len(skipped)}: {', '.join(skipped)}" if skipped else ""))
    return info


def _what_it_holds(state, spec) -> str:
    """'. The file holds RRDBNet(...)' when framework.detect recognises it, else ''."""
    scale = (spec or {}).get("scale")
    try:
        found = identify(state, **({"scale": scale} if scale else {})).spec
    except (ValueError, TypeError):
        return ""
    return f". The file holds {describe(found)}: set model: to that"
