"""Issue 42's layers against torch: MultiheadAttention (keys, masks, batch_first, every gradient),
InstanceNorm2d (affine, running statistics), Embedding, ModuleDict."""
import numpy as np
import pytest

import framework as sg
from framework import nn

torch = pytest.importorskip("torch")


def _load_from(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("masks", ["none", "bool", "float", "causal"])
def test_multihead_attention_matches_torch(batch_first, masks):
    m = nn.MultiheadAttention(8, 2, batch_first=batch_first).to(sg.float64)
    tm = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first).double()
    assert list(m.state_dict()) == list(tm.state_dict())
    _load_from(m, tm)
    q, k = _r(3, 2, 8), _r(5, 2, 8, seed=1)
    if batch_first:
        q, k = q.transpose(1, 0, 2).copy(), k.transpose(1, 0, 2).copy()
    kw, tkw = {}, {}
    if masks == "bool":
        am, kpm = _r(3, 5, seed=2) > 0.7, np.zeros((2, 5), bool)
        kpm[1, 4] = True
        kw = dict(attn_mask=sg.tensor(am), key_padding_mask=sg.tensor(kpm))
        tkw = dict(attn_mask=torch.tensor(am), key_padding_mask=torch.tensor(kpm))
    elif masks == "float":
        am = _r(3, 5, seed=3)
        kw, tkw = dict(attn_mask=sg.tensor(am)), dict(attn_mask=torch.tensor(am))
    elif masks == "causal":
        am = np.triu(np.ones((3, 5), bool), 1)
        kw = dict(attn_mask=sg.tensor(am), is_causal=True)
        tkw = dict(attn_mask=torch.tensor(am), is_causal=True)
    a = [sg.tensor(x, requires_grad=True) for x in (q, k, k * 0.5)]
    t = [torch.tensor(x, requires_grad=True) for x in (q, k, k * 0.5)]
    (o, w), (to, tw) = m(*a, **kw), tm(*t, **tkw)
    np.testing.assert_allclose(o.numpy(), to.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-10, atol=1e-12)
    (o.sum() + (w * w).sum()).backward()
    (to.sum() + (tw * tw).sum()).backward()
    for x, y in zip(a, t):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-9, atol=1e-12)
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=name)


def test_multihead_attention_options_and_refusals():
    m = nn.MultiheadAttention(4, 2)
    x = sg.randn(3, 4)  # unbatched (L, E)
    out, w = m(x, x, x, average_attn_weights=False)
    assert out.shape == (3, 4) and w.shape == (2, 3, 3)
    assert m(x, x, x, need_weights=False)[1] is None
    assert np.allclose(m.in_proj_bias.numpy(), 0) and m.in_proj_weight.shape == (12, 4)
    with pytest.raises(ValueError, match="divisible by num_heads"):
        nn.MultiheadAttention(5, 2)
    with pytest.raises(ValueError, match="kdim/vdim"):
        nn.MultiheadAttention(4, 2, kdim=3)


@pytest.mark.parametrize("affine,track", [(False, False), (True, False), (True, True)])
def test_instance_norm_matches_torch(affine, track):
    n = nn.InstanceNorm2d(3, affine=affine, track_running_stats=track).to(sg.float64)
    tn = torch.nn.InstanceNorm2d(3, affine=affine, track_running_stats=track).double()
    assert sorted(n.state_dict()) == sorted(tn.state_dict())
    if affine:
        with torch.no_grad():
            tn.weight.copy_(torch.tensor([0.5, 1.5, -1.0]))
            tn.bias.copy_(torch.tensor([0.1, 0.0, 0.3]))
        _load_from(n, tn)
    x = _r(2, 3, 4, 5)
    a, t = sg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = n(a), tn(t)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    (y * y * y).sum().backward()
    (ty * ty * ty).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-12)
    for k, v in n.state_dict().items():
        np.testing.assert_allclose(v, tn.state_dict()[k].numpy(), rtol=1e-12, err_msg=k)
    n.eval(), tn.eval()
    np.testing.assert_allclose(n(a).numpy(), tn(t).detach().numpy(), rtol=1e-10, atol=1e-12)
    assert n(a[0]).shape == (3, 4, 5)  # unbatched


def test_embedding_matches_torch():
    e, te = nn.Embedding(5, 3, padding_idx=-1), torch.nn.Embedding(5, 3, padding_idx=-1)
    assert e.padding_idx == te.padding_idx == 4 and np.all(e.weight.numpy()[4] == 0)
    _load_from(e, te)
    idx = np.array([[0, 4], [3, 0]])
    y, ty = e(sg.tensor(idx)), te(torch.tensor(idx))
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(e.weight.grad.numpy(), te.weight.grad.numpy(), rtol=1e-6)


def test_module_dict_registers_by_key():
    d = nn.ModuleDict({"conv": nn.Conv2d(1, 2, 3), "act": nn.ReLU()})
    d["head"] = nn.Linear(2, 1)
    td = torch.nn.ModuleDict({"conv": torch.nn.Conv2d(1, 2, 3), "act": torch.nn.ReLU(),
                              "head": torch.nn.Linear(2, 1)})
    assert list(d) == list(td) and list(d.state_dict()) == list(td.state_dict())
    assert "act" in d and len(d) == 3 and isinstance(d["head"], nn.Linear)
    assert len(list(d.parameters())) == 4
    d.pop("act")
    assert list(d.keys()) == ["conv", "head"]
