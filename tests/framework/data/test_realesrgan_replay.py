"""`degrade` replayed step by step from the public degradation primitives, in Real-ESRGAN's
feed_data order and with BasicSR's draw order, from the same generator: the LR image must be
bit-identical, with either JPEG. This pins every draw and every op of the pipeline, whatever shape
degrade's own code takes (with Pillow's JPEG it held before and after the two orders became
records of one type)."""
import math

import numpy as np
import pytest

from framework import functional as F
from framework.autograd import no_grad
from framework.data import DegradationOptions, degrade
from framework.data.degradations import (circular_lowpass_kernel, filter2d, pick,
                                         random_add_gaussian_noise, random_add_jpg_compression,
                                         random_add_poisson_noise, random_mixed_kernels)
from framework.tensor import Tensor

MODES = ("area", "bilinear", "bicubic")


def _kernel(rng, largest, sinc_prob, kinds, probs, sigma, betag, betap):
    sizes = range(7, largest + 1, 2)
    k = sizes[int(rng.integers(len(sizes)))]
    if rng.uniform() < sinc_prob:
        omega = rng.uniform(np.pi / 3, np.pi) if k < 13 else rng.uniform(np.pi / 5, np.pi)
        return circular_lowpass_kernel(omega, k)
    return random_mixed_kernels(kinds, probs, k, sigma, sigma, (-math.pi, math.pi), betag, betap,
                                None, rng=rng)


def _factor(rng, probs, low_high):
    way = pick(rng, ("up", "down", "keep"), probs)
    return (rng.uniform(1, low_high[1]) if way == "up" else
            rng.uniform(low_high[0], 1) if way == "down" else 1.0)


def _resize(img, mode, **size):
    with no_grad():
        return F.interpolate(Tensor(img[None]), mode=mode, **size).data[0]


def _noise(rng, img, gaussian_prob, sigma_range, poisson_range, gray_prob):
    if rng.uniform() < gaussian_prob:
        return random_add_gaussian_noise(img, sigma_range, gray_prob, rng=rng)
    return random_add_poisson_noise(img, poisson_range, gray_prob, rng=rng)


def replay(gt, rng, o: DegradationOptions, scale, jpeg):
    h, w = gt.shape[1:]
    # first order: blur, resize (its mode drawn even for a factor of 1), noise, JPEG
    out = filter2d(gt, _kernel(rng, o.blur_kernel_size, o.sinc_prob, o.kernel_list, o.kernel_prob,
                               o.blur_sigma, o.betag_range, o.betap_range))
    factor, mode = _factor(rng, o.resize_prob, o.resize_range), MODES[int(rng.integers(3))]
    if factor != 1.0:
        out = _resize(out, mode, scale_factor=factor)
    out = _noise(rng, out, o.gaussian_noise_prob, o.noise_range, o.poisson_scale_range,
                 o.gray_noise_prob)
    out = random_add_jpg_compression(out, o.jpeg_range, rng=rng, method=jpeg)
    # second order
    if rng.uniform() < o.second_blur_prob:
        out = filter2d(out, _kernel(rng, o.blur_kernel_size2, o.sinc_prob2, o.kernel_list2,
                                    o.kernel_prob2, o.blur_sigma2, o.betag_range2, o.betap_range2))
    factor = _factor(rng, o.resize_prob2, o.resize_range2)
    out = _resize(out, MODES[int(rng.integers(3))],
                  size=(int(h / scale * factor), int(w / scale * factor)))
    out = _noise(rng, out, o.gaussian_noise_prob2, o.noise_range2, o.poisson_scale_range2,
                 o.gray_noise_prob2)

    def resize_sinc(img):
        img = _resize(img, MODES[int(rng.integers(3))], size=(h // scale, w // scale))
        if rng.uniform() < o.final_sinc_prob:
            sizes = range(7, o.blur_kernel_size + 1, 2)
            k = sizes[int(rng.integers(len(sizes)))]
            img = filter2d(img, circular_lowpass_kernel(rng.uniform(np.pi / 3, np.pi), k))
        return img

    if rng.uniform() < 0.5:
        out = random_add_jpg_compression(resize_sinc(out), o.jpeg_range2, rng=rng, method=jpeg)
    else:
        out = resize_sinc(random_add_jpg_compression(out, o.jpeg_range2, rng=rng, method=jpeg))
    return np.clip(np.round(out * 255), 0, 255) / out.dtype.type(255)


SINC = dict(sinc_prob=0.5, sinc_prob2=0.5, kernel_list2=["aniso", "plateau_iso"],
            kernel_prob2=[0.5, 0.5], blur_kernel_size2=15)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("options, channels, dtype", [
    ({}, 3, np.float32), (SINC, 3, np.float32), ({"gray_noise_prob": 1.0}, 1, np.float32),
    ({}, 3, np.float64)])
def test_degrade_with_pillow_is_the_step_by_step_replay(seed, options, channels, dtype):
    gt = np.random.default_rng(100 + seed).random((channels, 48, 40)).astype(dtype)
    o = DegradationOptions.from_dict(options)
    want = replay(gt, np.random.default_rng(seed), o, 4, "pillow")
    got = degrade(gt, np.random.default_rng(seed), options, 4, jpeg="pillow")
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("options, channels", [({}, 3), ({"gray_noise_prob": 1.0}, 1)])
def test_degrade_with_diffjpeg_is_the_step_by_step_replay(seed, options, channels):
    gt = np.random.default_rng(100 + seed).random((channels, 48, 40)).astype(np.float32)
    o = DegradationOptions.from_dict(options)
    want = replay(gt, np.random.default_rng(seed), o, 4, "diffjpeg")
    got = degrade(gt, np.random.default_rng(seed), options, 4)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
