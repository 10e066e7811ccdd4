"""Shared by the ONNX tests: a Module around a function, an export + ONNX Runtime run, srgrad-export
on a published-layout .pth, and the skip when onnx/onnxruntime are missing."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import framework as sg
from framework import nn
from framework.onnx import unavailable_reason

REASON = unavailable_reason()


def require_onnx():
    """Skip the calling module, with the reason, when onnx or onnxruntime is missing."""
    if REASON:
        pytest.skip(REASON, allow_module_level=True)


class Lambda(nn.Module):
    """A model made of one function of the input (and optional parameters given as attributes)."""

    def __init__(self, fn, **params):
        super().__init__()
        self.fn = fn
        for k, v in params.items():
            setattr(self, k, v)

    def forward(self, x):
        return self.fn(self, x)


def image(*shape, seed=0, lo=0.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def ort_run(path, x):
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})


def srgrad_run(model, x):
    with sg.no_grad():
        out = model(sg.tensor(x))
    return [o.data for o in (out if isinstance(out, (tuple, list)) else (out,))]


def op_types(path):
    import onnx
    return [n.op_type for n in onnx.load(str(path)).graph.node]


def check(model, x, tmp_path, others=(), atol=1e-5, **kw):
    """Export at x, then compare ONNX Runtime with srgrad on x and on each of `others` (other sizes
    for a dynamic export). Returns (report, node op types)."""
    from framework.onnx import export
    path = tmp_path / "m.onnx"
    model.eval()  # as the export traces it
    report = export(model, x, path, overwrite=True, **kw)
    for inp in (x, *others):
        got, want = ort_run(path, inp), srgrad_run(model, inp)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=0, atol=atol)
    return report, op_types(path)


def export_published(model, tmp_path, name, size, wrap=None):
    """The model's weights as a published-layout `.pth` (torch.save of the bare state_dict, or under
    `wrap`, e.g. "params"), then `srgrad-export --weights` on it with no --model at LR `size` (H, W).
    Returns (the .onnx path, srgrad-export's printout, the model srgrad loads from the .pth)."""
    import torch
    from framework.engine import load_model
    from framework.engine.commands.export import main
    state = {k: torch.from_numpy(v.copy()) for k, v in model.state_dict().items()}
    path, out = tmp_path / f"{name}.pth", tmp_path / f"{name}.onnx"
    torch.save({wrap: state} if wrap else state, path)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main(["--weights", str(path), "--output", str(out), "--input-size", *map(str, size)]) == 0
    return out, printed.getvalue(), load_model(path, say=lambda msg: None)[0]
