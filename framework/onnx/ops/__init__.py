"""The converters, one file per op family (mirroring framework/functional/); importing this package
registers them all. NOT_EXPORTABLE lists, in this one place, each Function of framework.functional
that has no converter and why (tests/framework/onnx/test_coverage.py holds every Function to one
or the other)."""
from . import (activation, attention, conv, elementwise, linear, normalization,  # noqa: F401
               pixel_shuffle, pool, reduce, softmax)
from . import einsum, fold, grid_sample, jpeg, logistic, resample, shape, windows  # noqa: F401
from . import category, sort  # noqa: F401
from . import routing  # noqa: F401

from ...functional.dropout import DropoutFunction
from ...functional.logistic import BCEWithLogitsFunction
from ...functional.loss import FrobeniusLoss, PointwiseLoss

_LOSS = "a loss: training only, never part of an inference graph"
NOT_EXPORTABLE = {
    DropoutFunction: "training only: in eval() dropout is the identity and records no call; a "
                     "traced training-mode mask would be one random draw frozen into the graph",
    BCEWithLogitsFunction: _LOSS,
    PointwiseLoss: _LOSS,
    FrobeniusLoss: _LOSS,
}
