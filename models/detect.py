"""Which model is this checkpoint? `detect(state_dict) -> {"type": Name, **constructor keywords}`.

A `.pth` from BasicSR, Real-ESRGAN or srgrad carries weights but not the architecture's name (what
chaiNNer/ComfyUI users load; spandrel does this for PyTorch). Each registered model with a
`detect(shapes, known)` staticmethod takes part: its rule lives next to the model, reads the few
keys and shapes that fix its keywords, and raises `NoMatch` (why) when the state_dict is not its own.
This module only tries the rules, then confirms every candidate by building it (a scratch RNG, so the
caller's init stream is untouched) and comparing its state_dict with the checkpoint's: the same key
set and every shape. A new model adds a `detect` staticmethod and nothing here.

    from models.detect import detect
    spec = detect(state_dict)                        # {'type': 'RRDBNet', 'num_block': 23, ...}
    model = MODELS.build(spec); model.load_state_dict(state_dict)

A keyword the weights cannot tell is a rule's `Unknown(probe, why)` when the model has no default
for it (SRCNN's scale: the bicubic pre-upsampling has no weights) or the weights rule the default out
(act_type of an SRVGGNetCompact without PReLU slopes: ReLU or LeakyReLU?): the caller gives it,
`detect(sd, scale=3)`, else the error asks for it. Keywords that change no weight and that published
checkpoints leave at their defaults (img_range, rgb_mean, res_scale, UpsampleNet's mode) are assumed
at the defaults unless given. A given keyword the weights contradict rules that model out, and so
does one the model does not take, which also settles a tie (`types=[...]` restricts the candidates
by name). Unknown or ambiguous state_dicts raise a ValueError that lists every candidate and why it
failed or fits. Only `.shape` of each value is read: numpy arrays, torch tensors (even on the "meta"
device) and srgrad Tensors all work.
"""
from __future__ import annotations

import inspect
import math


from framework.random import fork_rng
from framework.registry import MODELS

__all__ = ["detect", "NoMatch", "Unknown", "need", "indices", "count", "split_shuffle"]


class NoMatch(ValueError):
    """A rule's answer "this state_dict is not (or cannot be built as) this model": the message
    says why, and detect() lists it."""


class Unknown:
    """A keyword the weights do not fix: `probe` is a value to build the model with while checking
    the shapes, `why` the reason, `choices` the values it could take (for the error message)."""

    def __init__(self, probe, why: str, choices=None):
        self.probe, self.why, self.choices = probe, why, choices

    def __repr__(self):
        return f"Unknown({self.why})"


# -- helpers for the rules ---------------------------------------------------------------------------
def need(shapes: dict, key: str, ndim: int | None = None) -> tuple:
    """The shape of `key`, or NoMatch naming the missing key (or the wrong number of dimensions)."""
    if key not in shapes:
        raise NoMatch(f"no key {key!r}")
    shape = shapes[key]
    if ndim is not None and len(shape) != ndim:
        raise NoMatch(f"{key} has shape {shape}, not {ndim}-dimensional")
    return shape


def indices(shapes: dict, prefix: str, suffix: str = "") -> list[int]:
    """Sorted i for which a key `prefix.i.<...>suffix` exists (the entries of a Sequential)."""
    head = prefix + "." if prefix else ""
    found = set()
    for key in shapes:
        if key.startswith(head) and key.endswith(suffix):
            part = key[len(head):].split(".", 1)[0]
            if part.isdigit():
                found.add(int(part))
    return sorted(found)


def count(shapes: dict, prefix: str, suffix: str = "") -> int:
    """How many consecutive entries 0, 1, ... a Sequential `prefix` has (keys ending in `suffix`);
    NoMatch when an index is skipped (a checkpoint cut or merged by hand)."""
    found = indices(shapes, prefix, suffix)
    if found != list(range(len(found))):
        raise NoMatch(f"{prefix}.* entries are not numbered 0..{len(found) - 1}: {found}")
    return len(found)


def split_shuffle(channels: int, num_in_ch: int, known: dict, owner: str) -> tuple[int, int]:
    """(num_out_ch, scale) of a last conv with num_out_ch * scale^2 channels before a pixel
    shuffle. A given scale or num_out_ch decides; otherwise num_out_ch = num_in_ch, then 3, then 1,
    the first that leaves a square."""
    def root(q):
        r = math.isqrt(q) if q >= 1 else 0
        return r if r * r == q else None

    if "scale" in known and isinstance(known["scale"], int) and known["scale"] >= 1:
        s = known["scale"]
        if channels % (s * s):
            raise NoMatch(f"{owner}: {channels} output channels are not num_out_ch * {s}^2")
        return channels // (s * s), s
    outs = [known["num_out_ch"]] if isinstance(known.get("num_out_ch"), int) else [num_in_ch, 3, 1]
    for out in dict.fromkeys(outs):
        if out >= 1 and channels % out == 0 and root(channels // out):
            return out, root(channels // out)
    raise NoMatch(f"{owner}: {channels} output channels are not num_out_ch * scale^2 for "
                  f"num_out_ch in {list(dict.fromkeys(outs))}")


# -- the detector ------------------------------------------------------------------------------------
def _shapes(state_dict) -> dict:
    if not hasattr(state_dict, "items"):
        raise TypeError(f"detect: expected a state_dict (a mapping of names to arrays), got "
                        f"{type(state_dict).__name__}")
    shapes = {}
    for key, value in state_dict.items():
        shape = getattr(value, "shape", None)
        if not isinstance(key, str) or shape is None:
            raise TypeError(f"detect: state_dict entry {key!r} is not a named array "
                            f"(got {type(value).__name__})")
        shapes[key] = tuple(int(n) for n in shape)
    return shapes


def _same(a, b) -> bool:
    norm = (lambda v: tuple(v) if isinstance(v, (list, tuple)) else v)
    return norm(a) == norm(b)


def _describe(spec: dict) -> str:
    kw = ", ".join(f"{k}={'?' if isinstance(v, Unknown) else repr(v)}" for k, v in spec.items()
                   if k != "type")
    return f"{spec['type']}({kw})"


def _mismatch(own: dict, shapes: dict) -> str | None:
    """Why a built model's state_dict (key -> shape) differs from the checkpoint's, or None."""
    missing = [k for k in own if k not in shapes]
    unexpected = [k for k in shapes if k not in own]
    wrong = [f"{k} {shapes[k]} (model {own[k]})" for k in own if k in shapes and own[k] != shapes[k]]
    parts = []
    for what, keys in (("missing keys", missing), ("unexpected keys", unexpected),
                       ("shape mismatches", wrong)):
        if keys:
            more = f" and {len(keys) - 4} more" if len(keys) > 4 else ""
            parts.append(f"{what} {', '.join(map(str, keys[:4]))}{more}")
    return "; ".join(parts) or None


def _try(name: str, cls, shapes: dict, known: dict):
    """(spec, unknowns) when `name` fits the checkpoint, else NoMatch."""
    params = inspect.signature(cls).parameters
    open_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    foreign = [k for k in known if k not in params and not open_kw]
    if foreign:
        raise NoMatch(f"takes no keyword {', '.join(map(repr, foreign))}")
    try:
        found = cls.detect(shapes, dict(known))
    except (LookupError, ArithmeticError) as err:  # a shape no rule foresaw (a 0-channel conv...)
        raise NoMatch(f"its rule cannot read these shapes ({type(err).__name__}: {err})") from None
    for k, v in found.items():
        if k in known and not isinstance(v, Unknown) and not _same(v, known[k]):
            raise NoMatch(f"the weights say {k}={v!r}, {known[k]!r} was given")
    spec = {"type": name, **found, **known}
    unknowns = {k: v for k, v in spec.items() if isinstance(v, Unknown)}
    probe = {k: (v.probe if isinstance(v, Unknown) else v) for k, v in spec.items()}
    try:
        with fork_rng():  # building draws init weights: not from the caller's stream
            model = MODELS.build(probe)
    except (ValueError, TypeError) as err:
        raise NoMatch(f"{_describe(spec)} does not build: {err}") from None
    own = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    why = _mismatch(own, shapes)
    if why:
        raise NoMatch(f"{_describe(spec)}: {why}")
    return spec, unknowns


def detect(state_dict, *, types=None, **known) -> dict:
    """The model spec `{"type": Name, **keywords}` whose state_dict has exactly the keys and shapes
    of `state_dict` (a mapping of names to arrays or tensors: only `.shape` is read).

    Args:
        types: names of the models to try (default: every registered model with a detect rule).
        **known: keywords the caller knows (scale, act_type, img_range, ...): kept in the spec,
            checked against the weights where they speak.

    Raises:
        ValueError: no model fits, several fit, or the one that fits needs a keyword the weights
            do not fix; the message lists each candidate and why.
    """
    shapes = _shapes(state_dict)
    if not shapes:
        raise ValueError("detect: the state_dict is empty")
    names = [n for n in MODELS.names() if callable(getattr(MODELS.get(n), "detect", None))]
    if types is not None:
        types = [types] if isinstance(types, str) else list(types)
        unknown_types = [t for t in types if t not in names]
        if unknown_types:
            raise ValueError(f"detect: no detect rule for {', '.join(map(repr, unknown_types))} "
                             f"(models with one: {', '.join(names)})")
        names = [n for n in names if n in types]
    fits, failures = [], []
    for name in names:
        try:
            fits.append(_try(name, MODELS.get(name), shapes, known))
        except NoMatch as err:
            failures.append(f"  {name}: {err}")
    if len(fits) == 1 and not fits[0][1]:
        return fits[0][0]
    if len(fits) == 1:
        spec, unknowns = fits[0]
        wants = "; ".join(
            f"{k} ({u.why}{'; one of ' + ', '.join(map(repr, u.choices)) if u.choices else ''})"
            for k, u in unknowns.items())
        args = ", ".join(f"{k}=..." for k in unknowns)
        shown = {k: v for k, v in spec.items() if k not in unknowns}
        raise ValueError(f"detect: the state_dict is a {_describe(shown)}, but its weights do not "
                         f"fix {wants}: pass detect(state_dict, {args})")
    keys = list(shapes)
    sample = ", ".join(keys[:3]) + (f", ... ({len(keys)} keys)" if len(keys) > 3 else "")
    if not fits:
        raise ValueError(f"detect: no registered model fits this state_dict ({sample}):\n"
                         + "\n".join(failures))
    listed = "\n".join(f"  {_describe({k: v for k, v in s.items() if k not in u})}"
                       + (f" (and {', '.join(u)} unknown)" if u else "") for s, u in fits)
    raise ValueError(f"detect: the state_dict ({sample}) fits {len(fits)} models:\n{listed}\n"
                     f"pass types=[...] or a keyword only one of them takes to choose")
