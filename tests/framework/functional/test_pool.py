import itertools

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64


def _grid():
    """(size, kernel, stride, padding, ceil_mode) over small sizes, incl. ceil_mode's last-window rule."""
    for size, k, s, ceil in itertools.product((1, 2, 3, 4, 5, 6, 7), (1, 2, 3, 4), (1, 2, 3), (False, True)):
        for p in range(k // 2 + 1):
            yield size, k, s, p, ceil


def _torch_or_error(tfn, *args, **kwargs):
    try:
        return tfn(*args, **kwargs)
    except RuntimeError:
        return None


def test_avg_pool2d_sizes_and_values_match_torch_over_a_grid(rng):
    torch = pytest.importorskip("torch")
    checked = 0
    for h, kh, sh, ph, ceil in _grid():
        x = rng.standard_normal((1, 2, h, 6))
        for include in (True, False):
            options = dict(kernel_size=(kh, 2), stride=(sh, 2), padding=(ph, 1), ceil_mode=ceil,
                           count_include_pad=include)
            ref = _torch_or_error(torch.nn.functional.avg_pool2d, torch.tensor(x), **options)
            if ref is None:  # torch refuses: so must we, with a ValueError
                with pytest.raises(ValueError, match="avg_pool2d: output size"):
                    F.avg_pool2d(sg.tensor(x), **options)
                continue
            np.testing.assert_allclose(F.avg_pool2d(sg.tensor(x), **options).numpy(), ref.numpy(),
                                       rtol=1e-12, atol=1e-14)
            checked += 1
    assert checked > 500


def test_max_pool2d_sizes_and_values_match_torch_over_a_grid(rng):
    torch = pytest.importorskip("torch")
    checked = 0
    for (h, kh, sh, ph, ceil), d in itertools.product(_grid(), (1, 2)):
        x = rng.standard_normal((1, 2, h, 5))
        options = dict(kernel_size=(kh, 3), stride=(sh, 2), padding=(ph, 1), dilation=(d, 1), ceil_mode=ceil)
        ref = _torch_or_error(torch.nn.functional.max_pool2d, torch.tensor(x), return_indices=True, **options)
        if ref is None:
            with pytest.raises(ValueError, match="max_pool2d: output size"):
                F.max_pool2d(sg.tensor(x), **options)
            continue
        y, idx = F.max_pool2d(sg.tensor(x), return_indices=True, **options)
        np.testing.assert_array_equal(y.numpy(), ref[0].numpy())
        padding_only = ref[1].numpy() >= h * 5  # ATen's index for a window of padding: past the input
        np.testing.assert_array_equal(idx.numpy()[~padding_only], ref[1].numpy()[~padding_only])
        assert (idx.numpy()[padding_only] == -1).all()
        checked += 1
    assert checked > 500


@pytest.mark.parametrize("fn,options", [
    ("avg", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("avg", dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), count_include_pad=False, ceil_mode=True)),
    ("avg", dict(kernel_size=2, divisor_override=3)),
    ("max", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("max", dict(kernel_size=(2, 3), stride=1, padding=(1, 0), dilation=(2, 1))),
    ("adaptive", dict(output_size=(3, 4))),
    ("adaptive", dict(output_size=(None, 2))),
    ("adaptive", dict(output_size=1)),
])
def test_pool_gradcheck_and_gradient_parity(fn, options, rng):
    f = {"avg": F.avg_pool2d, "max": F.max_pool2d, "adaptive": F.adaptive_avg_pool2d}[fn]
    x = t64(rng, 2, 2, 5, 7)
    assert sg.gradcheck(lambda x: f(x, **options), (x,))
    torch = pytest.importorskip("torch")
    tf = getattr(torch.nn.functional, {"avg": "avg_pool2d", "max": "max_pool2d",
                                       "adaptive": "adaptive_avg_pool2d"}[fn])
    y = f(x, **options)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    tx = torch.tensor(x.numpy(), requires_grad=True)
    ty = tf(tx, **options)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_avg_pool2d_hand_worked_divisors():
    x = sg.tensor(np.ones((1, 1, 4, 4)), dtype=np.float64)
    # 3x3 windows at stride 2 with padding 1 and ceil_mode: the last window hangs past the padding, and
    # the hanging part is not counted even with count_include_pad (torch's rule)
    y = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True).numpy()[0, 0]
    np.testing.assert_allclose(y, [[4 / 9, 2 / 3, 1 / 3], [2 / 3, 1, 1 / 2], [1 / 3, 1 / 2, 1 / 4]])
    y = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False).numpy()
    np.testing.assert_allclose(y, 1.0)
    y = F.avg_pool2d(x, 2, divisor_override=3).numpy()
    np.testing.assert_allclose(y, 4 / 3)


def test_adaptive_avg_pool2d_windows_overlap_like_torch():
    x = sg.tensor(np.arange(5.0).reshape(1, 1, 1, 5), dtype=np.float64)
    # 5 -> 3: windows [0, 2), [1, 4), [3, 5)
    np.testing.assert_allclose(F.adaptive_avg_pool2d(x, (1, 3)).numpy().ravel(), [0.5, 2.0, 3.5])
    # 5 -> 7 (upsampling): windows of one or two pixels, [floor(5 i / 7), ceil(5 (i + 1) / 7))
    np.testing.assert_allclose(F.adaptive_avg_pool2d(x, (None, 7)).numpy().ravel(),
                               [0, 0.5, 1.5, 2, 2.5, 3.5, 4])


def test_max_pool2d_ties_go_to_the_first_maximum_and_padding_never_wins():
    torch = pytest.importorskip("torch")
    x = np.array([[1.0, 3.0, 3.0], [3.0, -5.0, 3.0], [-1.0, -2.0, -3.0]]).reshape(1, 1, 3, 3)
    t = sg.tensor(x, requires_grad=True, dtype=np.float64)
    y, idx = F.max_pool2d(t, 2, 1, 1, return_indices=True)
    ty, tidx = torch.nn.functional.max_pool2d(torch.tensor(x), 2, 1, 1, return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    assert idx.numpy()[0, 0, 1, 2] == 1  # window {3 (0,1), 3 (0,2)}: the first
    assert y.numpy()[0, 0, 3, 3] == -3.0  # a window of padding and one -3: the -3
    y.sum().backward()
    np.testing.assert_array_equal(t.grad.numpy()[0, 0], [[1, 4, 2], [3, 0, 2], [2, 1, 1]])


def test_max_pool2d_window_of_padding_only():
    """With dilation a window can miss every input pixel: -inf, index -1 and no gradient (torch: -inf,
    an index past the input, no gradient)."""
    x = sg.tensor(np.array([[[[2.0]]]]), requires_grad=True, dtype=np.float64)
    y, idx = F.max_pool2d(x, 2, padding=1, dilation=2, return_indices=True)
    assert y.numpy().ravel().tolist() == [-np.inf] and idx.numpy().ravel().tolist() == [-1]
    y.backward(np.ones(y.shape))
    assert x.grad.numpy().ravel().tolist() == [0.0]


def test_max_pool2d_nan_propagates_like_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[1.0, np.nan], [2.0, 0.0]]).reshape(1, 1, 2, 2)
    y = F.max_pool2d(sg.tensor(x, dtype=np.float64), 2).numpy()
    assert np.isnan(y).all() and np.isnan(torch.nn.functional.max_pool2d(torch.tensor(x), 2).numpy()).all()


@pytest.mark.parametrize("hw,out", [((5, 7), (3, 4)), ((6, 8), (3, 2)), ((5, 7), (None, 9)),
                                    ((4, 3), 1), ((1, 5), (2, 3)), ((9, 9), (4, 4))])
def test_adaptive_max_pool2d_values_indices_and_gradient_match_torch(hw, out, rng):
    """Overlapping windows (5 -> 3), equal ones (6 -> 3), upsampling (7 -> 9, 1 -> 2: a pixel in two
    windows gets both gradients), global: values, torch's flat indices and the gradient."""
    torch = pytest.importorskip("torch")
    x = t64(rng, 2, 3, *hw)
    y, idx = F.adaptive_max_pool2d(x, out, return_indices=True)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    tx = torch.tensor(x.numpy(), requires_grad=True)
    ty, tidx = torch.nn.functional.adaptive_max_pool2d(tx, out, return_indices=True)
    ty.backward(torch.tensor(g))
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-14, atol=1e-15)
    assert sg.gradcheck(lambda a: F.adaptive_max_pool2d(a, out), (x,))


def test_adaptive_max_pool2d_windows_ties_and_nan_by_hand():
    """5 -> 3: windows [0, 2), [1, 4), [3, 5); ties go to the first maximum; a NaN wins (the last
    NaN of the window, as ATen's loop); -inf everywhere still names the first pixel."""
    x = sg.tensor(np.array([4.0, 1.0, 4.0, 2.0, -1.0]).reshape(1, 1, 1, 5), dtype=np.float64)
    y, idx = F.adaptive_max_pool2d(x, (1, 3), return_indices=True)
    assert y.numpy().ravel().tolist() == [4, 4, 2] and idx.numpy().ravel().tolist() == [0, 2, 3]
    nan = sg.tensor(np.array([np.nan, 1.0, np.nan, -np.inf]).reshape(1, 1, 2, 2), dtype=np.float64)
    y, idx = F.adaptive_max_pool2d(nan, 1, return_indices=True)
    assert np.isnan(y.numpy()).all() and idx.numpy().ravel().tolist() == [2]
    inf = sg.tensor(np.full((1, 1, 2, 2), -np.inf), dtype=np.float64)
    assert F.adaptive_max_pool2d(inf, 1, return_indices=True)[1].numpy().ravel().tolist() == [0]


def test_float32_stays_float32(rng):
    x = sg.tensor(rng.standard_normal((2, 3, 6, 5)), requires_grad=True, dtype=np.float32)
    ys = [F.avg_pool2d(x, 2), F.max_pool2d(x, 2, 1, 1), F.adaptive_avg_pool2d(x, 3),
          F.adaptive_max_pool2d(x, (4, 2))]
    sum(y.sum() for y in ys).backward()
    assert all(y.dtype == np.float32 for y in ys) and x.grad.dtype == np.float32
    ref = x.numpy().astype(np.float64)[..., :4].reshape(2, 3, 3, 2, 2, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(ys[0].numpy(), ref, rtol=1e-6)


def _x(*shape, dtype=np.float64):
    return sg.tensor(np.zeros(shape), dtype=dtype)


@pytest.mark.parametrize("call,err,match", [
    (lambda: F.avg_pool2d(_x(3, 4, 4), 2), ValueError,
     r"avg_pool2d: expected a 4-D input \(N, C, H, W\), got shape \(3, 4, 4\)"),
    (lambda: F.avg_pool2d(_x(1, 3, 4, 4, dtype=np.int32), 2), TypeError,
     r"avg_pool2d: input must be float32 or float64, got dtype int32"),
    (lambda: F.avg_pool2d(_x(1, 1, 2, 2), 3), ValueError,
     r"avg_pool2d: output size \(0, 0\) is below 1 for input \(1, 1, 2, 2\) with kernel_size \(3, 3\)"),
    (lambda: F.avg_pool2d(_x(1, 1, 6, 6), 3, padding=2), ValueError,
     r"avg_pool2d: padding \(2, 2\) must be at most half of kernel_size \(3, 3\)"),
    (lambda: F.avg_pool2d(_x(1, 1, 6, 6), 0), ValueError, r"avg_pool2d: kernel_size must be >= 1, got 0"),
    (lambda: F.avg_pool2d(_x(1, 1, 6, 6), 2, stride=0), ValueError,
     r"avg_pool2d: stride must be >= 1, got 0"),
    (lambda: F.avg_pool2d(_x(1, 1, 6, 6), 2, divisor_override=0), ValueError,
     r"avg_pool2d: divisor_override must be a non-zero number, got 0"),
    (lambda: F.max_pool2d(_x(1, 1, 6, 6), 3, padding=(0, 2)), ValueError,
     r"max_pool2d: padding \(0, 2\) must be at most half of kernel_size \(3, 3\)"),
    (lambda: F.max_pool2d(_x(1, 1, 6, 6), 3, dilation=0), ValueError, r"max_pool2d: dilation must be >= 1"),
    (lambda: F.max_pool2d(_x(1, 1, 4, 6), 3, dilation=2), ValueError,
     r"max_pool2d: output size \(0, 1\) is below 1"),
    (lambda: F.max_pool2d(_x(1, 1, 6, 6), (2, 2, 2)), ValueError,
     r"max_pool2d: kernel_size must have 2 entries \(H, W\), got \(2, 2, 2\)"),
    (lambda: F.adaptive_avg_pool2d(_x(1, 1, 6, 6), 0), ValueError,
     r"adaptive_avg_pool2d: output_size must hold positive ints \(or None\), got 0 for input \(1, 1, 6, 6\)"),
    (lambda: F.adaptive_avg_pool2d(_x(1, 1, 6, 6), (1, 2, 3)), ValueError,
     r"adaptive_avg_pool2d: output_size must be an int or a pair"),
    (lambda: F.adaptive_avg_pool2d(_x(6, 6), 2), ValueError, r"adaptive_avg_pool2d: expected a 4-D input"),
    (lambda: F.adaptive_max_pool2d(_x(1, 1, 6, 6), (2, 0)), ValueError,
     r"adaptive_max_pool2d: output_size must hold positive ints \(or None\), got \(2, 0\)"),
    (lambda: F.adaptive_max_pool2d(_x(1, 1, 0, 6), 2), ValueError,
     r"adaptive_max_pool2d: input \(1, 1, 0, 6\) has an empty spatial dimension"),
    (lambda: F.adaptive_max_pool2d(_x(1, 6, 6, dtype=np.float32), 2), ValueError,
     r"adaptive_max_pool2d: expected a 4-D input"),
])
def test_errors(call, err, match):
    with pytest.raises(err, match=match):
        call()
