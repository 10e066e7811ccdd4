"""unfold / fold: unfold as a grouped Conv whose one-hot kernels copy each tap of each channel
into its own output channel (then Reshape to columns); fold as Col2Im (opset 18)."""
from __future__ import annotations

import numpy as np

from ...functional.fold import Fold, Unfold
from ..graph import ConversionError, register_converter


def _attrs(geo):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw), _ = geo
    return dict(dilations=[dh, dw], pads=[ph, pw, ph, pw], strides=[sh, sw]), (kh, kw)


@register_converter(Unfold)
def unfold(g, call):
    attrs, (kh, kw) = _attrs(call.options["geo"])
    c = g.shape(0)[1]
    onehot = np.eye(kh * kw, dtype=np.float32).reshape(kh * kw, 1, kh, kw)
    w = g.const(np.tile(onehot, (c, 1, 1, 1)))  # out channel c kh kw + p kw + q <- (c, p, q)
    y = g.node("Conv", [g.input(0), w], group=c, kernel_shape=[kh, kw], **attrs)
    return g.node("Reshape", [y, g.const(np.asarray([0, 0, -1], np.int64))])


@register_converter(Fold)
def fold(g, call):
    if g.opset < 18:
        raise ConversionError(f"{call.describe()}: fold needs Col2Im (opset 18 or more)")
    attrs, (kh, kw) = _attrs(call.options["geo"])
    size = g.const(np.asarray(call.options["size"], np.int64))
    return g.node("Col2Im", [g.input(0), size, g.const(np.asarray([kh, kw], np.int64))], **attrs)
