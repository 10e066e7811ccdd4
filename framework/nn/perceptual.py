"""PerceptualLoss and its VGGFeatureExtractor: BasicSR's (basicsr/losses/basic_loss.py,
basicsr/archs/vgg_arch.py) names, keywords and layer names (conv1_1 ... relu5_4, pool1 ... pool5),
over torchvision's pretrained VGG weights read from a file the user points to.

The weights: torchvision's `vgg19-dcbb9e9d.pth` (or the file of another vgg_type), passed as
`weights=` or in the environment variable SRGRAD_VGG19_WEIGHTS (SRGRAD_<VGG_TYPE>_WEIGHTS), read by
framework.weights.load_weights (no pickle, no torch). Only the `features.<i>` entries up to the
deepest requested layer are used. The network is frozen: no parameter requires a gradient, it stays in
eval mode whatever train() is called with, and it belongs to the loss, not to the generator, so it is
never in the generator's state_dict or checkpoints.
"""
from __future__ import annotations

import os
from collections import OrderedDict

import numpy as np

from .. import functional as F
from .._check import choice, did_you_mean, flag, int_arg, number
from ..autograd import no_grad
from ..registry import LOSSES
from ..tensor import Tensor
from ..weights import load_weights
from .activation import ReLU
from .conv import Conv2d
from .module import Module, Sequential
from .normalization import BatchNorm2d
from .pooling import MaxPool2d

__all__ = ["VGGFeatureExtractor", "PerceptualLoss", "vgg_layer_names"]

# torchvision's VGG configurations: output channels of each 3x3 convolution, "M" a 2x2 max pool
_CFGS = {
    "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg13": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
              512, 512, 512, 512, "M"],
}
VGG_TYPES = tuple(t + bn for t in _CFGS for bn in ("", "_bn"))
# torchvision's IMAGENET1K_V1 files
_FILES = {"vgg11": "vgg11-8a719046.pth", "vgg13": "vgg13-19584684.pth", "vgg16": "vgg16-397923af.pth",
          "vgg19": "vgg19-dcbb9e9d.pth", "vgg11_bn": "vgg11_bn-6002323d.pth",
          "vgg13_bn": "vgg13_bn-abd245e5.pth", "vgg16_bn": "vgg16_bn-6c64b313.pth",
          "vgg19_bn": "vgg19_bn-c79401a0.pth"}
_URL = "https://download.pytorch.org/models/"
_MEAN, _STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet statistics of [0, 1] images
# PerceptualLoss's criterion names (BasicSR's) -> the functional loss each one is
_CRITERIA = {"l1": F.l1_loss, "l2": F.mse_loss, "fro": F.frobenius_loss}


def vgg_layer_names(vgg_type: str = "vgg19") -> list[str]:
    """BasicSR's names of torchvision's `features` modules, in order (index = features index):
    conv{b}_{i}, [bn{b}_{i},] relu{b}_{i} for each convolution, pool{b} after each block b."""
    choice("vgg_layer_names", "vgg_type", vgg_type, VGG_TYPES)
    names, block, conv = [], 1, 1
    for v in _CFGS[vgg_type.replace("_bn", "")]:
        if v == "M":
            names.append(f"pool{block}")
            block, conv = block + 1, 1
            continue
        names += [f"conv{block}_{conv}"] + ([f"bn{block}_{conv}"] if vgg_type.endswith("_bn") else [])
        names.append(f"relu{block}_{conv}")
        conv += 1
    return names


def _env_name(vgg_type: str) -> str:
    return f"SRGRAD_{vgg_type.upper()}_WEIGHTS"


def weights_path(owner: str, vgg_type: str, weights) -> str:
    """The weights file: `weights`, else the environment variable; a FileNotFoundError that says
    where to download it and how to point srgrad at it when there is none."""
    env = _env_name(vgg_type)
    path = weights if weights is not None else os.environ.get(env)
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{owner}: weights must be a path, got {type(path).__name__}")
    if path and os.path.isfile(path):
        return os.fspath(path)
    fname = _FILES[vgg_type]
    where = (f"weights={os.fspath(path)!r} is not a file" if weights is not None else
             f"{env}={path!r} is not a file" if path else f"no {vgg_type.upper()} weights given")
    raise FileNotFoundError(
        f"{owner}: {where}. Download torchvision's pretrained {vgg_type} ({_URL}{fname}), then "
        f"point srgrad at it: `weights: /path/to/{fname}` in the loss spec, or the environment "
        f"variable {env}=/path/to/{fname}")


def _check_layers(owner: str, layer_name_list, vgg_type: str) -> list[str]:
    names = vgg_layer_names(vgg_type)
    layers = list(layer_name_list) if isinstance(layer_name_list, (list, tuple, dict)) else None
    if not layers:
        raise ValueError(f"{owner}: expected a non-empty list of layer names ({names[0]}, ...), got "
                         f"{layer_name_list!r}")
    for layer in layers:
        if layer not in names:
            raise ValueError(f"{owner}: {vgg_type} has no layer {layer!r}{did_you_mean(layer, names)} "
                             f"Layers: {', '.join(names)}")
    return layers


class VGGFeatureExtractor(Module):
    """torchvision's VGG `features` under BasicSR's layer names; forward(x) -> {layer: feature} for
    each requested layer, in network order.

    x: (N, 3, H, W) in [0, 1] (or [-1, 1] with range_norm). use_input_norm subtracts ImageNet's mean
    and divides by its std (buffers `mean`, `std`, (1, 3, 1, 1)). Only the layers up to the deepest
    requested one are built; keys are BasicSR's (`vgg_net.conv1_1.weight`, ...).

    Args:
        layer_name_list: the layers to return, e.g. ["relu1_1", "conv5_4"] (vgg_layer_names).
        vgg_type: vgg11, vgg13, vgg16, vgg19 (default), or their _bn variants.
        use_input_norm: ImageNet normalisation, default True. range_norm: x -> (x + 1) / 2 first,
            default False.
        requires_grad: train the VGG too, default False (frozen, eval mode).
        remove_pooling: drop the max pools, default False. pooling_stride: their stride, default 2.
        weights: the torchvision weights file; default: the environment variable
            SRGRAD_<VGG_TYPE>_WEIGHTS (e.g. SRGRAD_VGG19_WEIGHTS).
    """

    def __init__(self, layer_name_list, vgg_type: str = "vgg19", use_input_norm: bool = True,
                 range_norm: bool = False, requires_grad: bool = False, remove_pooling: bool = False,
                 pooling_stride: int = 2, weights=None):
        super().__init__()
        owner = "VGGFeatureExtractor"
        choice(owner, "vgg_type", vgg_type, VGG_TYPES)
        self.layer_name_list = _check_layers(owner, layer_name_list, vgg_type)
        self.use_input_norm = flag(owner, "use_input_norm", use_input_norm)
        self.range_norm = flag(owner, "range_norm", range_norm)
        self.requires_grad = flag(owner, "requires_grad", requires_grad)
        flag(owner, "remove_pooling", remove_pooling)
        pooling_stride = int_arg(owner, "pooling_stride", pooling_stride)
        path = weights_path(owner, vgg_type, weights)
        names = vgg_layer_names(vgg_type)
        last = max(names.index(k) for k in self.layer_name_list)
        if self.use_input_norm:  # registered first: torch's state_dict lists own buffers first
            self.register_buffer("mean", Tensor(np.array(_MEAN, np.float32).reshape(1, 3, 1, 1)))
            self.register_buffer("std", Tensor(np.array(_STD, np.float32).reshape(1, 3, 1, 1)))
        layers, sources, channels = OrderedDict(), {}, 3
        cfg = iter(v for v in _CFGS[vgg_type.replace("_bn", "")] if v != "M")
        for index, name in enumerate(names[:last + 1]):
            if name.startswith("conv"):
                out = next(cfg)
                layers[name] = Conv2d(channels, out, 3, padding=1)
                channels = out
            elif name.startswith("bn"):
                layers[name] = BatchNorm2d(channels)
            elif name.startswith("relu"):
                layers[name] = ReLU()
            elif not remove_pooling:
                layers[name] = MaxPool2d(2, stride=pooling_stride)
            sources[name] = index
        self.vgg_net = Sequential(layers)
        self._load(path, sources, owner)
        self.requires_grad_(self.requires_grad)
        self.vgg_net.train(self.requires_grad)

    def _load(self, path: str, sources: dict, owner: str) -> None:
        """Copy `features.<index>.<key>` of the file into vgg_net.<name>.<key>: every key must be
        there with the right shape; other entries (the classifier, deeper layers) are ignored."""
        state, _ = load_weights(path)
        for name, module in self.vgg_net.named_children():
            for key, tensor in list(module.named_parameters()) + list(module.named_buffers()):
                src = f"features.{sources[name]}.{key}"
                if src not in state:
                    if key == "num_batches_tracked":  # older torchvision files predate it
                        continue
                    raise ValueError(f"{owner}: {path} has no {src!r} (for {name}): not torchvision's "
                                     f"VGG weights of this vgg_type?")
                value = np.asarray(state[src])
                if value.shape != tensor.shape:
                    raise ValueError(f"{owner}: {path}: {src} has shape {value.shape}, {name}.{key} "
                                     f"needs {tensor.shape}: weights of another vgg_type?")
                np.copyto(tensor.data, value, casting="unsafe")

    def forward(self, x):
        wdtype = next(self.parameters()).dtype
        if x.dtype != wdtype:
            raise TypeError(f"VGGFeatureExtractor: input dtype {x.dtype} but the VGG is {wdtype}: "
                            f"convert the loss with .to({x.dtype}) (or the input)")
        if not self.requires_grad and self.vgg_net.training:
            # frozen: eval mode always (batch norms keep the pretrained statistics), also after a
            # parent's train(), which sets every submodule's flag without calling its train()
            self.vgg_net.eval()
        if self.range_norm:
            x = (x + 1.0) / 2.0
        if self.use_input_norm:
            x = (x - self.mean) / self.std
        out = {}
        for name, layer in self.vgg_net.named_children():
            x = layer(x)
            if name in self.layer_name_list:
                out[name] = x
        return out


@LOSSES.register()
class PerceptualLoss(Module):
    """BasicSR's perceptual (and style) loss of VGG features: forward(x, gt) -> (percep_loss,
    style_loss), each a scalar, or None when its weight is 0. gt is detached.

    percep_loss = perceptual_weight * sum_k layer_weights[k] * criterion(phi_k(x), phi_k(gt));
    style_loss = style_weight * sum_k layer_weights[k] * criterion(G(phi_k(x)), G(phi_k(gt))),
    G the Gram matrix F F^T / (C H W) of a feature F viewed as (N, C, H W).

    Args:
        layer_weights: {layer: weight}, e.g. Real-ESRGAN's {conv1_2: 0.1, conv2_2: 0.1, conv3_4: 1,
            conv4_4: 1, conv5_4: 1} (conv features: before their ReLU).
        vgg_type, use_input_norm, range_norm, weights: as VGGFeatureExtractor (default vgg19, True,
            False, SRGRAD_VGG19_WEIGHTS).
        perceptual_weight: default 1.0. style_weight: default 0.0.
        criterion: "l1" (mean absolute error, default), "l2" (mean squared error) or "fro" (the
            Frobenius norm of the difference).
    """

    # forward returns (percep, style): the recipes log the second as <column>_style
    extra_outputs = ("style",)

    def __init__(self, layer_weights, vgg_type: str = "vgg19", use_input_norm: bool = True,
                 range_norm: bool = False, perceptual_weight: float = 1.0, style_weight: float = 0.0,
                 criterion: str = "l1", weights=None):
        super().__init__()
        self._check(layer_weights, vgg_type, perceptual_weight, style_weight, criterion)
        self.layer_weights = {k: float(v) for k, v in layer_weights.items()}
        self.perceptual_weight, self.style_weight = float(perceptual_weight), float(style_weight)
        self.criterion_type = criterion
        self.vgg = VGGFeatureExtractor(list(layer_weights), vgg_type=vgg_type,
                                       use_input_norm=use_input_norm, range_norm=range_norm,
                                       weights=weights_path("PerceptualLoss", vgg_type, weights))

    @staticmethod
    def _check(layer_weights, vgg_type, perceptual_weight, style_weight, criterion) -> None:
        owner = "PerceptualLoss"
        if not isinstance(layer_weights, dict):
            raise TypeError(f"{owner}: layer_weights must be a mapping of layer names to weights, "
                            f"e.g. {{conv5_4: 1.0}}, got {type(layer_weights).__name__}")
        choice(owner, "vgg_type", vgg_type, VGG_TYPES)
        _check_layers(owner, layer_weights, vgg_type)
        for k, v in layer_weights.items():
            number(owner, f"layer_weights[{k!r}]", v)
        number(owner, "perceptual_weight", perceptual_weight)
        number(owner, "style_weight", style_weight)
        choice(owner, "criterion", criterion, tuple(_CRITERIA))

    @classmethod
    def check_kwargs(cls, kwargs: dict) -> None:
        """Config validation without the weights file: the arguments only. Whether the file is
        there is `check_files`' question, asked when training starts (a config that names it can
        be translated, read and validated on a machine without it)."""
        defaults = {"vgg_type": "vgg19", "perceptual_weight": 1.0, "style_weight": 0.0, "criterion": "l1"}
        args = {**defaults, **kwargs}
        cls._check(args.get("layer_weights"), args["vgg_type"], args["perceptual_weight"],
                   args["style_weight"], args["criterion"])
        for key in ("use_input_norm", "range_norm"):
            if key in kwargs:
                flag("PerceptualLoss", key, kwargs[key])
        weights = kwargs.get("weights")
        if weights is not None and not isinstance(weights, (str, os.PathLike)):
            raise TypeError(f"PerceptualLoss: weights must be a path, got {type(weights).__name__}")

    @classmethod
    def check_files(cls, kwargs: dict) -> None:
        """The files a run needs before it starts: the VGG weights (`weights`, or the environment
        variable); FileNotFoundError saying where to download them and how to point srgrad at
        them."""
        weights_path("PerceptualLoss", kwargs.get("vgg_type", "vgg19"), kwargs.get("weights"))

    def _distance(self, a, b):
        return _CRITERIA[self.criterion_type](a, b)

    @staticmethod
    def _gram(x):
        """(N, C, H, W) -> (N, C, C): F F^T / (C H W)."""
        n, c, h, w = x.shape
        f = F.reshape(x, (n, c, h * w))
        return F.matmul(f, F.transpose(f, 1, 2)) / float(c * h * w)

    def forward(self, x, gt):
        x_features = self.vgg(x)
        with no_grad():
            gt_features = self.vgg(gt.detach() if isinstance(gt, Tensor) else Tensor(gt))
        percep = style = None
        if self.perceptual_weight > 0:
            for k in x_features:
                term = self._distance(x_features[k], gt_features[k]) * self.layer_weights[k]
                percep = term if percep is None else percep + term
            percep = percep * self.perceptual_weight
        if self.style_weight > 0:
            for k in x_features:
                term = self._distance(self._gram(x_features[k]), self._gram(gt_features[k])) \
                    * self.layer_weights[k]
                style = term if style is None else style + term
            style = style * self.style_weight
        return percep, style

    def extra_repr(self):
        return (f"layer_weights={self.layer_weights}, perceptual_weight={self.perceptual_weight}, "
                f"style_weight={self.style_weight}, criterion={self.criterion_type!r}")
