"""Module basics: registration, traversal, dotted state_dict keys, strict loading errors, train/eval,
zero_grad, repr, Sequential and ModuleList."""
from collections import OrderedDict

import numpy as np
import pytest

import framework as sg
from framework import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.scale = nn.Parameter(np.ones(1, np.float32))
        self.note = "not registered"

    def forward(self, x):
        return self.bn(self.conv(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = Block()
        self.body = nn.Sequential(nn.ReLU(), nn.Conv2d(3, 3, 1, bias=False))
        self.tails = nn.ModuleList([nn.PReLU(3), nn.Identity()])

    def forward(self, x):
        x = self.body(self.head(x))
        for m in self.tails:
            x = m(x)
        return x


KEYS = ["head.scale", "head.conv.weight", "head.conv.bias", "head.bn.weight", "head.bn.bias",
        "head.bn.running_mean", "head.bn.running_var", "head.bn.num_batches_tracked", "body.1.weight",
        "tails.0.weight"]


def test_registration_and_traversal():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["head.scale", "head.conv.weight", "head.conv.bias", "head.bn.weight", "head.bn.bias",
                     "body.1.weight", "tails.0.weight"]
    assert [type(m).__name__ for m in net.children()] == ["Block", "Sequential", "ModuleList"]
    assert [n for n, _ in net.named_modules()] == [  # depth-first pre-order, as torch
        "", "head", "head.conv", "head.bn", "body", "body.0", "body.1", "tails", "tails.0", "tails.1"]
    assert [n for n, _ in net.named_buffers()] == ["head.bn.running_mean", "head.bn.running_var",
                                                  "head.bn.num_batches_tracked"]
    assert net.head.note == "not registered" and "note" not in net.state_dict()
    assert net.num_parameters() == 1 + 54 + 3 + 3 + 3 + 9 + 3
    assert net.head.conv.bias is not None and net.body[1].bias is None


def test_state_dict_keys_match_torch():
    torch = pytest.importorskip("torch")

    class TBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(3)
            self.scale = torch.nn.Parameter(torch.ones(1))

    tnet = torch.nn.Module()
    tnet.head = TBlock()
    tnet.body = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Conv2d(3, 3, 1, bias=False))
    tnet.tails = torch.nn.ModuleList([torch.nn.PReLU(3), torch.nn.Identity()])
    ours, theirs = Net().state_dict(), tnet.state_dict()
    assert sorted(ours) == sorted(theirs) and set(ours) == set(KEYS)
    for k in theirs:
        assert ours[k].shape == tuple(theirs[k].shape), k


def test_load_state_dict_copies_in_place():
    a, b = Net(), Net()
    w = b.head.conv.weight
    arr = w.data
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert b.head.conv.weight is w and w.data is arr  # optimizers keep their references
    for k, v in a.state_dict().items():
        np.testing.assert_array_equal(b.state_dict()[k], v)


def test_load_state_dict_strict_errors_name_keys_and_shapes():
    net = Net()
    sd = OrderedDict((k, v.copy()) for k, v in net.state_dict().items())
    del sd["head.conv.bias"]
    sd["head.extra"] = np.zeros(2)
    with pytest.raises(ValueError, match=r"missing keys \['head.conv.bias'\], unexpected keys \['head.extra'\]"):
        net.load_state_dict(sd)
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["head.conv.bias"] and result.unexpected_keys == ["head.extra"]
    sd = dict(net.state_dict())
    sd["head.conv.weight"] = np.zeros((3, 2, 5, 5), np.float32)
    with pytest.raises(ValueError, match=r"head.conv.weight: checkpoint shape \(3, 2, 5, 5\), model shape \(3, 2, 3, 3\)"):
        net.load_state_dict(sd, strict=False)


def test_train_eval_and_zero_grad():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net and not any(m.training for m in net.modules())
    net.train()
    assert net.head.bn.training
    x = sg.tensor(np.random.default_rng(0).standard_normal((2, 2, 4, 4)).astype(np.float32))
    net(x).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_double_converts_parameters_and_float_buffers():
    net = Net().double()
    assert all(p.dtype == np.float64 for p in net.parameters())
    assert net.head.bn.running_var.dtype == np.float64
    assert net.head.bn.num_batches_tracked.dtype == np.int64


def test_repr_matches_torch_layout():
    torch = pytest.importorskip("torch")
    ours = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.PixelShuffle(2))
    theirs = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.PixelShuffle(2))
    assert repr(ours) == repr(theirs)


def test_sequential_and_modulelist():
    seq = nn.Sequential(OrderedDict(first=nn.ReLU(), second=nn.Tanh()))
    assert list(seq._modules) == ["first", "second"] and len(seq) == 2
    x = sg.tensor(np.array([-1.0, 2.0]))
    np.testing.assert_allclose(seq(x).data, np.tanh([0.0, 2.0]))
    assert isinstance(seq[1], nn.Tanh) and isinstance(seq[0:1], nn.Sequential) and len(seq[0:1]) == 1
    seq.append(nn.Sigmoid())
    assert len(seq) == 3 and list(seq._modules)[-1] == "2"
    ml = nn.ModuleList([nn.ReLU()])
    ml.extend([nn.Conv2d(1, 1, 1), nn.Tanh()])
    assert len(ml) == 3 and [n for n, _ in ml.named_parameters()] == ["1.weight", "1.bias"]
    assert isinstance(ml[1], nn.Conv2d) and isinstance(ml[1:], nn.ModuleList)


def test_setattr_before_init_is_a_clear_error():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.ones(1))

    with pytest.raises(AttributeError, match=r"call super\(\).__init__\(\) before assigning attribute 'w'"):
        Bad()


def test_reassigning_replaces_registration():
    m = nn.Module()
    m.a = nn.Parameter(np.ones(2))
    m.a = nn.ReLU()
    assert list(m.state_dict()) == [] and list(m._modules) == ["a"]
    del m.a
    assert not hasattr(m, "a")


def test_shared_submodule_appears_under_every_path_in_state_dict():
    from framework import nn
    c = nn.Conv2d(2, 2, 1)
    seq = nn.Sequential(c, c)
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert len(list(seq.parameters())) == 2  # parameters are still listed once
    seq.load_state_dict({k: v * 0 for k, v in seq.state_dict().items()})
    assert not c.weight.numpy().any()


def test_assigning_none_keeps_a_parameter_registered():
    from framework import nn
    c = nn.Conv2d(2, 2, 1)
    c.bias = None
    assert "bias" in c._parameters and c.bias is None and list(c.state_dict()) == ["weight"]


def test_module_to_speaks_torch():
    import framework.nn as nn_
    m = nn_.Conv2d(1, 2, 3)
    assert m.to("cpu") is m and m.cpu() is m and m.weight.dtype == np.float32
    assert m.to(device="cpu", dtype="float64").weight.dtype == np.float64
    assert m.to(np.float32).bias.dtype == np.float32
    with pytest.raises(ValueError, match="Conv2d.to: srgrad runs on the CPU only; device 'cuda'"):
        m.to("cuda")


# -- forward hooks ---------------------------------------------------------------------------------
class Affine(nn.Module):
    """forward(x, shift=0) = 2 x + shift: positional and keyword arguments both visible."""

    def forward(self, x, shift=0.0):
        return x * 2.0 + shift


def test_hooks_replace_args_and_output_in_registration_order():
    m, log = Affine(), []
    m.register_forward_pre_hook(lambda mod, args: log.append(("pre1", args[0].item())))
    m.register_forward_pre_hook(lambda mod, args: args[0] + 1.0)  # a single value: wrapped in a tuple
    m.register_forward_pre_hook(lambda mod, args: log.append(("pre3", args[0].item())))
    m.register_forward_hook(lambda mod, args, out: log.append(("post1", args[0].item(), out.item())))
    m.register_forward_hook(lambda mod, args, out: out * 10.0)
    m.register_forward_hook(lambda mod, args, out: log.append(("post3", out.item())))
    y = m(sg.tensor([1.0]), shift=0.5)
    # pre2 turned 1 into 2; forward 2*2+0.5 = 4.5; post2 made it 45
    assert y.item() == 45.0
    assert log == [("pre1", 1.0), ("pre3", 2.0), ("post1", 2.0, 4.5), ("post3", 45.0)]


def test_hook_order_and_results_match_torch():
    torch = pytest.importorskip("torch")

    def run(module, x, log):
        hs = [module.register_forward_pre_hook(lambda mod, args: (args[0] * 3.0,)),
              module.register_forward_pre_hook(lambda mod, args: log.append("a")),
              module.register_forward_pre_hook(lambda mod, args: log.append("b"), prepend=True),
              module.register_forward_hook(lambda mod, args, out: out - args[0]),
              module.register_forward_hook(lambda mod, args, out: log.append("c"), prepend=True)]
        first = float(module(x).sum())
        hs[0].remove()
        hs[3].remove()
        return first, float(module(x).sum())

    class TorchAffine(torch.nn.Module):
        def forward(self, x, shift=0.0):
            return x * 2.0 + shift

    ours, theirs = [], []
    assert run(Affine(), sg.tensor([1.0, 2.0]), ours) == run(TorchAffine(), torch.tensor([1.0, 2.0]), theirs)
    assert ours == theirs == ["b", "a", "c", "b", "a", "c"]


def test_hooks_with_kwargs():
    m = Affine()
    seen = []
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {**kwargs, "shift": 100.0}),
                                with_kwargs=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: seen.append(dict(kwargs)), with_kwargs=True)
    assert m(sg.tensor([1.0]), shift=1.0).item() == 102.0
    assert seen == [{"shift": 100.0}]
    bad = Affine()
    bad.register_forward_pre_hook(lambda mod, args, kwargs: args, with_kwargs=True)
    with pytest.raises(RuntimeError, match="tuple of \\(new_args, new_kwargs\\)"):
        bad(sg.tensor([1.0, 2.0, 3.0]))


def test_handle_remove_is_idempotent_and_a_context_manager():
    m = Affine()
    h = m.register_forward_hook(lambda mod, args, out: out + 1.0)
    assert m(sg.tensor([1.0])).item() == 3.0
    h.remove()
    h.remove()
    assert m(sg.tensor([1.0])).item() == 2.0
    with m.register_forward_pre_hook(lambda mod, args: (args[0] * 0.0,), with_kwargs=False):
        assert m(sg.tensor([1.0])).item() == 0.0
    assert m(sg.tensor([1.0])).item() == 2.0
    assert not m._forward_pre_hooks and not m._forward_hooks and not m._hooks_with_kwargs


def test_a_hook_may_remove_itself_during_the_call():
    m, calls = Affine(), []
    handles = []

    def once(mod, args):
        calls.append(1)
        handles[0].remove()

    handles.append(m.register_forward_pre_hook(once))
    m.register_forward_pre_hook(lambda mod, args: calls.append(2))
    m(sg.tensor([1.0]))
    m(sg.tensor([1.0]))
    assert calls == [1, 2, 2]


def test_hooks_see_the_graph_and_gradients_flow_through_replacements():
    m = nn.Linear(2, 1, dtype=np.float64)
    m.register_forward_hook(lambda mod, args, out: out * out)
    x = sg.tensor(np.array([[1.0, -2.0]]), requires_grad=True)
    y = m(x)
    y.sum().backward()
    lin = x.data @ m.weight.data.T + m.bias.data
    np.testing.assert_allclose(x.grad.data, 2 * lin * m.weight.data)


def test_without_hooks_call_goes_straight_to_forward(monkeypatch):
    def fail(self, args, kwargs):
        raise AssertionError("the hook path ran without hooks")

    monkeypatch.setattr(nn.Module, "_call_with_hooks", fail)
    assert Affine()(sg.tensor([1.0])).item() == 2.0


def test_hook_arguments_are_checked():
    m = Affine()
    with pytest.raises(TypeError, match="register_forward_hook: hook must be callable"):
        m.register_forward_hook("not a function")
    with pytest.raises(TypeError, match="register_forward_pre_hook: prepend must be a bool"):
        m.register_forward_pre_hook(lambda mod, args: None, prepend=1)
    assert not m._forward_pre_hooks
