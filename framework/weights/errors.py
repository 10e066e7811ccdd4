"""The one error type of the weights formats, in a leaf module: the safetensors checkpoints, the
`.pth` reader and its pickle machine all raise it, and none of them imports another for it."""
from __future__ import annotations

__all__ = ["CheckpointError"]


class CheckpointError(ValueError):
    """A weights or checkpoint file that cannot be used: not safetensors (e.g. pickle), truncated,
    or made for a different architecture. The message names the file."""
