"""conv2d -> Conv, conv_transpose2d -> ConvTranspose (groups, dilation, stride, padding,
output_padding). The recorded geometry keeps only the top/left padding (bottom/right follow from the
sizes), so the bottom/right pads are recovered from the sizes, preferring the symmetric value: the
nodes then do not depend on the input size, and the graph can take any size."""
from __future__ import annotations

from ...functional.conv import Conv2dFunction, ConvTranspose2dFunction
from ..graph import register_converter


def _end_pad(n, out, k, s, d, begin):
    """The bottom/right padding that gives `out` outputs from `n` inputs: the symmetric `begin` when
    it does (an int padding), else the exact remainder (padding="same" with an even kernel)."""
    extent = d * (k - 1) + 1
    if (n + 2 * begin - extent) // s + 1 == out:
        return begin
    return (out - 1) * s + extent - n - begin


def _inputs(g):
    return [g.input(0), g.input(1)] + ([g.input(2)] if g.call.args[2] is not None else [])


@register_converter(Conv2dFunction)
def conv2d(g, call):  # x (N, C, H, W), w (O, C/g, kh, kw), b (O,) -> Conv
    geo = call.options["geo"]
    g.size_rule(*geo.stride)  # the end padding follows the size modulo the stride
    ends = [_end_pad(n, o, k, s, d, p) for n, o, k, s, d, p in
            zip(geo.image, geo.features, geo.kernel, geo.stride, geo.dilation, geo.padding)]
    return g.node("Conv", _inputs(g), kernel_shape=list(geo.kernel), strides=list(geo.stride),
                  dilations=list(geo.dilation), pads=list(geo.padding) + ends, group=geo.groups)


@register_converter(ConvTranspose2dFunction)
def conv_transpose2d(g, call):  # x (N, C, H, W), w (C, O/g, kh, kw), b (O,) -> ConvTranspose
    geo = call.options["geo"]  # image = the output size, features = the input size here
    out_pad = [o - ((i - 1) * s - 2 * p + d * (k - 1) + 1) for o, i, s, p, d, k in
               zip(geo.image, geo.features, geo.stride, geo.padding, geo.dilation, geo.kernel)]
    return g.node("ConvTranspose", _inputs(g), kernel_shape=list(geo.kernel),
                  strides=list(geo.stride), dilations=list(geo.dilation),
                  pads=list(geo.padding) * 2, output_padding=out_pad, group=geo.groups)
