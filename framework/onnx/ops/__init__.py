"""The converters, one file per op family (mirroring framework/functional/); importing this package
registers them all."""
from . import activation, conv, elementwise, linalg, normalization, pixel_shuffle, pool, reduce  # noqa: F401
from . import resample, shape  # noqa: F401
