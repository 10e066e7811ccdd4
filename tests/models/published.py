"""Shared by the published-layout tests: a torch twin in a layout's OWN module structure is saved as
a .pth (torch.save, zip or legacy), loaded through srgrad's loading path with no model named
(framework.engine.load_model: detection, layout mapping, strict load), and run on the same input."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.engine import load_model

torch = pytest.importorskip("torch")


def save_pth(twin, path, fmt: str, wrap: str | None = None):
    """torch.save of the twin's state_dict (under `wrap`, e.g. "params_ema", when given)."""
    state = twin.state_dict()
    torch.save({wrap: state} if wrap else state, str(path), _use_new_zipfile_serialization=fmt == "zip")
    return path


def run_published(twin, tmp_path, fmt="zip", shape=(1, 3, 6, 5), seed=0, **load_kw):
    """(srgrad's output, the twin's, info, what load_model said) for a random input of `shape`,
    from the twin's .pth loaded with no --model."""
    twin.eval()
    path = save_pth(twin, tmp_path / f"published_{fmt}.pth", fmt)
    said = []
    model, info = load_model(path, say=said.append, **load_kw)
    x = np.random.default_rng(seed).uniform(0, 1, shape).astype(np.float32)
    with sg.no_grad():
        ours = model(sg.Tensor(x)).data
    with torch.no_grad():
        ref = twin(torch.from_numpy(x)).numpy()
    return ours, ref, info, said


def assert_close(ours, ref, rel=2e-5):
    """float32 outputs equal to a bound relative to the output's scale (float rounding only)."""
    assert ours.shape == ref.shape
    bound = rel * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(ours, ref, rtol=0, atol=bound)
