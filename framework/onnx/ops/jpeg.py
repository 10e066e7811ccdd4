"""diff_jpeg has no converter on purpose: it simulates JPEG compression for training (degrading
inputs, a loss through compression), not a step of a deployed network."""
from __future__ import annotations

from ...functional.jpeg import DiffJPEGFunction
from ..graph import ConversionError, register_converter


@register_converter(DiffJPEGFunction)
def diff_jpeg(g, call):
    raise ConversionError(
        "DiffJPEG (F.diff_jpeg / nn.DiffJPEG) is not exported to ONNX: it simulates JPEG "
        "compression for training. Export the network without it (the layers before or after "
        "the compression as their own model).")
