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


# -- roll ------------------------------------------------------------------------------------------

ROLLS = [(1, None), (-7, None), ((3,), None), ((2, -1), (0, 2)), ((1, 1), (1, 1)), (7, 1), (-3, -1),
         ([1, 2], [2, 0]), (1, ())]


@pytest.mark.parametrize("shifts,dims", ROLLS)
def test_roll_torch_parity_and_gradcheck(shifts, dims, rng):
    torch = pytest.importorskip("torch")
    x = t64(rng, 2, 3, 4)
    y = F.roll(x, shifts, dims)
    np.testing.assert_array_equal(y.data, torch.roll(torch.tensor(x.data), shifts, dims).numpy())
    assert sg.gradcheck(lambda a: F.roll(a, shifts, dims), (x,))


def test_roll_backward_is_the_opposite_roll(rng):
    x = t64(rng, 4, 5, 3)
    g = rng.standard_normal((4, 5, 3))
    x.roll((-2, 3), (0, 1)).backward(g)  # SwinIR's cyclic shift of (B, H, W, C) windows
    np.testing.assert_array_equal(x.grad.data, np.roll(g, (2, -3), (0, 1)))
    s = sg.tensor(np.float64(3.0), requires_grad=True)
    assert F.roll(s, 5).item() == 3.0 and F.roll(s, 1, 0).shape == ()


def test_roll_errors(rng):
    x = t64(rng, 2, 3)
    with pytest.raises(ValueError, match=r"roll: without dims, shifts must be one int, got \(1, 2\)"):
        F.roll(x, (1, 2))
    with pytest.raises(ValueError, match=r"roll: shifts \(1, 2\) and dims \(0,\) must have the same length"):
        F.roll(x, (1, 2), 0)
    with pytest.raises(ValueError, match=r"roll: dims 2 is out of range for a tensor with 2 dimensions"):
        F.roll(x, 1, 2)
    with pytest.raises(TypeError, match="roll: shifts must be an int or a sequence of ints, got 1.5"):
        F.roll(x, 1.5, 1)


# -- split / chunk ---------------------------------------------------------------------------------

SPLITS = [(3, 0), (2, 1), (4, -1), (10, 0), ([1, 4], 0), ([0, 3, 0], 1), ([5], 0), (1, 2)]


@pytest.mark.parametrize("size,dim", SPLITS)
def test_split_matches_torch(size, dim, rng):
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((5, 3, 4))
    x = sg.tensor(a, requires_grad=True)
    pieces = F.split(x, size, dim)
    theirs = torch.split(torch.tensor(a, requires_grad=True), size, dim)
    assert isinstance(pieces, tuple) and len(pieces) == len(theirs)
    grads = [rng.standard_normal(p.shape) for p in pieces]
    for p, t in zip(pieces, theirs):
        np.testing.assert_array_equal(p.data, t.detach().numpy())
    # the gradient of every piece lands in its slice, in one backward through one Function
    assert len({id(p._node) for p in pieces}) == 1
    total = sum((p * sg.tensor(g)).sum() for p, g in zip(pieces, grads))
    total.backward()
    tx = torch.tensor(a, requires_grad=True)
    sum((t * torch.tensor(g)).sum() for t, g in zip(torch.split(tx, size, dim), grads)).backward()
    np.testing.assert_array_equal(x.grad.data, tx.grad.numpy())


@pytest.mark.parametrize("chunks,dim", [(3, 0), (2, 0), (4, 1), (1, 2), (5, 0), (6, 0), (8, 2), (3, -1)])
def test_chunk_matches_torch(chunks, dim, rng):
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((6, 3, 5))
    theirs = torch.chunk(torch.tensor(a), chunks, dim)
    ours = sg.tensor(a).chunk(chunks, dim)
    assert [p.shape for p in ours] == [tuple(t.shape) for t in theirs]
    for p, t in zip(ours, theirs):
        np.testing.assert_array_equal(p.data, t.numpy())
    empty = torch.chunk(torch.zeros(0, 2), chunks)
    assert [p.shape for p in F.chunk(sg.tensor(np.zeros((0, 2))), chunks)] == [tuple(t.shape) for t in empty]


def test_split_gradcheck_with_unused_pieces(rng):
    """qkv = x.chunk(3, -1) with only q and v used: k's gradient is zero in its slice."""
    x = t64(rng, 2, 6)
    assert sg.gradcheck(lambda a: F.chunk(a, 3, -1)[0] * F.chunk(a, 3, -1)[2], (x,))
    q, k, v = x.chunk(3, -1)
    (q * 2 + v).sum().backward()
    np.testing.assert_array_equal(x.grad.data, np.tile([2.0, 2.0, 0.0, 0.0, 1.0, 1.0], (2, 1)))
    y = t64(rng, 5)
    assert sg.gradcheck(lambda a: y.split(2)[2] * 3 + 0 * y.split(2)[0].sum(), (y,))
    assert [p.shape for p in F.split(sg.tensor(np.zeros(0)), 0)] == [(0,)]


def test_split_chunk_errors(rng):
    x = t64(rng, 4, 3)
    with pytest.raises(ValueError, match=r"split: sections \[1, 2\] must sum to the size 4 of dim 0"):
        F.split(x, [1, 2])
    with pytest.raises(ValueError, match="split: split size 0 needs an empty dimension, dim 0 has size 4"):
        F.split(x, 0)
    with pytest.raises(ValueError, match="split: split_size_or_sections must be an int >= 0, got -1"):
        F.split(x, [-1, 5])
    with pytest.raises(TypeError, match="split: split_size_or_sections must be an int >= 0, got 1.5"):
        F.split(x, 1.5)
    with pytest.raises(ValueError, match="chunk: chunks must be a positive int, got 0"):
        F.chunk(x, 0)
    with pytest.raises(ValueError, match=r"chunk: dim 2 is out of range for a tensor with 2 dimensions"):
        F.chunk(x, 2, 2)
    with pytest.raises(ValueError, match="split: a scalar has no dimension to split"):
        F.split(sg.tensor(np.float64(1.0)), 1)


# -- pad_to_multiple / crop_to -------------------------------------------------------------------
@pytest.mark.parametrize("hw,multiple", [((5, 7), 4), ((8, 8), 4), ((3, 9), 2), ((1, 2), 4)])
def test_pad_to_multiple_values_and_gradcheck(hw, multiple, rng):
    x = t64(rng, 1, 2, *hw)
    y = F.pad_to_multiple(x, multiple)
    ph, pw = -hw[0] % multiple, -hw[1] % multiple
    mode = "reflect" if ph < hw[0] and pw < hw[1] else "edge"  # too small to reflect: replicate
    np.testing.assert_array_equal(y.numpy(), np.pad(x.numpy(), ((0, 0), (0, 0), (0, ph), (0, pw)),
                                                    mode=mode))
    assert sg.gradcheck(lambda a: F.pad_to_multiple(a, multiple), (x,))


@pytest.mark.parametrize("hw,multiple,border,mode", [
    ((5, 7), 2, 3, "reflect"), ((6, 4), 4, 2, "reflect"), ((5, 6), 2, 1, "replicate"),
    ((5, 6), 4, 0, "constant")])
def test_pad_to_multiple_with_a_border_is_torchs_one_pad(hw, multiple, border, mode, rng):
    """border b: F.pad(x, (b, b + pw, b, b + ph), mode) in one pad (Real-CUGAN's input padding),
    values and gradient; two pads in a row would reflect the already padded image instead."""
    torch = pytest.importorskip("torch")
    x = t64(rng, 1, 2, *hw)
    y = F.pad_to_multiple(x, multiple, mode=mode, border=border)
    ph, pw = -hw[0] % multiple, -hw[1] % multiple
    tx = torch.tensor(x.numpy(), requires_grad=True)
    ty = torch.nn.functional.pad(tx, (border, border + pw, border, border + ph), mode)
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    g = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(g))
    y.backward(sg.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert sg.gradcheck(lambda a: F.pad_to_multiple(a, multiple, mode=mode, border=border), (x,))
    with pytest.raises(ValueError, match="pad_to_multiple: border must be an int >= 0, got -1"):
        F.pad_to_multiple(x, 2, border=-1)


@pytest.mark.parametrize("hw,minimum,multiple", [((5, 7), 12, 1), ((3, 20), 8, 4), ((1, 2), 6, 1),
                                                  ((9, 10), 4, 4), ((6, 6), 1, 1)])
def test_pad_to_requirement_is_spandrels_reflect_then_replicate(hw, minimum, multiple, rng):
    """spandrel's size-requirement padding: torch's reflect pad as far as the image allows (n - 1),
    then a replicate pad of the rest, values and gradient; gradcheck."""
    torch = pytest.importorskip("torch")
    x = t64(rng, 1, 2, *hw)
    y = F.pad_to_requirement(x, minimum, multiple)
    ph, pw = (-(-max(n, minimum) // multiple) * multiple - n for n in hw)
    rh, rw = min(ph, hw[0] - 1), min(pw, hw[1] - 1)
    tx = torch.tensor(x.numpy(), requires_grad=True)
    ty = torch.nn.functional.pad(tx, (0, rw, 0, rh), "reflect") if rh or rw else tx
    ty = torch.nn.functional.pad(ty, (0, pw - rw, 0, ph - rh), "replicate")
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    g = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(g))
    y.backward(sg.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert sg.gradcheck(lambda a: F.pad_to_requirement(a, minimum, multiple), (x,))
    with pytest.raises(ValueError, match="pad_to_requirement: multiple must be a positive int, got 0"):
        F.pad_to_requirement(x, 4, 0)


@pytest.mark.parametrize("hw,multiple", [((5, 7), 4), ((3, 9), 16), ((1, 2), 4), ((8, 8), 4)])
def test_pad_to_multiple_symmetric_is_atds_flip_padding(hw, multiple, rng):
    """ATD's torch.cat([x, x.flip(2)], 2)[:, :, :H'] (W alike), values and gradient, where the
    padding is no wider than the image (the original's range); past it the reflection repeats
    (numpy's symmetric pad); gradcheck."""
    torch = pytest.importorskip("torch")
    x = t64(rng, 1, 2, *hw)
    y = F.pad_to_multiple(x, multiple, mode="symmetric")
    th, tw = (-(-n // multiple) * multiple for n in hw)
    ph, pw = th - hw[0], tw - hw[1]
    np.testing.assert_array_equal(y.numpy(), np.pad(x.numpy(), ((0, 0), (0, 0), (0, ph), (0, pw)),
                                                    mode="symmetric"))
    if ph <= hw[0] and pw <= hw[1]:
        tx = torch.tensor(x.numpy(), requires_grad=True)
        ty = torch.cat([tx, torch.flip(tx, [2])], 2)[:, :, :th]
        ty = torch.cat([ty, torch.flip(ty, [3])], 3)[:, :, :, :tw]
        np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
        g = rng.standard_normal(ty.shape)
        ty.backward(torch.tensor(g))
        y.backward(sg.tensor(g))
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert sg.gradcheck(lambda a: F.pad_to_multiple(a, multiple, mode="symmetric"), (x,))


def test_pad_to_multiple_on_other_axes_is_the_same_pad(rng):
    """axes=(1, 2) on channels-last (B, H, W, C) pads as the default on (B, C, H, W) does (DAT)."""
    x = t64(rng, 2, 5, 7, 3)
    y = F.pad_to_multiple(x, 4, mode="constant", axes=(1, 2))
    want = F.pad_to_multiple(F.permute(x, (0, 3, 1, 2)), 4, mode="constant")
    np.testing.assert_array_equal(y.numpy(), np.transpose(want.numpy(), (0, 2, 3, 1)))
    assert sg.gradcheck(lambda a: F.pad_to_multiple(a, 4, mode="reflect", axes=(1, 2)), (x,))
    for axes in ((2, 1), (1, 4), (1,), ("a", 1)):
        with pytest.raises(ValueError, match="pad_to_multiple: axes must be two"):
            F.pad_to_multiple(x, 4, axes=axes)


def test_crop_to_undoes_the_padding_and_gradcheck(rng):
    x = t64(rng, 1, 2, 5, 7)
    y = t64(rng, 1, 2, 16, 16)
    out = F.crop_to(y, x, 2)
    np.testing.assert_array_equal(out.numpy(), y.numpy()[..., :10, :14])
    assert sg.gradcheck(lambda a: F.crop_to(a, x, 2), (y,))
    with pytest.raises(ValueError, match=r"crop_to: \(1, 2, 16, 16\) is smaller than reference "
                                         r"\(1, 2, 5, 7\) times scale 4"):
        F.crop_to(y, x, 4)
    with pytest.raises(ValueError, match="pad_to_multiple: mode must be one of 'reflect', "
                                         "'replicate', 'constant', 'symmetric', got 'circular'"):
        F.pad_to_multiple(x, 2, mode="circular")


def test_cat_stack_take_torch_dim(rng):
    a, b = t64(rng, 2, 3), t64(rng, 2, 3)
    np.testing.assert_array_equal(F.cat([a, b], dim=1).numpy(), np.concatenate([a.numpy(), b.numpy()], 1))
    np.testing.assert_array_equal(F.stack((a, b), dim=-1).numpy(), np.stack([a.numpy(), b.numpy()], -1))
    with pytest.raises(TypeError, match="cat: got both axis and dim"):
        F.cat([a, b], 1, dim=1)


@pytest.mark.parametrize("shape,dim", [((3,), 0), ((3,), -1), ((2, 3), 1), ((2, 3), -3), ((), 0),
                                       ((1, 5), 2)])
def test_unsqueeze_matches_torch_and_gradcheck(shape, dim, rng):
    torch = pytest.importorskip("torch")
    x = t64(rng, *shape)
    y = x.unsqueeze(dim)
    assert y.shape == tuple(torch.zeros(shape).unsqueeze(dim).shape)
    np.testing.assert_array_equal(y.numpy().ravel(), x.numpy().ravel())
    assert F.unsqueeze(x, axis=dim).shape == y.shape  # numpy's spelling
    assert sg.gradcheck(lambda a: F.unsqueeze(a, dim) * 2.0, (x,))


@pytest.mark.parametrize("shape,dim", [((1, 3, 1), None), ((1, 3, 1), 0), ((1, 3, 1), 1),
                                       ((1, 3, 1), -1), ((1, 3, 1), (0, 2)), ((1,), 0), ((2, 1), None)])
def test_squeeze_matches_torch_and_gradcheck(shape, dim, rng):
    torch = pytest.importorskip("torch")
    x = t64(rng, *shape)
    y = x.squeeze() if dim is None else x.squeeze(dim)
    want = torch.zeros(shape)
    want = want.squeeze() if dim is None else want.squeeze(dim)
    assert y.shape == tuple(want.shape)  # a listed axis of size != 1 stays, as torch
    assert sg.gradcheck(lambda a: F.squeeze(a, dim) * 3.0, (x,))


def test_unsqueeze_squeeze_errors(rng):
    x = t64(rng, 2, 3)
    with pytest.raises(ValueError, match=r"unsqueeze: dim 3 is out of range for a tensor with 3 "
                                         r"dimensions \(expected \[-3, 2\]\)"):
        x.unsqueeze(3)
    with pytest.raises(ValueError, match="squeeze: dim -3 is out of range"):
        x.squeeze(-3)
    with pytest.raises(TypeError, match="squeeze: dim must be an int or a sequence of ints, got 0.5"):
        x.squeeze(0.5)


@pytest.mark.parametrize("shape,sizes", [((3, 1), (3, 4)), ((3, 1), (-1, 4)), ((1,), (5,)),
                                         ((2, 1, 3), (4, 2, 5, -1)), ((1, 1), (1, 1)), ((), (2, 3))])
def test_expand_matches_torch_values_and_gradients(shape, sizes, rng):
    torch = pytest.importorskip("torch")
    x = t64(rng, *shape)
    y = x.expand(*sizes)
    assert np.array_equal(x.expand(sizes).numpy(), y.numpy())  # one tuple or several ints
    tx = torch.tensor(x.numpy(), requires_grad=True)
    ty = tx.expand(*sizes)
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    w = np.cos(np.arange(y.numel())).reshape(y.shape)
    (y * sg.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    assert sg.gradcheck(lambda a: F.expand(a, sizes), (t64(rng, *shape),))
    assert not y.numpy().flags.writeable and np.shares_memory(y.numpy(), x.numpy())  # a view


def test_expand_as_and_errors(rng):
    x = t64(rng, 3, 1)
    assert x.expand_as(sg.zeros(2, 3, 4)).shape == (2, 3, 4)
    with pytest.raises(ValueError, match=r"expand: size 2 must match the existing size 3 at "
                                         r"non-singleton dimension 0"):
        x.expand(2, 4)
    with pytest.raises(ValueError, match="expand: size -1 is not allowed for the new leading "
                                         "dimension 0"):
        x.expand(-1, 3, 4)
    with pytest.raises(ValueError, match="expand: 1 sizes"):
        x.expand(3)
