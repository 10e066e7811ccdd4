"""PyTorch twins of srgrad's models (models/): the same architectures with the same parameter names
and shapes, so `twin.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()},
strict=True)` works. Used by the parity tests and by the side-by-side benchmarks (scripts/), which
import this package; torch is an optional extra, imported only here and in the tests that need it.
One module per model family; a twin registers under the srgrad model's name with `@register`.

    from tests.twins import build_twin
    twin = build_twin({"type": "EDSR", "scale": 2})     # the same spec as `MODELS.build(spec)`
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

TWINS: dict = {}


def register(cls):
    """Class decorator: the twin of the srgrad model of the same name."""
    if cls.__name__ in TWINS:
        raise KeyError(f"twin {cls.__name__!r} is registered twice")
    TWINS[cls.__name__] = cls
    return cls


def build_twin(spec: dict) -> nn.Module:
    """The torch twin of `MODELS.build(spec)` (`spec` = `{type: Name, **kwargs}`), default torch init."""
    kwargs = {k: v for k, v in spec.items() if k != "type"}
    return TWINS[spec["type"]](**kwargs)


def twin_of(model, spec: dict, dtype=torch.float64) -> nn.Module:
    """The twin of srgrad `model` built from `spec`, carrying a copy of its weights (strict load)."""
    twin = build_twin(spec).to(dtype)
    state = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in model.state_dict().items()}
    twin.load_state_dict(state, strict=True)
    return twin


def num_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


from . import classic  # noqa: E402,F401  (registers; after `register` exists)
from . import srvgg, msrresnet, rrdbnet, rcan, swinir, hat, swin2sr, dat  # noqa: E402,F401
from . import span, plksr  # noqa: E402,F401
from . import realcugan, safmn, omnisr  # noqa: E402,F401
from . import drct, mosr, swiftsrgan  # noqa: E402,F401
from . import nafnet, drunet, scunet  # noqa: E402,F401
from . import mmrealsr  # noqa: E402,F401
from . import grl  # noqa: E402,F401
from . import atd  # noqa: E402,F401
from . import dncnn, fbcnn  # noqa: E402,F401
from . import uformer, kbnet  # noqa: E402,F401
from . import discriminators, kernelgan, zssr  # noqa: E402,F401
from . import rgt  # noqa: E402,F401
from . import craft  # noqa: E402,F401
from . import ditn, seemore, dctlsa  # noqa: E402,F401
from . import redux  # noqa: E402,F401
