"""The discriminators of BasicSR's GAN recipes, registered in MODELS beside the generators (as BasicSR
registers them in ARCH_REGISTRY), with BasicSR's constructor keywords and parameter names, so a
`network_d:` block and a `net_d_*.pth` (e.g. RealESRGAN_x4plus_netD.pth) load as they are:

- VGGStyleDiscriminator (basicsr/archs/discriminator_arch.py; SRGAN, ESRGAN): strided convolutions
  with batch norm down to 4x4, then two linear layers -> one logit per image.
- UNetDiscriminatorSN (realesrgan/archs/discriminator_arch.py; Real-ESRGAN): a U-Net with spectral
  normalisation on its inner convolutions -> one logit per pixel.

Both start from torch's default initialisation, as BasicSR's (neither calls default_init_weights).
They take no `scale` and have no `detect` rule: they judge images, they do not upscale them.
"""
from __future__ import annotations

import framework.functional as F
from framework import nn
from framework.check import choice, flag, int_arg
from framework.registry import MODELS
from framework.card import Card, SizeRequirements, conv, linear, norm

__all__ = ["VGGStyleDiscriminator", "UNetDiscriminatorSN"]


def _lrelu(x):
    return F.leaky_relu(x, 0.2)


@MODELS.register()
class VGGStyleDiscriminator(nn.Module):
    """VGG-style discriminator: (N, num_in_ch, S, S) -> (N, 1) logits, S = input_size.

    conv0_0 (3x3, bias) -> LeakyReLU(0.2); then stages i = 0..4 (and 5 when input_size is 256):
    [conv i_0 (3x3) -> bn i_0 -> lrelu] (not in stage 0) and conv i_1 (4x4, stride 2) -> bn i_1 ->
    lrelu, halving the size; features num_feat, 2F, 4F, 8F, 8F (, 8F); convolutions after the first
    have no bias. Then flatten (8F x 4 x 4) -> linear1 (100) -> lrelu -> linear2 (1).

    Args:
        num_in_ch: image channels (BasicSR: no default; 3 for RGB).
        num_feat: base features (BasicSR: no default; 64 in its configs).
        input_size: 128 (default) or 256; the input must be input_size x input_size.
    """

    def __init__(self, num_in_ch: int, num_feat: int, input_size: int = 128):
        super().__init__()
        name = "VGGStyleDiscriminator"
        num_in_ch = int_arg(name, "num_in_ch", num_in_ch)
        num_feat = int_arg(name, "num_feat", num_feat)
        self.input_size = choice(name, "input_size", input_size, (128, 256))
        feats = [num_feat, num_feat * 2, num_feat * 4, num_feat * 8, num_feat * 8]
        if self.input_size == 256:
            feats.append(num_feat * 8)
        self.stages = len(feats)
        # registration order = BasicSR's attribute order = the state_dict order
        self.conv0_0 = nn.Conv2d(num_in_ch, num_feat, 3, 1, 1, bias=True)
        self.conv0_1 = nn.Conv2d(num_feat, num_feat, 4, 2, 1, bias=False)
        self.bn0_1 = nn.BatchNorm2d(num_feat, affine=True)
        for i in range(1, self.stages):
            cin, cout = feats[i - 1], feats[i]
            setattr(self, f"conv{i}_0", nn.Conv2d(cin, cout, 3, 1, 1, bias=False))
            setattr(self, f"bn{i}_0", nn.BatchNorm2d(cout, affine=True))
            setattr(self, f"conv{i}_1", nn.Conv2d(cout, cout, 4, 2, 1, bias=False))
            setattr(self, f"bn{i}_1", nn.BatchNorm2d(cout, affine=True))
        self.linear1 = nn.Linear(num_feat * 8 * 4 * 4, 100)
        self.linear2 = nn.Linear(100, 1)

    @staticmethod
    def card(spec: dict) -> Card:
        """Strided convs with batch norm (no biases after the first) down to 4x4, two linears:
        one logit per image of exactly input_size x input_size."""
        c, f, s = spec["num_in_ch"], spec["num_feat"], spec["input_size"]
        feats = [f, 2 * f, 4 * f, 8 * f, 8 * f] + ([8 * f] if s == 256 else [])
        params = conv(c, f) + conv(f, f, 4, bias=False) + norm(f) + sum(
            conv(a, b, bias=False) + conv(b, b, 4, bias=False) + 2 * norm(b)
            for a, b in zip(feats, feats[1:])) + linear(8 * f * 16, 100) + linear(100, 1)
        return Card("discriminator", c, 1, 1, params, max(f, c),
                    SizeRequirements(s, s, True, s), channel_keys=("num_in_ch",),
                    out_size=lambda h, w: ())

    def forward(self, x):
        s = self.input_size
        if x.ndim != 4 or tuple(x.shape[2:]) != (s, s):
            raise ValueError(f"VGGStyleDiscriminator: input must be (N, C, {s}, {s}) (input_size="
                             f"{s}), got {tuple(x.shape)}")
        feat = _lrelu(self.conv0_0(x))
        feat = _lrelu(self.bn0_1(self.conv0_1(feat)))
        for i in range(1, self.stages):
            feat = _lrelu(getattr(self, f"bn{i}_0")(getattr(self, f"conv{i}_0")(feat)))
            feat = _lrelu(getattr(self, f"bn{i}_1")(getattr(self, f"conv{i}_1")(feat)))
        feat = F.reshape(feat, (feat.shape[0], -1))  # (N, 8F * 4 * 4)
        return self.linear2(_lrelu(self.linear1(feat)))


@MODELS.register()
class UNetDiscriminatorSN(nn.Module):
    """Real-ESRGAN's U-Net discriminator with spectral norm: (N, num_in_ch, H, W) -> (N, 1, H, W).

    conv0 (3x3) -> three 4x4 stride-2 convolutions (F -> 2F -> 4F -> 8F), then three times: bilinear
    2x upsampling (align_corners=False) -> 3x3 convolution (8F -> 4F -> 2F -> F), plus the encoder
    feature of the same size when skip_connection; then conv7, conv8 (F -> F) and conv9 (F -> 1).
    LeakyReLU(0.2) after every convolution but the last. conv1..conv8 are spectrally normalised
    (keys convK.weight_orig, convK.weight_u, convK.weight_v) and have no bias; conv0, conv9 are plain.
    With skip_connection, H and W must be multiples of 8 (the upsampled features meet the skips).

    Args:
        num_in_ch: image channels (Real-ESRGAN: no default; 3 for RGB).
        num_feat: base features, default 64.
        skip_connection: add the encoder features in the decoder, default True.
    """

    def __init__(self, num_in_ch: int, num_feat: int = 64, skip_connection: bool = True):
        super().__init__()
        name = "UNetDiscriminatorSN"
        num_in_ch = int_arg(name, "num_in_ch", num_in_ch)
        num_feat = int_arg(name, "num_feat", num_feat)
        self.skip_connection = flag(name, "skip_connection", skip_connection)
        sn = nn.utils.spectral_norm
        f = num_feat
        self.conv0 = nn.Conv2d(num_in_ch, f, 3, 1, 1)
        self.conv1 = sn(nn.Conv2d(f, f * 2, 4, 2, 1, bias=False))
        self.conv2 = sn(nn.Conv2d(f * 2, f * 4, 4, 2, 1, bias=False))
        self.conv3 = sn(nn.Conv2d(f * 4, f * 8, 4, 2, 1, bias=False))
        self.conv4 = sn(nn.Conv2d(f * 8, f * 4, 3, 1, 1, bias=False))
        self.conv5 = sn(nn.Conv2d(f * 4, f * 2, 3, 1, 1, bias=False))
        self.conv6 = sn(nn.Conv2d(f * 2, f, 3, 1, 1, bias=False))
        self.conv7 = sn(nn.Conv2d(f, f, 3, 1, 1, bias=False))
        self.conv8 = sn(nn.Conv2d(f, f, 3, 1, 1, bias=False))
        self.conv9 = nn.Conv2d(f, 1, 3, 1, 1)

    @staticmethod
    def card(spec: dict) -> Card:
        """conv0, three stride-2 convs, three convs after 2x upsamplings, conv7..conv9 (the
        spectral norm's weight_orig is the parameter; u and v are buffers): a logit per pixel.
        Three stride-2 convs need sides of at least 8; with skip_connection multiples of 8
        (without, the output is the input's size rounded down to a multiple of 8)."""
        c, f = spec["num_in_ch"], spec["num_feat"]
        inner = [(f, 2 * f, 4), (2 * f, 4 * f, 4), (4 * f, 8 * f, 4), (8 * f, 4 * f, 3),
                 (4 * f, 2 * f, 3), (2 * f, f, 3), (f, f, 3), (f, f, 3)]
        params = conv(c, f) + sum(conv(a, b, k, bias=False) for a, b, k in inner) + conv(f, 1)
        multiple = 8 if spec["skip_connection"] else 1
        return Card("discriminator", c, 1, 1, params, max(f, c), SizeRequirements(8, multiple),
                    channel_keys=("num_in_ch",), out_size=lambda h, w: (h // 8 * 8, w // 8 * 8))

    def forward(self, x):
        if self.skip_connection and x.ndim == 4 and (x.shape[2] % 8 or x.shape[3] % 8):
            raise ValueError(f"UNetDiscriminatorSN: with skip_connection the input height and width "
                             f"must be multiples of 8 (three stride-2 convolutions, then three 2x "
                             f"upsamplings added to the skips), got {tuple(x.shape)}")
        x0 = _lrelu(self.conv0(x))
        x1 = _lrelu(self.conv1(x0))
        x2 = _lrelu(self.conv2(x1))
        x3 = _lrelu(self.conv3(x2))
        out = x3
        for conv, skip in ((self.conv4, x2), (self.conv5, x1), (self.conv6, x0)):
            out = _lrelu(conv(F.interpolate(out, scale_factor=2, mode="bilinear", align_corners=False)))
            if self.skip_connection:
                out = out + skip
        out = _lrelu(self.conv7(out))
        out = _lrelu(self.conv8(out))
        return self.conv9(out)

