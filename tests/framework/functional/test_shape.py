import numpy as np
import pytest

import framework as sg
import framework.functional as F
from tests.conftest import t64


def test_reshape_permute_transpose_flatten(rng):
    x = t64(rng, 2, 3, 4)
    assert sg.gradcheck(lambda a: a.reshape(4, -1) * 2, (x,))
    w = t64(rng, 4, 1, 1, requires_grad=False)
    assert sg.gradcheck(lambda a: a.permute(2, 0, 1) * w, (x,))
    assert sg.gradcheck(lambda a: a.transpose(0, 2), (x,))
    assert sg.gradcheck(lambda a: a.flatten(1), (x,))
    assert x.flatten(1).shape == (2, 12) and x.flatten().shape == (24,)
    assert np.array_equal(x.permute(2, 0, 1).numpy(), x.numpy().transpose(2, 0, 1))
    with pytest.raises(ValueError, match=r"reshape: cannot reshape a tensor of shape \(2, 3, 4\) into \(5, -1\)"):
        x.reshape(5, -1)
    with pytest.raises(ValueError, match="permute"):
        x.permute(0, 0, 1)


@pytest.mark.parametrize("index", [
    (slice(None), 1), (0, slice(1, None), slice(None, None, 2)), (Ellipsis, -1), (None, 1),
    (np.array([0, 1, 0]),), (slice(None), np.array([2, 0, 2, 2])),
])
def test_getitem_gradcheck(index, rng):
    x = t64(rng, 2, 3, 4)
    assert sg.gradcheck(lambda a: a[index], (x,))
    assert np.array_equal(x[index].numpy(), x.numpy()[index])


def test_getitem_repeated_integer_index_accumulates():
    x = sg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[np.array([0, 0, 2])].sum().backward()
    assert x.grad.numpy().tolist() == [2.0, 0.0, 1.0]


def test_getitem_bad_index_names_shape():
    with pytest.raises(IndexError, match=r"shape \(2, 3\)"):
        sg.zeros(2, 3)[5]


def test_cat_and_stack(rng):
    a, b = t64(rng, 2, 3), t64(rng, 2, 1)
    assert sg.gradcheck(lambda x, y: F.cat([x, y], axis=1), (a, b))
    assert F.cat([a, b], axis=-1).shape == (2, 4)
    c = t64(rng, 2, 3)
    assert sg.gradcheck(lambda x, y: F.stack([x, y], axis=1), (a, c))
    assert np.array_equal(F.stack([a, c], axis=1).numpy(), np.stack([a.numpy(), c.numpy()], 1))
    with pytest.raises(ValueError, match=r"cat: shapes \(2, 3\) and \(3, 1\) differ outside axis 1"):
        F.cat([a, t64(rng, 3, 1)], axis=1)
    with pytest.raises(ValueError, match=r"stack: shapes \(2, 3\) and \(2, 1\) differ"):
        F.stack([a, b])


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(1, 2), (2, 1, 0, 3), (0, 0, 1, 1)])
def test_pad_gradcheck_and_torch_parity(mode, pad, rng):
    x = t64(rng, 2, 4, 5) if len(pad) == 2 else t64(rng, 1, 2, 4, 5)  # torch's rank rules per pad length
    fn = lambda a: F.pad(a, pad, mode=mode, value=0.5)
    assert sg.gradcheck(fn, (x,))
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF
    kw = {"value": 0.5} if mode == "constant" else {}
    tx = torch.tensor(x.numpy(), requires_grad=True)
    tout = TF.pad(tx, pad, mode=mode, **kw)
    g = rng.standard_normal(tuple(tout.shape))
    tout.backward(torch.tensor(g))
    out = fn(x)
    out.backward(g)
    assert np.allclose(out.numpy(), tout.detach().numpy(), rtol=0, atol=0)
    assert np.allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13, atol=1e-13)


def test_pad_errors():
    x = sg.zeros(1, 1, 3, 3)
    with pytest.raises(ValueError, match="pad: unknown mode 'mirror'; known: constant, reflect, replicate, circular"):
        F.pad(x, (1, 1), mode="mirror")
    with pytest.raises(ValueError, match=r"reflect padding \(3, 3\) must be smaller than the axis size 3"):
        F.pad(x, (3, 3), mode="reflect")
    with pytest.raises(ValueError, match="even length"):
        F.pad(x, (1, 1, 1))
    # torch crops with negative constant padding; srgrad refuses it (docs/reliability.md)
    with pytest.raises(ValueError, match=r"pad: negative padding \(-1, 1\) is not supported"):
        F.pad(x, (-1, 1))
