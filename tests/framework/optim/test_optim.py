"""SGD / Adam / AdamW: step-by-step parity with torch, dtype, pickle-free state_dict, validation."""
import json

import numpy as np
import pytest

from framework import nn, optim, tensor
from framework.registry import OPTIMIZERS

SHAPES = [(3, 4), (5,), (1,)]
STEPS = 20

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.02)),
    ("SGD", dict(lr=0.05, momentum=0.5, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True, betas=(0.3, 0.9), eps=1e-6)),
    ("Adam", dict(lr=0.02, weight_decay=0.05, amsgrad=True, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.01, betas=(0.6, 0.95), weight_decay=0.3, maximize=True)),
]


def _problem(dtype, seed=0):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]
    return init, grads


def _feed(params, grads):
    for p, g in zip(params, grads):
        p.grad = tensor(g, dtype=g.dtype)


def _run(name, kw, init, grads, dtype):
    params = [nn.Parameter(a, dtype=dtype) for a in init]
    opt = getattr(optim, name)(params, **kw)
    for gs in grads:
        _feed(params, gs)
        opt.step()
    return params, opt


@pytest.mark.parametrize("name,kw", CASES)
def test_matches_torch_every_step_float64(name, kw):
    torch = pytest.importorskip("torch")
    init, grads = _problem(np.float64)
    ours = [nn.Parameter(a, dtype=np.float64) for a in init]
    theirs = [torch.tensor(a, requires_grad=True) for a in init]
    opt = getattr(optim, name)(ours, **kw)
    ref = getattr(torch.optim, name)(theirs, **kw)
    data_ids = [id(p.data) for p in ours]
    for step, gs in enumerate(grads):
        _feed(ours, gs)
        for q, g in zip(theirs, gs):
            q.grad = torch.tensor(g)
        opt.step()
        ref.step()
        for p, q in zip(ours, theirs):
            # torch fuses a*b+c (one rounding): a few ulps apart at most
            np.testing.assert_allclose(p.data, q.detach().numpy(), rtol=1e-12, atol=1e-14,
                                       err_msg=f"step {step + 1}")
    assert [id(p.data) for p in ours] == data_ids, "parameters must be updated in place"


@pytest.mark.parametrize("name,kw", CASES[::3] + [CASES[-2]])
def test_float32_stays_float32_and_close_to_torch(name, kw):
    torch = pytest.importorskip("torch")
    init, grads = _problem(np.float32, seed=1)
    params, opt = _run(name, kw, init, grads, np.float32)
    theirs = [torch.tensor(a, requires_grad=True) for a in init]
    ref = getattr(torch.optim, name)(theirs, **kw)
    for gs in grads:
        for q, g in zip(theirs, gs):
            q.grad = torch.tensor(g)
        ref.step()
    for p, q in zip(params, theirs):
        assert p.dtype == np.float32
        np.testing.assert_allclose(p.data, q.detach().numpy(), rtol=1e-5, atol=1e-6)
    for st in opt.state.values():
        for v in st.values():
            if isinstance(v, np.ndarray):
                assert v.dtype == np.float32


def test_adam_first_step_by_hand():
    # t=1: m = 0.1 g, v = 0.001 g^2, p -= lr * (m/0.1) / (sqrt(v/0.001) + eps) = lr * g/(|g| + eps)
    p = nn.Parameter(np.array([1.0, -2.0, 0.5]), dtype=np.float64)
    opt = optim.Adam([p], lr=0.1, eps=0.0)
    p.grad = tensor(np.array([3.0, -0.5, 2.0]))
    opt.step()
    np.testing.assert_allclose(p.data, [0.9, -1.9, 0.4], rtol=1e-14)
    assert opt.state[p]["step"] == 1


def test_sgd_momentum_first_buffer_is_grad_then_dampened():
    p = nn.Parameter(np.array([0.0]), dtype=np.float64)
    opt = optim.SGD([p], lr=1.0, momentum=0.5, dampening=0.5)
    p.grad = tensor(np.array([2.0]))
    opt.step()  # buf = g = 2 (no dampening on the first step)
    assert p.data[0] == -2.0 and opt.state[p]["momentum_buffer"][0] == 2.0
    opt.step()  # buf = 0.5*2 + 0.5*2 = 2
    assert p.data[0] == -4.0


def test_skips_params_without_grad_and_zero_grad():
    a, b = nn.Parameter(np.ones(2)), nn.Parameter(np.ones(2))
    opt = optim.SGD([a, b], lr=0.5)
    a.grad = tensor(np.ones(2, np.float32))
    opt.step()
    np.testing.assert_array_equal(a.data, [0.5, 0.5])
    np.testing.assert_array_equal(b.data, [1.0, 1.0])
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(a.grad.data, [0.0, 0.0])
    opt.zero_grad()
    assert a.grad is None and b.grad is None


def test_param_groups_with_own_options():
    a, b = nn.Parameter(np.zeros(2)), nn.Parameter(np.zeros(3))
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[0]["momentum"] == 0.0 and opt.param_groups[1]["momentum"] == 0.9
    a.grad, b.grad = tensor(np.ones(2)), tensor(np.ones(3))
    opt.step()
    np.testing.assert_allclose(a.data, -0.1)
    np.testing.assert_allclose(b.data, -0.5)
    c = nn.Parameter(np.zeros(1))
    opt.add_param_group({"params": [c], "lr": 0.2})
    assert opt.param_groups[2]["lr"] == 0.2 and opt.param_groups[2]["momentum"] == 0.0
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


def _assert_plain(obj, path="state_dict"):
    if isinstance(obj, dict):
        for k, v in obj.items():
            assert isinstance(k, (str, int)) and not isinstance(k, bool), f"{path} key {k!r}"
            _assert_plain(v, f"{path}[{k!r}]")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _assert_plain(v, f"{path}[{i}]")
    else:
        assert obj is None or type(obj) in (str, int, float, bool, np.ndarray), \
            f"{path} is a {type(obj).__name__}"


def _split_arrays(obj):
    """(JSON-able copy with arrays replaced by keys, {key: array}) as a checkpoint writer would."""
    arrays = {}

    def walk(o, path):
        if isinstance(o, dict):
            return {str(k): walk(v, f"{path}.{k}") for k, v in o.items()}
        if isinstance(o, list):
            return [walk(v, f"{path}.{i}") for i, v in enumerate(o)]
        if isinstance(o, np.ndarray):
            arrays[path] = o
            return {"__array__": path}
        return o
    return walk(obj, "sd"), arrays


def _join_arrays(obj, arrays):
    if isinstance(obj, dict):
        if set(obj) == {"__array__"}:
            return arrays[obj["__array__"]]
        return {k: _join_arrays(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_join_arrays(v, arrays) for v in obj]
    return obj


@pytest.mark.parametrize("name,kw", [CASES[2], CASES[3], CASES[8], CASES[10]])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_state_dict_resume_mid_run_is_exact(name, kw, dtype):
    init, grads = _problem(dtype, seed=2)
    straight, _ = _run(name, kw, init, grads, dtype)

    first, opt = _run(name, kw, init, grads[:10], dtype)
    sd = opt.state_dict()
    _assert_plain(sd)
    # through JSON + separate arrays, as a checkpoint stores it (JSON turns int keys into str)
    meta, arrays = _split_arrays(sd)
    sd = _join_arrays(json.loads(json.dumps(meta)), {k: v.copy() for k, v in arrays.items()})
    resumed = [nn.Parameter(p.data.copy(), dtype=dtype) for p in first]
    opt2 = getattr(optim, name)(resumed, lr=123.0)  # options come from the state_dict
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == kw["lr"]
    if "betas" in opt2.param_groups[0]:
        assert isinstance(opt2.param_groups[0]["betas"], tuple)
    for gs in grads[10:]:
        _feed(resumed, gs)
        opt2.step()
    for p, q in zip(resumed, straight):
        assert p.dtype == dtype
        np.testing.assert_array_equal(p.data, q.data)


def test_state_dict_layout_and_copies():
    a, b = nn.Parameter(np.zeros(2)), nn.Parameter(np.zeros(3))
    opt = optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.5}])
    a.grad = tensor(np.ones(2))
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert list(sd["state"]) == [0] and sd["state"][0]["step"] == 1
    assert sd["param_groups"][1]["lr"] == 0.5 and sd["param_groups"][0]["betas"] == [0.9, 0.999]
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    before = sd["state"][0]["exp_avg"].copy()
    opt.step()  # the saved arrays are copies, unaffected by later steps
    np.testing.assert_array_equal(sd["state"][0]["exp_avg"], before)
    json.dumps(_split_arrays(sd)[0])


def test_load_state_dict_mismatches():
    a, b = nn.Parameter(np.zeros(2)), nn.Parameter(np.zeros(3))
    opt = optim.SGD([a, b], lr=0.1, momentum=0.9)
    a.grad, b.grad = tensor(np.ones(2)), tensor(np.ones(3))
    opt.step()
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="has 2 parameters, the optimizer has 1"):
        optim.SGD([nn.Parameter(np.zeros(2))], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="2 parameter groups, the optimizer has 1"):
        optim.SGD([a, b]).load_state_dict(
            {"state": {}, "param_groups": sd["param_groups"] * 2})
    with pytest.raises(ValueError, match=r"shape \(2,\), the parameter has shape \(4,\)"):
        optim.SGD([nn.Parameter(np.zeros(4)), b], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="keys 'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})


def test_load_copies_arrays():
    a = nn.Parameter(np.zeros(2))
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    a.grad = tensor(np.ones(2))
    opt.step()
    sd = opt.state_dict()
    opt.load_state_dict(sd)
    opt.step()
    np.testing.assert_array_equal(sd["state"][0]["momentum_buffer"], [1.0, 1.0])


@pytest.mark.parametrize("call,match", [
    (lambda p: optim.SGD(p, lr=-0.1), r"SGD: lr must be >= 0, got -0\.1"),
    (lambda p: optim.SGD(p, momentum=-0.5), r"SGD: momentum must be >= 0, got -0\.5"),
    (lambda p: optim.SGD(p, weight_decay=-1.0), r"SGD: weight_decay must be >= 0, got -1\.0"),
    (lambda p: optim.SGD(p, nesterov=True), r"nesterov=True requires a momentum > 0.*momentum=0"),
    (lambda p: optim.SGD(p, momentum=0.9, dampening=0.1, nesterov=True), r"dampening=0\.1"),
    (lambda p: optim.Adam(p, lr=-1e-3), r"Adam: lr must be >= 0, got -0\.001"),
    (lambda p: optim.Adam(p, eps=-1.0), r"Adam: eps must be >= 0, got -1\.0"),
    (lambda p: optim.Adam(p, betas=(1.0, 0.999)), r"Adam: betas\[0\] must be in \[0, 1\.0\), got 1\.0"),
    (lambda p: optim.AdamW(p, betas=(0.9, -0.1)), r"AdamW: betas\[1\] must be in \[0, 1\.0\), got -0\.1"),
    (lambda p: optim.Adam(p, betas=(0.9,)), r"betas must be a pair"),
    (lambda p: optim.Adam([{"params": p, "lr": -2.0}]), r"Adam: lr must be >= 0, got -2\.0"),
    (lambda p: optim.SGD([], lr=0.1), r"empty parameter list"),
    (lambda p: optim.Adam([{"params": p, "momentum": 0.9}]), r"unknown option.*momentum"),
])
def test_bad_arguments_raise_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call([nn.Parameter(np.zeros(2))])


def test_bad_types_raise_type_error():
    with pytest.raises(TypeError, match="must be a number, got str '1e-4'.*YAML"):
        optim.Adam([nn.Parameter(np.zeros(2))], lr="1e-4")
    with pytest.raises(TypeError, match=r"params\[1\] is a ndarray"):
        optim.SGD([nn.Parameter(np.zeros(2)), np.zeros(2)], lr=0.1)
    with pytest.raises(TypeError, match=r"params\[0\] is a Tensor of dtype int64"):
        optim.SGD([tensor(np.zeros(2, np.int64))], lr=0.1)
    with pytest.raises(TypeError, match="single Parameter"):
        optim.SGD(nn.Parameter(np.zeros(2)), lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": {nn.Parameter(np.zeros(2))}}], lr=0.1)


def test_registered_by_class_name_and_buildable():
    assert set(OPTIMIZERS.names()) >= {"SGD", "Adam", "AdamW"}
    p = nn.Parameter(np.zeros(2))
    opt = OPTIMIZERS.build({"type": "Adam", "lr": 2e-4, "betas": [0.9, 0.99]}, params=[p])
    assert isinstance(opt, optim.Adam) and opt.param_groups[0]["betas"] == (0.9, 0.99)
    assert isinstance(OPTIMIZERS.build({"type": "AdamW"}, params=[p]), optim.AdamW)


def test_closure_is_evaluated_and_returned():
    p = nn.Parameter(np.array([2.0]))
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert float(loss) == 4.0 and p.data[0] == 1.0  # p -= 0.25 * 2p
