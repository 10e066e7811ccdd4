"""burn's own 20 interpolate cases (../shared/reference/burn_interpolate_cases.json) under burn's
tolerances, and the float64 recomputations of burn's forward and adjoint (derived_* fields) tightly.
burn's default is align_corners=True and its nearest is torch's legacy floor; its lanczos3 (which torch
refuses without antialias) is srgrad's lanczos with antialias=False."""
import json
import pathlib

import numpy as np
import pytest

import framework as sg
import framework.functional as F

CASES_FILE = (pathlib.Path(__file__).resolve().parents[3] / ".." / "shared" / "reference"
              / "burn_interpolate_cases.json")
CASES = json.loads(CASES_FILE.read_text()) if CASES_FILE.exists() else []


def _close(ours, theirs, tol):
    """burn's rule: pass iff x == y or |x - y| < max(abs, rel * max(|x|, |y|)), elementwise."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    assert ours.shape == theirs.shape
    bound = np.maximum(tol["absolute"], tol["relative"] * np.maximum(np.abs(ours), np.abs(theirs)))
    bad = ~((ours == theirs) | (np.abs(ours - theirs) < bound))
    assert not bad.any(), f"max |diff| {np.abs(ours - theirs).max():.3g}"


def _run(case):
    mode = {"Nearest": "nearest", "Bilinear": "bilinear", "Bicubic": "bicubic",
            "Lanczos3": "lanczos3"}[case["options"]["mode"]]
    kw = {} if mode == "nearest" else {"align_corners": case["options"]["align_corners"]}
    x = sg.Tensor(np.array(case["input"], np.float64), requires_grad=True)
    y = F.interpolate(x, size=tuple(case["output_size"]), mode=mode, **kw)
    y.backward(np.ones(y.shape))  # burn's autodiff tests seed the un-reduced output with ones
    return y.data, x.grad.data


def test_all_twenty_cases_present():
    if not CASES_FILE.exists():
        pytest.skip(f"{CASES_FILE} not found (it lives beside the repository)")
    assert len(CASES) == 20


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_burn_case(case):
    y, grad = _run(case)
    assert list(y.shape) == case["expected_output_shape"]
    if case.get("expected_output") is not None:
        _close(y, case["expected_output"], case["tolerance"])
    if case.get("expected_grad") is not None:
        _close(grad, case["expected_grad"], case["tolerance"])
    np.testing.assert_allclose(y, case["derived_output_f64"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(grad, case["derived_grad_upstream_ones_f64"], rtol=1e-9, atol=1e-9)
