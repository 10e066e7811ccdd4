"""The framework's one global random generator (numpy's PCG64), as torch's default generator.

Every random draw that is not given its own generator comes from here: default weight
initialisation (framework.nn.init) and the dropout / drop-path masks (framework.functional.dropout).
`manual_seed(s)` replaces it with `np.random.default_rng(s)`, so a run that reseeds it (once, or
per iteration) repeats its weights and masks exactly. It starts seeded with 0, as torch starts from
a fixed default seed.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ._check import ArgumentTypeError, is_int

__all__ = ["manual_seed", "default_generator", "fork_rng", "generator_or_default"]

_generator = np.random.default_rng(0)


def manual_seed(seed) -> np.random.Generator:
    """Reseed the global generator: `seed` is a non-negative int or a sequence of them (what
    np.random.default_rng takes, e.g. (run_seed, iteration)). Returns the new generator."""
    global _generator
    items = seed if isinstance(seed, (list, tuple)) else (seed,)
    if not items or not all(is_int(s) for s in items):
        raise ArgumentTypeError(f"manual_seed: seed must be an int or a sequence of ints, got {seed!r}")
    if any(s < 0 for s in items):
        raise ValueError(f"manual_seed: seed must be non-negative, got {seed!r}")
    _generator = np.random.default_rng([int(s) for s in items] if isinstance(seed, (list, tuple))
                                       else int(seed))
    return _generator


def default_generator() -> np.random.Generator:
    """The global generator (the live object: draws from it advance the framework's stream)."""
    return _generator


def generator_or_default(owner: str, generator) -> np.random.Generator:
    """A function's `generator=` argument: a numpy Generator as given, None the global one;
    ArgumentTypeError naming `owner` otherwise."""
    if generator is None:
        return _generator
    if not isinstance(generator, np.random.Generator):
        raise ArgumentTypeError(f"{owner}: generator must be a numpy Generator "
                                f"(np.random.default_rng(seed)) or None, got "
                                f"{type(generator).__name__}")
    return generator


@contextlib.contextmanager
def fork_rng(seed=0):
    """Within the block the global generator is a fresh one seeded `seed`; on exit the caller's is
    back, not advanced (torch.random.fork_rng): build or draw without shifting a run's stream."""
    global _generator
    saved = _generator
    _generator = np.random.default_rng(seed)
    try:
        yield _generator
    finally:
        _generator = saved
