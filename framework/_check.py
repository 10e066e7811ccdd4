"""Argument checks, one of each. Every public op, layer, model, dataset and optimizer validates its
arguments through these before any kernel runs (numba does not check bounds), and each error names
the caller (`owner`: "conv2d", "EDSR", "BatchLoader", ...) and the argument.

A bool is never a number here (`True` would pass for 1 otherwise), and numpy integers count as ints.
"""
from __future__ import annotations

import difflib
import math
import numbers
import os
import reprlib

import numpy as np

__all__ = ["ArgumentTypeError", "is_int", "is_number", "int_arg", "pair", "int_pair", "int_list",
           "number", "flag", "choice", "float_array", "did_you_mean", "show", "clip_message",
           "name_problem"]

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 160
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxlevel = 3
SHOW_CHARS = 240            # the most a value takes in a message
MESSAGE_LINE_CHARS = 1000   # the most one line of an error message takes (clip_message)
MESSAGE_LINES = 60          # and its number of lines


def show(value) -> str:
    """repr for messages, bounded (at most SHOW_CHARS): a value built from YAML aliases can expand
    to billions of items, and its full repr would exhaust memory before the error is shown."""
    text = _REPR.repr(value)
    return text if len(text) <= SHOW_CHARS else text[:SHOW_CHARS - 3] + "..."


def clip_message(text: str) -> str:
    """An error message bounded for printing: each line at most MESSAGE_LINE_CHARS, at most
    MESSAGE_LINES lines, with what was left out counted."""
    lines = str(text).split("\n")
    out = [line if len(line) <= MESSAGE_LINE_CHARS else
           f"{line[:MESSAGE_LINE_CHARS]}... ({len(line) - MESSAGE_LINE_CHARS:,} more characters)"
           for line in lines[:MESSAGE_LINES]]
    if len(lines) > MESSAGE_LINES:
        out.append(f"... ({len(lines) - MESSAGE_LINES:,} more lines)")
    return "\n".join(out)


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type: a TypeError, as Python raises, and also a ValueError, so a
    caller that turns every bad argument into a one-line message (configs, command lines) needs
    one except clause."""


def is_int(value) -> bool:
    """An integral number that is not a bool (Python or numpy)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _prefix(owner: str) -> str:
    return f"{owner}: " if owner else ""


def _bound(minimum: int) -> str:
    return "a positive int" if minimum == 1 else f"an int >= {minimum}"


def int_arg(owner: str, name: str, value, minimum: int | None = 1) -> int:
    """`value` as a Python int >= `minimum` (None: any int): "owner: name must be a positive int,
    got 0", a TypeError for another type (2.0, '8', True), a ValueError below the minimum."""
    if not is_int(value) or (minimum is not None and value < minimum):
        what = "an int" if minimum is None else _bound(minimum)
        error = ValueError if is_int(value) else ArgumentTypeError
        raise error(f"{_prefix(owner)}{name} must be {what}, got {show(value)}")
    return int(value)


def pair(owner: str, name: str, value, kind=int, minimum=None, positive: bool = False) -> tuple:
    """An int (kind=int) or a number (kind=float), or a pair of them (H, W), as a tuple of two Python
    ints or floats. ValueError for another length, TypeError for another type, ValueError below
    `minimum` or, with `positive`, for a value that is not finite and > 0."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(items) != 2:
        raise ValueError(f"{_prefix(owner)}{name} must have 2 entries (H, W), got {show(value)}")
    ok = is_int if kind is int else is_number
    if not all(ok(v) for v in items):
        what = "an int or a pair of ints" if kind is int else "a number or a pair of numbers"
        raise ArgumentTypeError(f"{_prefix(owner)}{name} must be {what}, got {show(value)}")
    if minimum is not None and any(v < minimum for v in items):
        raise ValueError(f"{_prefix(owner)}{name} must be >= {minimum}, got {show(value)}")
    if positive and not all(v > 0 and math.isfinite(v) for v in items):
        raise ValueError(f"{_prefix(owner)}{name} must be positive, got {show(value)}")
    return tuple(kind(v) for v in items)


def int_pair(owner: str, name: str, value, minimum: int) -> tuple[int, int]:
    """pair() of ints >= minimum (stride, padding, kernel_size, ...)."""
    return pair(owner, name, value, int, minimum)


def int_list(owner: str, name: str, value, length: int | None = None, minimum: int = 1,
             odd: bool = False) -> tuple[int, ...]:
    """A list (or tuple) of ints >= minimum, of `length` entries when given; `odd` for kernel sizes
    padded to keep the image size."""
    if not isinstance(value, (list, tuple)) or (length is not None and len(value) != length) \
            or not all(is_int(v) and v >= minimum for v in value):
        count = f"{length} " if length is not None else ""
        raise ValueError(f"{_prefix(owner)}{name} must be a list of {count}ints >= {minimum}, got "
                         f"{show(value)}")
    if odd and any(v % 2 == 0 for v in value):
        raise ValueError(f"{_prefix(owner)}{name} must be odd (padded to keep the size), got "
                         f"{show(value)}")
    return tuple(int(v) for v in value)


def number(owner: str, name: str, value, low=None, high=None, low_open: bool = False,
           high_open: bool = False) -> float:
    """`value` as a finite Python float within [low, high] (an end open when `*_open`; None: no
    bound). TypeError unless a number (a YAML string such as '1e-4' gets a hint); ValueError
    outside the range."""
    if not is_number(value):
        hint = " (YAML 1.1 reads 1e-4 as a string: write 1.0e-4)" if isinstance(value, str) else ""
        raise ArgumentTypeError(f"{_prefix(owner)}{name} must be a number, got {type(value).__name__} "
                        f"{show(value)}{hint}")
    v = float(value)
    below = low is not None and (v <= low if low_open else v < low)
    above = high is not None and (v >= high if high_open else v > high)
    if math.isnan(v) or below or above:
        if high is None:
            rule = f"> {low}" if low_open else f">= {low}"
        elif low is None:
            rule = f"< {high}" if high_open else f"<= {high}"
        else:
            rule = f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{_prefix(owner)}{name} must be {rule}, got {show(value)}")
    return v


def flag(owner: str, name: str, value) -> bool:
    """A real bool (TypeError for 0/1, 'yes', None)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{_prefix(owner)}{name} must be a bool, got {show(value)}")
    return bool(value)


def did_you_mean(name, known) -> str:
    """"; did you mean 'x'?" for the closest known name (a case-only difference first), or ""."""
    if not isinstance(name, (str, int, float)) or len(str(name)) > SHOW_CHARS:
        return ""  # a list or a long text is no misspelt name
    known = [str(k) for k in known]
    same_letters = [k for k in known if k.lower() == str(name).lower()]
    hint = same_letters or difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
    return f"; did you mean {hint[0]!r}?" if hint else ""


def choice(owner: str, name: str, value, choices):
    """`value` if it is one of `choices`, else ValueError listing them (with a did-you-mean)."""
    if not isinstance(value, (str, int, float, type(None))) or value not in choices:
        raise ValueError(f"{_prefix(owner)}{name} must be one of {', '.join(map(repr, choices))}, got "
                         f"{show(value)}{did_you_mean(value, choices)}")
    return value


def float_array(owner: str, name: str, x) -> np.ndarray:
    """The array behind a Tensor or array-like, which must be float32 or float64 (TypeError)."""
    arr = np.asarray(getattr(x, "data", x)) if not isinstance(x, np.ndarray) else x
    if arr.dtype not in (np.float32, np.float64):
        raise ArgumentTypeError(f"{_prefix(owner)}{name} must be float32 or float64, got dtype {arr.dtype}")
    return arr


_SEPARATORS = ("/", "\\")  # both, on every system: a name must mean the same folder everywhere


def name_problem(value, part: bool = False):
    """Why `value` cannot be a name srgrad makes a file or folder of (a run, a results folder, a
    test set, a model's -n name), or None: it must be exactly one path component, not empty, not
    '.' or '..', without a path separator ('/' or '\\'), NUL or (on Windows) a drive, so it never
    points outside its parent folder. part: it is joined with other text into one name (a
    suffix): only separators, NUL and a drive are refused."""
    if not isinstance(value, str):
        return f"expected a str, got {type(value).__name__} {show(value)}"
    if not part and value in ("", ".", ".."):
        return f"{show(value)} is not a name (it must name one folder or file)"
    if any(s in value for s in _SEPARATORS) or "\0" in value or os.path.splitdrive(value)[0]:
        if part:
            return f"{show(value)} would make a path of a file name: no '/', '\\' or drive in it"
        return (f"{show(value)} is a path, not a name: it must name one folder or file, without "
                f"'/', '\\' or a drive")
    return None
