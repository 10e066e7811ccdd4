"""`framework.cuda`: what torch.cuda answers on a machine without a GPU, so that scripts written
the torch way (`if framework.cuda.is_available(): ...`, `framework.cuda.manual_seed_all(0)`) run
unchanged. srgrad computes on the CPU only."""
from __future__ import annotations

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all"]


def is_available() -> bool:
    """False: srgrad has no GPU backend."""
    return False


def device_count() -> int:
    """0: no GPU devices."""
    return 0


def manual_seed(seed) -> None:
    """Nothing to seed without a GPU (torch does the same when CUDA is unavailable); the CPU
    stream is framework.manual_seed's."""


manual_seed_all = manual_seed
