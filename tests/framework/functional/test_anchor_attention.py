"""GRL's attention ops (framework/functional/anchor_attention.py): the tables, indices and masks
value for value against the original's (spandrel 0.4.2's GRL ops), cosine attention and the
anchored stripe attention against a torch reference written from the original's Attention.attn
and AffineTransform (values and the gradient of every input, logit scales and biases included, in
float64), float64 gradchecks, and the errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import framework as sg
from framework.functional.anchor_attention import (anchor_coords_table, anchor_position_index,
                                                   anchor_shift_mask, anchor_stripe_attention,
                                                   cosine_attention)

from ._parity import parity, rand, torch


def _ops():
    import importlib
    from tests.twins._spandrel import spandrel_architecture
    spandrel_architecture("GRL")
    return importlib.import_module("spandrel.architectures.GRL.__arch.ops")


@pytest.mark.parametrize("window,df,pretrained", [
    ((4, 4), 1, (0, 0)), ((8, 8), 2, (0, 0)), ((8, 16), 4, (0, 0)), ((6, 8), 4, (0, 0)),
    ((8, 4), 2, (12, 10)), ((4, 4), 1, (6, 6))])
def test_tables_and_indices_are_the_originals(window, df, pretrained):
    ops = _ops()
    ours = anchor_coords_table(window, df, pretrained)
    theirs = ops.get_relative_coords_table_all(list(window), list(pretrained), df).numpy()
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=2e-7, atol=0)  # float32 log2: an ulp
    for w2a in (True, False):
        np.testing.assert_array_equal(anchor_position_index(window, df, w2a),
                                      ops.get_relative_position_index_simple(list(window), df, w2a))
    rows = ours.shape[1] * ours.shape[2]
    index = anchor_position_index(window, df, True)
    assert index.min() >= 0 and index.max() < rows


@pytest.mark.parametrize("size,window,shift,df", [
    ((16, 16), (8, 8), (4, 4), 2), ((8, 24), (8, 12), (4, 6), 4), ((16, 8), (8, 8), (4, 0), 2),
    ((8, 8), (8, 8), (4, 4), 1)])
def test_masks_are_the_originals(size, window, shift, df):
    ops = _ops()
    for w2a in (True, False):
        ours = anchor_shift_mask(size, window, shift, df, w2a)
        theirs = ops.calculate_mask_all(list(size), list(window), list(shift), df, w2a).numpy()
        np.testing.assert_array_equal(ours, theirs)
    assert (anchor_shift_mask(size, window, shift, df) != 0).any()


def _cos(q, k, v, heads, logit_scale, bias, mask):
    """The original's Attention.attn + AffineTransform in torch on (B, N, C) heads side by side."""
    tf = torch.nn.functional
    b, n, c = q.shape
    m = k.shape[1]
    q, k = (t.reshape(b, -1, heads, c // heads).transpose(1, 2) for t in (q, k))
    v = v.reshape(b, m, heads, -1).transpose(1, 2)
    attn = tf.normalize(q, dim=-1) @ tf.normalize(k, dim=-1).transpose(-2, -1)
    attn = attn * torch.clamp(logit_scale, max=math.log(100)).exp() + bias.unsqueeze(0)
    if mask is not None:
        nw = mask.shape[0]
        attn = (attn.view(b // nw, nw, heads, n, m) + torch.from_numpy(mask)[None, :, None]).view(-1, heads, n, m)
    return (attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, -1)


def _mask(nw, n, m, seed):
    return np.where(np.random.default_rng(seed).uniform(size=(nw, n, m)) < 0.3, -100.0, 0.0)


@pytest.mark.parametrize("masked", [False, True])
def test_cosine_attention_matches_torch(masked):
    heads, b, n, m = 2, 4, 6, 3
    mask = _mask(2, n, m, 3) if masked else None
    arrays = [rand(b, n, 4, seed=1), rand(b, m, 4, seed=2), rand(b, m, 6, seed=3),
              rand(heads, 1, 1, seed=4) * 0.5 + 2.0, rand(heads, n, m, seed=5)]
    parity(lambda q, k, v, s, bias: cosine_attention(q, k, v, heads, s, bias, mask),
           lambda q, k, v, s, bias: _cos(q, k, v, heads, s, bias, mask), arrays)


def test_a_logit_scale_above_log_100_is_clamped():
    """exp(min(s, log 100)): a scale past the clamp gets no gradient, as torch's clamp."""
    heads = 1
    s = sg.tensor(np.full((1, 1, 1), 6.0), requires_grad=True)
    q, k, v = (sg.tensor(rand(1, 3, 2, seed=i)) for i in range(3))
    cosine_attention(q, k, v, heads, s).sum().backward()
    assert s.grad.numpy().item() == 0.0


@pytest.mark.parametrize("masked", [False, True])
def test_anchor_stripe_attention_matches_torch(masked):
    """Both stages: the anchors attend to the stripe (a2w), the stripe to the anchors (w2a)."""
    heads, b, n, m = 2, 4, 8, 2
    masks = (_mask(2, m, n, 6), _mask(2, n, m, 7)) if masked else (None, None)
    arrays = [rand(b, n, 4, seed=1), rand(b, n, 4, seed=2), rand(b, n, 4, seed=3),
              rand(b, m, 4, seed=4), rand(heads, 1, 1, seed=5) * 0.3 + 2.0,
              rand(heads, 1, 1, seed=6) * 0.3 + 2.0, rand(heads, m, n, seed=7),
              rand(heads, n, m, seed=8)]

    def ours(q, k, v, a, s1, s2, b1, b2):
        return anchor_stripe_attention(q, k, v, a, heads, (s1, s2), (b1, b2), masks)

    def theirs(q, k, v, a, s1, s2, b1, b2):
        y = _cos(a, k, v, heads, s1, b1, masks[0])
        return _cos(q, a, y, heads, s2, b2, masks[1])
    parity(ours, theirs, arrays)


def test_errors():
    q = sg.tensor(np.zeros((2, 4, 6)))
    s = sg.tensor(np.zeros((3, 1, 1)))
    with pytest.raises(ValueError, match=r"^cosine_attention: q \(2, 4, 6\) is not \(B, N, C\) with "
                                         r"C a multiple of heads 4"):
        cosine_attention(q, q, q, 4, s)
    with pytest.raises(ValueError, match=r"^cosine_attention: logit_scale must be a Tensor of 2 values"):
        cosine_attention(q, q, q, 2, s)
    with pytest.raises(ValueError, match=r"^anchor_stripe_attention: anchor \(1, 2, 6\) does not pair"):
        anchor_stripe_attention(q, q, q, sg.tensor(np.zeros((1, 2, 6))), 3, (s, s), (None, None))
    with pytest.raises(ValueError, match=r"^anchor_shift_mask: the grid \(8, 12\) is not made of"):
        anchor_shift_mask((8, 12), (8, 8), (4, 4), 2)
    with pytest.raises(ValueError, match=r"^anchor_coords_table: window must be an \(h, w\) pair"):
        anchor_coords_table(8)
