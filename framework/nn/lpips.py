"""LPIPS, the learned perceptual image patch similarity of Zhang et al. (CVPR 2018), as the `lpips`
package 0.1.4 (richzhang/PerceptualSimilarity) computes it, and LPIPSLoss, its use as a training loss.

    d(x0, x1) = sum_l mean_hw( w_l . (f_l(x0) / |f_l(x0)| - f_l(x1) / |f_l(x1)|)^2 )

f_l are five ReLU outputs of a frozen ImageNet backbone (torchvision's AlexNet `features` after
ReLU 1-5, or VGG16's after relu1_2, relu2_2, relu3_3, relu4_3, relu5_3), each unit-normalised over
channels (|f| + 1e-10), and w_l >= 0 the learned per-channel weights of v0.1 (a 1x1 convolution
without bias). Inputs are in [-1, 1] (`normalize=True`: [0, 1]) and are first shifted and scaled
(`scaling_layer`: shift (-.030, -.088, -.188), scale (.458, .448, .450)). Lower is closer; 0 for
identical images. Keys are the `lpips` package's (`scaling_layer.shift`, `net.slice1.0.weight`, ...,
`lin0.model.1.weight`), so its state_dict loads as it is.

The weights, two files, read without running code (framework.weights.load_weights):
- the backbone: torchvision's `alexnet-owt-7be5be79.pth` / `vgg16-397923af.pth` (`features.<i>.*`);
- the linear layers: the lpips package's `weights/v0.1/alex.pth` / `vgg.pth`.
Each is given as a keyword (`backbone_weights=`, `weights=`), or by the environment variables
SRGRAD_LPIPS_<NET>_BACKBONE and SRGRAD_LPIPS_<NET>_WEIGHTS; without them the error says where to get
each file. Version 0.0 (the paper's first arXiv version, with a normalisation bug) is not offered.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .. import functional as F
from .._check import choice, flag, number
from ._util import weight_file
from ..registry import LOSSES
from ..tensor import Tensor
from ..weights import load_weights
from .activation import ReLU
from .conv import Conv2d
from .dropout import Dropout
from .module import Module, Sequential
from .pooling import MaxPool2d

__all__ = ["LPIPS", "LPIPSLoss", "NETS", "weight_files"]


def _vgg_features(cfg):
    """torchvision's VGG `features` entries from its configuration (channels, "M" a 2x2 max pool)."""
    out, c = [], 3
    for v in cfg:
        if v == "M":
            out.append(("pool", 2, 2))
        else:
            out += [("conv", c, v, 3, 1, 1), ("relu",)]
            c = v
    return out


# torchvision's `features` as data: ("conv", in, out, kernel, stride, padding), ("relu",),
# ("pool", kernel, stride); and the lpips package's slices (features indices, end exclusive).
NETS = {
    "alex": dict(features=[("conv", 3, 64, 11, 4, 2), ("relu",), ("pool", 3, 2),
                           ("conv", 64, 192, 5, 1, 2), ("relu",), ("pool", 3, 2),
                           ("conv", 192, 384, 3, 1, 1), ("relu",), ("conv", 384, 256, 3, 1, 1), ("relu",),
                           ("conv", 256, 256, 3, 1, 1), ("relu",)],
                 slices=[(0, 2), (2, 5), (5, 8), (8, 10), (10, 12)], channels=[64, 192, 384, 256, 256],
                 backbone="alexnet-owt-7be5be79.pth", lin="alex.pth", cached="lpips_v0.1_alex.pth",
                 min_side=31),  # the second max pool's output is empty below 31 px
    "vgg": dict(features=_vgg_features([64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
                                        512, 512, 512]),
                slices=[(0, 4), (4, 9), (9, 16), (16, 23), (23, 30)], channels=[64, 128, 256, 512, 512],
                backbone="vgg16-397923af.pth", lin="vgg.pth", cached="lpips_v0.1_vgg.pth",
                min_side=16),  # four 2x2 pools before relu5_3
}
NETS["vgg16"] = NETS["vgg"]
_TORCHVISION = "https://download.pytorch.org/models/"
_LPIPS = "https://github.com/richzhang/PerceptualSimilarity/raw/master/lpips/weights/v0.1/"
_SHIFT, _SCALE = (-0.030, -0.088, -0.188), (0.458, 0.448, 0.450)


def _path(owner: str, net: str, given, kind: str) -> str:
    """The backbone or linear-layer ("weights") file of `net` (module docstring)."""
    env = f"SRGRAD_LPIPS_{net.upper().replace('16', '')}_{'BACKBONE' if kind == 'backbone' else 'WEIGHTS'}"
    spec = NETS[net]
    url = _TORCHVISION + spec["backbone"] if kind == "backbone" else _LPIPS + spec["lin"]
    keyword = "backbone_weights" if kind == "backbone" else "weights"
    return weight_file(owner, given, env, url, keyword, kind, weight_files(net)[kind == "weights"])


def weight_files(net: str) -> tuple[str, str]:
    """(backbone, linear layers): the names of `net`'s two files in srgrad's model cache."""
    return NETS[net]["backbone"], NETS[net]["cached"]


def _layer(spec):
    if spec[0] == "conv":
        _, cin, cout, k, s, p = spec
        return Conv2d(cin, cout, k, stride=s, padding=p)
    if spec[0] == "relu":
        return ReLU()
    return MaxPool2d(spec[1], stride=spec[2])


class _Backbone(Module):
    """torchvision's `features` cut into the lpips package's slices (`slice1.0.weight`, ...);
    forward(x) -> the list of each slice's output."""

    def __init__(self, net: str):
        super().__init__()
        spec = NETS[net]
        for s, (a, b) in enumerate(spec["slices"], 1):
            setattr(self, f"slice{s}", Sequential(OrderedDict((str(i), _layer(spec["features"][i]))
                                                              for i in range(a, b))))
        self.n_slices = len(spec["slices"])

    def forward(self, x):
        outs = []
        for s in range(1, self.n_slices + 1):
            x = getattr(self, f"slice{s}")(x)
            outs.append(x)
        return outs


def _copy(module: Module, state: dict, source, path: str, owner: str) -> None:
    """Copy state[source(key)] into each parameter of `module` (every key present, shapes equal)."""
    for key, tensor in module.named_parameters():
        copy_checked(tensor, state, source(key), path, owner)


def copy_checked(tensor, state: dict, src: str, path: str, owner: str) -> None:
    """tensor.data = state[src]: present, of the tensor's shape, finite; else a ValueError naming
    the file and the entry."""
    if src not in state:
        raise ValueError(f"{owner}: {path} has no {src!r}")
    value = np.asarray(state[src])
    if value.shape != tensor.shape:
        raise ValueError(f"{owner}: {path}: {src} has shape {value.shape}, needs {tensor.shape}")
    if not np.all(np.isfinite(value)):
        raise ValueError(f"{owner}: {path}: {src} holds non-finite values")
    np.copyto(tensor.data, value, casting="unsafe")


class LPIPS(Module):
    """The lpips package's `LPIPS(net=..., version='0.1')` in eval mode, frozen.

    forward(in0, in1, normalize=False): (N, 3, H, W) each, in [-1, 1] ([0, 1] with normalize=True)
    -> (N, 1, 1, 1) distances, or (N, 1, H, W) with spatial=True (each layer's map upsampled
    bilinearly to the input size, as the package does). Differentiable in both inputs.

    Args:
        net: "alex" (default, the package's default and the paper's best forward metric) or "vgg"
            ("vgg16"; the usual choice as a training loss).
        weights: the lpips package's v0.1 linear-layer file for `net`; backbone_weights:
            torchvision's file (module docstring; environment variables otherwise).
        spatial: return the distance map instead of its mean (default False).
    """

    def __init__(self, net: str = "alex", version: str = "0.1", spatial: bool = False, weights=None,
                 backbone_weights=None):
        super().__init__()
        owner = "LPIPS"
        self.net_type = choice(owner, "net", net, tuple(NETS))
        if str(version) != "0.1":
            raise ValueError(f"LPIPS: version must be '0.1' (0.0 had a normalisation bug and is not "
                             f"offered), got {version!r}")
        self.spatial = flag(owner, "spatial", spatial)
        self.scaling_layer = Module()
        self.scaling_layer.register_buffer("shift", Tensor(np.array(_SHIFT, np.float32).reshape(1, 3, 1, 1)))
        self.scaling_layer.register_buffer("scale", Tensor(np.array(_SCALE, np.float32).reshape(1, 3, 1, 1)))
        self.net = _Backbone(self.net_type)
        for k, c in enumerate(NETS[self.net_type]["channels"]):
            setattr(self, f"lin{k}", Module())
            getattr(self, f"lin{k}").model = Sequential(Dropout(), Conv2d(c, 1, 1, bias=False))
        backbone = _path(owner, self.net_type, backbone_weights, "backbone")
        state, _ = load_weights(backbone)
        _copy(self.net, state, lambda key: "features." + key.split(".", 1)[1], backbone, owner)
        lin = _path(owner, self.net_type, weights, "weights")
        state, _ = load_weights(lin)
        for k in range(len(NETS[self.net_type]["channels"])):
            _copy(getattr(self, f"lin{k}"), state, lambda key, k=k: f"lin{k}.{key}", lin, owner)
        self.requires_grad_(False)
        self.eval()

    def train(self, mode: bool = True):
        return super().train(False)  # frozen: the dropout of the linear layers never runs

    def forward(self, in0, in1, normalize: bool = False):
        if normalize:
            in0, in1 = 2 * in0 - 1, 2 * in1 - 1
        shift, scale = self.scaling_layer.shift, self.scaling_layer.scale
        feats0 = self.net((in0 - shift) / scale)
        feats1 = self.net((in1 - shift) / scale)
        total = None
        for k, (f0, f1) in enumerate(zip(feats0, feats1)):
            n0 = f0 / (F.sqrt(F.sum(f0 * f0, dim=1, keepdim=True)) + 1e-10)
            n1 = f1 / (F.sqrt(F.sum(f1 * f1, dim=1, keepdim=True)) + 1e-10)
            layer = getattr(self, f"lin{k}").model((n0 - n1) ** 2)
            if self.spatial:
                layer = F.interpolate(layer, size=tuple(in0.shape[2:]), mode="bilinear", align_corners=False)
            else:
                layer = F.mean(layer, dim=(2, 3), keepdim=True)
            total = layer if total is None else total + layer
        return total


@LOSSES.register()
class LPIPSLoss(Module):
    """LPIPS as a training loss (traiNNer-redux / neosr style): loss_weight x mean over the batch of
    LPIPS(x, gt) on images in [0, 1]. Keywords: net ("vgg" default, as those trainers), loss_weight
    (1.0), weights / backbone_weights (LPIPS). The LPIPS network is frozen and belongs to the loss."""

    def __init__(self, loss_weight: float = 1.0, net: str = "vgg", weights=None, backbone_weights=None,
                 reduction: str = "mean"):
        super().__init__()
        self.loss_weight = number("LPIPSLoss", "loss_weight", loss_weight)
        self.reduction = choice("LPIPSLoss", "reduction", reduction, ("mean", "sum"))
        self.lpips = LPIPS(net=net, weights=weights, backbone_weights=backbone_weights)

    @staticmethod
    def weight_files(kwargs: dict) -> tuple:
        """The files srgrad's model cache must hold unless the spec names them (engine/hub/models.py)."""
        net = kwargs.get("net", "vgg")
        return tuple(f for f, key in zip(weight_files(net), ("backbone_weights", "weights"))
                     if kwargs.get(key) is None)

    @classmethod
    def check_files(cls, kwargs: dict) -> None:
        """The two weight files exist (before training starts: engine/config/preflight.py)."""
        net = kwargs.get("net", "vgg")
        choice("LPIPSLoss", "net", net, tuple(NETS))
        _path("LPIPSLoss", net, kwargs.get("backbone_weights"), "backbone")
        _path("LPIPSLoss", net, kwargs.get("weights"), "weights")

    def forward(self, x, gt):
        d = self.lpips(x, gt, normalize=True)
        d = F.mean(d) if self.reduction == "mean" else F.sum(d)
        return d * self.loss_weight

