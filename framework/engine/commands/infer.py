"""`srgrad-infer`: upscale an image or a folder of images with a model from weights or a published
model by name (engine/hub/models.py), with srgrad's options and Real-ESRGAN's inference_realesrgan.py
flags (-n -i -o -s -t -dn, --suffix, --tile_pad, --pre_pad, --alpha_upsampler, --fp32, ...).

Exit codes as the other commands: 0 done, 1 error (message printed), 2 bad arguments, 130
interrupted.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .bf16_check import bf16_arg
from .args import error, load_model_from_args, model_args, run_guarded, tta_arg
from .outputs import OutputError

__all__ = ["main"]


def main(argv=None) -> int:
    from ..inference.upscale import OUTSCALE_MODES
    p = argparse.ArgumentParser(prog="srgrad-infer", description="Upscale an image or a folder "
                                "of images (PNG, JPEG, BMP, TIFF; RGB, gray, RGBA; 8/16-bit). "
                                "Real-ESRGAN's inference_realesrgan.py flags work too (-n -i -o "
                                "-s -t -dn, --suffix, --tile_pad, --pre_pad, --alpha_upsampler, "
                                "--fp32).")
    model_args(p)
    p.add_argument("-i", "--input", required=True, help="an image file or a folder of images")
    p.add_argument("-o", "--output", required=True, help="output file (for one input file) or "
                   "folder")
    p.add_argument("--suffix", default="_x{scale}", help="added to each output's name (default "
                   "_x{scale}: photo.png -> photo_x4.png); one that starts with a letter or digit "
                   "is joined with _, as Real-ESRGAN's: --suffix out -> photo_out.png; '' keeps "
                   "the name in another folder")
    p.add_argument("--ext", default="auto", choices=("auto", "png", "jpg", "webp", "tif"),
                   help="output format (default auto: the input's). An image with alpha is "
                   "written as PNG where the format cannot store alpha (jpg), as Real-ESRGAN")
    p.add_argument("--overwrite", action="store_true", help="replace outputs that exist (an "
                   "input is never replaced); without it a folder run skips them, a file run stops")
    tta_arg(p)
    bf16_arg(p)
    p.add_argument("-s", "--outscale", metavar="F", help="final size F x the input's, floor(F*h) "
                   "x floor(F*w) as Real-ESRGAN (default: the model's scale, no resize; "
                   "Real-ESRGAN's default is 4 whatever the model); {scale} in --suffix becomes F")
    p.add_argument("--outscale-mode", default="bicubic", choices=OUTSCALE_MODES,
                   help="resampling for --outscale (default bicubic; bicubic, bilinear and lanczos "
                   "are antialiased when shrinking)")
    p.add_argument("--max-memory", metavar="SIZE", help="memory budget of --tile auto (the "
                   "default tiling): bytes or 512M, 4G, ... (default: half of MemAvailable in "
                   "/proc/meminfo). The tile is the largest whose run fits, measured from the "
                   "model's own activations on two small probe tiles")
    video = p.add_argument_group("video (an --input with a video extension: .mp4 .mkv .mov "
                                 ".webm .avi .m4v; needs pip install 'srgrad[video]')")
    video.add_argument("--codec", help="the output's video encoder (default libx264; webm: "
                       "libvpx-vp9); any FFmpeg encoder in PyAV's build")
    video.add_argument("--crf", type=int, help="the encoder's constant rate factor (default 18 "
                       "for x264, x265, vp9, svtav1; 0: lossless x264)")
    video.add_argument("--preset", help="the encoder's preset (x264: ultrafast ... veryslow; "
                       "default the encoder's own, medium)")
    video.add_argument("--segment-frames", type=int, default=None, metavar="N",
                       help="frames per resumable segment (default 64)")
    _realesrgan_args(p)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    return run_guarded(lambda: _infer(args))


def _realesrgan_args(p):
    """inference_realesrgan.py's flags that srgrad-infer has no other name for."""
    from ..inference.upscale import ALPHA_UPSAMPLERS
    p.add_argument("--alpha_upsampler", "--alpha-upsampler", dest="alpha_upsampler",
                   default="bicubic", choices=ALPHA_UPSAMPLERS, help="how alpha is upscaled: "
                   "bicubic (default: interpolation) or realesrgan (the model, on the alpha as "
                   "gray RGB, as Real-ESRGAN's default)")
    p.add_argument("--pre_pad", "--pre-pad", dest="pre_pad", type=int, default=0, metavar="N",
                   help="N reflected LR pixels added at the bottom and right before SR and cropped "
                   "after, as Real-ESRGAN (default 0)")
    p.add_argument("--fp32", action="store_true", help="accepted for Real-ESRGAN's scripts: "
                   "srgrad computes in float32 already (a no-op)")
    p.add_argument("--face_enhance", action="store_true", help="not available: GFPGAN face "
                   "restoration is not part of srgrad (refused)")
    p.add_argument("-g", "--gpu-id", "--gpu_id", dest="gpu_id", type=int, default=None,
                   help="accepted for Real-ESRGAN's scripts: srgrad runs on the CPU (ignored)")


def _outscale(args):
    """--outscale as a finite float > 0 (None when absent), else a one-line error naming it."""
    from ..inference.upscale import check_outscale
    if args.outscale is None:
        return None
    try:
        value = float(args.outscale)
    except ValueError:
        raise OutputError(f"--outscale must be a number > 0, got {args.outscale!r}") from None
    try:
        return check_outscale(value, "--outscale")
    except ValueError as exc:
        raise OutputError(str(exc)) from None


def _max_memory(args):
    """--max-memory in bytes (None: the default budget), else a one-line error naming it."""
    if args.max_memory is None:
        return None
    from ..inference.autotile import parse_memory
    try:
        return parse_memory(args.max_memory)
    except ValueError as exc:
        raise OutputError(str(exc)) from None


def _check_outscale_sizes(files, outscale) -> None:
    """Every output within the pixel limit and at least 1x1, from the image headers, before any
    work (a one-line error naming --outscale)."""
    from ...io.image import image_size
    from ..inference.upscale import checked_outscale_size
    for f in files:
        w, h = image_size(f)
        try:
            checked_outscale_size((h, w), outscale, "--outscale", f)
        except ValueError as exc:
            raise OutputError(str(exc)) from None


def _infer(args) -> int:
    import contextlib
    from tqdm.auto import tqdm
    from ... import precision
    from ...io.atomic import clean_partial_writes
    from ...io.image import list_images, read_image
    from .bf16_check import announce
    from ..inference.upscale import capture_inference, model_in_channels, upscale_file
    from .outputs import plan_outputs
    if args.face_enhance:
        return error("--face_enhance is not available: face restoration needs GFPGAN, which is not "
                     "part of srgrad; run without it", 2)
    if args.pre_pad < 0:
        return error(f"--pre_pad must be >= 0, got {args.pre_pad}", 2)
    if args.fp32:
        print("note: --fp32 changes nothing: srgrad computes in float32 already",
              file=sys.stderr)
    if args.gpu_id is not None:
        print(f"note: --gpu-id {args.gpu_id} ignored: srgrad runs on the CPU", file=sys.stderr)
    src = Path(args.input)
    from ..inference.video import is_video
    if src.is_file() and is_video(src):
        return _infer_video(args, src)
    if args.codec or args.crf is not None or args.preset or args.segment_frames:
        return error("--codec, --crf, --preset and --segment-frames are for a video --input", 2)
    if src.is_dir():
        files = list_images(src)
    elif src.is_file():
        files = [src]
    else:
        return error(f"--input {src}: no such file or folder", 2)
    outscale = _outscale(args)
    max_memory = _max_memory(args)
    tile = "auto" if args.tile is None else args.tile  # auto: the whole image when it fits
    model, info = load_model_from_args(args)
    capture_inference(model)  # its tiles through captured graphs (the weights are final here)
    # {scale} in --suffix names the output's scale: 3 for --outscale 3, 1.5 for --outscale 1.5
    shown = int(info["scale"]) if outscale is None else \
        (int(outscale) if outscale.is_integer() else outscale)
    todo, skipped = plan_outputs(files, args.output, src.is_dir(), args.suffix, args.ext,
                                 args.overwrite, shown)
    for folder in {dst.parent for _, dst in todo + skipped}:  # what a killed run left half-written
        clean_partial_writes(folder, keep=files)
    for f, dst in skipped:
        print(f"skipped {f}: {dst} exists (--overwrite replaces it)", file=sys.stderr)
    if outscale is not None:
        _check_outscale_sizes([f for f, _ in todo], outscale)
    if args.bf16:
        precision.require_bf16("--bf16")
        if todo:  # once per model: the first image's crop both ways
            announce(model, read_image(todo[0][0])[0], int(info["scale"]), model_in_channels(info),
                     todo[0][0], args.tta)
    with precision.autocast("bf16") if args.bf16 else contextlib.nullcontext():
        for f, dst in tqdm(todo, desc="upscale", unit="img", disable=args.no_progress):
            shape = upscale_file(model, info, f, dst, tile, args.tile_overlap, args.tta,
                                 outscale, args.outscale_mode, args.alpha_upsampler, args.pre_pad,
                                 max_memory, say=tqdm.write)
            tqdm.write(f"{f} -> {dst} ({shape[2]}x{shape[1]})")
    return 0


def _infer_video(args, src: Path) -> int:
    """srgrad-infer on a video file (engine/inference/video.py): resumable, the same command continues."""
    from .outputs import check_output
    from ..inference.video import SEGMENT_FRAMES, upscale_video
    if args.pre_pad or args.alpha_upsampler != "bicubic":
        return error("--pre_pad and --alpha_upsampler are for images, not video", 2)
    outscale = _outscale(args)
    max_memory = _max_memory(args)
    dst = check_output(args.output, "--output", [("--input", src)], args.overwrite)
    model, info = load_model_from_args(args)
    tile = "auto" if args.tile is None else args.tile
    try:
        report = upscale_video(model, info, src, dst, tile, args.tile_overlap, args.tta, outscale,
                               args.outscale_mode, args.codec, args.crf, args.preset,
                               segment=args.segment_frames or SEGMENT_FRAMES,
                               max_memory=max_memory, progress=not args.no_progress,
                               say=lambda m: print(m, file=sys.stderr))
    except KeyboardInterrupt:
        from ..inference.video import work_folder
        print(f"interrupted: the finished segments are kept in {work_folder(dst)}; the same "
              "command continues after them", file=sys.stderr)
        return 130
    resumed = f" ({report['resumed']} found done)" if report["resumed"] else ""
    print(f"{src} -> {dst} ({report['frames']} frames{resumed})")
    return 0
