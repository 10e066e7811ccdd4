"""PyTorch twins of the discriminators (BasicSR discriminator_arch.py, Real-ESRGAN
discriminator_arch.py): torch's default init, torch.nn.utils.spectral_norm, the same keys."""
from __future__ import annotations

from torch import nn
from torch.nn import functional as F

from . import register


@register
class VGGStyleDiscriminator(nn.Module):
    def __init__(self, num_in_ch, num_feat, input_size=128):
        super().__init__()
        self.input_size = input_size
        feats = [num_feat, num_feat * 2, num_feat * 4, num_feat * 8, num_feat * 8]
        feats += [num_feat * 8] if input_size == 256 else []
        self.stages = len(feats)
        self.conv0_0 = nn.Conv2d(num_in_ch, num_feat, 3, 1, 1, bias=True)
        self.conv0_1 = nn.Conv2d(num_feat, num_feat, 4, 2, 1, bias=False)
        self.bn0_1 = nn.BatchNorm2d(num_feat, affine=True)
        for i in range(1, self.stages):
            setattr(self, f"conv{i}_0", nn.Conv2d(feats[i - 1], feats[i], 3, 1, 1, bias=False))
            setattr(self, f"bn{i}_0", nn.BatchNorm2d(feats[i], affine=True))
            setattr(self, f"conv{i}_1", nn.Conv2d(feats[i], feats[i], 4, 2, 1, bias=False))
            setattr(self, f"bn{i}_1", nn.BatchNorm2d(feats[i], affine=True))
        self.linear1 = nn.Linear(num_feat * 8 * 4 * 4, 100)
        self.linear2 = nn.Linear(100, 1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)

    def forward(self, x):
        assert x.size(2) == self.input_size
        feat = self.lrelu(self.conv0_0(x))
        feat = self.lrelu(self.bn0_1(self.conv0_1(feat)))
        for i in range(1, self.stages):
            feat = self.lrelu(getattr(self, f"bn{i}_0")(getattr(self, f"conv{i}_0")(feat)))
            feat = self.lrelu(getattr(self, f"bn{i}_1")(getattr(self, f"conv{i}_1")(feat)))
        feat = feat.view(feat.size(0), -1)
        return self.linear2(self.lrelu(self.linear1(feat)))


@register
class UNetDiscriminatorSN(nn.Module):
    def __init__(self, num_in_ch, num_feat=64, skip_connection=True):
        super().__init__()
        self.skip_connection = skip_connection
        sn, f = nn.utils.spectral_norm, num_feat
        self.conv0 = nn.Conv2d(num_in_ch, f, kernel_size=3, stride=1, padding=1)
        self.conv1 = sn(nn.Conv2d(f, f * 2, 4, 2, 1, bias=False))
        self.conv2 = sn(nn.Conv2d(f * 2, f * 4, 4, 2, 1, bias=False))
        self.conv3 = sn(nn.Conv2d(f * 4, f * 8, 4, 2, 1, bias=False))
        self.conv4 = sn(nn.Conv2d(f * 8, f * 4, 3, 1, 1, bias=False))
        self.conv5 = sn(nn.Conv2d(f * 4, f * 2, 3, 1, 1, bias=False))
        self.conv6 = sn(nn.Conv2d(f * 2, f, 3, 1, 1, bias=False))
        self.conv7 = sn(nn.Conv2d(f, f, 3, 1, 1, bias=False))
        self.conv8 = sn(nn.Conv2d(f, f, 3, 1, 1, bias=False))
        self.conv9 = nn.Conv2d(f, 1, 3, 1, 1)

    def forward(self, x):
        def act(t):
            return F.leaky_relu(t, negative_slope=0.2, inplace=True)

        def up(t):
            return F.interpolate(t, scale_factor=2, mode="bilinear", align_corners=False)

        x0 = act(self.conv0(x))
        x1 = act(self.conv1(x0))
        x2 = act(self.conv2(x1))
        x3 = act(self.conv3(x2))
        x4 = act(self.conv4(up(x3)))
        x4 = x4 + x2 if self.skip_connection else x4
        x5 = act(self.conv5(up(x4)))
        x5 = x5 + x1 if self.skip_connection else x5
        x6 = act(self.conv6(up(x5)))
        x6 = x6 + x0 if self.skip_connection else x6
        out = act(self.conv7(x6))
        out = act(self.conv8(out))
        return self.conv9(out)
