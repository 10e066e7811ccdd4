"""The argument checks, public: the same checks every srgrad op, layer, model, dataset and optimizer
runs before any kernel (numba does not check bounds), for your own layers, models and datasets.
Each error names the owner and the argument: `int_arg("MyNet", "num_feat", 0)` raises
`ValueError: MyNet: num_feat must be a positive int, got 0`. A bool is never a number here, numpy
integers count as ints; a wrong type raises ArgumentTypeError (a TypeError and a ValueError).
`show(value)` and `clip_message(text)` bound what a message of your own quotes.

    from framework.check import choice, int_arg, number

The implementation is framework/_check.py; this module is its public name.
"""
from ._check import (ArgumentTypeError, choice, clip_message, did_you_mean, flag, float_array,
                     int_arg, int_list, int_pair, is_int, is_number, name_problem, number, pair, show)

__all__ = ["ArgumentTypeError", "is_int", "is_number", "int_arg", "pair", "int_pair", "int_list",
           "number", "flag", "choice", "float_array", "did_you_mean", "show", "clip_message",
           "name_problem"]
