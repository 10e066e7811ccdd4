"""batch_norm: gradcheck (train and eval, with and without affine), torch parity of outputs,
gradients and running statistics, dtypes, errors."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64


def _running(rng, c):
    return (sg.tensor(rng.standard_normal(c) * 0.1), sg.tensor(rng.uniform(0.5, 2.0, c)))


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(2, 3, 3, 2), (3, 2, 1, 1), (1, 2, 1, 3), (4, 2)])
def test_gradcheck(training, affine, shape, rng):
    c = shape[1]
    x = t64(rng, *shape)
    w, b = (t64(rng, c), t64(rng, c)) if affine else (None, None)
    rm, rv = _running(rng, c)
    inputs = (x, w, b) if affine else (x,)

    def fn(x, w=None, b=None):
        return F.batch_norm(x, rm, rv, w, b, training=training, eps=1e-3)
    assert sg.gradcheck(fn, inputs)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(4, 3, 5, 3), (2, 3, 1, 1)])
def test_torch_parity_forward_gradients(training, shape, rng):
    torch = pytest.importorskip("torch")
    c = shape[1]
    a, wa, ba, g = (rng.standard_normal(shape) * 2 + 1, rng.standard_normal(c), rng.standard_normal(c),
                    rng.standard_normal(shape))
    rma, rva = rng.standard_normal(c), rng.uniform(0.5, 2, c)
    x, w, b = (sg.tensor(v, requires_grad=True) for v in (a, wa, ba))
    rm, rv = sg.tensor(rma), sg.tensor(rva)
    y = F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.3, eps=1e-4)
    y.backward(g)
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (a, wa, ba))
    trm, trv = torch.tensor(rma), torch.tensor(rva)
    ty = torch.nn.functional.batch_norm(tx, trm, trv, tw, tb, training=training, momentum=0.3, eps=1e-4)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-12, atol=1e-13)
    for ours, theirs in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(ours.grad.data, theirs.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rm.data, trm.numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(rv.data, trv.numpy(), rtol=1e-13, atol=1e-15)
    if not training:
        np.testing.assert_array_equal(rm.data, rma)  # eval never touches the statistics


def test_running_statistics_follow_torch_over_steps(rng):
    torch = pytest.importorskip("torch")
    rm, rv = sg.tensor(np.zeros(3)), sg.tensor(np.ones(3))
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    for _ in range(5):
        a = rng.standard_normal((2, 3, 3, 4)) * 3 + 2
        F.batch_norm(sg.tensor(a), rm, rv, training=True)
        torch.nn.functional.batch_norm(torch.tensor(a), trm, trv, training=True)
    np.testing.assert_allclose(rm.data, trm.numpy(), rtol=1e-14)
    np.testing.assert_allclose(rv.data, trv.numpy(), rtol=1e-14)


def test_running_var_is_unbiased_by_hand():
    a = np.array([1.0, 3.0]).reshape(2, 1, 1, 1)  # mean 2, biased var 1, unbiased var 2
    rm, rv = sg.tensor(np.zeros(1)), sg.tensor(np.ones(1))
    y = F.batch_norm(sg.tensor(a), rm, rv, training=True, momentum=0.5, eps=0.0)
    np.testing.assert_allclose(y.data.ravel(), [-1.0, 1.0])
    assert rm.data[0] == 1.0 and rv.data[0] == 1.5  # 0.5*0 + 0.5*2 ; 0.5*1 + 0.5*2


def test_training_without_running_stats(rng):
    a = rng.standard_normal((3, 2, 2, 2))
    y = F.batch_norm(sg.tensor(a), None, None, training=True)
    np.testing.assert_allclose(y.data.mean(axis=(0, 2, 3)), 0, atol=1e-14)


def test_float32_stays_float32(rng):
    x = sg.tensor(rng.standard_normal((2, 3, 2, 2)).astype(np.float32), requires_grad=True)
    w = sg.tensor(np.ones(3, np.float32), requires_grad=True)
    rm, rv = sg.tensor(np.zeros(3, np.float32)), sg.tensor(np.ones(3, np.float32))
    for training in (True, False):
        y = F.batch_norm(x, rm, rv, w, None, training=training)
        y.backward(np.ones(y.shape, np.float32))
        assert y.dtype == np.float32 and x.grad.dtype == np.float32 and w.grad.dtype == np.float32
        assert rm.data.dtype == np.float32 and rv.data.dtype == np.float32


def test_errors():
    x = sg.tensor(np.ones((2, 3, 2, 2)))
    rm, rv = sg.tensor(np.zeros(3)), sg.tensor(np.ones(3))
    with pytest.raises(ValueError, match=r"running_mean must have shape \(3,\) .*\(2, 3, 2, 2\), got \(4,\)"):
        F.batch_norm(x, sg.tensor(np.zeros(4)), rv)
    with pytest.raises(ValueError, match=r"weight must have shape \(3,\)"):
        F.batch_norm(x, rm, rv, weight=sg.tensor(np.ones(2)))
    with pytest.raises(ValueError, match=r"more than 1 value per channel .*\(1, 3, 1, 1\)"):
        F.batch_norm(sg.tensor(np.ones((1, 3, 1, 1))), rm, rv, training=True)
    with pytest.raises(ValueError, match="required when training=False"):
        F.batch_norm(x, None, None)
    with pytest.raises(ValueError, match=r"at least 2 dimensions, got shape \(3,\)"):
        F.batch_norm(sg.tensor(np.ones(3)), rm, rv)
    with pytest.raises(TypeError, match="input must be float32 or float64, got dtype int64"):
        F.batch_norm(sg.Tensor(np.ones((2, 3), np.int64)), rm, rv)
