import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64


@pytest.mark.parametrize("shape,r", [((2, 12, 3, 5), 2), ((1, 9, 1, 1), 3), ((2, 3, 2, 3), 1),
                                     ((1, 8, 4, 1), 2)])
def test_pixel_shuffle_parity_gradcheck_and_inverse(shape, r, rng):
    x = t64(rng, *shape)
    assert sg.gradcheck(lambda x: F.pixel_shuffle(x, r), (x,))
    y = F.pixel_shuffle(x, r)
    np.testing.assert_array_equal(F.pixel_unshuffle(y, r).numpy(), x.numpy())
    torch = pytest.importorskip("torch")
    ref = torch.nn.functional.pixel_shuffle(torch.tensor(x.numpy()), r)
    np.testing.assert_array_equal(y.numpy(), ref.numpy())


@pytest.mark.parametrize("shape,r", [((2, 3, 4, 6), 2), ((1, 1, 3, 3), 3), ((2, 3, 2, 3), 1)])
def test_pixel_unshuffle_parity_and_gradcheck(shape, r, rng):
    x = t64(rng, *shape)
    assert sg.gradcheck(lambda x: F.pixel_unshuffle(x, r), (x,))
    torch = pytest.importorskip("torch")
    y = F.pixel_unshuffle(x, r)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    tx = torch.tensor(x.numpy(), requires_grad=True)
    ty = torch.nn.functional.pixel_unshuffle(tx, r)
    ty.backward(torch.tensor(g))
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_pixel_shuffle_channel_order_by_hand():
    # channel c r^2 + a r + b goes to offset (a, b) of every r x r output block
    x = sg.tensor(np.arange(4.0).reshape(1, 4, 1, 1), dtype=np.float32)
    y = F.pixel_shuffle(x, 2)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.numpy()[0, 0], [[0, 1], [2, 3]])


@pytest.mark.parametrize("call,err,match", [
    (lambda: F.pixel_shuffle(sg.zeros(1, 6, 2, 2), 2), ValueError,
     r"pixel_shuffle: input \(1, 6, 2, 2\) has 6 channels, not divisible by upscale_factor\^2 = 4"),
    (lambda: F.pixel_unshuffle(sg.zeros(1, 1, 4, 5), 2), ValueError,
     r"pixel_unshuffle: input \(1, 1, 4, 5\) has height 4 and width 5, not both divisible by "
     r"downscale_factor 2"),
    (lambda: F.pixel_shuffle(sg.zeros(4, 2, 2), 2), ValueError,
     r"pixel_shuffle: expected a 4-D input \(N, C, H, W\), got shape \(4, 2, 2\)"),
    (lambda: F.pixel_shuffle(sg.zeros(1, 4, 2, 2), 0), ValueError,
     r"pixel_shuffle: upscale_factor must be a positive int, got 0"),
    (lambda: F.pixel_unshuffle(sg.zeros(1, 4, 2, 2), 1.5), TypeError,
     r"pixel_unshuffle: downscale_factor must be a positive int, got 1.5"),
    (lambda: F.pixel_shuffle(sg.tensor(np.zeros((1, 4, 2, 2), np.int64)), 2), TypeError,
     r"pixel_shuffle: input must be float32 or float64, got dtype int64"),
])
def test_errors(call, err, match):
    with pytest.raises(err, match=match):
        call()
