"""ZSSR + KernelGAN on a synthetic non-bicubic case (docs/benchmarks.md, "Zero-shot SR"): an HR crop
of a bundled image blurred by a known anisotropic Gaussian and subsampled x2 (imresize with the
numeric kernel), quantised to 8 bits. Compared by PSNR (Y, border 2) against the HR crop: bicubic
interpolation, a bicubic-trained model (--weights, e.g. srvgg_cpu_x2's best), ZSSR with the
bicubic kernel and ZSSR with KernelGAN's estimate; the kernel error of the estimate. Writes a
side-by-side picture (--figure).

    python scripts/validate_zssr.py --weights runs/srvgg_cpu_x2/weights/best.safetensors \
        --preset fast --figure docs/images/zssr_validation.png
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import framework.functional as F
from framework.autograd import no_grad
from framework.data import degradations as D
from framework.data.degradations.kernel_file import centre_kernel
from framework.engine import load_model
from framework.engine.inference.upscale import bicubic, upscale
from framework.engine.zeroshot.kernelgan import estimate_kernel
from framework.engine.zeroshot.zssr import PRESETS, zssr
from framework.io.image import read_image, write_image
from framework.metrics.psnr import psnr
from framework.tensor import Tensor


def kernel_error(est, true) -> float:
    """||est - true|| / ||true|| after centring both (odd, centre of mass on the centre tap) and
    zero-padding to one size."""
    a, b = centre_kernel(est), centre_kernel(true)
    n = max(a.shape[0], b.shape[0])
    pad = [np.pad(k, (n - k.shape[0]) // 2) for k in (a, b)]
    return float(np.linalg.norm(pad[0] - pad[1]) / np.linalg.norm(pad[1]))


def _three(x):
    return np.repeat(x, 3, axis=0) if x.shape[0] == 1 else x


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--image", default="data/val/gravel.png")
    p.add_argument("--box", type=int, nargs=4, default=(0, 0, 256, 256), help="top left h w")
    p.add_argument("--weights", help="a bicubic-trained x2 model (without: the ZSSR runs only)")
    p.add_argument("--preset", default="fast", choices=tuple(PRESETS))
    p.add_argument("--figure")
    p.add_argument("--cache", default="/tmp/zval")
    args = p.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    top, left, h, w = args.box
    hr = read_image(args.image)[0][:, top:top + h, left:left + w]
    true_k = D.bivariate_Gaussian(13, 2.5, 1.0, 0.5, isotropic=False)
    with no_grad():
        lr = F.imresize(Tensor(hr), 0.5, kernel=true_k).data
    lr = (np.round(np.clip(lr, 0, 1) * 255) / 255).astype(np.float32)
    preset = PRESETS[args.preset]
    results, times = {}, {}
    results["bicubic"] = np.clip(bicubic(lr, 2), 0, 1)
    kpath = cache / f"k_est_{args.preset}.npy"
    if not kpath.exists():
        t = time.perf_counter()
        np.save(kpath, estimate_kernel(lr, preset["kernelgan_iters"]))
        times["KernelGAN"] = time.perf_counter() - t
    k_est = np.load(kpath, allow_pickle=False)
    for name, tag, kernel in (("ZSSR, bicubic kernel", "bicubic", "bicubic"),
                              ("ZSSR, KernelGAN's kernel", "kernelgan", k_est)):
        path = cache / f"zssr_{tag}_{args.preset}.npy"
        if not path.exists():
            t = time.perf_counter()
            np.save(path, zssr(lr, 2, kernel, preset["iters"], preset["crop_size"],
                               say=lambda m: print("  ", m)))
            times[name] = time.perf_counter() - t
        results[name] = np.load(path, allow_pickle=False)
    if args.weights is None:
        return
    model, _ = load_model(args.weights)
    sr = np.clip(upscale(model, _three(lr)), 0, 1)
    results["bicubic-trained model"] = sr.mean(0, keepdims=True) if hr.shape[0] == 1 else sr
    print(f"image {args.image} box {args.box}, kernel: anisotropic Gaussian 13x13 sig (2.5, 1.0) "
          f"theta 0.5; preset {args.preset}")
    for name, sr in results.items():
        print(f"| {name} | {psnr(np.round(sr * 255) / 255, hr, 2):.2f} |")
    print(f"kernel error (relative L2 after centring): KernelGAN {kernel_error(k_est, true_k):.3f}"
          f"; an isotropic Gaussian sigma 1.6: "
          f"{kernel_error(D.bivariate_Gaussian(13, 1.6, 1.6, 0), true_k):.3f}")
    for name, t in times.items():
        print(f"time {name}: {t:.0f} s")
    if args.figure:
        y0, x0, s = 64, 64, 96  # a detail, HR pixels
        near = np.repeat(np.repeat(lr, 2, 1), 2, 2)
        tiles = [near] + [results[k] for k in ("bicubic", "bicubic-trained model",
                                               "ZSSR, KernelGAN's kernel")] + [hr]
        row = np.concatenate([_three(t[:, y0:y0 + s, x0:x0 + s]) for t in tiles], axis=2)
        write_image(args.figure, np.clip(row, 0, 1))


if __name__ == "__main__":
    main()
