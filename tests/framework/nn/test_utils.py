"""clip_grad_norm_ / clip_grad_value_ against torch.nn.utils."""
import math

import numpy as np
import pytest

from framework import nn, tensor
from framework.nn.utils import clip_grad_norm_, clip_grad_value_


def _params(dtype, seed=0, scale=1.0, with_none=True):
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (5,), (1,), (2, 1, 3)]
    params = [nn.Parameter(rng.standard_normal(s), dtype=dtype) for s in shapes]
    for i, p in enumerate(params):
        if not (with_none and i == 2):
            p.grad = tensor(scale * rng.standard_normal(p.shape), dtype=dtype)
    return params


def _torch_twins(torch, params):
    out = []
    for p in params:
        q = torch.tensor(p.data, requires_grad=True)
        if p.grad is not None:
            q.grad = torch.tensor(p.grad.data.copy())
        out.append(q)
    return out


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, 0.5])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_clip_grad_norm_matches_torch(norm_type, max_norm, dtype):
    torch = pytest.importorskip("torch")
    params = _params(dtype)
    theirs = _torch_twins(torch, params)
    total = clip_grad_norm_(params, max_norm, norm_type=norm_type)
    ref = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    tol = dict(rtol=1e-13, atol=0) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-7)
    assert total.dtype == dtype and total.shape == ()
    np.testing.assert_allclose(float(total), ref.item(), **tol)
    for p, q in zip(params, theirs):
        if q.grad is None:
            assert p.grad is None
        else:
            assert p.grad.dtype == dtype
            np.testing.assert_allclose(p.grad.data, q.grad.numpy(), **tol)


def test_clip_grad_norm_by_hand_and_in_place():
    p = nn.Parameter(np.zeros(2), dtype=np.float64)
    p.grad = tensor(np.array([3.0, 4.0]))
    g = p.grad.data
    total = clip_grad_norm_(p, max_norm=1.0)  # a single Tensor is accepted
    assert float(total) == 5.0
    np.testing.assert_allclose(p.grad.data, np.array([3.0, 4.0]) / (5.0 + 1e-6), rtol=1e-15)
    assert p.grad.data is g
    total = clip_grad_norm_([p], max_norm=10.0)  # under the limit: unchanged
    np.testing.assert_allclose(p.grad.data, np.array([3.0, 4.0]) / (5.0 + 1e-6), rtol=1e-15)
    assert float(total) == pytest.approx(5.0 / (5.0 + 1e-6), rel=1e-15)


def test_clip_grad_norm_no_grads_and_nonfinite():
    total = clip_grad_norm_([nn.Parameter(np.zeros(2))], 1.0)
    assert float(total) == 0.0
    p = nn.Parameter(np.zeros(2), dtype=np.float64)
    p.grad = tensor(np.array([np.inf, 1.0]))
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(p.grad.data, [np.inf, 1.0])  # untouched when it raises
    p.grad = tensor(np.array([np.nan, 1.0]))
    assert math.isnan(float(clip_grad_norm_([p], 1.0)))
    assert np.isnan(p.grad.data).all()  # scaled by nan, as torch


def test_clip_grad_norm_bad_arguments():
    with pytest.raises(TypeError, match=r"parameters\[0\] is a ndarray"):
        clip_grad_norm_([np.zeros(2)], 1.0)
    with pytest.raises(TypeError, match="max_norm must be a number, got str"):
        clip_grad_norm_([nn.Parameter(np.zeros(2))], "1.0")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_clip_grad_value_matches_torch(dtype):
    torch = pytest.importorskip("torch")
    params = _params(dtype, scale=2.0)
    theirs = _torch_twins(torch, params)
    assert clip_grad_value_(params, 0.7) is None
    torch.nn.utils.clip_grad_value_(theirs, 0.7)
    for p, q in zip(params, theirs):
        if q.grad is not None:
            assert p.grad.dtype == dtype
            np.testing.assert_array_equal(p.grad.data, q.grad.numpy())
            assert np.abs(p.grad.data).max() <= dtype(0.7)


def test_exported_from_nn():
    assert nn.clip_grad_norm_ is clip_grad_norm_ and nn.clip_grad_value_ is clip_grad_value_
