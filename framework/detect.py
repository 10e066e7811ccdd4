"""Which model is this state_dict? `detect(state_dict) -> {"type": Name, **constructor keywords}`.

A `.pth` from BasicSR, Real-ESRGAN, an architecture's own repository or srgrad carries weights but
not the architecture's name (what chaiNNer/ComfyUI users load; spandrel does this for PyTorch).
Each registered model (framework.registry.MODELS) with a `detect(shapes, known)` staticmethod takes
part: its rule lives beside the model, reads the few keys and shapes that fix its keywords, and
raises `NoMatch` (why) when the state_dict is not its own. A model whose published files also come
in another repository's key layout lists them as `layouts` (a tuple of `Layout`: a key mapping to
the model's own keys, BasicSR's, plus the keywords that layout's structure implies); the rule then
also runs on the mapped keys. This module only tries the rules, then confirms every candidate by
building it (a scratch RNG, so the caller's init stream is untouched, and within a parameter budget
of the file's size, which the model's card counts before anything is allocated: framework/card.py) and comparing its state_dict with the (mapped) checkpoint's: the same key set
and every shape. A new model adds a `detect` staticmethod (and `layouts`) and nothing here.

    from framework.detect import detect, identify
    spec = detect(state_dict)                        # {'type': 'RRDBNet', 'num_block': 23, ...}
    match = identify(state_dict)                     # spec, layout, notes, the state in srgrad's keys
    model = MODELS.build(match.spec); model.load_state_dict(match.convert(state_dict))

A keyword the weights cannot tell is never guessed silently. A rule either
- leaves it at the constructor's default or returns it as a plain value when a documented
  convention of the original repository decides it (the rule's docstring says which);
- returns `Assumed(value, why)` when a convention decides it that a file from elsewhere may not
  follow: it is used, and said (Match.notes; srgrad-infer prints it with the --model-arg that changes
  it); `Assumed(value, why, quiet=True)` for a documented convention that a given keyword may
  override (a plain value would contradict it);
- returns `Unknown(probe, why, choices)` when nothing decides it (SRCNN's scale: the bicubic
  pre-upsampling has no weights): the caller gives it, `detect(sd, scale=3)`, else the error asks.
A given keyword the weights contradict rules that model out, and so does one the model does not
take, which also settles a tie (`types=[...]` restricts the candidates by name). Unknown or ambiguous
state_dicts raise a ValueError that says first that no architecture srgrad has matches (or which
several do), then what the keys look like (framework/signatures.py), then each model's reason.
Only `.shape` of each value is read, except by a layout whose keywords live in values (the mean of
a MeanShift conv) and by a rule whose detect takes a third parameter `values` (a buffer that
records the structure: MoESR's and FDAT's MetaUpsample): numpy arrays, torch tensors and srgrad
Tensors all work.
"""
from __future__ import annotations

import inspect
import math
import re
from dataclasses import dataclass, field

from ._check import show
from .card import SpecTooLarge, preflight
from .nn.module import BudgetError, parameter_budget
from .random import fork_rng
from .registry import MODELS

__all__ = ["detect", "identify", "check", "Match", "Layout", "NoMatch", "DetectError", "Unknown",
           "Assumed", "need",
           "indices", "count", "split_shuffle", "describe", "shapes_of", "budget"]


class NoMatch(ValueError):
    """A rule's answer "this state_dict is not (or cannot be built as) this model": the message
    says why, and detect() lists it."""


class DetectError(ValueError):
    """identify()'s refusal (no model fits, several do, or one needs keywords the weights do not
    fix: then `match` is that one, with its `unknowns`; `out_of_scope`: the file is an architecture
    srgrad does not run by design, framework/signatures.py, so no other flags help)."""

    def __init__(self, message: str, match=None, out_of_scope: bool = False):
        super().__init__(message)
        self.match, self.out_of_scope = match, out_of_scope


class Unknown:
    """A keyword the weights do not fix: `probe` is a value to build the model with while checking
    the shapes, `why` the reason, `choices` the values it could take (for the error message)."""

    def __init__(self, probe, why: str, choices=None):
        self.probe, self.why, self.choices = probe, why, choices

    def __repr__(self):
        return f"Unknown({self.why})"


class Assumed:
    """A keyword the weights do not fix, decided by a convention: `value` is used unless the caller
    gives the keyword (no conflict then), and `why` is said (Match.notes) unless `quiet` (a
    convention every published file of the original repository follows, which the rule's
    docstring states)."""

    def __init__(self, value, why: str, quiet: bool = False):
        self.value, self.why, self.quiet = value, why, quiet

    def __repr__(self):
        return f"Assumed({self.value!r}: {self.why})"


class Layout:
    """A published key layout of a model other than srgrad's own (BasicSR's keys).

    Args:
        name: what it is, for messages ("the original ESRGAN repository's (model.N)").
        example: a published file in this layout (README, messages).
        signature: keys that mark it, all present.
        rules: (pattern, replacement) pairs, or a function of the shapes returning them (for a
            layout whose indices depend on the file): each key becomes the replacement of the first
            pattern that matches it whole (`re.fullmatch`; groups as `\\1`), or is dropped when the
            replacement is None; a key no pattern matches is kept as it is.
        keywords: shapes -> constructor keywords the layout's structure implies (plain values are
            facts of the file; `Assumed` values conventions the caller may override).
        values: (state_dict, spec) -> keywords read from the values of dropped keys (the mean of a
            MeanShift conv); raises NoMatch when srgrad's model cannot represent them.
    """

    def __init__(self, name: str, example: str, signature: tuple, rules, keywords=None,
                 values=None):
        self.name, self.example, self.signature = name, example, tuple(signature)
        self.rules, self.keywords, self.values = rules, keywords, values

    def applies(self, shapes) -> bool:
        return all(k in shapes for k in self.signature)

    def mapping(self, shapes: dict) -> dict:
        """{key of the file: key of the model, or None (dropped)}; NoMatch when two keys land on
        the same name."""
        rules = self.rules(shapes) if callable(self.rules) else self.rules
        compiled = [(re.compile(p), r) for p, r in rules]
        out, seen = {}, {}
        for key in shapes:
            new = key
            for pattern, replacement in compiled:
                m = pattern.fullmatch(key)
                if m:
                    new = None if replacement is None else m.expand(replacement)
                    break
            if new is not None and new in seen:
                raise NoMatch(f"{seen[new]} and {key} both map to {new}")
            seen[new] = key
            out[key] = new
        return out

    def __repr__(self):
        return f"Layout({self.name})"


@dataclass
class Match:
    """What identify() found: the spec, the layout the keys are in (None: the model's own), the
    key mapping, the assumptions made (`notes`: "keyword=value: why"), the keywords left Unknown,
    the model built to confirm it (a fresh init; None when keywords are unknown) and the keywords
    the layout implies (`implied`: facts of its structure or values the shapes do not show)."""
    spec: dict
    layout: Layout | None = None
    mapping: dict | None = None
    notes: list = field(default_factory=list)
    unknowns: dict = field(default_factory=dict)
    model: object = None
    implied: dict = field(default_factory=dict)

    def convert(self, state_dict) -> dict:
        """`state_dict` with the model's keys (the layout's keys renamed, its dropped keys gone)."""
        if self.mapping is None:
            return dict(state_dict)
        out = {}
        for key, value in state_dict.items():
            new = self.mapping.get(key, key)
            if new is not None:
                out[new] = value
        return out


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
def shapes_of(state_dict, owner: str = "detect") -> dict:
    """{key: shape tuple} of a state_dict (a mapping of names to arrays / tensors); TypeError for
    anything else."""
    if not hasattr(state_dict, "items"):
        raise TypeError(f"{owner}: expected a state_dict (a mapping of names to arrays), got "
                        f"{type(state_dict).__name__}")
    shapes = {}
    for key, value in state_dict.items():
        shape = getattr(value, "shape", None)
        if not isinstance(key, str) or shape is None:
            raise TypeError(f"{owner}: state_dict entry {key!r} is not a named array "
                            f"(got {type(value).__name__})")
        shapes[key] = tuple(int(n) for n in shape)
    return shapes


def _same(a, b) -> bool:
    norm = (lambda v: tuple(v) if isinstance(v, (list, tuple)) else v)
    return norm(a) == norm(b)


def describe(spec: dict) -> str:
    """`Name(k=v, ...)` of a spec, Unknown keywords as `?`, long values shortened."""
    kw = ", ".join(f"{k}={'?' if isinstance(v, Unknown) else show(v)}" for k, v in spec.items()
                   if k != "type")
    return f"{spec.get('type')}({kw})"


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


def budget(shapes: dict) -> int:
    """How many values a model built for weights of these shapes may hold while it is built
    (parameter_budget): twice theirs, plus room for a tiny model (a model that fits has as many)."""
    return 2 * sum(math.prod(s) for s in shapes.values()) + 65536


def _values_arg(cls, state, mapping) -> tuple:
    """(values,) for a rule whose detect takes a third parameter `values`: key (the model's own
    name) -> that entry of the state_dict as a numpy array (a buffer that records the network's
    structure, MoESR's and FDAT's MetaUpsample); () for the other rules. values is None when no
    state_dict is at hand."""
    if len(inspect.signature(cls.detect).parameters) < 3:
        return ()
    if state is None:
        return (None,)
    back = {new: old for old, new in (mapping or {}).items() if new is not None}

    def values(key):
        import numpy as np  # noqa: PLC0415 (only the rules that read values need it)
        value = state[back.get(key, key)]
        if hasattr(value, "detach"):  # a torch tensor
            value = value.detach().cpu().numpy()
        return np.asarray(getattr(value, "data", value) if not isinstance(value, np.ndarray)
                          else value)
    return (values,)


def _try(name: str, cls, shapes: dict, known: dict, layout: Layout | None, state) -> Match:
    """The Match when `name` (under `layout`, None: its own keys) fits the checkpoint, else NoMatch."""
    params = inspect.signature(cls).parameters
    open_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    foreign = [k for k in known if k not in params and not open_kw]
    if foreign:
        raise NoMatch(f"takes no keyword {', '.join(map(repr, foreign))}")
    mapping, implied = None, {}
    if layout is not None:
        implied = layout.keywords(shapes) if layout.keywords else {}
        mapping = layout.mapping(shapes)
        shapes = {mapping[k]: v for k, v in shapes.items() if mapping[k] is not None}
    facts = {k: (v.value if isinstance(v, Assumed) else v) for k, v in implied.items()}
    try:
        found = {**implied, **cls.detect(shapes, {**facts, **known}, *_values_arg(cls, state, mapping))}
    except (LookupError, ArithmeticError) as err:  # a shape no rule foresaw (a 0-channel conv...)
        raise NoMatch(f"its rule cannot read these shapes ({type(err).__name__}: {err})") from None
    for k, v in found.items():
        if k in known and not isinstance(v, (Unknown, Assumed)) and not _same(v, known[k]):
            raise NoMatch(f"the weights say {k}={show(v)}, {show(known[k])} was given")
    spec, notes = {"type": name}, []
    for k, v in found.items():
        if isinstance(v, Assumed) and k not in known and not v.quiet:
            notes.append(f"{k}={v.value!r}: {v.why}")
        spec[k] = v.value if isinstance(v, Assumed) else v
    spec.update(known)
    implied = {k: v for k, v in implied.items() if not isinstance(v, Assumed)}
    if layout is not None and layout.values is not None and state is not None:
        for k, v in layout.values(state, spec).items():
            if k in known and not _same(v, known[k]):
                raise NoMatch(f"the weights say {k}={show(v)}, {show(known[k])} was given")
            spec[k] = implied[k] = v
    unknowns = {k: v for k, v in spec.items() if isinstance(v, Unknown)}
    probe = {k: (v.probe if isinstance(v, Unknown) else v) for k, v in spec.items()}
    try:
        # building draws init weights: not from the caller's stream; a model much bigger than the
        # file cannot fit it, so it is refused before its memory is touched
        with fork_rng(), parameter_budget(budget(shapes), describe(spec)):
            preflight(probe, budget(shapes))  # the card's count, before anything is allocated
            model = MODELS.build(probe)
    except (BudgetError, SpecTooLarge) as err:
        raise NoMatch(str(err)) from None
    except (ValueError, TypeError) as err:
        raise NoMatch(f"{describe(spec)} does not build: {err}") from None
    own = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    why = _mismatch(own, shapes)
    if why:
        raise NoMatch(f"{describe(spec)}: {why}")
    return Match(spec, layout, mapping, notes, unknowns, None if unknowns else model, implied)


def _attempts(name: str, shapes: dict, known: dict, state) -> Match:
    """The Match of model `name` under its own keys or the first of its layouts that applies and
    fits; NoMatch with `.reasons` [(layout or None, NoMatch)] when none does."""
    cls = MODELS.get(name)
    reasons = []
    for layout in [None] + [lay for lay in getattr(cls, "layouts", ()) if lay.applies(shapes)]:
        try:
            return _try(name, cls, shapes, known, layout, state)
        except NoMatch as err:
            reasons.append((layout, err))
    shown = [(lay, err) for lay, err in reasons if lay is not None] or reasons
    err = NoMatch("; ".join((f"as {lay.name}: " if lay is not None else "") + str(e)
                            for lay, e in shown))
    err.reasons = reasons
    raise err


def check(state_dict, spec: dict) -> Match:
    """The Match of the model `spec` names ({"type": Name, **keywords}, the keywords taken as
    given), under its own keys or one of its layouts: how a spec from elsewhere (a file's metadata,
    a config, --model) is checked against the weights before its model is built. NoMatch says why
    it does not fit; KeyError when Name has no detect rule."""
    cls = MODELS.get(spec["type"])
    if not callable(getattr(cls, "detect", None)):
        raise KeyError(f"{spec['type']} has no detect rule")
    shapes = shapes_of(state_dict)
    return _attempts(spec["type"], shapes, {k: v for k, v in spec.items() if k != "type"},
                     state_dict)


def _candidates(types) -> list[str]:
    names = [n for n in MODELS.names() if callable(getattr(MODELS.get(n), "detect", None))]
    if types is None:
        return names
    types = [types] if isinstance(types, str) else list(types)
    unknown_types = [t for t in types if t not in names]
    if unknown_types:
        raise ValueError(f"detect: no detect rule for {', '.join(map(repr, unknown_types))} "
                         f"(models with one: {', '.join(names)})")
    return [n for n in names if n in types]


def _sample(shapes: dict) -> str:
    keys = list(shapes)
    return ", ".join(keys[:3]) + (f", ... ({len(keys)} keys)" if len(keys) > 3 else "")


def _no_fit(shapes: dict, names: list, failures: dict) -> str:
    """The message for a state_dict no rule fits: that first, then what its keys look like (a
    layout of one of srgrad's models that failed, another architecture's signature), then each
    model's reason."""
    from .signatures import looks_like
    lines = [f"detect: no architecture srgrad has matches this state_dict ({_sample(shapes)})."]
    for name, reasons in failures.items():
        for layout, err in reasons:
            if layout is not None:
                lines.append(f"It has the keys of {layout.name} (e.g. {layout.example}), which "
                             f"{name} reads, but: {err}")
    lines += [f"It looks like {hint}." for hint in looks_like(shapes, tried=names)]
    lines.append("Why each of srgrad's models does not fit:")
    for name, reasons in failures.items():
        shown = [(lay, err) for lay, err in reasons if lay is not None] or reasons
        lines.append(f"  {name}: " + "; ".join(
            (f"as {lay.name}: " if lay is not None else "") + str(err) for lay, err in shown))
    return "\n".join(lines)


def identify(state_dict, *, types=None, **known) -> Match:
    """The Match (spec `{"type": Name, **keywords}`, layout, key mapping, assumptions) of the one
    model whose state_dict has exactly the keys and shapes of `state_dict` (directly, or through
    one of the model's `layouts`).

    Args:
        state_dict: a mapping of names to arrays or tensors (only `.shape` is read, except by a
            layout whose keywords live in values).
        types: names of the models to try (default: every registered model with a detect rule).
        **known: keywords the caller knows (scale, act_type, img_range, ...): kept in the spec,
            checked against the weights where they speak, overriding an assumption.

    Raises:
        ValueError: no model fits, several fit, or the one that fits needs a keyword the weights
            do not fix; the message lists each candidate and why.
    """
    shapes = shapes_of(state_dict)
    if not shapes:
        raise ValueError("detect: the state_dict is empty")
    names = _candidates(types)
    fits, failures = [], {}
    for name in names:
        try:
            fits.append(_attempts(name, shapes, known, state_dict))
        except NoMatch as err:
            failures[name] = err.reasons
    if len(fits) == 1 and not fits[0].unknowns:
        return fits[0]
    if len(fits) == 1:
        spec, unknowns = fits[0].spec, fits[0].unknowns
        wants = "; ".join(
            f"{k} ({u.why}{'; one of ' + ', '.join(map(repr, u.choices)) if u.choices else ''})"
            for k, u in unknowns.items())
        args = ", ".join(f"{k}=..." for k in unknowns)
        shown = {k: v for k, v in spec.items() if k not in unknowns}
        raise DetectError(f"detect: the state_dict is a {describe(shown)}, but its weights do not "
                          f"fix {wants}: pass detect(state_dict, {args})", fits[0])
    if not fits:
        from .signatures import out_of_scope
        refused = out_of_scope(shapes, tried=names)
        if refused:  # an architecture srgrad does not run by design: what it is, in one line
            raise DetectError(f"detect: this state_dict is {refused}", out_of_scope=True)
        raise DetectError(_no_fit(shapes, names, failures))
    listed = "\n".join(
        f"  {describe({k: v for k, v in m.spec.items() if k not in m.unknowns})}"
        + (f" (and {', '.join(m.unknowns)} unknown)" if m.unknowns else "") for m in fits)
    raise DetectError(f"detect: the state_dict ({_sample(shapes)}) fits {len(fits)} models:\n"
                     f"{listed}\npass types=[...] or a keyword only one of them takes to choose")


def detect(state_dict, *, types=None, **known) -> dict:
    """The model spec `{"type": Name, **keywords}` whose state_dict has exactly the keys and shapes
    of `state_dict` (identify(...).spec: the arguments and errors are identify's)."""
    return identify(state_dict, types=types, **known).spec
