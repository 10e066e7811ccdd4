"""Argument checks shared by the architectures: every model validates its keywords in Python, before
any layer is built, and names itself and the bad value in the error."""
from __future__ import annotations

import numbers


def check_scale(model: str, scale, supported=None) -> int:
    """`scale` must be an int >= 1 (bool refused); `supported`, when given, lists the scales the
    design allows. Returns the scale as a Python int."""
    if isinstance(scale, bool) or not isinstance(scale, numbers.Integral) or scale < 1:
        raise ValueError(f"{model}: scale must be a positive integer, got {scale!r}")
    if supported is not None and scale not in supported:
        allowed = ", ".join(f"x{s}" for s in supported)
        raise ValueError(f"{model}: scale x{scale} is not supported by this design "
                         f"(supported: {allowed})")
    return int(scale)


def check_positive_int(model: str, name: str, value, minimum: int = 1) -> int:
    """A count or channel number: an int >= `minimum` (bool refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{model}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_int_list(model: str, name: str, value, length: int, odd: bool = False) -> tuple:
    """A fixed-length list of positive ints (YAML lists and tuples both accepted); `odd` for kernel
    sizes that are padded to keep the image size."""
    if not isinstance(value, (list, tuple)) or len(value) != length:
        raise ValueError(f"{model}: {name} must be a list of {length} integers, got {value!r}")
    out = tuple(check_positive_int(model, name, v) for v in value)
    if odd and any(v % 2 == 0 for v in out):
        raise ValueError(f"{model}: {name} must be odd (padded to keep the size), got {value!r}")
    return out
