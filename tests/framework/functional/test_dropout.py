"""dropout and drop_path: masks cannot match torch's bit for bit, so the statistics (keep rate,
scale), the backward's use of the forward's mask, determinism under a seed or a generator, and the
identity (the input itself, no graph) in eval and at p = 0."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F


def _ones(*shape, dtype=np.float64):
    return sg.tensor(np.ones(shape, dtype), requires_grad=True)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keep_rate_and_scale(p):
    x = _ones(400, 500)
    y = F.dropout(x, p, generator=np.random.default_rng(0))
    kept = y.data != 0
    # 200k Bernoulli(1 - p) draws: the rate is within 5 standard deviations of 1 - p
    assert abs(kept.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / kept.size)
    np.testing.assert_allclose(y.data[kept], 1 / (1 - p), rtol=1e-15)
    assert abs(y.data.mean() - 1.0) < 5 * np.sqrt(p / (1 - p) / kept.size)  # unbiased


@pytest.mark.parametrize("op", ["dropout", "drop_path"])
def test_backward_uses_the_forward_mask(op, rng):
    p = 0.4
    x = sg.tensor(rng.standard_normal((64, 3, 5)), requires_grad=True)
    fn = (lambda t: F.dropout(t, p)) if op == "dropout" else (lambda t: F.drop_path(t, p, True))
    y = fn(x)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    mask = y.data / x.data != 0  # where the forward kept x
    np.testing.assert_allclose(x.grad.data, mask * g / (1 - p), rtol=1e-14)
    np.testing.assert_allclose(y.data, mask * x.data / (1 - p), rtol=1e-14)


def test_drop_path_drops_whole_samples():
    x = _ones(4000, 3, 2, 2)
    y = F.drop_path(x, 0.25, training=True, generator=np.random.default_rng(1)).data
    per_sample = y.reshape(4000, -1)
    assert np.all(per_sample.min(axis=1) == per_sample.max(axis=1))  # each sample: all 0 or all kept
    kept = per_sample[:, 0] != 0
    assert abs(kept.mean() - 0.75) < 5 * np.sqrt(0.25 * 0.75 / 4000)
    np.testing.assert_allclose(per_sample[kept], 1 / 0.75, rtol=1e-15)
    unscaled = F.drop_path(x, 0.25, True, scale_by_keep=False, generator=np.random.default_rng(1)).data
    np.testing.assert_array_equal(unscaled, y * 0.75)  # the same mask, no scaling


@pytest.mark.parametrize("op", [F.dropout, F.drop_path])
def test_deterministic_under_seed_and_generator(op):
    x = _ones(50, 20)
    sg.manual_seed(3)
    a = op(x, 0.5, True).data
    sg.manual_seed(3)
    b = op(x, 0.5, True).data
    c = op(x, 0.5, True).data  # the stream moved on
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)
    d = op(x, 0.5, True, generator=np.random.default_rng(9)).data
    e = op(x, 0.5, True, generator=np.random.default_rng(9)).data
    np.testing.assert_array_equal(d, e)
    # the mask depends on the seed and shape, not on the dtype
    f = op(_ones(50, 20, dtype=np.float32), 0.5, True, generator=np.random.default_rng(9)).data
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f != 0, d != 0)


@pytest.mark.parametrize("op", [F.dropout, F.drop_path])
def test_identity_in_eval_and_at_zero(op):
    x = _ones(3, 4)
    assert op(x, 0.5, False) is x
    assert op(x, 0.0, True) is x
    sg.manual_seed(0)
    before = sg.random.default_generator().random()
    sg.manual_seed(0)
    assert op(x, 0.3, False) is x  # no draw either
    assert sg.random.default_generator().random() == before
    assert F.drop_path(x, 0.5) is x  # timm's default: training=False


def test_p_one_zeroes_everything():
    x = _ones(3, 4)
    y = F.dropout(x, 1.0)
    y.backward(np.ones((3, 4)))
    assert np.all(y.data == 0) and np.all(x.grad.data == 0)
    assert np.all(F.drop_path(x, 1.0, True).data == 0)


def test_float32_stays_float32():
    x = _ones(10, 10, dtype=np.float32)
    for y in (F.dropout(x, 0.3), F.drop_path(x, 0.3, True)):
        y.backward(np.ones((10, 10), np.float32))
        assert y.dtype == np.float32 and x.grad.dtype == np.float32
        x.grad = None


def test_errors():
    x = _ones(2, 3)
    with pytest.raises(ValueError, match=r"dropout: p must be in \[0.0, 1.0\], got 1.5"):
        F.dropout(x, 1.5)
    with pytest.raises(ValueError, match=r"drop_path: drop_prob must be in \[0.0, 1.0\], got -0.1"):
        F.drop_path(x, -0.1, True)
    with pytest.raises(TypeError, match="dropout: generator must be a numpy Generator"):
        F.dropout(x, 0.5, generator=np.random.RandomState(0))
    with pytest.raises(TypeError, match="dropout: training must be a bool, got 1"):
        F.dropout(x, 0.5, 1)
    with pytest.raises(ValueError, match="drop_path: input must have a batch dimension"):
        F.drop_path(sg.tensor(np.float64(1.0)), 0.5, True)
    with pytest.raises(TypeError, match="dropout: input must be float32 or float64, got dtype int64"):
        F.dropout(sg.Tensor(np.ones(3, np.int64)))


def test_dropout2d_drops_whole_channels_and_backward_uses_the_mask(rng):
    """Each (sample, channel) plane is all zero or all kept (scaled); the keep rate is 1 - p; the
    gradient is g times the forward's mask; torch.nn.Dropout2d's repr and no state."""
    p = 0.3
    x = sg.tensor(rng.uniform(0.5, 2.0, (200, 40, 3, 2)), requires_grad=True)
    y = F.dropout2d(x, p, generator=np.random.default_rng(2))
    zero = (y.data == 0).reshape(200, 40, -1)
    assert np.all(zero.min(axis=2) == zero.max(axis=2))  # x > 0: a plane is all zero or all kept
    kept = ~zero[:, :, 0]
    assert abs(kept.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / kept.size)
    np.testing.assert_allclose(y.data[kept], x.data[kept] / (1 - p), rtol=1e-14)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    np.testing.assert_allclose(x.grad.data, kept[:, :, None, None] * g / (1 - p), rtol=1e-14)
    assert F.dropout2d(x, 0.5, training=False) is x and F.dropout2d(x, 0.0) is x
    with pytest.raises(ValueError, match=r"dropout2d: expected a 4-D input \(N, C, H, W\), got shape \(2, 3\)"):
        F.dropout2d(_ones(2, 3), 0.5)
    with pytest.raises(ValueError, match=r"dropout2d: p must be in \[0.0, 1.0\], got 2"):
        F.dropout2d(x, 2)


def test_dropout2d_layer():
    torch = pytest.importorskip("torch")
    from framework import nn
    assert repr(nn.Dropout2d(0.2)) == repr(torch.nn.Dropout2d(0.2))
    layer = nn.Dropout2d(0.5)
    x = sg.tensor(np.ones((4, 8, 2, 2), np.float32))
    assert layer.eval()(x) is x
    y = layer.train()(x).data
    assert set(np.unique(y)) <= {0.0, 2.0} and np.all(y.min(axis=(2, 3)) == y.max(axis=(2, 3)))
