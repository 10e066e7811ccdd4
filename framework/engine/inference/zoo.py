"""The one place that imports every package whose classes register themselves, the application's
model zoo (`models/`) included, so the registries are complete before a config is validated or a
weights file is loaded. The library (framework/) never imports `models` anywhere else."""
from __future__ import annotations

import importlib

_PACKAGES = ("framework.nn", "framework.optim", "framework.data", "framework.metrics",
             "framework.engine.inference.upscale", "models")


def load_zoo() -> None:
    """Import the registering packages (a no-op after the first call)."""
    for name in _PACKAGES:
        importlib.import_module(name)
