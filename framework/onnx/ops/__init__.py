"""The converters, one file per op family (mirroring framework/functional/); importing this package
registers them all."""
from . import (activation, conv, elementwise, linear, normalization, pixel_shuffle, pool,  # noqa: F401
               reduce, softmax)
from . import grid_sample, logistic, resample, shape  # noqa: F401
