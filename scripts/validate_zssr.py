"""Blind zero-shot SR, validated (issue 43, docs/benchmarks.md): a DIV2KRK-style set built from
bundled images, and on every case PSNR-Y (border = scale) against the HR crop for

- bicubic interpolation (MATLAB's imresize),
- the bicubic-trained models given with --model NAME=WEIGHTS (e.g. srvgg_cpu_x2's; their scale is
  the file's; a model whose scale is not the case's is skipped),
- ZSSR with the bicubic kernel (`srgrad-zssr`'s `--kernel bicubic`),
- ZSSR blind (`--kernel estimate`: KernelGAN, then the guard of engine/zeroshot/kernel_guard.py;
  when it falls back, the result *is* the bicubic-kernel run, same seed),
- with --unguarded, ZSSR with KernelGAN's estimate whatever the guard says (`--no-guard`),
- ZSSR with the true kernel (the oracle; x2 stages with the x2 kernel, the x4 kernel being its
  analytic composition),

plus the estimate's kernel error against the true x2 kernel (relative L2 after centring; for a
bicubic control: against MATLAB's bicubic kernel), its orientation, widths and the guard's
confidence. Per-case lines, then the median of every method, its wins over the best
bicubic-trained model, and the blind mode's worst loss against ZSSR-bicubic on the bicubic
controls (the issue's bound: 0.3 dB).

The set (`build_cases`): from each image (--images; default the 2 held-out images of data/val, not
seen by the bicubic-trained models) --crops HR crops of --size pixels (evenly spaced along the
diagonal), and for every crop and scale:
- --gaussians anisotropic Gaussians drawn as DIV2KRK (KernelGAN's paper, section 5: 11x11, the
  covariance's eigenvalues U(0.35, 5), the angle U(0, pi), each tap times 1 + U(-0.25, 0.25), then
  centred and normalised); x4: KernelGAN's analytic_kernel of the x2 one;
- one bicubic control (MATLAB's imresize) unless --no-control;
- --motion linear motion trails (--motion-length pixels at a random angle, antialiased), not
  Gaussian: beyond KernelGAN's model, reported apart.
LR images are rounded to 8 bits. Everything is drawn from --seed; every result is cached in
--cache (case, method and settings in the name): a rerun with more cases reuses what is done.

    srgrad-train configs/srvgg_cpu_x2.yaml
    srgrad-train configs/srvgg_cpu_x2.yaml --set scale=4 --set name=srvgg_cpu_x4
    python scripts/validate_zssr.py --scales 2 4 --preset fast --unguarded \\
        --model srvgg_cpu_x2=runs/srvgg_cpu_x2/net_best.safetensors \\
        --model srvgg_cpu_x4=runs/srvgg_cpu_x4/net_best.safetensors

The bicubic-trained models (docs/benchmarks.md has their cost): the two `srgrad-train` commands
above; any other x2/x4 CPU config likewise. `--shard I/N` splits the cases over N processes
(each with NUMBA_NUM_THREADS=1 on a 2-core machine: ZSSR gains 1.5x from a second thread, two
one-thread processes 2x); a last run without it prints the whole table from the cache.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

from framework.data.degradations.kernel_file import analytic_kernel, centre_kernel
from framework.data.degradations.kernels import mesh_grid, pdf2, sigma_matrix2
from framework.data.zssr import downscale
from framework.engine.inference.upscale import bicubic, upscale
from framework.engine.zeroshot.kernel_guard import bicubic_kernel, kernel_error, kernel_guard
from framework.engine.zeroshot.kernelgan import estimate_kernel
from framework.engine.zeroshot.zssr import PRESETS, zssr
from framework.io.image import read_image
from framework.metrics.psnr import psnr

DEFAULT_IMAGES = ("data/val/gravel.png", "data/val/ihc.png")


# -- the set --------------------------------------------------------------------------------------
def div2krk_kernel(rng, size: int = 11, var_range=(0.35, 5.0), noise: float = 0.25) -> np.ndarray:
    """A DIV2KRK x2 kernel (module docstring): (size, size), centred, sum 1."""
    lam1, lam2 = rng.uniform(*var_range), rng.uniform(*var_range)
    theta = rng.uniform(0.0, np.pi)
    grid, _, _ = mesh_grid(size)
    k = pdf2(sigma_matrix2(np.sqrt(lam1), np.sqrt(lam2), theta), grid)
    k = k * (1.0 + rng.uniform(-noise, noise, k.shape))
    return centre_kernel(k)


def motion_kernel(rng, length: float = 7.0, size: int = 11) -> np.ndarray:
    """A straight motion trail of `length` pixels at a random angle: points along the segment
    splatted bilinearly, centred, sum 1."""
    angle = rng.uniform(0.0, np.pi)
    k = np.zeros((size, size))
    c = size // 2
    for t in np.linspace(-length / 2, length / 2, 8 * int(np.ceil(length)) + 1):
        x, y = c + t * np.cos(angle), c + t * np.sin(angle)
        x0, y0 = int(np.floor(x)), int(np.floor(y))
        fx, fy = x - x0, y - y0
        for dy, dx, w in ((0, 0, (1 - fy) * (1 - fx)), (0, 1, (1 - fy) * fx),
                          (1, 0, fy * (1 - fx)), (1, 1, fy * fx)):
            k[y0 + dy, x0 + dx] += w
    return centre_kernel(k)


def build_cases(args) -> list[dict]:
    """The cases: dict(name, hr (3, S, S), scale, kind, k2 (the x2 kernel, or "bicubic"))."""
    rng = np.random.default_rng(args.seed)
    if args.size // max(args.scales) < 64:
        sys.exit(f"--size {args.size}: the x{max(args.scales)} LR image would be smaller than "
                 f"KernelGAN's 64-pixel crops (at least {64 * max(args.scales)})")
    cases = []
    for path in args.images:
        img, _ = read_image(path)
        img = np.repeat(img, 3, axis=0) if img.shape[0] == 1 else img
        h, w = img.shape[1:]
        if min(h, w) < args.size:
            sys.exit(f"--images {path}: {w}x{h} is smaller than --size {args.size}")
        for c in range(args.crops):
            f = (c + 1) / (args.crops + 1)
            top, left = int(f * (h - args.size)), int(f * (w - args.size))
            hr = img[:, top:top + args.size, left:left + args.size]
            base = f"{Path(path).stem}@{top},{left}"
            for scale in args.scales:
                kinds = [("gauss", div2krk_kernel(rng)) for _ in range(args.gaussians)]
                kinds += [("motion", motion_kernel(rng, args.motion_length))
                          for _ in range(args.motion)]
                kinds += [] if args.no_control else [("bicubic", "bicubic")]
                for i, (kind, k2) in enumerate(kinds):
                    cases.append({"name": f"{base} x{scale} {kind}{i}", "hr": hr, "scale": scale,
                                  "kind": kind, "k2": k2})
    return cases


def degrade(hr, scale, k2):
    """The LR image: MATLAB's bicubic, or the kernel (x4: analytic_kernel(k2)), 8 bits."""
    if isinstance(k2, str):
        lr = downscale(hr, scale)
    else:
        lr = downscale(hr, scale, k2 if scale == 2 else analytic_kernel(k2))
    return (np.round(np.clip(lr, 0, 1) * 255) / 255).astype(np.float32)


# -- the methods ----------------------------------------------------------------------------------
class Cache:
    """Results as .npy files named by case and method (a rerun reuses them)."""

    def __init__(self, root):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def get(self, key: str, make):
        name = hashlib.sha1(key.encode()).hexdigest()[:16] + ".npy"
        path = self.root / name
        if path.exists():
            return np.load(path, allow_pickle=False)
        value = np.asarray(make())
        np.save(path, value)
        return value


def run_case(case, args, models, cache, settings):
    lr, hr, s = degrade(case["hr"], case["scale"], case["k2"]), case["hr"], case["scale"]
    tag = f"{case['name']}|{args.seed}|{hashlib.sha1(lr.tobytes()).hexdigest()[:8]}"
    z = f"{settings['iters']},{settings['crop_size']},{args.bp_iters}"

    def run_zssr(kernel, label):
        return cache.get(f"{tag}|zssr|{label}|{z}", lambda: zssr(
            lr, s, kernel, settings["iters"], settings["crop_size"], bp_iters=args.bp_iters,
            seed=args.seed, say=lambda m: print(f"    {label}: {m}", flush=True), progress=False))

    out, times = {"bicubic": np.clip(bicubic(lr, s), 0, 1)}, {}
    for name, (model, scale) in models.items():
        if scale == s:
            out[name] = np.clip(upscale(model, lr), 0, 1)
    t = time.perf_counter()
    out["zssr-bicubic"] = run_zssr("bicubic", "bicubic")
    times["zssr"] = time.perf_counter() - t
    t = time.perf_counter()
    runs = settings["restarts"]
    kg = f"{settings['kernelgan_iters']}" + (f"x{runs}" if runs > 1 else "")  # iterations x runs
    k_est = cache.get(f"{tag}|kernelgan|{kg}", lambda: estimate_kernel(
        lr, settings["kernelgan_iters"], args.seed, restarts=runs))
    times["kernelgan"] = time.perf_counter() - t
    decision = kernel_guard(lr, k_est)
    if decision.use_estimate or args.unguarded:
        unguarded = run_zssr(k_est, f"estimate{kg}")
    out["zssr-blind"] = unguarded if decision.use_estimate else out["zssr-bicubic"]
    if args.unguarded:
        out["zssr-unguarded"] = unguarded
    out["zssr-oracle"] = out["zssr-bicubic"] if isinstance(case["k2"], str) else \
        run_zssr(case["k2"], "oracle")
    true2 = bicubic_kernel(2) if isinstance(case["k2"], str) else case["k2"]
    scores = {m: psnr(sr, hr, s) for m, sr in out.items()}
    if args.figure and not Path(args.figure).exists():
        write_figure(args.figure, lr, s, out, hr)
    return scores, kernel_error(k_est, true2), decision, times


def write_figure(path, lr, scale, out, hr, y0=64, x0=64, side=96):
    """LR (nearest-neighbour), each method's SR, HR: a `side` square at (y0, x0) (HR pixels)."""
    from framework.io.image import write_image
    near = np.repeat(np.repeat(lr, scale, 1), scale, 2)
    tiles = [near, *out.values(), hr]
    write_image(path, np.concatenate([t[:, y0:y0 + side, x0:x0 + side] for t in tiles], axis=2))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", nargs="+", default=list(DEFAULT_IMAGES))
    p.add_argument("--crops", type=int, default=2, help="HR crops per image (default 2)")
    p.add_argument("--size", type=int, default=256, help="HR crop side (default 256)")
    p.add_argument("--scales", type=int, nargs="+", default=[2, 4], choices=(2, 4))
    p.add_argument("--gaussians", type=int, default=2, help="DIV2KRK kernels per crop and scale")
    p.add_argument("--motion", type=int, default=1, help="motion trails per crop and scale")
    p.add_argument("--motion-length", type=float, default=7.0)
    p.add_argument("--no-control", action="store_true", help="no bicubic control cases")
    p.add_argument("--model", action="append", default=[], metavar="NAME=WEIGHTS",
                   help="a bicubic-trained model (repeatable)")
    p.add_argument("--weights", help="old spelling of --model bicubic-trained=WEIGHTS")
    p.add_argument("--image", help="old spelling of --images IMAGE")
    p.add_argument("--figure", help="a PNG: the first case's 96x96 HR detail, side by side: LR "
                   "(nearest), each method, HR")
    p.add_argument("--preset", default="fast", choices=tuple(PRESETS))
    p.add_argument("--iters", type=int, help="ZSSR iterations per stage (default: the preset's)")
    p.add_argument("--kernelgan-iters", type=int, help="default: the preset's")
    p.add_argument("--kernelgan-restarts", type=int, help="KernelGAN runs averaged (default: the "
                   "preset's)")
    p.add_argument("--shard", default="1/1", metavar="I/N", help="run only cases I, I + N, ... "
                   "(1-based; N processes share the cache: a last run without --shard prints "
                   "the whole table from it)")
    p.add_argument("--bp-iters", type=int, default=10)
    p.add_argument("--unguarded", action="store_true", help="also ZSSR with the estimate "
                   "whatever the guard says")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default="/tmp/srgrad_validate_zssr")
    args = p.parse_args()
    if args.weights:
        args.model.append(f"bicubic-trained={args.weights}")
    if args.image:
        args.images = [args.image]
    settings = dict(PRESETS[args.preset])
    if args.iters:
        settings["iters"] = args.iters
    if args.kernelgan_iters:
        settings["kernelgan_iters"] = args.kernelgan_iters
    if args.kernelgan_restarts:
        settings["restarts"] = args.kernelgan_restarts
    try:
        shard, shards = (int(v) for v in args.shard.split("/"))
        assert 1 <= shard <= shards
    except (ValueError, AssertionError):
        sys.exit(f"--shard {args.shard}: must be I/N with 1 <= I <= N")
    models = {}
    for spec in args.model:
        from framework.engine.inference.loading import load_model
        name, _, path = spec.partition("=")
        model, info = load_model(path)
        models[name] = (model, int(info.get("scale") or 2))
    cache, rows = Cache(args.cache), []
    print(f"preset {args.preset} (ZSSR {settings['iters']} iterations, crops "
          f"{settings['crop_size']}; KernelGAN {settings['kernelgan_iters']} x "
          f"{settings['restarts']}), seed {args.seed}")
    for case in build_cases(args)[shard - 1::shards]:
        t = time.perf_counter()
        scores, kerr, decision, times = run_case(case, args, models, cache, settings)
        rows.append((case, scores, kerr, decision))
        print(f"| {case['name']} | " + " | ".join(f"{m} {v:.2f}" for m, v in scores.items()) +
              f" | kernel error {kerr:.3f} | {decision.describe()} | "
              f"{time.perf_counter() - t:.0f} s |", flush=True)
    summarise(rows, models)


def summarise(rows, models):
    for scale in sorted({c["scale"] for c, *_ in rows}):
        for kind in ("gauss", "bicubic", "motion", "all"):
            sel = [r for r in rows if r[0]["scale"] == scale and kind in ("all", r[0]["kind"])]
            if not sel:
                continue
            methods = list(sel[0][1])
            med = {m: float(np.median([r[1][m] for r in sel])) for m in methods}
            ref = [m for m in methods if m in models]
            line = f"x{scale} {kind} ({len(sel)} cases): median PSNR-Y " + ", ".join(
                f"{m} {v:.2f}" for m, v in med.items())
            line += f"; median kernel error {np.median([r[2] for r in sel]):.3f}"
            line += f"; guard kept the estimate in {sum(r[3].use_estimate for r in sel)}"
            if ref:
                best = [max(r[1][m] for m in ref) for r in sel]
                line += f"; blind beats the best bicubic-trained model in " \
                        f"{sum(r[1]['zssr-blind'] > b for r, b in zip(sel, best))}"
            if kind == "bicubic":
                loss = max(r[1]["zssr-bicubic"] - r[1]["zssr-blind"] for r in sel)
                line += f"; worst loss of blind vs ZSSR-bicubic {loss:.2f} dB (bound 0.3)"
            print(line)


if __name__ == "__main__":
    main()
