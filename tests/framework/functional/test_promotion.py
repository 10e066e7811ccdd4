"""The operator audit (issue 42): every operator and every top-level function that takes two
tensors, or a tensor and a number, against torch 2.13 directly: values, result dtypes (torch's type
promotion), errors, and the gradients of the differentiable ones."""
import operator

import numpy as np
import pytest

import framework as sg

torch = pytest.importorskip("torch")
# division by 0 (a bool False divisor) gives inf / nan as in torch; numpy also warns
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

_T = {np.float32: torch.float32, np.float64: torch.float64, np.int64: torch.int64,
      np.int32: torch.int32, np.uint8: torch.uint8, np.bool_: torch.bool}
_VALUES = {np.bool_: [True, False, True], np.uint8: [5, 3, 2]}

# operands: a name, then (value, shape-or-None); None: a Python number
OPERANDS = {
    "f32": (np.float32, (3,)), "f64": (np.float64, (3,)), "i64": (np.int64, (3,)),
    "i32": (np.int32, (3,)), "u8": (np.uint8, (3,)), "b": (np.bool_, (3,)),
    "f32_0d": (np.float32, ()), "f64_0d": (np.float64, ()), "i64_0d": (np.int64, ()),
    "int": (int, None), "float": (float, None), "bool": (bool, None),
}


def _make(name, right):
    """The operand `name` in both libraries; `right` operands avoid 0 (division by 0 is
    checked apart) and negative int exponents."""
    dtype, shape = OPERANDS[name]
    if shape is None:
        v = {int: 2, float: 1.5, bool: True}[dtype]
        return v, v
    base = _VALUES.get(dtype, [2.5, -3.0, 4.0] if not right else [2.0, 3.0, 1.5])
    arr = np.asarray(base if shape else base[0]).astype(dtype)
    return sg.tensor(arr.copy()), torch.tensor(arr.copy())


BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "eq": operator.eq, "ne": operator.ne, "and": operator.and_, "or": operator.or_,
    "xor": operator.xor, "matmul": operator.matmul,
}
# top-level functions of two operands, srgrad's and torch's spelling
FUNCTIONS = {name: (getattr(sg, name), getattr(torch, name)) for name in (
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
    "remainder", "floor_divide", "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and",
    "logical_or", "logical_xor")}
FUNCTIONS["max"] = (sg.max, torch.max)
FUNCTIONS["min"] = (sg.min, torch.min)


def _run(fn, a, b):
    try:
        return fn(a, b), None
    except Exception as e:  # noqa: BLE001 (the audit compares whether each side refuses)
        return None, e


def _compare(ours, theirs, what):
    """'' when the two results agree (value, dtype, bool/int exactness), else what differs."""
    (x, ex), (y, ey) = ours, theirs
    if ey is not None or ex is not None:
        if (ex is None) != (ey is None):
            return f"{what}: srgrad {ex!r} / torch {ey!r}"
        return ""
    if not isinstance(y, torch.Tensor):
        return "" if x == y else f"{what}: {x} != {y}"
    if not isinstance(x, sg.Tensor):
        return f"{what}: srgrad gave {type(x).__name__}"
    want = y.numpy()
    if x.dtype != want.dtype or x.shape != want.shape:
        return f"{what}: dtype/shape {x.dtype}{x.shape} vs torch {want.dtype}{want.shape}"
    if not np.allclose(x.numpy(), want, rtol=1e-6, equal_nan=True):
        return f"{what}: {x.numpy()} vs {want}"
    return ""


def _pairs():
    for left in OPERANDS:
        for right in OPERANDS:
            if OPERANDS[left][1] is not None or OPERANDS[right][1] is not None:
                yield left, right


def _audit(ours_fn, torch_fn, tensor_only_left=False):
    bad = []
    for left, right in _pairs():
        if tensor_only_left and OPERANDS[left][1] is None:
            continue
        a, ta = _make(left, False)
        b, tb = _make(right, True)
        bad.append(_compare(_run(ours_fn, a, b), _run(torch_fn, ta, tb), f"{left} . {right}"))
    return [b for b in bad if b]


@pytest.mark.parametrize("name", BINARY)
def test_operator_and_its_reflected_form_match_torch(name):
    """a OP b for every pair of operand kinds (tensors of each dtype, 0-d tensors, Python
    numbers on either side): the same values, the same dtype, and a refusal where torch refuses."""
    assert _audit(BINARY[name], BINARY[name]) == []


@pytest.mark.parametrize("name", FUNCTIONS)
def test_top_level_function_matches_torch(name):
    """Where torch's function takes only tensors (maximum(x, 2.0) is a TypeError there), srgrad
    also takes a number, with the operator's promotion (README: differ on purpose); max(x, 1)
    is srgrad's reduction over dim 1."""
    ours, theirs = FUNCTIONS[name]
    bad = _audit(ours, theirs, tensor_only_left=True)
    bad = [b for b in bad if "must be Tensor" not in b and "invalid combination" not in b]
    assert bad == []


@pytest.mark.parametrize("name", ["neg", "abs", "invert", "pos"])
def test_unary_operator_matches_torch(name):
    fn = {"neg": operator.neg, "abs": abs, "invert": operator.invert, "pos": operator.pos}[name]
    bad = []
    for left, (dtype, shape) in OPERANDS.items():
        if shape is not None:
            a, ta = _make(left, False)
            bad.append(_compare(_run(lambda x, _: fn(x), a, None),
                                _run(lambda x, _: fn(x), ta, None), left))
    assert [b for b in bad if b] == []


INPLACE = {"iadd": operator.iadd, "isub": operator.isub, "imul": operator.imul,
           "itruediv": operator.itruediv, "ifloordiv": operator.ifloordiv, "imod": operator.imod,
           "ipow": operator.ipow, "iand": operator.iand, "ior": operator.ior,
           "ixor": operator.ixor}


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_operator_matches_torch_and_keeps_the_object(name):
    """x OP= y writes into x (the same object, its dtype kept) or refuses as torch does
    (e.g. int /= int: the float result cannot be written into an int tensor)."""
    fn = INPLACE[name]
    bad = []
    for left, right in _pairs():
        if OPERANDS[left][1] != (3,):
            continue
        a, ta = _make(left, False)
        b, tb = _make(right, True)
        ours, theirs = _run(fn, a, b), _run(fn, ta, tb)
        bad.append(_compare(ours, theirs, f"{left} {name} {right}"))
        if ours[0] is not None and ours[0] is not a:
            bad.append(f"{left} {name} {right}: not in place")
    assert [b for b in bad if b] == []


def test_division_by_zero_matches_torch():
    x, tx = sg.tensor([1.0, -1.0, 0.0]), torch.tensor([1.0, -1.0, 0.0])
    np.testing.assert_array_equal((x / 0).numpy(), (tx / 0).numpy())
    np.testing.assert_array_equal((sg.arange(3) / 0).numpy(), (torch.arange(3) / 0).numpy())
    for op in (operator.floordiv, operator.mod):
        for lib in (sg, torch):  # torch: a RuntimeError; srgrad's is also a ZeroDivisionError
            with pytest.raises(RuntimeError, match="ZeroDivisionError|division by zero"):
                op(lib.arange(3), 0)
        with pytest.raises(ZeroDivisionError):
            op(sg.arange(3), 0)


GRAD_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
            "div": operator.truediv, "pow": operator.pow, "remainder": operator.mod,
            "maximum": "maximum", "minimum": "minimum", "max": "max", "where": "where",
            "matmul": operator.matmul}


@pytest.mark.parametrize("name", GRAD_OPS)
@pytest.mark.parametrize("da,db,sb", [(np.float32, np.float64, (3,)), (np.float64, np.float32, ()),
                                      (np.float32, np.float32, (1,)), (np.float32, np.int64, (3,))])
def test_gradients_and_dtypes_across_mixed_dtypes_match_torch(name, da, db, sb):
    """The result dtype and the gradient of every operand (in the operand's own dtype) when the
    operands' dtypes differ, e.g. float32 x float64 -> float64 with a float32 gradient back."""
    rng = np.random.default_rng(0)
    xa = (rng.random((3,)) + 0.5).astype(da)
    xb = (rng.random(sb) + 0.5 if db != np.int64 else np.full(sb, 2)).astype(db)
    if name == "matmul" and sb != (3,):
        pytest.skip("matmul needs two vectors")
    fn = GRAD_OPS[name]
    ours = [sg.tensor(xa, requires_grad=True), sg.tensor(xb, requires_grad=db != np.int64)]
    theirs = [torch.tensor(xa, requires_grad=True), torch.tensor(xb, requires_grad=db != np.int64)]
    if isinstance(fn, str):
        def fn(a, b):
            lib = torch if isinstance(a, torch.Tensor) else sg
            return lib.where(a > 1, a, b) if name == "where" else getattr(lib, name)(a, b)
    (y, e), (ty, te) = _run(fn, *ours), _run(fn, *theirs)
    if te is not None:  # torch refuses (matmul of float32 and float64): so does srgrad
        assert e is not None, f"torch: {te}"
        return
    assert y.dtype == ty.detach().numpy().dtype
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-6)
    y.sum().backward()
    ty.sum().backward()
    for o, t in zip(ours, theirs):
        if t.grad is not None:
            assert o.grad.dtype == t.grad.numpy().dtype
            np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-5)


def test_comparisons_and_masks_are_outside_the_graph():
    x = sg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for mask in (x == 2, x != 2, x < 2, x.eq(2), sg.isfinite(x), ~(x > 1), (x > 1) & (x < 3)):
        assert mask.dtype == np.bool_ and not mask.requires_grad
    with pytest.raises(RuntimeError, match="floor_divide"):
        (x // 2).sum().backward()


def test_tensors_stay_dict_keys_set_members_and_identity_list_members():
    """== is element-wise, the hash is identity (torch's pair): dicts and sets of tensors work,
    `t in list` raises for a many-element t as in torch (RuntimeError, ambiguous)."""
    a, b = sg.tensor([1.0, 2.0]), sg.tensor([1.0, 2.0])
    d = {a: "a", b: "b"}
    assert d[a] == "a" and d[b] == "b" and len({a, b}) == 2 and a in {a}
    with pytest.raises(RuntimeError, match="ambiguous"):
        a in [b, a]  # noqa: B015
    assert (a == None) is False and (a != None) is True and (a == "x") is False  # noqa: E711


def _lib_cases():
    """The other top-level functions of two operands (or a list of them), as (name, fn(lib))."""
    def ts(lib):
        return (lib.tensor([1, 2]), lib.tensor([1.0, 2.5]),
                lib.tensor([1.0, 2.0], dtype=lib.float64))
    return {
        "cat_int_float": lambda lib: lib.cat([ts(lib)[0], ts(lib)[1]]),
        "cat_f32_f64": lambda lib: lib.cat([ts(lib)[1], ts(lib)[2]]),
        "stack_int_float": lambda lib: lib.stack([ts(lib)[0], ts(lib)[1]]),
        "where_int_float": lambda lib: lib.where(ts(lib)[0] > 1, ts(lib)[0], ts(lib)[1]),
        "where_0d_f64": lambda lib: lib.where(ts(lib)[0] > 1, lib.tensor(1.5, dtype=lib.float64),
                                              ts(lib)[1]),
        "clamp_tensor_min": lambda lib: lib.clamp(ts(lib)[1], min=lib.tensor([1.5, 0.0])),
        "clamp_tensor_max_0d": lambda lib: lib.clamp(ts(lib)[1], max=lib.tensor(2.0)),
        "clamp_int_float": lambda lib: lib.clamp(ts(lib)[0], min=1.5),
        "clamp_int": lambda lib: lib.clamp(ts(lib)[0], 0, 1),
        "allclose_dtypes": lambda lib: lib.allclose(ts(lib)[1], ts(lib)[2]),
        "allclose": lambda lib: lib.allclose(ts(lib)[1], ts(lib)[1] + 1e-9),
        "equal_int_float": lambda lib: lib.equal(ts(lib)[0], lib.tensor([1.0, 2.0])),
        "exp_int": lambda lib: lib.exp(ts(lib)[0]),
        "log_int": lambda lib: lib.log(ts(lib)[0]),
        "sqrt_int": lambda lib: lib.sqrt(ts(lib)[0]),
        "pow_float_int": lambda lib: lib.pow(ts(lib)[1], ts(lib)[0]),
        "matmul_int_float": lambda lib: lib.matmul(ts(lib)[0], ts(lib)[1]),
        "sum_bool": lambda lib: (ts(lib)[0] > 1).sum(),
    }


@pytest.mark.parametrize("name", list(_lib_cases()))
def test_other_top_level_functions_match_torch(name):
    fn = _lib_cases()[name]
    assert _compare(_run(lambda lib, _: fn(lib), sg, None),
                    _run(lambda lib, _: fn(lib), torch, None), name) == ""


def test_clamp_with_tensor_bounds_matches_torchs_gradients():
    x = np.array([0.5, 1.5, 2.5, 1.0])
    lo, hi = np.array([1.0, 1.0, 0.0, 1.0]), np.array([2.0, 2.0, 2.0, 3.0])
    grads = []
    for lib in (sg, torch):
        a, b, c = (lib.tensor(v, requires_grad=True) for v in (x, lo, hi))
        (lib.clamp(a, b, c) * lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64)).sum().backward()
        grads.append([v.grad.numpy() for v in (a, b, c)])
    for ours, theirs in zip(*grads):
        np.testing.assert_array_equal(ours, theirs)
