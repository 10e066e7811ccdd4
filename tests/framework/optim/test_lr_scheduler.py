"""Schedulers: lr sequences against torch and BasicSR's formula, warm-up, resume, validation."""
import json
import math
import warnings

import numpy as np
import pytest

from framework import nn, optim
from framework.registry import SCHEDULERS

N = 50


def _opt(lr=0.1, groups=1):
    params = [{"params": [nn.Parameter(np.zeros(2))], "lr": lr * (i + 1)} for i in range(groups)]
    return optim.SGD(params, lr=lr)


def _lrs(opt, sched, n=N):
    """lr used by each of n iterations (step the optimizer, then the scheduler, as in training)."""
    out = []
    for _ in range(n):
        out.append([g["lr"] for g in opt.param_groups])
        assert sched.get_last_lr() == out[-1]
        opt.step()
        sched.step()
    return np.array(out)


@pytest.mark.parametrize("cls,kw", [
    ("StepLR", dict(step_size=7, gamma=0.1)),
    ("StepLR", dict(step_size=1, gamma=0.9)),
    ("MultiStepLR", dict(milestones=[30, 5, 12, 12], gamma=0.3)),
    ("CosineAnnealingLR", dict(T_max=20, eta_min=1e-3)),
    ("CosineAnnealingLR", dict(T_max=7)),  # past T_max: torch's schedule is periodic
])
def test_matches_torch(cls, kw):
    torch = pytest.importorskip("torch")
    opt = _opt(groups=2)
    ours = _lrs(opt, getattr(optim, cls)(opt, **kw))
    topt = torch.optim.SGD([{"params": [torch.zeros(2, requires_grad=True)], "lr": 0.1 * (i + 1)}
                            for i in range(2)], lr=0.1)
    tsched = getattr(torch.optim.lr_scheduler, cls)(topt, **kw)
    ref = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(N):
            ref.append([g["lr"] for g in topt.param_groups])
            topt.step()
            tsched.step()
    # torch multiplies recursively; the closed form differs by rounding only
    np.testing.assert_allclose(ours, np.array(ref), rtol=1e-12, atol=1e-15)


def test_step_and_multistep_by_hand():
    opt = _opt(lr=1.0)
    lrs = _lrs(opt, optim.StepLR(opt, step_size=3, gamma=0.5), 8)[:, 0]
    np.testing.assert_array_equal(lrs, [1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25])
    opt = _opt(lr=1.0)
    lrs = _lrs(opt, optim.MultiStepLR(opt, milestones=[2, 4, 4], gamma=0.5), 6)[:, 0]
    np.testing.assert_array_equal(lrs, [1, 1, 0.5, 0.5, 0.125, 0.125])


def test_cosine_annealing_restart_is_basicsr():
    # BasicSR: cycle i ends at cumulative period c_i (right-closed); lr restarts right after it
    periods, weights, eta_min, base = [10, 10, 5], [1, 0.5, 0.25], 1e-4, 0.2
    opt = _opt(lr=base)
    lrs = _lrs(opt, optim.CosineAnnealingRestartLR(opt, periods, weights, eta_min), 30)[:, 0]

    def basicsr(e):
        cumulative = [10, 20, 25]
        idx = next(i for i, c in enumerate(cumulative) if e <= c)
        start = 0 if idx == 0 else cumulative[idx - 1]
        return eta_min + weights[idx] * 0.5 * (base - eta_min) * (
            1 + math.cos(math.pi * ((e - start) / periods[idx])))
    np.testing.assert_array_equal(lrs[:26], [basicsr(e) for e in range(26)])
    # hand-computed landmarks
    assert lrs[0] == base and lrs[10] == pytest.approx(eta_min, abs=1e-18)
    assert lrs[5] == pytest.approx(eta_min + 0.5 * (base - eta_min), rel=1e-15)
    after_restart = eta_min + 0.5 * 0.5 * (base - eta_min) * (1 + math.cos(math.pi / 10))
    assert lrs[11] == pytest.approx(after_restart, rel=1e-15)
    assert lrs[15] == pytest.approx(eta_min + 0.25 * (base - eta_min), rel=1e-15)
    assert lrs[20] == pytest.approx(eta_min, rel=1e-12)
    np.testing.assert_array_equal(lrs[26:], eta_min)  # past the last cycle: stays at eta_min


@pytest.mark.parametrize("warmup", [1, 4])
def test_warmup_multiplies_the_schedule(warmup):
    opt = _opt(lr=0.8)
    sched = SCHEDULERS.build({"type": "MultiStepLR", "milestones": [6], "gamma": 0.5,
                              "warmup_iters": warmup}, optimizer=opt)
    lrs = _lrs(opt, sched, 9)[:, 0]
    expected = [0.8 * min(1.0, (e + 1) / warmup) * (0.5 if e >= 6 else 1.0) for e in range(9)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-15)
    if warmup == 4:
        np.testing.assert_allclose(lrs[:5], [0.2, 0.4, 0.6, 0.8, 0.8], rtol=1e-15)


def test_linear_warmup_then_constant_and_cosine_warmup():
    opt = _opt(lr=1.0)
    lrs = _lrs(opt, optim.LinearWarmupLR(opt, warmup_iters=4), 6)[:, 0]
    np.testing.assert_allclose(lrs, [0.25, 0.5, 0.75, 1.0, 1.0, 1.0], rtol=1e-15)
    opt = _opt(lr=1.0)
    lrs = _lrs(opt, optim.CosineAnnealingLR(opt, T_max=10, warmup_iters=3), 5)[:, 0]
    cos = [(1 + math.cos(math.pi * e / 10)) / 2 for e in range(5)]
    np.testing.assert_allclose(lrs, [cos[0] / 3, cos[1] * 2 / 3, cos[2], cos[3], cos[4]], rtol=1e-15)


@pytest.mark.parametrize("spec", [
    {"type": "StepLR", "step_size": 4, "gamma": 0.7},
    {"type": "MultiStepLR", "milestones": [3, 9, 15], "gamma": 0.5, "warmup_iters": 5},
    {"type": "CosineAnnealingLR", "T_max": 12, "eta_min": 1e-5},
    {"type": "CosineAnnealingRestartLR", "periods": [8, 8, 8], "restart_weights": [1, 0.5, 0.5],
     "eta_min": 1e-6, "warmup_iters": 3},
    {"type": "LinearWarmupLR", "warmup_iters": 15},
])
def test_state_dict_resume_continues_identically(spec):
    opt = _opt(groups=2)
    straight = _lrs(opt, SCHEDULERS.build(spec, optimizer=opt), 30)

    opt = _opt(groups=2)
    sched = SCHEDULERS.build(spec, optimizer=opt)
    first = _lrs(opt, sched, 12)
    sched_sd, opt_sd = json.loads(json.dumps(sched.state_dict())), opt.state_dict()
    # resume: fresh optimizer and scheduler, then load (either order works)
    opt2 = _opt(lr=5.0, groups=2)
    sched2 = SCHEDULERS.build(spec, optimizer=opt2)
    sched2.load_state_dict(sched_sd)
    opt2.load_state_dict(opt_sd)
    rest = _lrs(opt2, sched2, 18)
    np.testing.assert_array_equal(np.concatenate([first, rest]), straight)

    opt3 = _opt(lr=5.0, groups=2)
    sched3 = SCHEDULERS.build(spec, optimizer=opt3)
    opt3.load_state_dict(opt_sd)
    sched3.load_state_dict(sched_sd)
    np.testing.assert_array_equal(_lrs(opt3, sched3, 18), rest)


def test_state_dict_is_plain_data():
    opt = _opt()
    sched = optim.MultiStepLR(opt, milestones=np.array([2, 5]), gamma=np.float64(0.5))
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 0 and sd["milestones"] == [2, 5]
    assert type(sd["gamma"]) is float and all(type(m) is int for m in sd["milestones"])
    assert json.loads(json.dumps(sd)) == sd


def test_initial_lr_is_recorded_and_resume_needs_it():
    opt = _opt(lr=0.3)
    optim.StepLR(opt, step_size=2)
    assert opt.param_groups[0]["initial_lr"] == 0.3
    with pytest.raises(KeyError, match="initial_lr"):
        optim.StepLR(_opt(), step_size=2, last_epoch=4)


@pytest.mark.parametrize("call,exc,match", [
    (lambda o: optim.StepLR(o, step_size=0), ValueError, r"StepLR: step_size must be a positive int, got 0"),
    (lambda o: optim.StepLR(o, step_size=2.5), TypeError, r"step_size must be a positive int, got 2\.5"),
    (lambda o: optim.MultiStepLR(o, milestones=[3, -1]), ValueError,
     r"milestones\[1\] must be an int >= 0, got -1"),
    (lambda o: optim.CosineAnnealingLR(o, T_max=0), ValueError, r"T_max must be a positive int, got 0"),
    (lambda o: optim.CosineAnnealingLR(o, T_max=5, eta_min=-1.0), ValueError,
     r"CosineAnnealingLR: eta_min must be >= 0, got -1"),
    (lambda o: optim.CosineAnnealingRestartLR(o, periods=[5, 5]), ValueError,
     r"periods \[5, 5\] and restart_weights \[1\]"),
    (lambda o: optim.StepLR(o, step_size=2, warmup_iters=-3), ValueError,
     r"warmup_iters must be an int >= 0, got -3"),
    (lambda o: optim.StepLR(object(), step_size=2), TypeError, r"object is not an Optimizer"),
])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call(_opt())


def test_registered():
    assert set(SCHEDULERS.names()) >= {"StepLR", "MultiStepLR", "CosineAnnealingLR",
                                       "CosineAnnealingRestartLR", "LinearWarmupLR"}
