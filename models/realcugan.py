"""Real-CUGAN (bilibili AI Lab, 2022; github.com/bilibili/ailab Real-CUGAN/upcunet_v3.py, the
anime upscaler, as spandrel 0.4.2's RealCUGAN architecture reads and runs it): two cascaded U-Nets
with squeeze-excitation blocks, all convolutions unpadded ("valid"), so the input is padded by
reflection first and every skip connection is a centre crop. unet1 upscales (a transposed conv at
its bottom), unet2 refines its output, and the sum of the two is the result:

    x2, x3:       y = crop(unet1(pad(x))) + unet2(unet1(pad(x)))
    x4, x2 fast:  y = shuffle(conv_final(that sum, 64 features)) + nearest(x)
                  (fast: pixel_unshuffle(2) first, so the U-Nets run at half the size)

The published weight files (up2x/up3x/up4x, -conservative, -denoise1x/2x/3x, -no-denoise, and the
"pro" ones) share these layouts and differ only in their weights; a "pro" file carries a `pro` key
and expects its input mapped to [0.15, 0.85] (x 0.7 + 0.15, undone on the output). Keys are the
original's (unet1.conv1.conv.0.weight, ...; unet2.conv2.seblock.conv1.weight, ...; conv_final).
"""
from __future__ import annotations

import numpy as np

import framework.functional as F
from framework import nn
from framework.check import flag, int_arg, number
from framework.nn.conv import run_fused
from framework.registry import MODELS
from framework.card import conv, image_card

from ._blocks import pad_to_requirement
from framework.detect import NoMatch, need

_SLOPE = 0.1  # every LeakyReLU of the original
# The input padding of each variant: the border around the image and the multiple the padded size
# must be (the U-Nets halve it once, x3 twice); unet2's output is 40 pixels smaller than its input.
_BORDER = {2: 18, 3: 14, 4: 19}
_MULTIPLE = {2: 2, 3: 4, 4: 2}
# spandrel's size requirements (images below them are padded first, bottom/right, and the output
# cropped): the reflect padding above needs a few more pixels than the border, x2 fast 40 and a
# multiple of 4 (its unshuffled half must be even).
_MINIMUM, _FAST_MINIMUM = 32, 40


class SEBlock(nn.Module):
    """Squeeze-excitation: x * sigmoid(conv2(relu(conv1(mean over H, W of x)))), 1x1 convs C -> C/8
    -> C, on (N, C, H, W)."""

    def __init__(self, in_channels: int, reduction: int = 8, bias: bool = False):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, in_channels // reduction, 1, bias=bias)
        self.conv2 = nn.Conv2d(in_channels // reduction, in_channels, 1, bias=bias)

    def forward(self, x):
        s = self.conv1(F.mean(x, axis=(2, 3), keepdims=True), relu_slope=0.0)
        return x * F.sigmoid(self.conv2(s))


class UNetConv(nn.Module):
    """Two unpadded 3x3 convs with LeakyReLU(0.1) (H, W shrink by 4), then an SE block if `se`."""

    def __init__(self, in_channels: int, mid_channels: int, out_channels: int, se: bool):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(in_channels, mid_channels, 3), nn.LeakyReLU(_SLOPE),
                                  nn.Conv2d(mid_channels, out_channels, 3), nn.LeakyReLU(_SLOPE))
        self.seblock = SEBlock(out_channels, reduction=8, bias=True) if se else None

    def forward(self, x):
        z = run_fused(self.conv, x)
        return z if self.seblock is None else self.seblock(z)


def _crop(x, n: int):
    """x without n pixels on each side (the original's F.pad(x, (-n, -n, -n, -n)))."""
    return x[:, :, n:-n, n:-n]


def _kaiming_fan_out(module):
    """The original's init of the U-Nets: every conv and transposed conv weight kaiming_normal_
    (fan_out, relu); biases keep torch's default."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")


class UNet1(nn.Module):
    """One down/up level; (N, C, S, S) -> (N, out, 2S - 32, ...) with the transposed-conv bottom
    (x2: kernel 4, stride 2, padding 3) or (N, out, 3S - 44, ...) with x3's (5, 3, 2)."""

    def __init__(self, in_channels: int, out_channels: int, bottom=(4, 2, 3)):
        super().__init__()
        self.conv1 = UNetConv(in_channels, 32, 64, se=False)
        self.conv1_down = nn.Conv2d(64, 64, 2, stride=2)
        self.conv2 = UNetConv(64, 128, 64, se=True)
        self.conv2_up = nn.ConvTranspose2d(64, 64, 2, stride=2)
        self.conv3 = nn.Conv2d(64, 64, 3)
        k, s, p = bottom
        self.conv_bottom = nn.ConvTranspose2d(64, out_channels, k, stride=s, padding=p)
        _kaiming_fan_out(self)

    def forward(self, x):
        x1 = self.conv1(x)
        x2 = self.conv2(self.conv1_down(x1, relu_slope=_SLOPE))
        x2 = F.leaky_relu(self.conv2_up(x2), _SLOPE)
        x3 = self.conv3(_crop(x1, 4) + x2, relu_slope=_SLOPE)
        return self.conv_bottom(x3)


class UNet2(nn.Module):
    """Two down/up levels, an unpadded 3x3 conv at the bottom: (N, C, S, S) -> (N, out, S - 40,
    ...); `alpha` scales the deepest decoder features (the original's sharpness knob, 1 = off)."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv1 = UNetConv(in_channels, 32, 64, se=False)
        self.conv1_down = nn.Conv2d(64, 64, 2, stride=2)
        self.conv2 = UNetConv(64, 64, 128, se=True)
        self.conv2_down = nn.Conv2d(128, 128, 2, stride=2)
        self.conv3 = UNetConv(128, 256, 128, se=True)
        self.conv3_up = nn.ConvTranspose2d(128, 128, 2, stride=2)
        self.conv4 = UNetConv(128, 64, 64, se=True)
        self.conv4_up = nn.ConvTranspose2d(64, 64, 2, stride=2)
        self.conv5 = nn.Conv2d(64, 64, 3)
        self.conv_bottom = nn.Conv2d(64, out_channels, 3)
        _kaiming_fan_out(self)

    def forward(self, x, alpha: float = 1.0):
        x1 = self.conv1(x)
        x2 = self.conv2(self.conv1_down(x1, relu_slope=_SLOPE))
        x3 = self.conv3(self.conv2_down(x2, relu_slope=_SLOPE))
        x3 = F.leaky_relu(self.conv3_up(x3), _SLOPE)
        x4 = self.conv4(_crop(x2, 4) + x3)
        if alpha != 1:
            x4 = x4 * alpha
        x4 = F.leaky_relu(self.conv4_up(x4), _SLOPE)
        x5 = self.conv5(_crop(x1, 16) + x4, relu_slope=_SLOPE)
        return self.conv_bottom(x5)


@MODELS.register()
class RealCUGAN(nn.Module):
    """Real-CUGAN (spandrel's UpCunet2x, UpCunet3x, UpCunet4x, UpCunet2x_fast in one class, picked
    by `scale` and `fast` as spandrel's hyperparameters say): (N, in_channels, h, w) in [0, 1] ->
    (N, out_channels, h*scale, w*scale), any h, w >= 1 (spandrel's size requirements are applied
    inside: below 32 pixels, 40 and a multiple of 4 for fast, the input is padded and the output
    cropped, as its call API does).

    Args:
        in_channels, out_channels: image channels, default 3. x2 and x3 feed unet1's output to
            unet2, so they must be equal; x4 and fast add the nearest-upsampled input, so
            in_channels is out_channels or 1 (other counts build, as spandrel loads them, and the
            forward refuses them).
        scale: 2 (default), 3 or 4.
        pro: the "pro" weights (default False): a `pro` buffer (zeros(1), its value unused, as
            spandrel) and the input mapped x 0.7 + 0.15 (the output back).
        fast: x2 only (UpCunet2x_fast, "sudo_shuffle_cugan"): the U-Nets at half the size after a
            pixel_unshuffle(2), 64 features and conv_final + pixel_shuffle(2) at the end. Not pro.

    forward(x, alpha=1.0): alpha scales unet2's deepest decoder features (the original's sharpness
    setting; not for fast, as in the original).
    """

    def __init__(self, in_channels: int = 3, out_channels: int = 3, scale: int = 2, pro: bool = False,
                 fast: bool = False):
        super().__init__()
        name = "RealCUGAN"
        in_channels = int_arg(name, "in_channels", in_channels)
        out_channels = int_arg(name, "out_channels", out_channels)
        self.scale = int_arg(name, "scale", scale)
        self.fast = flag(name, "fast", fast)
        self.is_pro = flag(name, "pro", pro)
        if self.scale not in (2, 3, 4):
            raise ValueError(f"{name}: scale x{self.scale} is not supported (supported: x2, x3, x4)")
        if self.fast and (self.scale != 2 or self.is_pro):
            raise ValueError(f"{name}: fast (UpCunet2x_fast) is x2 and not pro, got scale="
                             f"{self.scale}, pro={self.is_pro}")
        tail = self.fast or self.scale == 4  # conv_final + pixel_shuffle + nearest skip
        # Channel counts the forward cannot run with still build (spandrel loads them too: its
        # tests do): forward says why.
        self._cannot_run = None
        if not tail and in_channels != out_channels:
            self._cannot_run = (f"x{self.scale} feeds unet1's output ({out_channels} channels) to "
                                f"unet2, which takes in_channels={in_channels}: they must be equal")
        if tail and in_channels not in (out_channels, 1):
            self._cannot_run = (f"the nearest-upsampled input ({in_channels} channels) is added to "
                                f"the output ({out_channels}): in_channels must be out_channels or 1")
        if self.is_pro:
            self.register_buffer("pro", np.zeros(1, np.float32))
        if tail:
            self.unet1 = UNet1(in_channels * (4 if self.fast else 1), 64)
            self.unet2 = UNet2(64, 64)
            self.conv_final = nn.Conv2d(64, 4 * out_channels, 3)
        else:
            self.unet1 = UNet1(in_channels, out_channels, (5, 3, 2) if self.scale == 3 else (4, 2, 3))
            self.unet2 = UNet2(in_channels, out_channels)

    def forward(self, x, alpha: float = 1.0):
        if self._cannot_run:
            raise ValueError(f"RealCUGAN: {self._cannot_run}")
        alpha = number("RealCUGAN", "alpha", alpha)
        if self.fast and alpha != 1:
            raise ValueError(f"RealCUGAN: fast (UpCunet2x_fast) has no alpha setting, got {alpha}")
        image = x
        x = pad_to_requirement(x, _FAST_MINIMUM, 4) if self.fast else pad_to_requirement(x, _MINIMUM)
        if self.is_pro:
            x = x * 0.7 + 0.15
        if self.fast:
            # the original pads by 38 (19 after the unshuffle) around a size that is a multiple of 4
            y = self._tail(F.pixel_unshuffle(F.pad(x, (38, 38, 38, 38), "reflect"), 2), x, alpha)
        elif self.scale == 4:
            y = self._tail(F.pad_to_multiple(x, 2, border=_BORDER[4]), x, alpha)
        else:
            s = self.scale
            u = self.unet1(F.pad_to_multiple(x, _MULTIPLE[s], border=_BORDER[s]))
            y = self.unet2(u, alpha) + _crop(u, 20)
        y = F.crop_to(y, image, self.scale)
        return (y - 0.15) / 0.7 if self.is_pro else y

    def _tail(self, padded, x, alpha):
        """x4 and fast: conv_final on unet1 + unet2 (a 1-pixel frame cropped), pixel_shuffle(2),
        plus the nearest-upsampled input."""
        u = self.unet1(padded)
        y = self.conv_final(self.unet2(u, alpha) + _crop(u, 20))
        y = F.pixel_shuffle(_crop(y, 1), 2)
        return F.crop_to(y, x, self.scale) + F.interpolate(x, scale_factor=self.scale, mode="nearest")

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """spandrel's rule. conv_final: x4, or x2 fast when unet1 sees 4 x the output channels
        (spandrel's convention; an x4 with those shapes cannot run: its nearest skip adds
        in_channels = 4 out_channels to the output) and there is no `pro` key (fast has none). Otherwise x3 when unet1's bottom is
        a 5x5 transposed conv, else x2. pro: the key `pro`. The weight variants (conservative,
        denoise1x-3x, no-denoise) have the same shapes: one spec."""
        for key in ("unet1.conv1_down.weight", "unet1.conv2.seblock.conv1.weight",
                    "unet2.conv3.seblock.conv1.weight", "unet2.conv4_up.weight", "unet2.conv5.weight"):
            need(shapes, key, 4)
        first = need(shapes, "unet1.conv1.conv.0.weight", 4)[1]
        pro = "pro" in shapes
        if "conv_final.weight" in shapes:
            out = need(shapes, "conv_final.weight", 4)[0] // 4
            fast = out * 4 == first and not pro
            return {"in_channels": first // 4 if fast else first, "out_channels": out,
                    "scale": 2 if fast else 4, "pro": pro, "fast": fast}
        bottom = need(shapes, "unet1.conv_bottom.weight", 4)
        if bottom[2] not in (4, 5):
            raise NoMatch(f"unet1.conv_bottom has a {bottom[2]}x{bottom[3]} kernel: not x2's 4 or "
                          f"x3's 5")
        return {"in_channels": first, "out_channels": need(shapes, "unet2.conv_bottom.weight", 4)[0],
                "scale": 3 if bottom[2] == 5 else 2, "pro": pro, "fast": False}

    @staticmethod
    def card(spec: dict):
        """Two U-Nets (and conv_final for x4 and fast), counted layer by layer. Any input runs: it
        is padded to at least 32 pixels (40 fast) and a multiple, plus a reflected border (18,
        14, 19 pixels; 38 fast): the largest array, 64 features at twice (x3: three times) the
        padded size, is bounded at the smallest such input. Its ONNX graph holds for one size
        below 32 pixels (the padding by replication is size-dependent)."""
        s, cin, cout, fast = spec["scale"], spec["in_channels"], spec["out_channels"], spec["fast"]

        def unet_conv(a, mid, b, se):
            return conv(a, mid) + conv(mid, b) + (conv(b, b // 8, 1) + conv(b // 8, b, 1) if se else 0)

        def unet1(a, b, k):
            return (unet_conv(a, 32, 64, False) + conv(64, 64, 2) + unet_conv(64, 128, 64, True)
                    + conv(64, 64, 2) + conv(64, 64) + conv(64, b, k))

        def unet2(a, b):
            return (unet_conv(a, 32, 64, False) + conv(64, 64, 2) + unet_conv(64, 64, 128, True)
                    + conv(128, 128, 2) + unet_conv(128, 256, 128, True) + conv(128, 128, 2)
                    + unet_conv(128, 64, 64, True) + conv(64, 64, 2) + conv(64, 64) + conv(64, b))
        if fast or s == 4:
            params = unet1(cin * (4 if fast else 1), 64, 4) + unet2(64, 64) + conv(64, 4 * cout)
        else:
            params = unet1(cin, cout, 5 if s == 3 else 4) + unet2(cin, cout)
        minimum = _FAST_MINIMUM if fast else _MINIMUM
        multiple = 4 if fast else _MULTIPLE[s]
        border = 38 if fast else _BORDER[s]
        grow = 3 if s == 3 else 2
        side = minimum + multiple + 2 * border  # the padded side of the smallest input, at most
        act = -(-64 * grow * grow * side * side // (minimum * minimum))
        return image_card(s, cin, cout, params, max(act, 4 * cout * s * s), pads_to=multiple,
                          pad_minimum=minimum, channel_keys=("in_channels", "out_channels"))
