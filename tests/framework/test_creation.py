"""Tensor factories: torch's names, signatures, dtypes and values (framework/creation.py)."""
import numpy as np
import pytest

import framework as sg

torch = pytest.importorskip("torch")


def _same(ours, theirs):
    """Same shape, the dtype torch gives (by name) and the same values."""
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("call", [
    "zeros(2, 3)", "zeros((2, 3))", "zeros([4])", "ones(2, 3)", "zeros(0, 2)",
    "zeros(2, dtype={ns}.float64)", "ones(3, dtype={ns}.int64)", "ones(2, dtype={ns}.bool)",
    "full((2, 2), 3.5)", "full((2,), 7)", "full((2,), True)", "full((2, 1), 2, dtype={ns}.float32)",
    "eye(3)", "eye(2, 4)", "eye(3, dtype={ns}.float64)",
    "arange(5)", "arange(2, 9, 3)", "arange(5, 0, -2)", "arange(0, 1, 0.25)", "arange(1.5)",
    "arange(3, dtype={ns}.float64)", "linspace(0, 1, 5)", "linspace(-1, 1, 1)",
    "linspace(2, 3, 4, dtype={ns}.float64)"])
def test_factories_match_torch(call):
    _same(eval("sg." + call.format(ns="sg")), eval("torch." + call.format(ns="torch")))


def test_float_arange_and_linspace_are_rounded_exact_values_and_near_torch():
    """Each value is the float64 value start + i * step (linspace: start + (end - start) * i /
    (steps - 1)) rounded once to float32; torch's vectorised kernels add float32 steps inside a
    vector (machine-dependent), so they are compared within a few float32 epsilons of the range."""
    cases = [(sg.arange(-1, 1, 0.1), torch.arange(-1, 1, 0.1),
              [-1 + i * 0.1 for i in range(20)]),
             (sg.linspace(-3, 7, 11), torch.linspace(-3, 7, 11),
              [-3 + 10 * i / 10 for i in range(11)]),
             (sg.linspace(0, 1, 7), torch.linspace(0, 1, 7), [i / 6 for i in range(7)])]
    for ours, theirs, exact in cases:
        ref = np.array(exact, np.float64).astype(np.float32)
        assert ours.shape == tuple(theirs.shape) == ref.shape and ours.dtype == np.float32
        assert np.all(np.abs(ours.numpy() - ref) <= np.spacing(np.abs(ref))), (ours, ref)
        span = float(np.abs(ref).max())
        assert np.abs(theirs.numpy() - ref).max() <= 4 * np.finfo(np.float32).eps * span


def test_like_factories_keep_shape_and_dtype():
    x = sg.tensor(np.arange(6.0).reshape(2, 3))  # float64
    for f in (sg.zeros_like, sg.ones_like, sg.empty_like, sg.rand_like, sg.randn_like):
        y = f(x)
        assert y.shape == (2, 3) and y.dtype == np.float64 and not y.requires_grad
    assert sg.zeros_like(x).numpy().sum() == 0 and sg.ones_like(x).numpy().sum() == 6
    assert sg.full_like(x, 2.5).numpy().tolist() == [[2.5] * 3] * 2
    assert sg.zeros_like(x, dtype=np.float32).dtype == np.float32
    assert sg.ones_like(x, requires_grad=True).requires_grad
    r = sg.randint_like(sg.zeros(100, dtype=sg.int64), 3, 5)
    assert r.dtype == np.int64 and set(r.tolist()) <= {3, 4}
    with pytest.raises(TypeError, match="zeros_like: input must be a Tensor"):
        sg.zeros_like(np.zeros(2))


def test_random_factories_follow_manual_seed():
    """torch.manual_seed repeats torch.rand/randn/randint; framework.manual_seed the same."""
    for f, args in ((sg.rand, (2, 3)), (sg.randn, (4,)), (sg.randint, (0, 10, (5,)))):
        sg.manual_seed(7)
        a = f(*args)
        sg.manual_seed(7)
        b = f(*args)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert not np.array_equal(f(*args).numpy(), b.numpy())  # the stream moves on
    u = sg.rand(1000)
    assert u.dtype == np.float32 and 0 <= u.numpy().min() and u.numpy().max() < 1
    assert sg.randn(2, 2, dtype=np.float64).dtype == np.float64
    r = sg.randint(3, (1000,))
    assert r.dtype == np.int64 and set(r.tolist()) == {0, 1, 2}
    g = np.random.default_rng(1)
    np.testing.assert_array_equal(sg.rand(3, generator=g).numpy(),
                                  np.random.default_rng(1).random(3).astype(np.float32))
    assert sg.randn(2, requires_grad=True).requires_grad


def test_as_tensor_shares_memory_when_the_dtype_is_kept():
    a = np.zeros(3)  # float64: kept, as torch.as_tensor keeps it
    t = sg.as_tensor(a)
    a[0] = 5
    assert t.dtype == np.float64 and t.numpy()[0] == 5
    x = sg.ones(2)
    assert sg.as_tensor(x) is x
    assert sg.as_tensor([1.0, 2.0]).dtype == np.float32
    assert sg.as_tensor(a, dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize("call, error, match", [
    ("sg.zeros(2, dtype=np.float16)", ValueError, "zeros: dtype float16 is not supported"),
    ("sg.full((2,), 1.0, dtype=sg.half)", ValueError, "full: dtype float16 is not supported"),
    ("sg.zeros(2, device='cuda')", ValueError, "zeros: srgrad runs on the CPU only"),
    ("sg.ones(2, device=sg.device('cuda', 0))", ValueError, "device 'cuda' is not available"),
    ("sg.zeros(-1)", TypeError, "zeros: size must be non-negative ints"),
    ("sg.zeros(2.5)", TypeError, "zeros: size must be non-negative ints"),
    ("sg.arange(0, 1, 0)", ValueError, "arange: step must be nonzero"),
    ("sg.arange(0, 5, -1)", ValueError, "arange: step -1 goes away from end 5"),
    ("sg.arange('a')", TypeError, "arange: start, end and step must be numbers"),
    ("sg.randint(5, 5, (2,))", ValueError, "randint: low and high must be ints with low < high"),
    ("sg.randint(5)", TypeError, "randint: expected randint"),
    ("sg.full((2,), 'x')", TypeError, "full: fill_value must be a number"),
    ("sg.rand(2, generator=3)", TypeError, "rand: generator must be a numpy Generator"),
    ("sg.linspace(0, 1, -1)", TypeError, "linspace: expected numbers start, end and an int"),
])
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        eval(call)


def test_devices_are_accepted_on_the_cpu():
    cpu = sg.device("cpu")
    assert sg.zeros(2, device=cpu).shape == (2,) and sg.ones(1, device="cpu:0").shape == (1,)
    assert str(sg.device("cuda:1")) == "cuda:1" and sg.device("cuda", 1) == sg.device("cuda:1")
    assert sg.device("cpu").index is None and repr(sg.device("cpu", 0)) == \
        "device(type='cpu', index=0)"
    assert sg.ones(2).to(cpu).device == "cpu"
    with pytest.raises(TypeError, match="device: expected a string like 'cpu'"):
        sg.device(3)
    with pytest.raises(ValueError, match="already names index 0"):
        sg.device("cuda:0", 1)
