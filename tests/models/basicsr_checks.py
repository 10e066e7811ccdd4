"""Checks every BasicSR architecture's test file runs (test_srvgg.py, test_msrresnet.py,
test_rrdbnet.py, test_rcan.py): keys in BasicSR's order, parity of the output and of every gradient
after an L1 loss with the torch twin, an Adam step, a `.pth` round trip, BasicSR's initialisation."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F
import models  # noqa: F401  registers every architecture
from framework.nn import init
from framework.optim import Adam
from framework.registry import MODELS

TOLERANCE = {np.float64: 1e-10, np.float32: 1e-5}  # relative to the largest |value| of each array


def build(spec: dict, seed: int = 0):
    init.manual_seed(seed)
    return MODELS.build(spec)


def inputs(spec: dict, shape, seed: int = 0):
    """An LR batch in [0, 1] and an L1 target of the output's size (scale from the spec)."""
    n, c, h, w = shape
    s = spec["scale"]
    rng = np.random.default_rng(seed)
    out = spec.get("num_out_ch", spec.get("out_channels", spec.get("out_ch", spec.get("out_nc", c))))  # RealCUGAN, MoSR, DCTLSA: spandrel's keywords
    return rng.uniform(0, 1, shape), rng.uniform(0, 1, (n, out, h * s, w * s))


def assert_close(ours, theirs, dtype, what, floor=0.0, tolerance=None):
    """max |ours - theirs| <= tolerance * max(max |theirs|, floor): relative to the array's scale;
    `floor` (the largest gradient of any parameter) for arrays that cancel to ~0, such as a bias
    gradient summing L1 signs, whose rounding error is relative to its terms, not to the sum.
    tolerance: default TOLERANCE[dtype]."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype == dtype, what
    assert ours.shape == theirs.shape, what
    bound = (tolerance or TOLERANCE[dtype]) * max(np.abs(theirs).max(), floor, 1e-30)
    err = np.abs(ours - theirs).max()
    assert err <= bound, f"{what}: max |ours - torch| {err:.3g} > {bound:.3g}"


def check_keys(spec: dict):
    """Our state_dict keys, in order, with shapes, equal the twin's (BasicSR's): a BasicSR state_dict
    loads strictly, and our weights load strictly into the twin."""
    twins = pytest.importorskip("tests.twins")
    ours = build(spec).state_dict()
    theirs = twins.build_twin(spec).state_dict()
    assert [(k, v.shape) for k, v in ours.items()] == [(k, tuple(v.shape)) for k, v in theirs.items()]
    return list(ours)


def check_parity(spec: dict, shape, dtype, train: bool = True, tolerance=None, prepare=None):
    """Output, input gradient and EVERY parameter gradient of an L1 loss, ours vs the twin, both in
    train() (default) or eval() mode; a parameter the twin gives no gradient (unused in that mode,
    or not trained) must get none here either. tolerance: default TOLERANCE[dtype]. prepare: a
    function of the built model run before the twin copies it (e.g. moving zero-init parameters
    off zero, so the gradients behind them are not all zero)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    model = build(spec).to(dtype).train(train)
    if prepare is not None:
        prepare(model)
    torch_dtype = {np.float64: torch.float64, np.float32: torch.float32}[dtype]
    twin = twins.twin_of(model, spec, dtype=torch_dtype).train(train)
    x_np, t_np = inputs(spec, shape)
    x_np, t_np = x_np.astype(dtype), t_np.astype(dtype)

    x = sg.tensor(x_np, requires_grad=True)
    y = model(x)
    F.l1_loss(y, sg.tensor(t_np)).backward()
    tx = torch.from_numpy(x_np.copy()).requires_grad_(True)
    ty = twin(tx)
    torch.nn.functional.l1_loss(ty, torch.from_numpy(t_np)).backward()

    assert_close(y.data, ty.detach().numpy(), dtype, "output", tolerance=tolerance)
    theirs = dict(twin.named_parameters())
    ours = dict(model.named_parameters())
    assert list(ours) == list(theirs)
    floor = max(np.abs(p.grad.numpy()).max() for p in theirs.values()
                if p.grad is not None and p.numel())
    # the input gradient cancels too (an L1 loss's signs through a deep net: Swin2SR's x4
    # nearest+conv sums terms far larger than its largest value), so it gets the same floor
    assert_close(x.grad.data, tx.grad.numpy(), dtype, "input gradient", floor, tolerance)
    for k, p in ours.items():
        if not theirs[k].numel():  # a zero-width layer of the original (DAT below embed_dim 32)
            assert p.data.shape == tuple(theirs[k].shape), k
            continue
        if theirs[k].grad is None:  # unused in this mode, or not trained (SPAN's eval_conv)
            assert p.grad is None and (theirs[k].requires_grad or not p.requires_grad), k
            continue
        assert_close(p.grad.data, theirs[k].grad.numpy(), dtype, f"gradient of {k}", floor, tolerance)


def check_eval_output(spec: dict, shape, dtype=np.float64, tolerance=None):
    """The eval() output, ours vs the twin, under no_grad (for originals whose eval() path writes in
    place and has no backward, e.g. PLKSR's partial conv). tolerance: default TOLERANCE[dtype]."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    model = build(spec).to(dtype).eval()
    torch_dtype = {np.float64: torch.float64, np.float32: torch.float32}[dtype]
    twin = twins.twin_of(model, spec, dtype=torch_dtype).eval()
    x = inputs(spec, shape)[0].astype(dtype)
    with sg.no_grad(), torch.no_grad():
        assert_close(model(sg.tensor(x)).data, twin(torch.from_numpy(x)).numpy(), dtype, "eval() output",
                     tolerance=tolerance)


def check_adam_step(spec: dict, shape, lr: float = 1e-3, margin: float = 2e-3):
    """One Adam step (lr 1e-3) lowers the L1 loss by at least `margin` of it. The target is the
    nearest-upsampled input brightened by 0.1, so the output biases alone have a consistent
    direction (a random target's L1 signs cancel, and a 0.1-scaled init moves little else)."""
    model = build(spec)
    x_np = inputs(spec, shape, seed=1)[0]
    s = spec["scale"]
    t_np = np.repeat(np.repeat(x_np, s, axis=2), s, axis=3) + 0.1
    x, target = sg.tensor(x_np, dtype=np.float32), sg.tensor(t_np, dtype=np.float32)
    opt = Adam(model.parameters(), lr=lr)
    loss = F.l1_loss(model(x), target)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    opt.step()
    with sg.no_grad():
        after = F.l1_loss(model(x), target).item()
    assert after < loss.item() * (1 - margin), (loss.item(), after)


def check_pth_round_trip(spec: dict, shape, tmp_path):
    """torch.save({'params': state_dict}) as BasicSR writes it -> framework.weights.pth -> a model built
    with another seed -> the same output as the model that was saved."""
    torch = pytest.importorskip("torch")
    pth = pytest.importorskip("framework.weights.pth")
    model = build(spec, seed=1)
    path = tmp_path / "net_g.pth"
    torch.save({"params": {k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()}},
               str(path))
    state, _ = pth.load_pth_state_dict(str(path))
    fresh = build(spec, seed=2)
    x = sg.tensor(inputs(spec, shape)[0], dtype=np.float32)
    with sg.no_grad():
        assert not np.array_equal(fresh(x).data, model(x).data)  # the seeds differ
        fresh.load_state_dict(state, strict=True)
        np.testing.assert_array_equal(fresh(x).data, model(x).data)


def check_init_matches_twin(spec: dict, normal_scaled: set):
    """Every conv weight has the twin's (BasicSR's) spread: kaiming normal x 0.1 (std
    0.1 sqrt(2 / fan_in), zero bias) where BasicSR calls default_init_weights (`normal_scaled`:
    names), torch's uniform default (std 1 / sqrt(3 fan_in)) elsewhere. The shape shows in the
    peak: a large normal sample reaches > 3 std, a uniform one at most sqrt(3) std."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    model = build(spec)
    torch.manual_seed(0)
    theirs = {k: p.detach().numpy().astype(np.float64)
              for k, p in twins.build_twin(spec).named_parameters()}
    params = {k: p.data.astype(np.float64) for k, p in model.named_parameters()}
    convs = [k for k, v in params.items() if v.ndim == 4]
    assert set(normal_scaled) <= set(convs)
    for k in convs:
        w, t = params[k], theirs[k]
        fan_in = np.prod(w.shape[1:])
        rtol = max(0.05, 5 / np.sqrt(2 * w.size))  # 5 standard errors of a sample std
        normal = k in normal_scaled
        want = 0.1 * np.sqrt(2 / fan_in) if normal else 1 / np.sqrt(3 * fan_in)
        np.testing.assert_allclose(w.std(), want, rtol=rtol, err_msg=k)
        np.testing.assert_allclose(t.std(), want, rtol=rtol, err_msg=f"twin {k}")
        if normal:
            assert not params[k[:-len("weight")] + "bias"].any(), k
        if w.size >= 4000:
            for arr, who in ((w, "ours"), (t, "twin")):
                peak = np.abs(arr).max() / arr.std()
                assert (peak > 3) if normal else (peak <= np.sqrt(3) * 1.05), (k, who, peak)
