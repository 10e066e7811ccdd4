"""Adam(fused=True) (framework/optim/fused.py) gives the same bits as the per-parameter update, for
every option and both dtypes."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.optim import Adam, AdamW

OPTIONS = [
    {},
    {"weight_decay": 0.1},
    {"weight_decay": 0.1, "decoupled_weight_decay": True},
    {"amsgrad": True, "betas": (0.3, 0.5)},  # 1 - beta1 >= 0.5: lerp's other branch
    {"maximize": True, "eps": 1e-3},
]


def _run(cls, options, dtype, fused, steps=3):
    rng = np.random.default_rng(0)
    # one parameter above fused.CHUNK (two chunks), odd sizes, a 0-d one
    shapes = [(3, 5, 3, 3), (20000,), (7,), ()]
    params = [sg.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in shapes]
    opt = cls(params, lr=0.05, fused=fused, **options)
    for i in range(steps):
        for p in params:
            # the gradient arrays are new each step here (the eager engine's way)
            p.grad = sg.tensor(rng.standard_normal(p.shape).astype(dtype) * (i + 1))
        params[2].grad = None if i == 1 else params[2].grad  # a parameter without a gradient
        opt.step()
    return params, opt


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("options", OPTIONS)
def test_fused_adam_is_bit_identical(options, dtype, monkeypatch):
    a, oa = _run(Adam, options, dtype, fused=False)
    monkeypatch.setattr(Adam, "_update", None)  # the fused pass runs, not the per-parameter one
    b, ob = _run(Adam, options, dtype, fused=True)
    for p, q in zip(a, b):
        assert np.array_equal(p.data, q.data)
    sa, sb = oa.state_dict()["state"], ob.state_dict()["state"]
    for k in sa:
        assert sa[k].keys() == sb[k].keys()
        for key in sa[k]:
            assert np.array_equal(sa[k][key], sb[k][key]), (k, key)


def test_fused_adamw_and_fallback():
    a, _ = _run(AdamW, {}, np.float32, fused=False)
    b, _ = _run(AdamW, {}, np.float32, fused=True)
    assert all(np.array_equal(p.data, q.data) for p, q in zip(a, b))
    # parameters of two dtypes: the fused pass declines, the per-parameter update runs
    p32 = sg.tensor(np.ones(3, np.float32), requires_grad=True)
    p64 = sg.tensor(np.ones(3, np.float64), requires_grad=True)
    opt = Adam([p32, p64], lr=0.1, fused=True)
    p32.grad, p64.grad = sg.tensor(np.ones(3, np.float32)), sg.tensor(np.ones(3, np.float64))
    opt.step()
    assert np.allclose(p32.data, 0.9) and np.allclose(p64.data, 0.9)


def test_fused_must_be_a_bool():
    with pytest.raises(TypeError, match="fused must be a bool"):
        Adam([sg.tensor(np.ones(2, np.float32), requires_grad=True)], fused="yes")
