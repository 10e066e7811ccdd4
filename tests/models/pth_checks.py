"""Checks of the architectures whose files people share (issue 30): a `.pth` both ways with the torch
twin (strict loads), a published-layout file (written by the twin) through the inference path with
no model given (detected from its keys), and ONNX export of the same model."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg

from . import basicsr_checks as checks


def _eval_output(model, x):
    with sg.no_grad():
        return model.eval()(sg.tensor(x)).data


def check_pth_both_ways(spec: dict, shape, tmp_path):
    """srgrad's .pth writer -> torch.load(weights_only=True) -> twin.load_state_dict(strict=True) ->
    the twin's eval() output equals ours; and the twin's torch.save -> srgrad's strict load -> ours
    equals the twin's. float32, as published."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.weights import load_pth_state_dict, write_pth

    model = checks.build(spec, seed=1)
    x = np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)
    ours = _eval_output(model, x)
    path = tmp_path / "ours.pth"
    write_pth(path, {"params": model.state_dict()})
    twin = twins.build_twin(spec)
    twin.load_state_dict(torch.load(path, weights_only=True)["params"], strict=True)
    with torch.no_grad():
        theirs = twin.eval()(torch.from_numpy(x)).numpy()
    checks.assert_close(ours, theirs, np.float32, "twin loading srgrad's .pth")

    torch.manual_seed(3)
    other = twins.build_twin(spec)
    path = tmp_path / "twin.pth"
    torch.save(other.state_dict(), path)
    state, _ = load_pth_state_dict(str(path))
    fresh = checks.build(spec, seed=2)
    fresh.load_state_dict(state, strict=True)
    with torch.no_grad():
        theirs = other.eval()(torch.from_numpy(x)).numpy()
    checks.assert_close(_eval_output(fresh, x), theirs, np.float32, "srgrad loading the twin's .pth")


def check_published_file_infers(spec: dict, shape, tmp_path, want_spec: dict | None = None):
    """A file in the published layout, written by the twin (torch.save of its state_dict, as
    chaiNNer and traiNNer-redux users share them), through framework.engine.inference.upscale.load_model
    with no model spec: detected as `want_spec` (default: spec), its eval() output the twin's."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine import load_model

    torch.manual_seed(5)
    twin = twins.build_twin(spec)
    path = tmp_path / "published.pth"
    torch.save(twin.state_dict(), path)
    said = []
    model, info = load_model(path, say=said.append)
    assert said and said[0].startswith("detected "), said
    want = {k: v for k, v in (want_spec or spec).items()}
    for k, v in want.items():
        got = info["model"].get(k)
        assert (list(got) if isinstance(got, tuple) else got) == (list(v) if isinstance(v, tuple) else v), k
    x = np.random.default_rng(1).uniform(0, 1, shape).astype(np.float32)
    with torch.no_grad():
        theirs = twin.eval()(torch.from_numpy(x)).numpy()
    checks.assert_close(_eval_output(model, x), theirs, np.float32, "published file through load_model")


def check_export_cli(spec: dict, hw, tmp_path, other_shape=None):
    """`srgrad-export --weights published.pth --output m.onnx --input-size H W` on a file the twin
    wrote (no model given: detected), which checks ONNX Runtime against srgrad within 1e-4 itself;
    then ONNX Runtime again at other_shape (a dynamic export) against the twin. Returns the ONNX op
    types."""
    from framework.onnx import unavailable_reason
    if unavailable_reason():
        pytest.skip(unavailable_reason())
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from framework.engine.commands.export import main
    from tests.framework.onnx._util import op_types, ort_run

    torch.manual_seed(6)
    twin = twins.build_twin(spec).eval()
    src, out = tmp_path / "published.pth", tmp_path / "m.onnx"
    torch.save(twin.state_dict(), src)
    assert main(["--weights", str(src), "--output", str(out), "--input-size", *map(str, hw)]) == 0
    if other_shape is not None:
        x = np.random.default_rng(4).uniform(0, 1, other_shape).astype(np.float32)
        with torch.no_grad():
            want = twin(torch.from_numpy(x)).numpy()
        got = ort_run(out, x)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * max(1.0, np.abs(want).max()))
    return op_types(out)
