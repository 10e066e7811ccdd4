"""`framework.device`: torch.device's shape for the one device srgrad has, so that
`device = framework.device("cuda" if framework.cuda.is_available() else "cpu")` and
`x.to(device)`, `model.to(device)`, `framework.zeros(3, device=device)` read as in torch.

A device object of another type ("cuda", "mps", ...) can be made, as torch allows without the
hardware; moving a tensor or model to it is the error (Tensor.to / Module.to / the factories).
"""
from __future__ import annotations

import re

from ._check import ArgumentTypeError, is_int

__all__ = ["device"]

_SPEC = re.compile(r"([a-z_]+)(?::(\d+))?")


class device:
    """torch.device(type[, index]) or torch.device("type:index"): `.type`, `.index` (None unless
    given), `str()` and equality as torch's."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):  # noqa: A002 (torch's parameter name)
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        match = _SPEC.fullmatch(type) if isinstance(type, str) else None
        if match is None:
            raise ArgumentTypeError(f"device: expected a string like 'cpu' or 'cuda:0', got "
                                    f"{type!r}")
        if match.group(2) is not None:
            if index is not None:
                raise ValueError(f"device: {type!r} already names index {match.group(2)}")
            index = int(match.group(2))
        if index is not None and not (is_int(index) and index >= 0):
            raise ArgumentTypeError(f"device: index must be an int >= 0, got {index!r}")
        self.type, self.index = match.group(1), None if index is None else int(index)

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        extra = "" if self.index is None else f", index={self.index}"
        return f"device(type={self.type!r}{extra})"

    def __eq__(self, other) -> bool:
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))
