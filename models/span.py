"""SPAN (Wan et al., "Swift Parameter-free Attention Network for Efficient Super-Resolution", CVPRW
2024, the NTIRE 2024 efficient-SR winner; hongyuanyu/SPAN's span_arch.py as spandrel 0.4.2 and
traiNNer-redux read it): conv_1 -> num_blocks SPABs -> conv_2 -> conv_cat over four features ->
pixel-shuffle upsampler. A SPAB is three Conv3XC with SiLU between them and the parameter-free
attention (out3 + x) * (sigmoid(out3) - 0.5).

Conv3XC is a re-parameterisable 3x3 convolution. In train() it runs its branches: pad by 1 (zeros),
1x1 (c_in -> 2 c_in), 3x3 without padding (-> 2 c_out), 1x1 (-> c_out), plus a 1x1 skip `sk` on the
unpadded input. In eval() it runs one 3x3 convolution, `eval_conv`, whose weights it first fuses
from the branches (the original's update_params, on every eval forward). The two agree everywhere,
the border included: padding before the first 1x1 puts that conv's bias on the padded ring, which
is what the fused bias (the first bias through every tap) assumes. eval_conv's parameters are not
trained (requires_grad False, as the original's).

Published files come in two layouts: with the branches and eval_conv (the training checkpoints
spandrel reads), and fused, eval_conv alone (the NTIRE challenge's deployed form): `deploy=True`
builds that one, whose eval_conv is an ordinary trainable 3x3 convolution in both modes.
"""
from __future__ import annotations

import numpy as np

import framework.functional as F
from framework import nn
from framework.check import flag, int_arg, number
from framework.detect import NoMatch, need, split_shuffle
from framework.registry import MODELS
from framework.card import conv, image_card

from ._blocks import channel_mean

_RGB_MEAN = (0.4488, 0.4371, 0.4040)


class Conv3XC(nn.Module):
    """Re-parameterisable 3x3 convolution (N, c_in, H, W) -> (N, c_out, H, W) (module docstring);
    gain: the branches' expansion (SPAN: 2); deploy: eval_conv only."""

    def __init__(self, c_in: int, c_out: int, gain: int = 2, deploy: bool = False):
        super().__init__()
        self.deploy = deploy
        if not deploy:
            self.sk = nn.Conv2d(c_in, c_out, 1)
            self.conv = nn.Sequential(nn.Conv2d(c_in, c_in * gain, 1),
                                      nn.Conv2d(c_in * gain, c_out * gain, 3),
                                      nn.Conv2d(c_out * gain, c_out, 1))
        self.eval_conv = nn.Conv2d(c_in, c_out, 3, padding=1)
        if not deploy:
            self.eval_conv.requires_grad_(False)
            self.update_params()

    def fused(self):
        """(weight, bias) of the one 3x3 convolution the branches make inside the image."""
        w1, w2, w3 = (c.weight.data for c in self.conv)
        b1, b2, b3 = (c.bias.data for c in self.conv)
        # W[o, i] = W3[o, m] w2[m, k] W1[k, i] per tap; the first bias passes through w2's taps
        w3m, w1m = w3[:, :, 0, 0], w1[:, :, 0, 0]
        w = np.tensordot(np.tensordot(w3m, w2, axes=(1, 0)), w1m, axes=(1, 0)).transpose(0, 3, 1, 2)
        b = w3m @ (np.tensordot(w2.sum(axis=(2, 3)), b1, axes=(1, 0)) + b2) + b3
        w = np.array(w, w1.dtype)
        w[:, :, 1, 1] += self.sk.weight.data[:, :, 0, 0]
        return w, (b + self.sk.bias.data).astype(w1.dtype)

    def update_params(self):
        """Write the fused weights into eval_conv (in place: optimisers and state_dict see them).
        The original fuses on every eval() forward; here the fusion is redone only when a branch
        weight or eval_conv changed since the last one (a copy of each is kept to compare): the
        same weights, without a dozen small products per layer per image."""
        arrays = [p.data for p in self.parameters()]
        last = self.__dict__.get("_fused_from")
        if last is not None and all(a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
                                    for a, b in zip(arrays, last)):
            return
        w, b = self.fused()
        np.copyto(self.eval_conv.weight.data, w)
        np.copyto(self.eval_conv.bias.data, b)
        self._fused_from = [p.data.copy() for p in self.parameters()]

    def forward(self, x):
        if self.deploy:
            return self.eval_conv(x)
        if self.training:
            return self.conv(F.pad(x, (1, 1, 1, 1))) + self.sk(x)
        self.update_params()
        return self.eval_conv(x)


class SPAB(nn.Module):
    """Swift parameter-free attention block: (out, a1) of (N, C, H, W), out = (out3 + x) *
    (sigmoid(out3) - 0.5) with a1 = silu(c1_r(x)), out3 = c3_r(silu(c2_r(a1))). The original returns
    c1_r(x) after its in-place SiLU (nn.SiLU(inplace=True) overwrites it), so a1 is what SPAN's
    conv_cat receives."""

    def __init__(self, channels: int, deploy: bool = False):
        super().__init__()
        self.c1_r = Conv3XC(channels, channels, 2, deploy)
        self.c2_r = Conv3XC(channels, channels, 2, deploy)
        self.c3_r = Conv3XC(channels, channels, 2, deploy)
        self.act1 = nn.SiLU()

    def forward(self, x):
        a1 = self.act1(self.c1_r(x))
        out3 = self.c3_r(self.act1(self.c2_r(a1)))
        return (out3 + x) * (F.sigmoid(out3) - 0.5), a1


@MODELS.register()
class SPAN(nn.Module):
    """SPAN: (N, num_in_ch, h, w) in [0, 1] -> (N, num_out_ch, h*scale, w*scale).

    out_feature = conv_1(x'), x' = (x - rgb_mean) * img_range when norm else x; blocks b_1 ..
    b_n; conv_cat(cat(out_feature, conv_2(b_n), b_1, the last block's out1)) -> 3x3 conv to
    num_out_ch * scale^2 -> pixel shuffle. The output is not shifted back (as the original). out1
    is the last block's silu(c1_r(.)) (SPAB's docstring says why).

    Args:
        num_in_ch, num_out_ch: image channels, default 3.
        feature_channels: features, default 48 (spandrel's default; traiNNer-redux's `span`: 52,
            `span_s`: 48).
        num_blocks: SPABs, default 6 (the paper's; traiNNer-redux's keyword).
        scale: upscaling factor, any int >= 1 (the original's `upscale`), default 4.
        bias: accepted and unused, as in the original (every convolution has a bias).
        norm: subtract rgb_mean and multiply by img_range first (default True, the paper's). False
            registers the original's `no_norm` buffer (zeros(1)), which is how a file says so.
        img_range: default 255; rgb_mean: per-channel mean, default DIV2K's (0.4488, 0.4371,
            0.4040); on one channel the average of the three.
        deploy: srgrad's keyword for the fused layout (module docstring), default False.
    """

    def __init__(self, num_in_ch: int = 3, num_out_ch: int = 3, feature_channels: int = 48,
                 num_blocks: int = 6, scale: int = 4, bias: bool = True, norm: bool = True,
                 img_range: float = 255.0, rgb_mean=_RGB_MEAN, deploy: bool = False):
        super().__init__()
        name = "SPAN"
        num_in_ch = int_arg(name, "num_in_ch", num_in_ch)
        num_out_ch = int_arg(name, "num_out_ch", num_out_ch)
        feat = int_arg(name, "feature_channels", feature_channels)
        self.num_blocks = int_arg(name, "num_blocks", num_blocks)
        self.scale = int_arg(name, "scale", scale)
        flag(name, "bias", bias)
        self.norm = flag(name, "norm", norm)
        self.img_range = number(name, "img_range", img_range, low=0, low_open=True)
        self.mean = channel_mean(name, rgb_mean, num_in_ch)  # a constant, not in the state_dict
        deploy = flag(name, "deploy", deploy)
        if not self.norm:
            self.register_buffer("no_norm", np.zeros(1, np.float32))
        self.conv_1 = Conv3XC(num_in_ch, feat, 2, deploy)
        for i in range(1, self.num_blocks + 1):
            setattr(self, f"block_{i}", SPAB(feat, deploy))
        self.conv_cat = nn.Conv2d(feat * 4, feat, 1)
        self.conv_2 = Conv3XC(feat, feat, 2, deploy)
        self.upsampler = nn.Sequential(nn.Conv2d(feat, num_out_ch * self.scale ** 2, 3, padding=1),
                                       nn.PixelShuffle(self.scale))

    def forward(self, x):
        if self.norm:
            x = (x - self.mean.astype(x.dtype, copy=False)) * self.img_range
        out_feature = self.conv_1(x)
        out, first, mid = out_feature, None, None
        for i in range(1, self.num_blocks + 1):
            out, mid = getattr(self, f"block_{i}")(out)
            first = out if i == 1 else first
        out = self.conv_cat(F.cat([out_feature, self.conv_2(out), first, mid], axis=1))
        return self.upsampler(out)

    @staticmethod
    def detect(shapes: dict, known: dict) -> dict:
        """feature_channels and num_in_ch from conv_1's eval_conv, num_blocks from block_1,
        block_2, ..., num_out_ch and scale from the upsampler's conv (split_shuffle: num_out_ch
        = num_in_ch first, as spandrel), norm from the `no_norm` buffer, deploy from whether the
        branches exist (conv_1.sk). img_range and rgb_mean change no weight: the original's
        defaults unless given (spandrel assumes the same)."""
        feat, num_in_ch = need(shapes, "conv_1.eval_conv.weight", 4)[:2]
        deploy = "conv_1.sk.weight" not in shapes
        blocks = 0
        while f"block_{blocks + 1}.c1_r.eval_conv.weight" in shapes:
            blocks += 1
        if not blocks:
            raise NoMatch("no key block_1.c1_r.eval_conv.weight")
        need(shapes, "conv_cat.weight", 4)
        num_out_ch, scale = split_shuffle(need(shapes, "upsampler.0.weight", 4)[0], num_in_ch, known,
                                          "SPAN")
        return {"num_in_ch": num_in_ch, "num_out_ch": num_out_ch, "feature_channels": feat,
                "num_blocks": blocks, "scale": scale, "norm": "no_norm" not in shapes,
                "deploy": deploy}

    @staticmethod
    def card(spec: dict):
        """conv_1, 3 Conv3XC per block, conv_cat (1x1 on 4 features), conv_2, the upsampler's conv.
        A Conv3XC holds its branches and eval_conv (its fused 3x3, a parameter too), or eval_conv
        alone when deploy. The largest array in eval(): the 4-feature concatenation or the
        upsampler's conv (train() adds the branches' 2F features on the 1-padded input)."""
        s, cin, cout, f, n = (spec[k] for k in ("scale", "num_in_ch", "num_out_ch",
                                                "feature_channels", "num_blocks"))

        def c3xc(a, b):
            branches = conv(a, b, 1) + conv(a, 2 * a, 1) + conv(2 * a, 2 * b, 3) + conv(2 * b, b, 1)
            return conv(a, b, 3) + (0 if spec["deploy"] else branches)
        params = c3xc(cin, f) + 3 * n * c3xc(f, f) + conv(4 * f, f, 1) + c3xc(f, f) + conv(f, cout * s * s)
        return image_card(s, cin, cout, params, max(4 * f, cin, cout * s * s))
