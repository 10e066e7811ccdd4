"""Issue 42's new differentiable ops: flip, repeat, index_put (x[i] = v), masked_fill, einsum,
embedding, unfold / fold. Each: a float64 gradcheck and torch parity of the values and of every
gradient."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F

torch = pytest.importorskip("torch")


def _parity(ours, theirs, arrays, *, grads=None, gradcheck=True):
    """Run ours(*srgrad tensors) and theirs(*torch tensors) on the same float64 arrays; compare
    the values and, through a random output weighting, every input's gradient; then gradcheck."""
    grads = [True] * len(arrays) if grads is None else grads
    a = [sg.tensor(x, requires_grad=g) for x, g in zip(arrays, grads)]
    t = [torch.tensor(x, requires_grad=g) for x, g in zip(arrays, grads)]
    y, ty = ours(*a), theirs(*t)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = np.random.default_rng(5).standard_normal(ty.shape)
    (y * sg.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    for p, q, g in zip(a, t, grads):
        if g:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12, atol=1e-12)
    if gradcheck:
        assert sg.gradcheck(ours, tuple(sg.tensor(x, requires_grad=g)
                                        for x, g in zip(arrays, grads)))


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("shape,dims", [((2, 3, 4), (0,)), ((2, 3, 4), (1, 2)), ((5,), -1),
                                        ((2, 1, 3), (0, 1, 2))])
def test_flip(shape, dims):
    _parity(lambda x: F.flip(x, dims), lambda x: torch.flip(x, dims if isinstance(dims, tuple)
                                                            else (dims,)), [_r(*shape)])


@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 1)), ((2, 3), (1, 2, 3)), ((3,), (2, 2)),
                                        ((2, 1, 2), (1, 3, 2)), ((2, 3), (0, 1))])
def test_repeat(shape, reps):
    _parity(lambda x: x.repeat(*reps), lambda x: x.repeat(*reps), [_r(*shape)])


@pytest.mark.parametrize("index,vshape", [((0, slice(None)), (4,)), ((slice(1, 3),), (1, 4)),
                                          ((Ellipsis, 1), ()), ((np.array([0, 2]),), (4,)),
                                          ((slice(None), slice(None, None, 2)), (3, 1))])
def test_setitem_gradients_reach_the_rest_and_the_value(index, vshape):
    def ours(x, v):
        y = x * 2
        y[index] = v * 3
        return y

    def theirs(x, v):
        y = x * 2
        y[tuple(torch.tensor(i) if isinstance(i, np.ndarray) else i for i in index)] = v * 3
        return y
    _parity(ours, theirs, [_r(3, 4), _r(*vshape, seed=1)])


def test_setitem_on_a_leaf_that_requires_grad_is_refused_as_in_torch():
    x = sg.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[0] = 1.0
    with sg.no_grad():
        x[0] = 1.0
    assert x.tolist() == [1.0, 0.0, 0.0] and x.is_leaf
    y = sg.zeros(2, 3)
    y[y == 0] = 2
    y[0, :] = sg.tensor([1, 2, 3])  # an int value is cast to the float tensor
    assert y.tolist() == [[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]]
    with pytest.raises(ValueError, match="does not broadcast to the indexed shape"):
        y[0] = sg.zeros(2)


def test_masked_fill_with_a_tensor_value():
    mask = np.array([[True, False, True], [False, False, True]])
    _parity(lambda x, v: F.masked_fill(x, sg.tensor(mask), v),
            lambda x, v: x.masked_fill(torch.tensor(mask), v), [_r(2, 3), _r(seed=1)])
    with pytest.raises(TypeError, match="bool tensor"):
        F.masked_fill(sg.zeros(2), sg.tensor([1, 0]), 1.0)


@pytest.mark.parametrize("eq,shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]),
    ("...c,c->...", [(2, 3, 4), (4,)]), ("ij,jk", [(2, 3), (3, 4)]), ("i,j->ij", [(3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("ij,k->ik", [(2, 3), (4,)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 2), (2, 3)])])
def test_einsum(eq, shapes):
    _parity(lambda *xs: F.einsum(eq, *xs), lambda *xs: torch.einsum(eq, *xs),
            [_r(*s, seed=i) for i, s in enumerate(shapes)])


@pytest.mark.parametrize("eq,shapes,match", [("ii->i", [(3, 3)], "repeated within one operand"),
                                              ("ij,jk->ik", [(2, 3), (4, 5)], "has size 3 and 4"),
                                              ("ij->ik", [(2, 3)], "names one no operand has"),
                                              ("ij,jk->ik", [(2, 3)], "2 operands")])
def test_einsum_refusals(eq, shapes, match):
    with pytest.raises(ValueError, match=match):
        F.einsum(eq, *[sg.zeros(*s) for s in shapes])


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_and_its_padding_row(padding_idx):
    """The padding row gets no gradient (torch's rule, not the derivative: no gradcheck there)."""
    idx = np.array([[0, 2, 1], [2, 2, 3]])
    _parity(lambda w: F.embedding(sg.tensor(idx), w, padding_idx=padding_idx),
            lambda w: torch.nn.functional.embedding(torch.tensor(idx), w, padding_idx=padding_idx),
            [_r(4, 3)], gradcheck=padding_idx is None)
    with pytest.raises(IndexError, match="out of range for 4 embeddings"):
        F.embedding(sg.tensor([4]), sg.zeros(4, 2))


FOLDS = [((2, 3, 7, 6), dict(kernel_size=3, padding=1)),
         ((1, 2, 9, 8), dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 0), stride=(2, 3))),
         ((1, 1, 4, 4), dict(kernel_size=4)), ((1, 2, 1, 1), dict(kernel_size=1))]


@pytest.mark.parametrize("shape,kw", FOLDS)
def test_unfold(shape, kw):
    _parity(lambda x: F.unfold(x, **kw), lambda x: torch.nn.functional.unfold(x, **kw),
            [_r(*shape)])


@pytest.mark.parametrize("shape,kw", FOLDS)
def test_fold(shape, kw):
    cols = torch.nn.functional.unfold(torch.zeros(shape, dtype=torch.float64), **kw).shape
    _parity(lambda c: F.fold(c, shape[2:], **kw),
            lambda c: torch.nn.functional.fold(c, shape[2:], **kw), [_r(*cols)])


def test_fold_and_unfold_refusals():
    with pytest.raises(ValueError, match="no sliding block"):
        F.unfold(sg.zeros(1, 1, 2, 2), 3)
    with pytest.raises(ValueError, match="blocks given"):
        F.fold(sg.zeros(1, 4, 5), (4, 4), 2)
