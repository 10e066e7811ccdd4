"""Checks for the architectures people share as spandrel-loadable `.pth` files (issue 30): strict
`.pth` round trips both ways with the torch twin, and a file in the published layout (the twin's
bare state_dict, written by torch.save) run through srgrad's inference path with no model spec
(detected from its keys and shapes), matching the twin."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg

from . import basicsr_checks as checks


def check_pth_both_ways(spec: dict, shape, tmp_path):
    """srgrad's .pth writer -> torch.load(weights_only=True) -> twin.load_state_dict(strict=True),
    and the twin's torch.save file -> framework.weights.pth -> srgrad's strict load: the same output."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.weights.pth import load_pth_state_dict
    from framework.weights.pth_write import write_pth
    model = checks.build(spec, seed=1).to(np.float64)
    ours = tmp_path / "ours.pth"
    write_pth(ours, dict(model.state_dict()))
    twin = twins.build_twin(spec).to(torch.float64)
    twin.load_state_dict(torch.load(ours, weights_only=True), strict=True)
    x = np.random.default_rng(0).uniform(0, 1, shape)
    with sg.no_grad(), torch.no_grad():
        np.testing.assert_allclose(model(sg.tensor(x)).data, twin(torch.from_numpy(x)).numpy(),
                                   rtol=0, atol=1e-10)
    theirs = tmp_path / "theirs.pth"
    torch.manual_seed(5)
    torch.save(twins.build_twin(spec).to(torch.float64).state_dict(), theirs)
    state, _ = load_pth_state_dict(str(theirs))
    fresh = checks.build(spec, seed=2).to(np.float64)
    fresh.load_state_dict(state, strict=True)
    twin.load_state_dict(torch.load(theirs, weights_only=True), strict=True)
    with sg.no_grad(), torch.no_grad():
        np.testing.assert_allclose(fresh(sg.tensor(x)).data, twin(torch.from_numpy(x)).numpy(),
                                   rtol=0, atol=1e-10)


def check_published_file(spec: dict, shape, tmp_path, want: dict | None = None, extra=None, **known):
    """The twin's float32 state_dict as a bare torch.save file (the layout people share; plus the
    `extra` entries such files carry) -> framework.engine.load_model with no spec
    (detected; `known` as --scale would give it) -> its output on an LR batch of `shape` equals the
    twin's. `want`: the detected spec."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine import load_model
    torch.manual_seed(3)
    twin = twins.build_twin(spec).eval()
    path = tmp_path / "published.pth"
    torch.save({**twin.state_dict(), **(extra or {})}, path)
    said = []
    model, info = load_model(path, say=said.append, **known)
    assert said and said[0].startswith("detected ")
    got = {k: v for k, v in info["model"].items() if k != "type"}
    expected = {k: v for k, v in (want or spec).items() if k != "type"}
    assert info["model"]["type"] == spec["type"]
    assert {k: got.get(k) for k in expected} == expected, (got, expected)
    x = np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)
    with sg.no_grad(), torch.no_grad():
        ours = model(sg.tensor(x)).data
        theirs = twin(torch.from_numpy(x)).numpy()
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 * max(1.0, np.abs(theirs).max()))
