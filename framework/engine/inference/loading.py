"""Which model a weights file is, built and loaded: `load_model(path, spec, ...)`, what
srgrad-infer / -eval / -export and srgrad-convert run (the file goes into the model through
framework.weights.load_into, the one path from a file into a model, which train.pretrained and
--resume take too).

`load_model` decides the model first: `spec` (--model), else the spec the file
  stores (srgrad's weights files), else a config's model:, else detected from the keys and shapes
  (framework/detect.py). A spec from anywhere is checked against the file's tensors before its
  model is built, and built within a parameter budget of the file's size: a file asking for a
  huge model is refused at once. `known` keywords (--model-arg without --model) override the
  stored or detected ones; an assumption detection makes is said with the flag that changes it.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from ...card import SpecTooLarge, card, has_card, preflight
from ...detect import DetectError, NoMatch, _same, budget, check, describe, identify, shapes_of
from ...nn.module import BudgetError, parameter_budget
from ...registry import MODELS
from ...loading import load_into, model_defaults, read
from ...weights import CheckpointError

__all__ = ["load_model", "build_model"]


def build_model(spec: dict, scale: int | None = None, limit: int | None = None):
    """MODELS.build on a `{type, **kwargs}` spec; `scale` is added when the spec lacks it; `limit`:
    at most this many values (parameter_budget), else a CheckpointError."""
    spec = dict(spec)
    if scale is not None:
        spec.setdefault("scale", scale)
    try:
        if limit is not None:  # the card's count, before anything is allocated
            preflight(spec, limit)
        if limit is None:
            return MODELS.build(spec)
        with parameter_budget(limit, f"the model {describe(spec)}"):
            return MODELS.build(spec)
    except (BudgetError, SpecTooLarge) as exc:
        raise CheckpointError(str(exc)) from None
    except KeyError as exc:  # an unregistered model or layer (e.g. EDSR's block: spec)
        raise ValueError(f"{exc.args[0]} (a custom model or layer? pass --config with its "
                         f"imports:, or --import MODULE)") from None


def _spec_differs(a: dict, b: dict) -> bool:
    """Whether two model specs describe different models (keys one of them leaves at the default
    are not compared)."""
    return a.get("type") != b.get("type") or any(a[k] != b[k] for k in a.keys() & b.keys())


def _flag(k: str, value=None) -> str:
    """The command-line option that sets keyword `k` (to `value`)."""
    if k == "scale":
        return f"--scale {'S' if value is None else value}"
    return f"--model-arg {k}={'...' if value is None else value}"


def load_model(path, spec: dict | None = None, scale: int | None = None,
               fallback_spec: dict | None = None, key: str | None = None, say=None,
               known: dict | None = None):
    """(model in eval mode, info) for the weights file `path` (any load_weights reads).

    The model spec is, in this order: `spec` (--model on the command line), the file's metadata
    (srgrad's trainer writes it: it describes these weights exactly), `fallback_spec` (a config's
    `model:` block), else detected from the state_dict's keys and shapes (framework/detect.py; said
    through `say`, with every assumption and the flag that changes it). `known` keywords
    (--model-arg without --model) are given to the detection, or replace the stored / config
    spec's (said). A config's model that disagrees with the file's spec is a warning naming both.
    The spec is checked against the file's tensors before its model is built, and the model is
    built within a budget of the file's size (a CheckpointError names the keyword the weights
    contradict). `key`: params or params_ema. info["model"] is the spec used (with its scale)."""
    from .zoo import load_zoo
    load_zoo()
    say = say or (lambda msg: print(msg, file=sys.stderr))
    source = os.fspath(path)
    known = dict(known or {})
    if scale is not None:
        known.setdefault("scale", scale)
    state, info = read(source, key, "")
    stored = info.get("model")
    if fallback_spec and stored and not spec and _spec_differs(stored, fallback_spec):
        say(f"warning: --config's model {describe(fallback_spec)} differs from the one stored in "
            f"{source}, {describe(stored)}: using the stored one (it describes these weights)")
    match, why = None, None
    if spec or stored or fallback_spec:
        given = spec or stored or fallback_spec
        from_store = not spec and bool(stored)
        origin = "--model" if spec else f"the spec stored in {source}" if stored else "--config"
        if given.get("scale") and known.get("scale", given["scale"]) != given["scale"]:
            raise ValueError(f"{source}: the model is x{given['scale']}, --scale {known['scale']} "
                             f"disagrees")
        defaults = model_defaults(given["type"]) if given.get("type") in MODELS.names() else {}
        for k, v in known.items():
            old = given.get(k, defaults.get(k))
            if not spec and k != "scale" and not _same(old, v):
                say(f"{_flag(k, v)} replaces {k}={old!r} of {origin}"
                    + ("" if k in given else " (its default)"))
        given = {**given, **known} if known else dict(given)
        match, why = _checked(state, given, source)
        spec = _given_spec(given, match, say, quiet=from_store)
        if spec.get("scale") is None:  # the weights' scale (where they tell), else the file's
            spec["scale"] = (match.spec.get("scale") if match is not None else None) \
                or info.get("scale")
    else:
        match = _detect(state, source, known, say)
        spec = match.spec
    if spec.get("scale") is None:
        raise ValueError("the model's scale is unknown: pass --scale")
    model = match.model if match is not None and _resolved(spec) == _resolved(match.spec) else None
    if model is None and match is not None and why is None:  # what the spec says otherwise
        have, fits = _resolved(spec), _resolved(match.spec)
        why = "; ".join(f"the weights say {k}={fits[k]!r}, the spec has {have.get(k)!r}"
                        for k in match.spec if k != "type" and not _same(have.get(k), fits[k]))
    if model is None:
        try:
            model = build_model(spec, limit=budget(shapes_of(state)))
        except CheckpointError as exc:  # over the budget: refused before its memory is touched
            raise CheckpointError(f"{source} does not fit the model {describe(spec)}: "
                                  f"{why or exc}; refused before building it") from None
        except ValueError as exc:
            if not info.get("imports"):
                raise
            raise ValueError(f"{exc} The weights were trained with imports: {info['imports']}") \
                from None
    if match is not None and match.layout is not None:
        state = match.convert(state)
        info["layout"] = match.layout.name
    dtype = info.get("dtype")
    if dtype:
        model.to(np.dtype(dtype))
    load_into(model, source, state=state, info=info, spec=spec)
    model.eval()
    scale = int(spec["scale"])
    info = {**info, "model": {**spec, "scale": scale}, "scale": scale}
    return model, info


def _resolved(spec: dict) -> dict:
    """Every constructor keyword of a spec (its value or the default), lists as tuples."""
    out = {**model_defaults(spec["type"]), **spec}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in out.items()}


def _given_spec(given: dict, match, say, quiet: bool) -> dict:
    """A given spec (--model, stored, config) means its keywords and the defaults for the rest;
    the facts of the layout the file is in (a MeanShift's mean, ...) fill what it leaves out. Where
    the detection would assume otherwise than the default, a note says so (not for a stored spec,
    which describes its weights exactly)."""
    if match is None:
        return given
    spec = {**given, **{k: v for k, v in match.implied.items() if k not in given}}
    defaults = model_defaults(spec["type"])
    for note in [] if quiet else match.notes:
        k = note.split("=", 1)[0]
        if k in defaults and not _same(match.spec[k], defaults[k]):
            say(f"note: running with {k}={defaults[k]!r} (the default); the detection would "
                f"assume {note}: pass {_flag(k, repr(match.spec[k]))} for that")
    return spec


def _checked(state, spec: dict, source: str):
    """(Match, None) when the given spec fits the file under its model's detect rule; (None, why)
    when it does not but the file is in the model's own keys (the model is then built within the
    budget and the strict load names every mismatch, or the budget refuses it with `why`); (None,
    None) for a model without a rule. CheckpointError when the file is in one of the model's
    other layouts and does not fit, or when keywords stay unknown."""
    name = spec.get("type")
    if name not in MODELS.names() or not callable(getattr(MODELS.get(name), "detect", None)):
        return None, None
    try:
        match = check(state, spec)
    except NoMatch as err:
        if any(layout is not None for layout, _ in err.reasons):
            raise CheckpointError(f"{source} does not fit the model {describe(spec)}: {err}") \
                from None
        return None, str(err)
    if match.unknowns:
        raise CheckpointError(f"{source}: the weights do not fix {', '.join(match.unknowns)} of "
                              f"{describe(spec)}: pass {' '.join(_flag(k) for k in match.unknowns)}")
    return match, None


def _detect(state, source: str, known: dict, say):
    try:
        match = identify(state, **known)
    except DetectError as exc:
        msg = str(exc)
        if exc.match is not None:
            msg = msg[:msg.rindex(": pass detect(")]
        if exc.match is not None:  # one model fits, keywords unknown: the flags that give them
            msg += ": pass " + " ".join(_flag(k) for k in exc.match.unknowns)
        elif not exc.out_of_scope:  # a file srgrad does not run by design: no flag helps
            msg += "\npass --model TYPE --scale S (and --model-arg k=v) or --config CONFIG"
        raise CheckpointError(f"{source} carries no model spec and {msg}") from None
    how = f" (in {match.layout.name})" if match.layout is not None else ""
    facts = f": {card(match.spec).summary()}" if has_card(match.spec["type"]) else ""
    say(f"detected {describe(match.spec)} from the keys and shapes of {source}{how}{facts}")
    for note in match.notes:
        say(f"assumed {note} ({_flag(note.split('=', 1)[0], 'VALUE')} changes it)")
    return match
