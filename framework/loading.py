"""Put a weights file into a built model: `load_into(model, path)` (also `framework.load_into`), the
one path from a file into a model (srgrad-infer and the other commands through engine/inference/loading.py's
load_model, train.pretrained, --resume, srgrad-convert). It sits above weights/ (the file formats),
nn/ and detect.py (the models' rules), which it uses; none of them imports it.

Any file load_weights reads (srgrad's safetensors, a plain safetensors file, a PyTorch .pth read
without running code) goes in strictly (every key and shape; the error names each mismatch and
what the file holds) or, with strict=False, what fits. A file in another published layout of the
model (the original ESRGAN repository's `model.N` keys, EDSR-PyTorch's, ...: the `layouts` beside
the model's detect rule, framework/detect.py) is mapped to the model's keys first.

Values are checked before anything is copied (`check_values`), so that no command runs a model
whose output cannot be right (NaN weights made black images; a NaN index table an IndexError):
every floating-point tensor must be finite; an integer buffer of the model is either a counter
(0-d, BatchNorm's num_batches_tracked: a whole number >= 0) or an index table the model computes
from its spec (relative_position_index and the like), which the file must hold exactly, value for
value (a table that differs points the attention at other bias rows: wrong output, or reads out of
range). The model's own table is freshly built, so this compares the file with the spec's truth.
"""
from __future__ import annotations

import inspect
import os
import sys

import numpy as np

from .detect import NoMatch, _same, check, describe, identify
from .registry import MODELS
from .weights.checkpoint import check_state_matches, load_weights
from .weights.errors import CheckpointError

__all__ = ["load_into", "check_values"]


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
    _check_finite(state, source, where)  # in the file's own keys, before any mapping
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
        _check_buffers(model, state, source, where)
        model.load_state_dict(state)
        return info
    own = model.state_dict()
    fits = {k: v for k, v in state.items() if k in own and tuple(v.shape) == own[k].shape}
    _check_buffers(model, fits, source, where)
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


# -- the values -----------------------------------------------------------------------------------
def check_values(model, state: dict, source: str, where: str = "") -> None:
    """Raise CheckpointError naming the first tensor of `state` (in `model`'s keys) whose values
    cannot be right: a non-finite value, or an integer buffer of the model that is not what the
    model computes (module docstring)."""
    _check_finite(state, source, where)
    _check_buffers(model, state, source, where)


def _refuse(source: str, where: str, msg: str):
    raise CheckpointError(f"{where + ': ' if where else ''}{source}: {msg}")


def _array(value) -> np.ndarray:
    """A state_dict value (an array, or a Tensor holding one) as a numpy array."""
    return np.asarray(value if isinstance(value, np.ndarray) else getattr(value, "data", value))


def _index(arr: np.ndarray, flat: int) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, arr.shape))


def _check_finite(state: dict, source: str, where: str) -> None:
    for k, v in state.items():
        arr = _array(v)
        if arr.dtype.kind in "biu" or arr.size == 0:
            continue
        try:
            ok = np.isfinite(arr)
        except TypeError:  # a numpy extension type (bfloat16): through float32
            ok = np.isfinite(arr.astype(np.float32))
        if ok.all():
            continue
        bad = arr.size - int(np.count_nonzero(ok))
        _refuse(source, where, f"tensor {k} holds {bad} non-finite value{'s' * (bad > 1)} (NaN or "
                f"inf) of {arr.size}, at index {_index(arr, int(np.argmin(ok.ravel())))}: refused "
                f"(weights of a training that diverged, or a damaged file)")


def _check_buffers(model, state: dict, source: str, where: str) -> None:
    """The integer buffers of `model` that `state` gives: counters whole and >= 0, index tables
    equal to the model's own."""
    for k, b in model.named_buffers():
        own = b.data
        if k not in state or own.dtype.kind not in "iu":
            continue
        arr = _array(state[k])
        if arr.shape != own.shape:
            continue  # named by the shape check
        if own.ndim == 0:
            value = arr[()].item()
            if not (value == np.floor(value) and value >= 0):
                _refuse(source, where, f"tensor {k} is a counter and holds {value!r}: refused (a "
                        f"damaged file)")
            continue
        differ = arr != own
        if differ.any():
            first = _index(arr, int(np.argmax(differ.ravel())))
            _refuse(source, where, f"tensor {k} is an index table (an integer buffer "
                    f"{type(model).__name__} computes from its spec) and differs from the model's: "
                    f"{int(np.count_nonzero(differ))} of {own.size} entries, first at index "
                    f"{first} (file {arr[first]:g}, model {own[first]}): refused (a damaged "
                    f"file, or weights of other settings)")
