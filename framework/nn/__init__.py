"""Modules: containers (module.py) and thin layers that call framework.functional (no math here)."""
from .module import IncompatibleKeys, Module, ModuleList, Parameter, Sequential
from .layers import *  # noqa: F401,F403  Conv2d, ConvTranspose2d, PixelShuffle, activations, pools, BatchNorm2d
from .upsample import *  # noqa: F401,F403  Upsample
from .loss import *  # noqa: F401,F403  L1Loss, MSELoss, CharbonnierLoss
from .utils import *  # noqa: F401,F403  clip_grad_norm_
from . import init, utils  # noqa: F401
