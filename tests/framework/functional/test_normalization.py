"""batch_norm and layer_norm: gradcheck (train and eval, with and without affine), torch parity of
outputs, gradients and running statistics, dtypes, errors."""
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


def test_num_batches_tracked_is_counted_by_the_op_and_momentum_none_averages(rng):
    """srgrad's num_batches_tracked argument (nn.BatchNorm2d's counter, counted in the op so that
    a captured step repeats it): momentum None is the cumulative average, as torch's module."""
    torch = pytest.importorskip("torch")
    rm, rv = sg.tensor(np.zeros(3)), sg.tensor(np.ones(3))
    n = sg.Tensor(np.array(0, np.int64))
    bn = torch.nn.BatchNorm2d(3, momentum=None).double()
    batches = [rng.standard_normal((2, 3, 3, 4)) * 3 + 2 for _ in range(4)]
    for a in batches:
        F.batch_norm(sg.tensor(a), rm, rv, training=True, momentum=None, num_batches_tracked=n)
        bn(torch.tensor(a))
    assert int(n.data) == 4 == int(bn.num_batches_tracked)
    np.testing.assert_allclose(rm.data, np.mean([a.mean(axis=(0, 2, 3)) for a in batches], axis=0),
                               rtol=1e-14)  # the plain average of the batch means
    np.testing.assert_allclose(rm.data, bn.running_mean.numpy(), rtol=1e-14)
    np.testing.assert_allclose(rv.data, bn.running_var.numpy(), rtol=1e-14)
    F.batch_norm(sg.tensor(batches[0]), rm, rv, training=False, num_batches_tracked=n)
    assert int(n.data) == 4  # eval counts nothing
    with pytest.raises(ValueError, match="num_batches_tracked must be a 0-d int64 Tensor, got float64"):
        F.batch_norm(sg.tensor(batches[0]), rm, rv, training=True,
                     num_batches_tracked=sg.tensor(np.array(0.0)))
    with pytest.raises(ValueError, match="momentum=None .* needs the running statistics and "
                                         "num_batches_tracked"):
        F.batch_norm(sg.tensor(batches[0]), rm, rv, training=True, momentum=None)


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


# -- layer_norm ----------------------------------------------------------------------------------------

LN_SHAPES = [((2, 3, 5), 5), ((2, 3, 4), (3, 4)), ((1, 1), 1), ((3,), [3]), ((4, 1, 2), (1, 2))]


@pytest.mark.parametrize("shape,ns", LN_SHAPES)
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm_gradcheck(shape, ns, affine, rng):
    nshape = (ns,) if isinstance(ns, int) else tuple(ns)
    x = t64(rng, *shape)
    w, b = t64(rng, *nshape), t64(rng, *nshape)
    fn, params = {"both": (lambda x, w, b: F.layer_norm(x, ns, w, b, eps=1e-3), (w, b)),
                  "weight": (lambda x, w: F.layer_norm(x, ns, w, eps=1e-3), (w,)),
                  "bias": (lambda x, b: F.layer_norm(x, ns, None, b, eps=1e-3), (b,)),
                  "none": (lambda x: F.layer_norm(x, ns, eps=1e-3), ())}[affine]
    assert sg.gradcheck(fn, (x, *params))


def _layer_norm_pair(torch, shape, nshape, rng, dtype=np.float64, affine=True):
    """Our and torch's layer_norm output and gradients (x, weight, bias) on the same data."""
    arrays = [rng.standard_normal(shape) * 2 + 1]
    if affine:
        arrays += [rng.standard_normal(nshape), rng.standard_normal(nshape)]
    arrays = [a.astype(dtype) for a in arrays]
    g = rng.standard_normal(shape).astype(dtype)
    ours = [sg.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = F.layer_norm(ours[0], nshape, *ours[1:], eps=1e-4)
    y.backward(g)
    ty = torch.nn.functional.layer_norm(theirs[0], nshape, *theirs[1:], eps=1e-4)
    ty.backward(torch.tensor(g))
    return [y.data] + [t.grad.data for t in ours], [ty.detach().numpy()] + [t.grad.numpy() for t in theirs]


@pytest.mark.parametrize("shape,nshape", [((2, 7, 5), (5,)), ((3, 4, 5), (4, 5)), ((1, 1), (1,)),
                                          ((6,), (6,)), ((2, 3, 1), (1,)), ((1200, 7), (7,))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_torch_parity(shape, nshape, affine, rng):
    """Values, dx, dW, dB; (1200, 7) sums dW, dB over several row chunks."""
    torch = pytest.importorskip("torch")
    ours, theirs = _layer_norm_pair(torch, shape, nshape, rng, affine=affine)
    for o, t in zip(ours, theirs):
        # atol: a one-element row has xhat = 0 exactly here, ~1e-15 in torch's x rstd - mean rstd
        np.testing.assert_allclose(o, t, rtol=1e-10, atol=1e-12)


def test_layer_norm_float32_close_to_torch_and_stays_float32(rng):
    """float32 rows accumulate in float64 here (float32 in torch): close, not equal."""
    torch = pytest.importorskip("torch")
    ours, theirs = _layer_norm_pair(torch, (2, 300, 60), (60,), rng, np.float32)
    assert all(o.dtype == np.float32 for o in ours)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, rtol=1e-4, atol=2e-5 * np.abs(t).max())


def test_layer_norm_parallel_equals_serial(rng):
    """Large enough for the parallel kernels: the same values as one thread, bit for bit."""
    import numba
    x = t64(rng, 64, 700)
    w = t64(rng, 700)
    g = rng.standard_normal((64, 700))
    results = []
    before = numba.get_num_threads()
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        try:
            x.grad = w.grad = None
            y = F.layer_norm(x, 700, w)
            y.backward(g)
            results.append((y.data, x.grad.data, w.grad.data))
        finally:
            numba.set_num_threads(before)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("R, D", [(7, 60), (6, 33), (5, 3), (3, 180)])
def test_layer_norm_forward_is_its_chains_bit_for_bit(R, D, dtype):
    # the documented order, emulated in numpy: per row float64 sums in 16 lanes (lane l: the
    # values l, l + 16, ... in order; then the upper half of the lanes onto the lower until one is
    # left) for the mean, again around it for the corrected two-pass variance; y = (x - mean) rstd
    # w + b in x's dtype. Rows two at a time in the kernel (an odd count's last alone): every row its
    # own bits (float64: the sums' order shows in them)
    x = (np.random.default_rng(R * D).standard_normal((R, D)) * 3 + 1).astype(dtype)
    w, b = (np.random.default_rng(R + D + k).standard_normal(D).astype(dtype) for k in (1, 2))

    def lanes(v):  # rows.row_sum16's sum of a 1-D float64 array
        t = np.array([np.cumsum(v[k::16])[-1] if D > k else 0.0 for k in range(16)])
        while t.size > 1:
            t = t[:t.size // 2] + t[t.size // 2:]
        return t[0]

    want = np.empty_like(x)
    for r in range(R):
        v = x[r].astype(np.float64)
        mu = lanes(v) / D
        d = v - mu
        s1, q = lanes(d), lanes(d * d)
        rs = 1.0 / np.sqrt((q - s1 * s1 / D) / D + 1e-5)
        want[r] = (x[r] - dtype(mu)) * dtype(rs) * w + b
    got = F.layer_norm(sg.tensor(x), D, sg.tensor(w), sg.tensor(b)).data
    bits = np.uint32 if dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(got.view(bits), want.view(bits))


def test_layer_norm_hand_values():
    x = sg.tensor(np.array([[1.0, 3.0], [2.0, 2.0]]), requires_grad=True)  # row 0: mean 2, var 1
    w = sg.tensor(np.array([2.0, 1.0]), requires_grad=True)
    b = sg.tensor(np.array([0.0, 10.0]), requires_grad=True)
    np.testing.assert_allclose(F.layer_norm(x, 2, w, b, eps=0.0).data[0], [-2.0, 11.0], rtol=1e-15)
    y = F.layer_norm(x, 2, w, b, eps=3.0)  # row 0: (x - 2) / sqrt(1 + 3) = [-0.5, 0.5]
    np.testing.assert_allclose(y.data, [[-1.0, 10.5], [0.0, 10.0]], rtol=1e-15)
    y.backward(np.array([[1.0, 0.0], [1.0, 1.0]]))
    np.testing.assert_allclose(w.grad.data, [-0.5, 0.0], rtol=1e-15)  # sum g xhat
    np.testing.assert_allclose(b.grad.data, [2.0, 1.0], rtol=1e-15)  # sum g


def test_layer_norm_non_contiguous_input(rng):
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((2, 6, 4))
    x = sg.tensor(a, requires_grad=True)
    F.layer_norm(x.transpose(1, 2), 6).sum().backward()  # (2, 4, 6) view, as SwinIR's patch embed
    tx = torch.tensor(a, requires_grad=True)
    torch.nn.functional.layer_norm(tx.transpose(1, 2), (6,)).sum().backward()
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), atol=1e-13)


def test_layer_norm_errors():
    x = sg.tensor(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match=r"layer_norm: input of shape \(2, 3, 4\) does not end in "
                                         r"normalized_shape \(3,\)"):
        F.layer_norm(x, 3)
    with pytest.raises(ValueError, match=r"does not end in normalized_shape \(1, 2, 3, 4\)"):
        F.layer_norm(x, (1, 2, 3, 4))
    with pytest.raises(ValueError, match="layer_norm: normalized_shape must be a list of ints >= 1"):
        F.layer_norm(x, (4, 0))
    with pytest.raises(ValueError, match="layer_norm: normalized_shape must be a list of ints >= 1"):
        F.layer_norm(x, "4")
    with pytest.raises(ValueError, match=r"layer_norm: weight must have shape normalized_shape \(4,\), "
                                         r"got \(3,\)"):
        F.layer_norm(x, 4, sg.tensor(np.ones(3)))
    with pytest.raises(TypeError, match="layer_norm: bias dtype float32 differs from input dtype float64"):
        F.layer_norm(x, 4, None, sg.tensor(np.ones(4, np.float32)))
    with pytest.raises(ValueError, match="layer_norm: eps must be >= 0, got -1"):
        F.layer_norm(x, 4, eps=-1)
    with pytest.raises(TypeError, match="layer_norm: input must be float32 or float64, got dtype int64"):
        F.layer_norm(sg.Tensor(np.ones((2, 4), np.int64)), 4)


# -- layer_norm2d --------------------------------------------------------------------------------
def _safmn_layer_norm(torch, x, w, b, eps):
    """SAFMN's / ConvNeXt's channels_first LayerNorm, as they write it in torch."""
    u = x.mean(1, keepdim=True)
    s = (x - u).pow(2).mean(1, keepdim=True)
    return w[:, None, None] * ((x - u) / torch.sqrt(s + eps)) + b[:, None, None]


@pytest.mark.parametrize("shape", [(2, 5, 3, 4), (1, 1, 2, 3), (1, 8, 1, 1)])
def test_layer_norm2d_matches_the_channels_first_layer_norm_and_gradcheck(shape, rng):
    torch = pytest.importorskip("torch")
    x, w, b = t64(rng, *shape), t64(rng, shape[1]), t64(rng, shape[1])
    y = F.layer_norm2d(x, w, b, eps=1e-6)
    g = rng.standard_normal(shape)
    y.backward(g)
    tx, tw, tb = (torch.tensor(t.numpy(), requires_grad=True) for t in (x, w, b))
    ty = _safmn_layer_norm(torch, tx, tw, tb, 1e-6)
    ty.backward(torch.tensor(g))
    for o, t in zip((y, x.grad, w.grad, b.grad), (ty.detach(), tx.grad, tw.grad, tb.grad)):
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-9, atol=1e-11)
    assert sg.gradcheck(lambda a, c, d: F.layer_norm2d(a, c, d, eps=1e-3), (x, w, b))
    assert sg.gradcheck(lambda a: F.layer_norm2d(a), (x,))


def test_layer_norm2d_by_hand_and_errors():
    """Pixel (0, 0): channels [1, 3] -> mean 2, var 1; eps 3: (x - 2) / 2 = [-0.5, 0.5]."""
    x = sg.tensor(np.array([1.0, 3.0]).reshape(1, 2, 1, 1))
    y = F.layer_norm2d(x, sg.tensor(np.array([2.0, 1.0])), sg.tensor(np.array([0.0, 10.0])), eps=3.0)
    np.testing.assert_allclose(y.numpy().ravel(), [-1.0, 10.5], rtol=1e-15)
    with pytest.raises(ValueError, match=r"layer_norm2d: expected a 4-D input \(N, C, H, W\), got "
                                         r"shape \(2, 3\)"):
        F.layer_norm2d(sg.tensor(np.ones((2, 3))))
    with pytest.raises(ValueError, match=r"layer_norm2d: weight must have shape \(2,\) for input "
                                         r"\(1, 2, 1, 1\), got \(3,\)"):
        F.layer_norm2d(x, sg.tensor(np.ones(3)))
    with pytest.raises(ValueError, match="layer_norm2d: eps must be >= 0"):
        F.layer_norm2d(x, eps=-1.0)


# -- group_norm ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,groups,affine", [((2, 6, 3, 4), 3, True), ((1, 4, 5, 1), 1, True),
                                                 ((3, 4, 2, 2), 4, False), ((2, 2, 1, 1), 2, True),
                                                 ((2, 6, 7), 2, True)])
def test_group_norm_gradcheck(shape, groups, affine, rng):
    x = t64(rng, *shape)
    args = (x, t64(rng, shape[1]), t64(rng, shape[1])) if affine else (x,)
    assert sg.gradcheck(lambda *a: F.group_norm(a[0], groups, *a[1:], eps=1e-3), args)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape,groups,eps", [((2, 8, 5, 6), 4, 1e-5), ((1, 64, 9, 7), 4, 1e-5),
                                              ((3, 6, 4, 4), 6, 1e-2), ((2, 4, 3, 5), 1, 1e-6)])
def test_group_norm_matches_torch(shape, groups, eps, dtype, rng):
    """Output and the input, weight and bias gradients of torch.nn.functional.group_norm."""
    torch = pytest.importorskip("torch")
    a, w, b = (rng.standard_normal(s).astype(dtype) for s in (shape, shape[1:2], shape[1:2]))
    a = a * 3 + 1  # a mean and a scale to remove
    g = rng.standard_normal(shape).astype(dtype)
    x, W, B = (sg.tensor(v, requires_grad=True) for v in (a, w, b))
    y = F.group_norm(x, groups, W, B, eps)
    y.backward(g)
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (a, w, b))
    ty = torch.nn.functional.group_norm(tx, groups, tw, tb, eps)
    ty.backward(torch.tensor(g))
    tol = 1e-12 if dtype == np.float64 else 2e-5
    for ours, theirs in ((y, ty), (x.grad, tx.grad), (W.grad, tw.grad), (B.grad, tb.grad)):
        theirs = theirs.detach().numpy()
        assert ours.dtype == dtype
        np.testing.assert_allclose(ours.data, theirs, rtol=0, atol=tol * max(1, np.abs(theirs).max()))


def test_group_norm_hand_values_and_layer():
    """Two groups of one channel each: each plane standardised on its own; GroupNorm's keys,
    defaults and repr are torch's."""
    x = np.array([[[[1.0, 3.0]], [[10.0, 10.0]]]])  # group 0: mean 2, var 1; group 1: constant
    y = F.group_norm(sg.tensor(x), 2, eps=0.0 + 1e-12).data
    np.testing.assert_allclose(y[0, 0, 0], [-1.0, 1.0], rtol=1e-9)
    np.testing.assert_array_equal(y[0, 1, 0], [0.0, 0.0])
    from framework import nn
    torch = pytest.importorskip("torch")
    layer = nn.GroupNorm(2, 4)
    assert list(layer.state_dict()) == ["weight", "bias"] and repr(layer) == repr(torch.nn.GroupNorm(2, 4))
    np.testing.assert_array_equal(layer.weight.data, 1)
    assert nn.GroupNorm(2, 4, affine=False).state_dict() == {}


def test_group_norm_errors():
    x = sg.tensor(np.zeros((2, 6, 3, 3)))
    with pytest.raises(ValueError, match=r"group_norm: num_groups=4 does not divide the 6 channels"):
        F.group_norm(x, 4)
    with pytest.raises(ValueError, match=r"group_norm: weight must have shape \(6,\), got \(3,\)"):
        F.group_norm(x, 3, np.ones(3))
    with pytest.raises(TypeError, match="group_norm: bias dtype float32 differs from input dtype float64"):
        F.group_norm(x, 3, None, np.zeros(6, np.float32))
    with pytest.raises(ValueError, match=r"group_norm: expected an input \(N, C, ...\)"):
        F.group_norm(sg.tensor(np.zeros(3)), 1)
    with pytest.raises(ValueError, match=r"group_norm: input of shape \(0, 6, 3, 3\) has no element"):
        F.group_norm(sg.tensor(np.zeros((0, 6, 3, 3))), 3)
    from framework import nn
    with pytest.raises(ValueError, match="GroupNorm: num_channels must be divisible by num_groups"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match=r"GroupNorm\(3, 6\): expected input of shape \(N, 6, ...\)"):
        nn.GroupNorm(3, 6)(sg.tensor(np.zeros((1, 3, 2, 2), np.float32)))


@pytest.mark.parametrize("stats", [False, True])
def test_instance_norm_matches_torch(stats):
    """F.instance_norm: values, the gradients of input, weight and bias, and the running
    statistics it updates, against torch; then a float64 gradcheck."""
    from ._parity import parity, rand, torch
    rm, rv = (np.zeros(3), np.ones(3)) if stats else (None, None)
    ours_stats = [None if v is None else sg.tensor(v.copy()) for v in (rm, rv)]
    theirs_stats = [None if v is None else torch.tensor(v.copy()) for v in (rm, rv)]
    parity(lambda x, w, b: F.instance_norm(x, *ours_stats, w, b, momentum=0.3),
           lambda x, w, b: torch.nn.functional.instance_norm(x, *theirs_stats, w, b,
                                                             momentum=0.3),
           [rand(2, 3, 4, 5), rand(3, seed=1), rand(3, seed=2)], gradcheck=not stats)
    if stats:
        for o, t in zip(ours_stats, theirs_stats):
            np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12)


def test_float32_training_sums_in_float64_as_torch():
    """A constant channel (0.1 everywhere, as a padded or saturated feature map) has variance 0:
    torch's CPU kernels sum in float64, get its mean exactly, and normalise it to 0 (the output is
    the bias); float32 sums miss the mean by an ulp and blew the ulp up to +-1 (the old srgrad).
    The other channels and every gradient match torch's float32 to float32 rounding."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    a[:, 1] = np.float32(0.1)
    g = rng.standard_normal(a.shape).astype(np.float32)
    w, b = np.array([1.0, 2.0, 0.5], np.float32), np.array([0.0, 0.25, -1.0], np.float32)
    x, wt = sg.tensor(a, requires_grad=True), sg.tensor(w, requires_grad=True)
    y = F.batch_norm(x, None, None, wt, sg.tensor(b), training=True)
    y.backward(g)
    tx, tw = torch.tensor(a, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.batch_norm(tx, None, None, tw, torch.tensor(b), training=True)
    ty.backward(torch.tensor(g))
    np.testing.assert_array_equal(y.data[:, 1], np.float32(0.25))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=0, atol=2e-6)
    np.testing.assert_allclose(wt.grad.data, tw.grad.numpy(), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("layout", ["planes", "channels last", "strided", "(N, C, L)"])
def test_batch_norm_eval_is_numpys_values_in_one_pass(layout, affine):
    """Eval batch norm runs one pass (_eval_pass) whose values are bit for bit numpy's four passes,
    ((x - mean) invstd) w + b, each step rounded in float32; its output keeps a channels-last input's
    layout (the transformers' convs read their tokens so); the gradients are those of the same values
    laid out in planes. (A strided slice reaches the op as tensor()'s copy, which keeps its memory
    order: channels last here.)"""
    rng = np.random.default_rng(3)
    base = (rng.standard_normal((2, 6, 5, 48)) * 3 + 1).astype(np.float32)
    x = {"planes": np.ascontiguousarray(base.transpose(0, 3, 1, 2)), "channels last": base.transpose(0, 3, 1, 2),
         "strided": base.transpose(0, 3, 1, 2)[:, :, ::2], "(N, C, L)": base.reshape(2, 30, 48).transpose(0, 2, 1)
         .copy()}[layout]
    rm, rv = rng.standard_normal(48).astype(np.float32), rng.uniform(0.5, 2, 48).astype(np.float32)
    wa, ba = (rng.standard_normal(48).astype(np.float32) if on else None for on in affine)
    g = rng.standard_normal(x.shape).astype(np.float32)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    invstd = (1 / np.sqrt(rv + np.float32(1e-5))).astype(np.float32)
    want = (x - rm.reshape(shape)) * invstd.reshape(shape)
    want = want if wa is None else want * wa.reshape(shape)
    want = want if ba is None else want + ba.reshape(shape)
    out = []
    for arr in (x, np.ascontiguousarray(x)):
        xt = sg.tensor(arr, requires_grad=True)
        wt, bt = (None if a is None else sg.tensor(a, requires_grad=True) for a in (wa, ba))
        y = F.batch_norm(xt, sg.tensor(rm), sg.tensor(rv), wt, bt)
        y.backward(g)
        out.append([y.numpy(), xt.grad.numpy()] + [t.grad.numpy() for t in (wt, bt) if t is not None])
    np.testing.assert_array_equal(out[0][0], want)
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)
    if layout == "channels last":
        assert out[0][0].strides[1] == 4  # channels together, as the input


def test_batch_norm_eval_of_an_empty_batch():
    """An empty batch in eval mode keeps numpy's passes (no one-pass kernel over nothing): an empty
    output of the input's shape, and empty gradients."""
    x = sg.tensor(np.zeros((0, 4, 3, 3), np.float32), requires_grad=True)
    w = sg.tensor(np.ones(4, np.float32), requires_grad=True)
    y = F.batch_norm(x, sg.tensor(np.zeros(4, np.float32)), sg.tensor(np.ones(4, np.float32)), w)
    y.backward(np.zeros(y.shape, np.float32))
    assert y.shape == (0, 4, 3, 3) and x.grad.shape == x.shape
    np.testing.assert_array_equal(w.grad.numpy(), 0)
