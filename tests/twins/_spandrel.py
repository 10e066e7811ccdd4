"""What the twins of spandrel's architectures share: its call API's size requirement (pad the input
at the bottom and right to a minimum and a multiple, reflecting what the image allows and
replicating the rest; crop the output back), wrapped around an original network's forward."""
from __future__ import annotations

from torch.nn import functional as F


def pad_tensor(t, minimum, multiple=1):
    """spandrel's pad_tensor for SizeRequirements(minimum, multiple_of): (padded, did_pad)."""
    h, w = t.shape[-2:]

    def target(n):
        n = max(minimum, n)
        return n if n % multiple == 0 else (n // multiple + 1) * multiple

    pad_w, pad_h = target(w) - w, target(h) - h
    if not (pad_w or pad_h):
        return t, False
    rw, rh = min(pad_w, w - 1), min(pad_h, h - 1)
    t = F.pad(t, (0, rw, 0, rh), "reflect")
    return F.pad(t, (0, pad_w - rw, 0, pad_h - rh), "replicate"), True


def sized(cls, minimum, multiple, scale):
    """cls with spandrel's call API around its forward: pad to the size requirement, crop back
    (to `scale` x the input's size)."""
    class Sized(cls):
        def forward(self, x, *args):
            h, w = x.shape[-2:]
            x, padded = pad_tensor(x, minimum, multiple)
            y = super().forward(x, *args)
            return y[..., : h * scale, : w * scale] if padded else y

    Sized.__name__ = cls.__name__
    return Sized


def spandrel_architecture(name: str):
    """spandrel 0.4.2's own `spandrel.architectures.<name>` module (its network class and its
    Architecture: detect + load), imported without spandrel's package __init__, which imports every
    architecture and so torchvision and einops (torchvision does not import beside torch 2.13).
    pytest.skip with the reason when spandrel 0.4.2 is not installed
    (`pip install --no-deps spandrel==0.4.2`: its own imports are torch and typing_extensions)."""
    import importlib
    import importlib.util
    import os
    import sys
    import types

    import pytest

    package = sys.modules.get("spandrel")
    if package is None:
        spec = importlib.util.find_spec("spandrel")
        if spec is None or not spec.submodule_search_locations:
            pytest.skip("spandrel is not installed (pip install --no-deps spandrel==0.4.2)")
        # a bare package: its submodules import, its __init__ does not run
        package = types.ModuleType("spandrel")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["spandrel"] = package
    root = list(package.__path__)[0]
    with open(os.path.join(root, "__init__.py"), encoding="utf-8") as f:
        version = next((line.split('"')[1] for line in f if line.startswith("__version__")), None)
    if version != "0.4.2":
        pytest.skip(f"spandrel {version} is installed, these tests read 0.4.2")
    return importlib.import_module(f"spandrel.architectures.{name}")


def spandrel_twin(name: str, cls: str, renamed: dict):
    """A twin that IS spandrel 0.4.2's own network class `cls` of architecture `name` (the original
    as spandrel reads it, its keys, init and forward; no call-API padding), built from srgrad's
    keywords with `renamed` ({srgrad keyword: spandrel's}). For twins of originals that import
    nothing beyond torch and einops; skips like spandrel_architecture when spandrel is absent."""

    def build(**kwargs):
        network = getattr(spandrel_architecture(name), cls)
        return network(**{renamed.get(k, k): v for k, v in kwargs.items()})

    return build
