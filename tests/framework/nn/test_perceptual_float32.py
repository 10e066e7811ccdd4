"""Issue 31: VGG19's features in float32 against float64 (random He weights in torchvision's file
layout, two 64 px images), the perceptual loss's inputs. With Winograd F(4, 3) on the 64-channel
layers their error was 7e-6 of each layer's largest value (torch's float32: at most 8e-7); the
loss's gradient to the generator changes wherever a float32 error flips a decision (an L1 sign, a
max-pool winner, a ReLU), so the flips came ~10x as often (docs/benchmarks.md)."""
import numpy as np
import pytest

import framework as sg
from framework import nn

torch = pytest.importorskip("torch")
from tests.framework.nn.test_perceptual import BASICSR_VGG19, CFG19, images, save_vgg, torch_features  # noqa: E402


def test_every_vgg19_feature_stays_near_float64(tmp_path):
    path = save_vgg(tmp_path / "vgg19-dcbb9e9d.pth", torch_features(CFG19))
    layers = [name for name in BASICSR_VGG19 if name.startswith("conv")]
    a = images((2, 3, 64, 64))[0].astype(np.float32)
    features = {}
    for dt in (np.float64, np.float32):
        vgg = nn.VGGFeatureExtractor(layers, weights=path).to(dt)
        with sg.no_grad():
            features[dt] = {k: v.numpy() for k, v in vgg(sg.tensor(a.astype(dt))).items()}
    errors = {k: np.abs(features[np.float32][k] - features[np.float64][k]).max()
              / np.abs(features[np.float64][k]).max() for k in layers}
    assert max(errors.values()) < 1e-6, errors
