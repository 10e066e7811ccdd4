"""The converters, one file per op family (mirroring framework/functional/); importing this package
registers them all."""
from . import (activation, attention, conv, elementwise, linear, normalization,  # noqa: F401
               pixel_shuffle, pool, reduce, softmax)
from . import einsum, fold, grid_sample, jpeg, logistic, resample, shape, windows  # noqa: F401
