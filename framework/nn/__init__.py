"""Modules: containers (module.py) and thin layers over framework.functional, one file per op family
(no math here). Every layer registers in LAYERS under its class name (YAML `type: Conv2d`)."""
import sys as _sys

from .module import IncompatibleKeys, Module, ModuleDict, ModuleList, Parameter, Sequential
from .attention import MultiheadAttention
from .activation import GELU, LeakyReLU, LogSoftmax, Mish, PReLU, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .conv import Conv2d, ConvTranspose2d
from .dropout import Dropout, Dropout2d, DropPath
from .gan_loss import GANLoss
from .jpeg import DiffJPEG
from .linear import Identity, Linear
from .loss import CharbonnierLoss, L1Loss, MSELoss
from .normalization import BatchNorm2d, GroupNorm, InstanceNorm2d, LayerNorm, LayerNorm2d
from .dists import DISTS, DISTSLoss
from .lpips import LPIPS, LPIPSLoss
from .perceptual import PerceptualLoss, VGGFeatureExtractor
from .pixel_shuffle import PixelShuffle, PixelUnshuffle
from .sparse import Embedding
from .pooling import AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool2d, MaxPool2d
from .upsample import Upsample
from .utils import clip_grad_norm_, clip_grad_value_
from . import init, utils
from .. import functional

# torch's spelling `import torch.nn.functional as F`: framework.nn.functional is
# framework.functional itself
_sys.modules[__name__ + ".functional"] = functional

__all__ = [
    "IncompatibleKeys", "Module", "ModuleDict", "ModuleList", "Parameter", "Sequential",
    "MultiheadAttention", "Embedding", "InstanceNorm2d", "GELU", "LeakyReLU",
    "LogSoftmax", "Mish", "PReLU", "ReLU", "Sigmoid", "SiLU", "Softmax", "Tanh", "Conv2d",
    "ConvTranspose2d", "Dropout", "Dropout2d", "DropPath", "DiffJPEG", "GANLoss", "Identity",
    "Linear", "CharbonnierLoss", "L1Loss", "MSELoss", "BatchNorm2d", "GroupNorm", "LayerNorm",
    "LayerNorm2d", "DISTS", "DISTSLoss", "LPIPS", "LPIPSLoss", "PerceptualLoss", "VGGFeatureExtractor",
    "PixelShuffle", "PixelUnshuffle",
    "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
    "AvgPool2d", "MaxPool2d", "Upsample", "clip_grad_norm_", "clip_grad_value_", "init", "utils",
]
