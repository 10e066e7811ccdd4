"""OneCycleLR and LambdaLR against torch's, step by step (lr and the cycled momentum / beta1), and
what a YAML config naming LambdaLR gets."""
import numpy as np
import pytest

import framework as sg
from framework import optim
from framework.registry import SCHEDULERS

torch = pytest.importorskip("torch")


def _pair(kind, **kw):
    ours = getattr(optim, kind)([sg.zeros(1, requires_grad=True)], lr=0.1, **kw)
    theirs = getattr(torch.optim, kind)([torch.zeros(1, requires_grad=True)], lr=0.1, **kw)
    return ours, theirs


def _trace(opt, sched, steps, torch_opt=None):
    lrs, moms = [], []
    for i in range(steps):
        g = opt.param_groups[0]
        lrs.append(g["lr"])
        moms.append(g["betas"][0] if "betas" in g else g.get("momentum", 0.0))
        if torch_opt is not None:
            torch_opt.step()
        if i < steps - 1:
            sched.step()
    return lrs, moms


@pytest.mark.parametrize("kind,kw", [("SGD", dict(momentum=0.9)), ("Adam", {})])
@pytest.mark.parametrize("three_phase", [False, True])
@pytest.mark.parametrize("anneal", ["cos", "linear"])
def test_one_cycle_matches_torch(kind, kw, three_phase, anneal):
    ours, theirs = _pair(kind, **kw)
    opts = dict(max_lr=1.0, total_steps=23, pct_start=0.25, three_phase=three_phase,
                anneal_strategy=anneal)
    a = _trace(ours, optim.OneCycleLR(ours, **opts), 23)
    b = _trace(theirs, torch.optim.lr_scheduler.OneCycleLR(theirs, **opts), 23, theirs)
    np.testing.assert_allclose(a, b, rtol=1e-12)


def test_one_cycle_epochs_state_and_end():
    ours, _ = _pair("SGD", momentum=0.9)
    s = optim.OneCycleLR(ours, max_lr=0.5, epochs=2, steps_per_epoch=3)
    assert s.total_steps == 6
    for _ in range(5):
        s.step()
    with pytest.raises(ValueError, match="total_steps is 6"):
        s.step()
    again, _ = _pair("SGD", momentum=0.9)
    s2 = optim.OneCycleLR(again, max_lr=0.5, total_steps=6)
    s2.load_state_dict(s.state_dict())
    assert again.param_groups[0]["lr"] == ours.param_groups[0]["lr"]
    with pytest.raises(ValueError, match="give total_steps"):
        optim.OneCycleLR(again, max_lr=0.5)


def test_lambda_lr_matches_torch_and_is_python_only():
    ours, theirs = _pair("SGD")
    a = _trace(ours, optim.LambdaLR(ours, lambda e: 0.9 ** e), 6)[0]
    b = _trace(theirs, torch.optim.lr_scheduler.LambdaLR(theirs, lambda e: 0.9 ** e), 6,
               theirs)[0]
    np.testing.assert_allclose(a, b, rtol=1e-12)
    s = optim.LambdaLR(ours, [lambda e: 1.0])
    assert "lr_lambdas" not in s.state_dict()
    problems = SCHEDULERS.check({"type": "LambdaLR"}, injected=("optimizer",))
    assert len(problems) == 1 and "a YAML config cannot hold one" in problems[0][1]
    assert SCHEDULERS.check({"type": "OneCycleLR", "max_lr": 0.01, "total_steps": 100},
                            injected=("optimizer",)) == []
