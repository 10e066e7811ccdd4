"""Differentiable ops, one family per module; each module holds its Functions (and numba kernels)
and the lowercase wrappers re-exported here. `import framework.functional as F`."""
from ._util import unbroadcast
from .attention import (attention, attention_softmax, window_attention, window_partition,
                        window_reverse)
from .activation import gelu, leaky_relu, prelu, relu, sigmoid, tanh
from .compare import (all, any, bitwise_and, bitwise_not, bitwise_or, bitwise_xor,
                      count_nonzero, eq, ge, gt, isfinite, isinf, isnan, le, logical_and,
                      logical_not, logical_or, logical_xor, lt, masked_fill, ne, nonzero)
from .conv import conv2d, conv_padding, conv_transpose2d
from .dropout import drop_path, dropout, dropout2d
from .elementwise import (abs, add, cast, clamp, clone, div, exp, floor_divide, log, maximum,
                          minimum, mul, neg, positive, pow, remainder, sqrt, sub, where)
from .einsum import einsum
from .embedding import embedding
from .fold import fold, unfold
from .grid_sample import grid_sample
from .imresize import imresize
from .jpeg import diff_jpeg
from .linear import linear, matmul
from .logistic import binary_cross_entropy_with_logits, mish, silu, softplus
from .loss import charbonnier_loss, frobenius_loss, l1_loss, mse_loss
from .normalization import batch_norm, group_norm, instance_norm, layer_norm, layer_norm2d
from .pixel_shuffle import pixel_shuffle, pixel_unshuffle
from .pool import adaptive_avg_pool2d, adaptive_max_pool2d, avg_pool2d, max_pool2d
from .reduce import argmax, argmin, max, mean, min, std, sum, var
from .resample import interpolate
from .shape import (cat, chunk, crop_to, expand, flatten, flip, getitem, index_put, pad,
                    pad_to_multiple, pad_to_requirement, permute, repeat, reshape, roll, split,
                    squeeze, stack, transpose, unsqueeze)
from .softmax import log_softmax, softmax
from .sort import argsort
from .category import category_group, category_ungroup
from .routing import keep_topk

__all__ = [
    "unbroadcast", "attention", "attention_softmax", "window_attention", "window_partition",
    "window_reverse", "gelu", "leaky_relu", "prelu", "relu", "sigmoid", "tanh", "conv2d",
    "conv_padding", "conv_transpose2d", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor",
    "eq", "ge", "gt", "isfinite", "isinf", "isnan", "le", "logical_and", "logical_not",
    "logical_or", "logical_xor", "lt", "masked_fill", "ne", "any", "all", "nonzero",
    "count_nonzero", "floor_divide", "remainder", "positive", "drop_path", "dropout", "dropout2d",
    "abs", "add", "cast", "clamp", "clone", "div", "exp", "log", "maximum", "minimum", "mul",
    "neg", "pow", "sqrt", "sub", "where", "einsum", "embedding", "fold", "unfold", "grid_sample",
    "diff_jpeg", "imresize", "linear", "matmul", "binary_cross_entropy_with_logits", "mish",
    "silu", "softplus", "charbonnier_loss", "frobenius_loss", "l1_loss", "mse_loss", "batch_norm",
    "group_norm", "instance_norm", "layer_norm", "layer_norm2d", "pixel_shuffle",
    "pixel_unshuffle", "adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool2d", "max_pool2d",
    "argmax", "argmin", "max", "mean", "min", "std", "sum", "var", "interpolate", "cat", "crop_to",
    "expand", "pad_to_multiple", "pad_to_requirement", "flip", "index_put", "repeat", "chunk", "flatten", "getitem",
    "pad", "permute", "reshape", "roll", "split", "squeeze", "stack", "transpose", "unsqueeze",
    "log_softmax", "softmax", "argsort", "category_group", "category_ungroup", "keep_topk",
]
