"""scripts/profile_step.py: the per-Function times of one step are inside the step's total, name the
model's Functions, and the wrapped methods are put back afterwards."""
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
profile_step = pytest.importorskip("profile_step")


def test_breakdown_of_an_espcn_step():
    from framework.functional.conv import Conv2dFunction
    before = (Conv2dFunction.__dict__["forward"], Conv2dFunction.__dict__["backward"])
    total, times = profile_step.breakdown("ESPCN", batch=1)
    assert total > 0
    assert times[("Conv2dFunction", "fwd")] > 0 and times[("Conv2dFunction", "bwd")] > 0
    # the weight gradient's time is also inside Conv2dFunction's backward: not counted twice
    assert sum(v for k, v in times.items() if k[0] != "conv weight grad") <= total
    assert (Conv2dFunction.__dict__["forward"], Conv2dFunction.__dict__["backward"]) == before


def test_the_summary_categories_add_up_to_the_step():
    from framework.functional import conv
    from framework.optim.optimizer import Optimizer
    before = (conv._weight_grad, Optimizer.step)
    total, times = profile_step.breakdown("UpsampleNet", batch=1)
    cats = profile_step.categories(total, times)
    assert list(cats) == list(profile_step.CATEGORIES)
    assert abs(sum(cats.values()) - total) < 1e-9
    # UpsampleNet: conv -> bicubic -> conv, Adam (its ReLUs run fused into the convs)
    for key in ("conv fwd", "conv dx", "conv dW", "resample", "optimizer"):
        assert cats[key] > 0, key
    assert cats["activations"] == 0
    assert cats["framework"] >= 0
    assert (conv._weight_grad, Optimizer.step) == before  # put back


def test_a_nested_weight_gradient_is_timed_once(monkeypatch):
    """MSRResNet's last conv (32 -> 3) takes its weight gradient through the flipped kernel:
    _weight_grad calls itself, and only the outer call may count (else conv dW doubles and conv dx
    goes negative)."""
    from framework.functional import conv
    calls = []
    inner = conv._weight_grad

    def spy(x, y, geo, w_shape):  # 0.1 s each: a nested call counted twice outgrows the whole backward
        calls.append(w_shape)
        time.sleep(0.1)
        return inner(x, y, geo, w_shape)

    monkeypatch.setattr(conv, "_weight_grad", spy)
    total, times = profile_step.breakdown("MSRResNet", batch=1)
    assert (32, 3, 3, 3) in calls and (3, 32, 3, 3) in calls  # the flipped kernel's, nested in conv_last's
    cats = profile_step.categories(total, times)
    assert times[("conv weight grad", "bwd")] <= times[("Conv2dFunction", "bwd")]
    assert cats["conv dx"] > 0
