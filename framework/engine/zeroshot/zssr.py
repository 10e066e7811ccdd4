"""ZSSR on one image, end to end (assafshocher/ZSSR's ZSSR.run; KernelGAN's run_zssr), and the
`srgrad-zssr` command.

`zssr(image, scale, kernel, ...)`: for each x2 stage (x2: one; x4: two, ZSSR's gradual
scale_factors [[2, 2], [4, 4]] with the base changed to the first stage's output) the recipe
`zssr` (engine/run/recipes/zssr.py) trains ZSSRNet on the father/son pairs of a ZSSRDataset until its
learning-rate policy ends it (or `iters`), then ZSSR's final_test: the network on the input (with
`tta`, on its 8 rotations/flips, each undone), `bp_iters` back-projections of each output onto the
input (the SR downscaled by the kernel, the difference upscaled by bicubic interpolation and
added), the median of the 8, and `bp_iters` more back-projections of the median. The network's
weights carry over from stage to stage, the learning rate and the policy start afresh (ZSSR's
init_net_for_each_sf False); the stage's output joins the sources of fathers.

The kernel: "bicubic" (MATLAB's imresize), a kernel array / .npy file, or "estimate": KernelGAN's
(engine/zeroshot/kernelgan.py) x2 kernel of the image, used by every x2 stage, unless the guard
(engine/zeroshot/kernel_guard.py: the estimate must explain the image's cross-scale sharpness
clearly better than bicubic) falls back to the bicubic kernel; the command says which, and why,
in one line with the estimate's orientation, widths and confidence (`--no-guard` keeps the
estimate).

The command's default is blind: `--kernel estimate` with the "fast" preset, the setting issue 43's
protocol validated (scripts/validate_zssr.py; docs/benchmarks.md has the table and its cost: on
the median it beats the bicubic-trained CPU models at x2 and x4 and loses nothing on bicubic
images, though single blurred images can lose several dB). An image too small for KernelGAN's
crops (KERNELGAN_MIN_SIDE) then uses the bicubic kernel and says so; `--kernel estimate` given
explicitly refuses it instead.

Presets (docs/benchmarks.md has their cost): "paper" is ZSSR's and KernelGAN's configs (3000
iterations at most, crops of 128, KernelGAN one run of 3000 iterations); "fast" caps ZSSR at 600
iterations on crops of 64 and runs KernelGAN 3 times for 1000 iterations from consecutive seeds,
its kernel the mean of the three (KernelGAN's estimate stops improving after ~1000 iterations,
and the mean of independent runs is nearer the truth than one: issue 43's sweep in
docs/benchmarks.md).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from ... import functional as F
from ...autograd import no_grad
from ...tensor import Tensor
from ..inference.tta import dihedral, undo_dihedral

__all__ = ["PRESETS", "back_projection", "zssr", "guarded_kernel", "main"]

PRESETS = {
    "paper": {"iters": 3000, "crop_size": 128, "kernelgan_iters": 3000, "restarts": 1},
    "fast": {"iters": 600, "crop_size": 64, "kernelgan_iters": 1000, "restarts": 3},
}
BP_ITERS = 10  # ZSSR's back_projection_iters
KERNELGAN_MIN_SIDE = 64  # KernelGAN's input_crop_size (data/kernelgan.py): its G's crops
LOG_EVERY = 100  # without a progress bar (--no-progress): a line per this many iterations


def back_projection(sr: np.ndarray, lr: np.ndarray, kernel="bicubic", scale: int = 2):
    """ZSSR's back_projection: sr + bicubic_up(lr - down(sr, kernel)), clipped to [0, 1]; (C, H s,
    W s) and (C, H, W) float32."""
    from ...data.zssr import downscale
    residual = lr - downscale(sr, scale, kernel)
    with no_grad():
        up = F.imresize(Tensor(np.ascontiguousarray(residual, np.float32)), scale).data
    return np.clip(sr + up[:, :sr.shape[1], :sr.shape[2]], 0.0, 1.0).astype(np.float32)


def _forward(model, img: np.ndarray) -> np.ndarray:
    model.eval()
    try:
        with no_grad():
            return np.clip(model(Tensor(np.ascontiguousarray(img)[None])).data[0], 0, 1)
    finally:
        model.train()


def final_test(model, img: np.ndarray, kernel, scale: int = 2, tta: bool = False,
               bp_iters: int = BP_ITERS) -> np.ndarray:
    """ZSSR's final_test of `img` (C, H, W) (module docstring)."""
    outs = []
    for k in range(8 if tta else 1):
        out = np.ascontiguousarray(undo_dihedral(_forward(model, dihedral(img, k)), k))
        for _ in range(bp_iters):
            out = back_projection(out, img, kernel, scale)
        outs.append(out)
    sr = np.median(outs, axis=0).astype(np.float32) if len(outs) > 1 else outs[0]
    for _ in range(bp_iters if len(outs) > 1 else 0):
        sr = back_projection(sr, img, kernel, scale)
    return sr


def _config(seed: int, iters: int, crop: int) -> dict:
    from ..config.schema import validate
    from ..inference.zoo import load_zoo
    load_zoo()  # ZSSRNet is models/zssr.py's
    return validate({
        "name": "zssr", "scale": 2, "seed": seed, "model": {"type": "ZSSRNet"},
        "datasets": {"train": {"type": "ZSSRDataset", "path": "-", "crop_size": crop}},
        "train": {"total_iters": iters, "batch_size": 1, "optimizer": {"type": "Adam", "lr": 1e-3},
                  "loss": {"type": "L1Loss"}}}, "srgrad-zssr")


def zssr(image: np.ndarray, scale: int = 2, kernel="bicubic", iters: int = 3000,
         crop_size: int = 128, tta: bool = False, bp_iters: int = BP_ITERS, seed: int = 0,
         say=print, progress: bool = True) -> np.ndarray:
    """SR of `image` (C, H, W) in [0, 1] (C = 3; or 1: run as RGB, the planes averaged) by `scale`
    (2 or 4) -> (C, H s, W s) float32; `kernel` a numeric kernel or "bicubic" (module docstring);
    `iters` per stage at most; `crop_size` the fathers'. A KeyboardInterrupt while a stage trains
    ends it: the network so far makes the output, and any later stage applies it untrained
    (`zssr_result` says whether that happened)."""
    return zssr_result(image, scale, kernel, iters, crop_size, tta, bp_iters, seed, say,
                       progress)[0]


def zssr_result(image, scale=2, kernel="bicubic", iters=3000, crop_size=128, tta=False,
                bp_iters=BP_ITERS, seed=0, say=print, progress=True):
    """`zssr`'s work -> (SR, interrupted: bool). BLAS runs on one thread meanwhile: conv's tile
    workers share the cores, and a threaded BLAS on these small products mostly waits for its
    threads on a busy machine (docs/benchmarks.md)."""
    from ...threads import limit_blas_threads, restore_blas_threads
    image = np.asarray(image, np.float32)
    if image.ndim != 3 or image.shape[0] not in (1, 3):
        raise ValueError(f"zssr: image must be (C, H, W) with 1 or 3 channels, got {image.shape}")
    gray = image.shape[0] == 1  # ZSSRNet is RGB: gray is run as three equal planes
    previous = limit_blas_threads(1)
    try:
        sr, interrupted = _stages(np.repeat(image, 3, axis=0) if gray else image, scale, kernel,
                                  iters, crop_size, tta, bp_iters, seed, say, progress)
    finally:
        restore_blas_threads(previous)
    return (sr.mean(axis=0, keepdims=True) if gray else sr), interrupted


def _stages(image, scale, kernel, iters, crop_size, tta, bp_iters, seed, say, progress):
    from tqdm.auto import tqdm
    from ...data.zssr import ZSSRDataset
    from ..run.distributed import SingleProcess
    from ..run.recipes.zssr import ZSSRRecipe
    if scale not in (2, 4):
        raise ValueError(f"zssr: scale must be 2 or 4 (x4: two x2 stages), got {scale!r}")
    cfg = _config(seed, iters, crop_size)
    recipe = ZSSRRecipe(cfg, SingleProcess(), say)
    data = ZSSRDataset(2, image=image, kernel=kernel, crop_size=crop_size)
    recipe.data = data
    current, done = np.asarray(image, np.float32), 2
    interrupted = False
    while True:
        recipe.set_lr(cfg["train"]["optimizer"]["lr"])
        recipe.policy.load_state_dict({"steps": [], "mse": [], "changes": [0]})
        start, steps = time.perf_counter(), 0
        bar = tqdm(total=iters, desc=f"zssr x{done}", unit="it", leave=False,
                   disable=not progress or interrupted)
        lines = not progress and not interrupted  # without a bar, log lines as srgrad-train's
        if lines:
            say(f"x{done}: training, at most {iters} iterations (a line every {LOG_EVERY})")
        try:
            for it in range(0 if interrupted else iters):  # after Ctrl-C: the network as it is
                rng = np.random.default_rng([seed, done, it])
                sample = data.get(0, rng)
                values = recipe.step({"lq": sample["lq"][None], "gt": sample["gt"][None]}, it)
                steps = it + 1
                bar.update(1)
                if values is not None and it % 50 == 0:
                    bar.set_postfix(loss=f"{values['loss']:.4f}", lr=f"{recipe.lr:.0e}")
                if lines and steps % LOG_EVERY == 0:
                    loss = "skipped" if values is None else f"loss {values['loss']:.4g}"
                    say(f"x{done}: iteration {steps}/{iters}, {loss}, lr {recipe.lr:.0e}, "
                        f"{time.perf_counter() - start:.0f} s")
                if recipe.done():
                    break
        except KeyboardInterrupt:
            interrupted = True
        finally:
            bar.close()
        if steps or not interrupted:
            say(f"x{done}: {'interrupted after' if interrupted else 'trained'} {steps} iterations "
                f"in {time.perf_counter() - start:.0f} s (lr {recipe.lr:.0e})")
        else:
            say(f"x{done}: not trained (interrupted before): the network as it is")
        start = time.perf_counter()
        if not progress:
            say(f"x{done}: the final pass ({'x8 median, ' if tta and not interrupted else ''}"
                f"{bp_iters} back-projections)")
        current = final_test(recipe.model, current, data.kernel, 2, tta and not interrupted,
                             bp_iters)
        say(f"x{done}: output {current.shape[2]}x{current.shape[1]}"
            f"{' (x8 median)' if tta and not interrupted else ''}, {bp_iters} back-projections, "
            f"{time.perf_counter() - start:.0f} s")
        if done == scale:
            return current, interrupted
        data.add_source(current, float(done))
        done *= 2


# -- the command ----------------------------------------------------------------------------------
def main(argv=None) -> int:
    from ..commands.args import run_guarded
    p = argparse.ArgumentParser(prog="srgrad-zssr", description="Zero-shot SR (ZSSR): train a "
                                "small network on the image itself, then upscale it; the kernel "
                                "bicubic, a file, or estimated by KernelGAN.")
    p.add_argument("--input", required=True, help="an image file or a folder of images")
    p.add_argument("--output", required=True, help="output file (for one input file) or folder")
    p.add_argument("--scale", type=int, default=2, choices=(2, 4), help="2 (default) or 4 (two "
                   "x2 stages, ZSSR's gradual way)")
    p.add_argument("--kernel", help="the image's downscaling kernel: estimate (the default: "
                   "KernelGAN, writes <output stem>_kernel.npy, then a guard falls back to bicubic "
                   "unless the estimate is clearly better; by default an image under "
                   f"{KERNELGAN_MIN_SIDE} pixels, too small for KernelGAN's crops, uses bicubic "
                   "and says so), bicubic (MATLAB's imresize), or a .npy file")
    p.add_argument("--no-guard", action="store_true", help="with --kernel estimate: use the "
                   "estimate even when the guard finds it not clearly better than bicubic")
    p.add_argument("--preset", default="fast", choices=tuple(PRESETS), help="fast (default: at "
                   "most 600 ZSSR iterations on crops of 64; KernelGAN 3 runs of 1000 iterations, "
                   "averaged) or paper (ZSSR's and KernelGAN's counts and crops: 3000, 128; one "
                   "run of 3000)")
    p.add_argument("--iters", type=int, help="ZSSR's iterations at most, per x2 stage (default: "
                   "the preset's)")
    p.add_argument("--kernelgan-iters", type=int, help="KernelGAN's iterations per run (default: "
                   "the preset's)")
    p.add_argument("--kernelgan-restarts", dest="restarts", type=int, metavar="N", help="KernelGAN "
                   "runs from seeds seed, seed + 1, ..., their kernels averaged (default: the "
                   "preset's)")
    p.add_argument("--tta", action="store_true", help="ZSSR's x8 self-ensemble: the median of the "
                   "8 rotations/flips (8x the final pass)")
    p.add_argument("--bp-iters", type=int, default=BP_ITERS, help="back-projections (default 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--suffix", default="_x{scale}", help="added to each output's name in a folder "
                   "run (default _x{scale})")
    p.add_argument("--ext", default="auto", choices=("auto", "png", "jpg", "webp", "tif"))
    p.add_argument("--overwrite", action="store_true", help="replace outputs that exist (an "
                   "input is never replaced)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    return run_guarded(lambda: _run(args))


def _settings(args) -> dict:
    from ..._check import int_arg
    from ..commands.outputs import OutputError
    s = dict(PRESETS[args.preset])
    for key, flag, minimum in (("iters", "--iters", 1), ("kernelgan_iters", "--kernelgan-iters", 1),
                               ("restarts", "--kernelgan-restarts", 1),
                               ("bp_iters", "--bp-iters", 0)):
        value = getattr(args, key, None)
        if value is not None:
            try:
                s[key] = int_arg("srgrad-zssr", flag, value, minimum)
            except ValueError as exc:
                raise OutputError(str(exc)) from None
    s.setdefault("bp_iters", BP_ITERS)
    return s


def _kernel_arg(text: str):
    """--kernel: "bicubic", "estimate" or a loaded .npy kernel."""
    from ...data.degradations.kernel_file import load_kernel
    from ..commands.outputs import OutputError
    if text in ("bicubic", "estimate"):
        return text
    if not text.lower().endswith(".npy"):
        raise OutputError(f"--kernel must be bicubic, estimate or a .npy file, got {text!r}")
    return load_kernel(text, "--kernel file")


def _run(args) -> int:
    from ...io.atomic import clean_partial_writes
    from ...io.image import list_images, read_image, supports_16bit, write_image
    from ..commands.args import error
    from ..commands.outputs import check_output, plan_outputs
    src = Path(args.input)
    files = list_images(src) if src.is_dir() else [src] if src.is_file() else None
    if files is None:
        return error(f"--input {src}: no such file or folder", 2)
    settings, kernel = _settings(args), _kernel_arg(args.kernel or "estimate")
    todo, skipped = plan_outputs(files, args.output, src.is_dir(), args.suffix, args.ext,
                                 args.overwrite, args.scale)
    kernel_files = {}
    if args.no_guard and not (isinstance(kernel, str) and kernel == "estimate"):
        print("note: --no-guard applies to --kernel estimate only: ignored", file=sys.stderr)
    if isinstance(kernel, str) and kernel == "estimate":
        for f, dst in todo:
            kernel_files[f] = check_output(dst.with_name(dst.stem + "_kernel.npy"), "kernel file",
                                           [("input image", i) for i in files], args.overwrite)
    for folder in {dst.parent for _, dst in todo + skipped}:
        clean_partial_writes(folder, keep=files)
    for f, dst in skipped:
        print(f"skipped {f}: {dst} exists (--overwrite replaces it)", file=sys.stderr)
    for f, dst in todo:
        img, meta = read_image(f)
        print(f"{f}: {img.shape[2]}x{img.shape[1]}, x{args.scale}, preset {args.preset}",
              file=sys.stderr)
        if f in kernel_files and args.kernel is None and \
                min(img.shape[1:]) // 2 * 2 < KERNELGAN_MIN_SIDE:
            print(f"  kernel: {img.shape[2]}x{img.shape[1]} is too small for KernelGAN's "
                  f"{KERNELGAN_MIN_SIDE}-pixel crops: the bicubic kernel (--kernel K.npy gives "
                  f"one)", file=sys.stderr)
            k = "bicubic"
        else:
            k = _estimate(img, settings, args, kernel_files[f]) if f in kernel_files else kernel
        sr, interrupted = zssr_result(img, args.scale, k, settings["iters"],
                                      settings["crop_size"], args.tta, settings["bp_iters"],
                                      args.seed, lambda m: print(f"  {m}", file=sys.stderr),
                                      not args.no_progress)
        alpha = meta.get("alpha")
        if alpha is not None:
            with no_grad():
                alpha = np.clip(F.imresize(Tensor(alpha), args.scale).data, 0, 1)
        bits = 16 if meta.get("bits") == 16 and supports_16bit(dst, sr.shape[0] + (
            alpha is not None)) else 8
        write_image(dst, sr, bits, alpha)
        print(f"{f} -> {dst} ({sr.shape[2]}x{sr.shape[1]})"
              f"{' (interrupted: the network so far)' if interrupted else ''}")
        if interrupted:
            return 130
    return 0


def _estimate(img, settings, args, path):
    from ...data.degradations.kernel_file import save_kernel
    from .kernelgan import estimate_kernel
    from tqdm.auto import tqdm
    start = time.perf_counter()
    total = settings["kernelgan_iters"] * settings["restarts"]

    def step(it, values):
        bar.update(1)
        if args.no_progress and (it + 1) % LOG_EVERY == 0:
            print(f"  kernel: KernelGAN iteration {it + 1}/{total}, "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr)

    runs = f"{settings['restarts']} runs of {settings['kernelgan_iters']}" \
        if settings["restarts"] > 1 else f"{total}"
    if args.no_progress:
        print(f"  kernel: KernelGAN, {runs} iterations (a line every {LOG_EVERY})",
              file=sys.stderr)
    with tqdm(total=total, desc="kernelgan", unit="it", leave=False,
              disable=args.no_progress) as bar:
        k = estimate_kernel(img, settings["kernelgan_iters"], args.seed, on_step=step,
                            restarts=settings["restarts"])
    k = save_kernel(path, k)
    mean = " (their mean)" if settings["restarts"] > 1 else ""
    print(f"  kernel: KernelGAN, {runs} iterations{mean} in "
          f"{time.perf_counter() - start:.0f} s -> {path} ({k.shape[0]}x{k.shape[1]})",
          file=sys.stderr)
    return guarded_kernel(img, k, not args.no_guard,
                          lambda m: print(f"  kernel {m}", file=sys.stderr))


def guarded_kernel(img, k, guard: bool = True, say=print):
    """The kernel ZSSR uses after an estimate `k` of `img`: `k`, or "bicubic" when the guard
    (engine/zeroshot/kernel_guard.py) does not trust it; `say` gets one line with the estimate's
    orientation, widths, confidence and the verdict (with `guard` False: the verdict is only
    reported, the estimate is used)."""
    from .kernel_guard import kernel_guard
    decision = kernel_guard(img, k)
    if not guard:
        say(f"{decision.describe()}; --no-guard: using the estimate")
        return k
    say(decision.describe())
    return k if decision.use_estimate else "bicubic"
