"""The attention converters (framework/onnx/ops/attention.py) against srgrad through ONNX Runtime:
attention with M != N key tokens, a bias and a per-window mask, a per-head Tensor scale, no bias;
attention_softmax without a bias; window partition / reverse with a rectangular window. SwinIR's
whole export: test_swinir.py."""
from __future__ import annotations

import numpy as np
import pytest

import framework.functional as F
from framework import nn

from ._util import Lambda, check, image, require_onnx

require_onnx()


def P(*shape, seed=1, scale=1.0):
    return nn.Parameter((np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32))


def tokens(x):
    """(B, C, H, W) -> (B, H W, C)."""
    return F.transpose(F.flatten(x, 2), 1, 2)


def image_of(t, h, w):
    """(B, H W, C) -> (B, C, H, W)."""
    return F.reshape(F.transpose(t, 1, 2), (t.shape[0], t.shape[2], h, w))


@pytest.mark.parametrize("with_bias,with_mask,per_head", [(True, True, False), (False, False, False),
                                                          (True, False, True)])
def test_attention(tmp_path, with_bias, with_mask, per_head):
    """q from all 12 tokens, k and v from the first 5 (M != N), 2 heads; v has 6 channels."""
    mask = np.where(np.random.default_rng(3).uniform(size=(2, 12, 5)) < 0.3, -100.0, 0.0)

    def fn(m, x):
        t = tokens(x)  # (4, 12, 4)
        kv = F.getitem(t, (slice(None), slice(0, 5)))
        scale = m.s if per_head else 0.5
        y = F.attention(t @ m.wq, kv @ m.wk, kv @ m.wv, 2, scale, m.bias if with_bias else None,
                        mask if with_mask else None)
        return image_of(y, 3, 4)
    model = Lambda(fn, wq=P(4, 4), wk=P(4, 4, seed=2), wv=P(4, 6, seed=3), bias=P(2, 12, 5, seed=4),
                   s=P(2, seed=5))
    _, ops = check(model, image(4, 4, 3, 4), tmp_path, dynamic=False, atol=1e-5)
    assert {"MatMul", "Softmax"} <= set(ops)


def test_attention_softmax_without_bias_and_rectangular_windows(tmp_path):
    """(1, 2, 4, 6) -> windows of 2 x 3 tokens -> scores of each window with itself -> softmax ->
    weighted tokens -> back to the image."""
    def fn(m, x):
        t = F.permute(x, (0, 2, 3, 1))  # (1, 4, 6, 2)
        win = F.window_partition(t, (2, 3))  # (4, 6, 2)
        s = F.unsqueeze(win @ F.transpose(win, 1, 2), 1)  # (4, 1, 6, 6)
        p = F.squeeze(F.attention_softmax(s, 0.8), 1)
        return F.permute(F.window_reverse(p @ win, (2, 3), 4, 6), (0, 3, 1, 2))
    _, ops = check(Lambda(fn), image(1, 2, 4, 6), tmp_path, dynamic=False)
    assert "Softmax" in ops and "Add" not in ops
