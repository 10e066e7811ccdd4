"""Blocks and helpers several architectures share, with BasicSR's names (basicsr/archs/arch_util.py),
so their state_dict keys match BasicSR's: the pixel-shuffle upsampler, the residual block without BN,
`make_layer`, `default_init_weights`, the per-channel mean of the mean-shift models, the reading
of the MeanShift convs that EDSR-PyTorch's and RCAN's own files hold, and spandrel's size
requirement (the padding its call API applies before a model that needs a minimum size or a
multiple)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import framework.functional as F
from framework import nn
from framework.nn.conv import conv_act
from framework.check import flag, int_arg, is_number, number
from framework.nn import init

from framework.card import conv
from framework.detect import NoMatch, indices, need


def upsampler_scale(model: str, scale) -> int:
    """`scale` checked for the pixel-shuffle upsampler: a power of two (x2 stages) or 3."""
    scale = int_arg(model, "scale", scale)
    if not (scale == 3 or (scale >= 2 and scale & (scale - 1) == 0)):
        raise ValueError(f"{model}: scale x{scale} is not supported by the pixel-shuffle upsampler "
                         f"(supported: x2, x3, x4 and other powers of two)")
    return scale


def residual_net_args(model: str, scale, num_in_ch, num_out_ch, num_feat, num_layers) -> tuple:
    """(scale, channels, num_feat, num_layers) of a plain residual net on an interpolated input
    (VDSR, ZSSRNet), checked: ints >= 1 (num_layers >= 2), num_in_ch == num_out_ch (the output adds
    the interpolated input)."""
    scale = int_arg(model, "scale", scale)
    num_in_ch = int_arg(model, "num_in_ch", num_in_ch)
    num_out_ch = int_arg(model, "num_out_ch", num_out_ch)
    if num_in_ch != num_out_ch:
        raise ValueError(f"{model}: the global residual needs num_in_ch == num_out_ch, "
                         f"got {num_in_ch} and {num_out_ch}")
    return (scale, num_in_ch, int_arg(model, "num_feat", num_feat),
            int_arg(model, "num_layers", num_layers, 2))


def supported_scale(model: str, scale, supported: tuple) -> int:
    """`scale` checked as a positive int, then as one of `supported` (the error lists them)."""
    scale = int_arg(model, "scale", scale)
    if scale not in supported:
        raise ValueError(f"{model}: scale x{scale} is not supported (supported: "
                         f"{', '.join(f'x{s}' for s in supported)})")
    return scale


def channel_mean(model: str, rgb_mean, channels: int) -> np.ndarray:
    """The per-channel mean of a mean-shift model as (1, C, 1, 1) float32; a 3-value mean on 1
    channel is averaged (BasicSR's models only run on 3 channels)."""
    if not isinstance(rgb_mean, (list, tuple)) or not all(is_number(v) for v in rgb_mean):
        raise ValueError(f"{model}: rgb_mean must be a list of numbers, got {rgb_mean!r}")
    mean = np.asarray(rgb_mean, dtype=np.float64)
    if mean.size != channels:
        if channels == 1 and mean.size == 3:
            mean = mean.mean(keepdims=True)
        else:
            raise ValueError(f"{model}: rgb_mean has {mean.size} values for {channels} channels "
                             f"(give one value per channel)")
    return mean.astype(np.float32).reshape(1, channels, 1, 1)


def pad_to_requirement(x, minimum: int = 0, multiple: int = 1):
    """spandrel's SizeRequirements(minimum, multiple) as its call API meets them: pad (N, C, H, W)
    at the bottom and right to max(H, minimum) rounded up to `multiple` (W alike), by reflection as
    far as the image allows (n - 1 pixels), the rest by replication. Undo with F.crop_to. One
    F.pad_to_requirement at every size (an ONNX graph that holds at every size); nothing when there
    is no requirement."""
    if minimum <= 1 and multiple <= 1:
        return x
    return F.pad_to_requirement(x, max(minimum, 1), multiple)


def mean_shift_values(state, spec: dict) -> dict:
    """img_range and rgb_mean from a MeanShift pair (EDSR-PyTorch's and RCAN's sub_mean / add_mean:
    1x1 convs, weight I / std, bias -+ rgb_range * mean / std). rgb_range, which multiplies the
    input, is 255 when the bias is larger than 1 (a mean in [0, 1] times 255: every published
    model) and 1 otherwise, unless img_range is given; std must be 1 (srgrad's models have none)."""
    if "sub_mean.weight" not in state:
        return {}
    arrays = {k: np.asarray(state[k], dtype=np.float64).reshape(-1)
              for k in ("sub_mean.weight", "sub_mean.bias", "add_mean.weight", "add_mean.bias")
              if k in state}
    if len(arrays) != 4:
        raise NoMatch("sub_mean / add_mean: a weight or bias is missing")
    n = arrays["sub_mean.bias"].size
    eye = np.eye(n).reshape(-1)
    for k in ("sub_mean.weight", "add_mean.weight"):
        if arrays[k].size != n * n or np.abs(arrays[k] - eye).max() > 1e-6:
            raise NoMatch(f"{k} is not the identity (a MeanShift with a std other than 1, which "
                          f"srgrad's models do not have)")
    bias = -arrays["sub_mean.bias"]
    if np.abs(bias - arrays["add_mean.bias"]).max() > 1e-4 * max(1.0, np.abs(bias).max()):
        raise NoMatch("sub_mean and add_mean shift by different means")
    img_range = spec.get("img_range") or (255.0 if np.abs(bias).max() > 1 else 1.0)
    return {"img_range": float(img_range),
            "rgb_mean": tuple(round(float(v), 6) for v in bias / img_range)}


def make_layer(block, num_block: int, /, **kwargs) -> nn.Sequential:
    """BasicSR's make_layer: `num_block` fresh `block(**kwargs)` in a Sequential (keys 0., 1., ...)."""
    return nn.Sequential(*[block(**kwargs) for _ in range(num_block)])


def default_init_weights(modules, scale: float = 1.0, bias_fill: float = 0.0, **kwargs) -> None:
    """BasicSR's default_init_weights on a module (or a list of them) and all their submodules:
    every Conv2d (and Linear) weight ~ kaiming_normal_(**kwargs) (default: std sqrt(2 / fan_in)),
    then multiplied by `scale` (0.1 keeps deep residual stacks near the identity at the start),
    biases filled with `bias_fill`; BatchNorm2d weights set to 1, biases to bias_fill."""
    linear = getattr(nn, "Linear", None)
    for module in modules if isinstance(modules, (list, tuple)) else [modules]:
        for m in module.modules():
            if isinstance(m, nn.Conv2d) or (linear is not None and isinstance(m, linear)):
                init.kaiming_normal_(m.weight, **kwargs)
                m.weight.data *= m.weight.data.dtype.type(scale)
            elif isinstance(m, nn.BatchNorm2d):
                if m.weight is not None:
                    init.constant_(m.weight, 1)
            else:
                continue
            if m.bias is not None:
                init.constant_(m.bias, bias_fill)


def drop_rates(model: str, drop_rate, attn_drop_rate, drop_path_rate) -> tuple[float, float, float]:
    """The Swin family's three dropout keywords (SwinIR, HAT, Swin2SR, DAT), each in [0, 1)."""
    return tuple(number(model, key, value, 0.0, 1.0, high_open=True) for key, value in (
        ("drop_rate", drop_rate), ("attn_drop_rate", attn_drop_rate), ("drop_path_rate", drop_path_rate)))


def swin_options(model: str, embed_dim: int, mlp_ratio, qkv_bias, qk_scale, drop_rate,
                 attn_drop_rate, drop_path_rate, ape, patch_norm, img_range) -> SimpleNamespace:
    """The transformer keywords SwinIR, HAT and DRCT check alike, checked: mlp_ratio (> 0 and at
    least one hidden feature), qkv_bias, qk_scale (None or > 0), the three dropout rates, ape,
    patch_norm, img_range (> 0). Returns them as attributes of one namespace."""
    mlp_ratio = number(model, "mlp_ratio", mlp_ratio, low=0, low_open=True)
    if int(embed_dim * mlp_ratio) < 1:
        raise ValueError(f"{model}: mlp_ratio {mlp_ratio} leaves the MLP no hidden feature "
                         f"(int(embed_dim * mlp_ratio) = 0)")
    if qk_scale is not None:
        qk_scale = number(model, "qk_scale", qk_scale, low=0, low_open=True)
    drop_rate, attn_drop_rate, drop_path_rate = drop_rates(model, drop_rate, attn_drop_rate,
                                                           drop_path_rate)
    return SimpleNamespace(
        mlp_ratio=mlp_ratio, qkv_bias=flag(model, "qkv_bias", qkv_bias), qk_scale=qk_scale,
        drop_rate=drop_rate, attn_drop_rate=attn_drop_rate, drop_path_rate=drop_path_rate,
        ape=flag(model, "ape", ape), patch_norm=flag(model, "patch_norm", patch_norm),
        img_range=number(model, "img_range", img_range, low=0, low_open=True))


def kair_unet(net, x0):
    """KAIR's U-Net pass (DRUNet, SCUNet): m_head, three downs (m_down1..3), m_body, three ups
    (m_up3..1) each taking the sum with its skip, m_tail on the sum with the head's output."""
    x1 = net.m_head(x0)
    x2 = net.m_down1(x1)
    x3 = net.m_down2(x2)
    x4 = net.m_down3(x3)
    x = net.m_up3(net.m_body(x4) + x4)
    x = net.m_up2(x + x3)
    x = net.m_up1(x + x2)
    return net.m_tail(x + x1)


def trunc_normal_linears(model) -> None:
    """The Swin family's _init_weights (SwinIR, HAT, Swin2SR, DAT): every Linear weight ~
    trunc_normal(std 0.02), its bias 0; LayerNorm keeps ones / zeros and convolutions torch's
    default."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                init.zeros_(m.bias)


def embed_tokens(model, x, name: str):
    """The Swin family's token embedding: (N, C, H, W) -> model.patch_embed -> tokens (N, H*W, C),
    plus model.absolute_pos_embed when model.ape (the padded input must then be img_size), then
    model.pos_drop."""
    x_size = (x.shape[2], x.shape[3])
    x = model.patch_embed(x)
    if model.ape:
        if x.shape[1] != model.absolute_pos_embed.shape[1]:
            raise ValueError(f"{name}: with ape=True the (padded) input must be img_size "
                             f"{model.patches_resolution}, got {x_size}")
        x = x + model.absolute_pos_embed
    return model.pos_drop(x)


class PixelShuffleUpsampler(nn.Sequential):
    """BasicSR's `Upsample` on (N, num_feat, H, W): one (conv 4F, shuffle 2) stage per factor 2 for
    scale = 2^n, one (conv 9F, shuffle 3) stage for scale 3 (keys `0.weight`, `2.weight`, ...)."""

    def __init__(self, scale: int, num_feat: int, model: str = "PixelShuffleUpsampler"):
        scale = upsampler_scale(model, scale)
        layers = []
        if scale == 3:
            layers += [nn.Conv2d(num_feat, 9 * num_feat, 3, padding=1), nn.PixelShuffle(3)]
        else:
            for _ in range(scale.bit_length() - 1):
                layers += [nn.Conv2d(num_feat, 4 * num_feat, 3, padding=1), nn.PixelShuffle(2)]
        super().__init__(*layers)

    @staticmethod
    def parameters(scale: int, num_feat: int) -> int:
        """Its parameters (for the models' cards): one 9F conv at x3, one 4F conv per x2 stage."""
        if scale == 3:
            return conv(num_feat, 9 * num_feat)
        return (scale.bit_length() - 1) * conv(num_feat, 4 * num_feat)

    @staticmethod
    def detect_scale(shapes: dict, prefix: str, num_feat: int) -> int:
        """The scale of an upsampler `prefix` in a state_dict's shapes (for models' detect rules):
        one conv with 9F outputs is x3, n convs with 4F outputs are x2^n."""
        convs = indices(shapes, prefix, ".weight")
        if not convs or convs != list(range(0, 2 * len(convs), 2)):
            raise NoMatch(f"no pixel-shuffle upsampler at {prefix}.0, {prefix}.2, ... (found {convs})")
        outs = [need(shapes, f"{prefix}.{i}.weight", 4)[0] for i in convs]
        if outs == [9 * num_feat]:
            return 3
        if all(o == 4 * num_feat for o in outs):
            return 2 ** len(outs)
        raise NoMatch(f"{prefix} convs have {outs} output channels: not one of {9 * num_feat} "
                      f"(x3) or n of {4 * num_feat} (x2^n)")


class ResidualBlockNoBN(nn.Module):
    """x + res_scale * extra(conv2(relu(conv1(x)))), 3x3 convs keeping (N, num_feat, H, W).
    `extra` is an optional custom layer (EDSR's `block:`); without it there is no such attribute, so
    the state_dict keys stay BasicSR's (conv1.*, conv2.*). The convolutions keep torch's default
    init (BasicSR's pytorch_init=True, as its EDSR); MSRResNet applies default_init_weights(0.1)."""

    def __init__(self, num_feat: int = 64, res_scale: float = 1.0, extra=None):
        super().__init__()
        self.res_scale = res_scale
        self.conv1 = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.conv2 = nn.Conv2d(num_feat, num_feat, 3, padding=1)
        self.relu = nn.ReLU()
        if extra is not None:
            self.extra = extra

    def forward(self, x):
        out = self.conv2(conv_act(self.conv1, self.relu, x))  # the ReLU fused into conv1
        if "extra" in self._modules:
            out = self.extra(out)
        if self.res_scale != 1:  # x * 1.0 is exact: skip the multiply in the common case
            out = out * self.res_scale
        return x + out
