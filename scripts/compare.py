"""Side by side: bicubic | each weights file's output | HR, on one validation image of a config (the
same LR the trainer validates on: for a RealESRGANDataset, its fixed degradation of that image),
cropped to the detailed region the trainer's validation images show, each panel labelled with its
PSNR (Y channel, crop_border = scale, as validation).

    python scripts/compare.py --config configs/realesrnet_compact_x4.yaml --image 0 \
        --weights stage1=runs/realesrnet_compact_x4/net_latest.safetensors \
                  stage2=runs/realesrgan_compact_x4/net_latest.safetensors \
        --output side_by_side.png [--key params_ema] [--crop 128]

Never replaces an existing --output (it says so instead).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _named(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--weights takes LABEL=PATH, got {text!r}")
    return name, path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="compare.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="the config whose datasets.val gives the image")
    ap.add_argument("--image", type=int, default=0, help="index into datasets.val (default 0)")
    ap.add_argument("--weights", nargs="+", type=_named, required=True, metavar="LABEL=PATH")
    ap.add_argument("--key", default=None, help="params or params_ema (default: the file's own)")
    ap.add_argument("--crop", type=int, default=128, help="side of the HR crop shown (default 128)")
    ap.add_argument("--output", required=True, type=Path)
    args = ap.parse_args(argv)
    if args.output.exists():
        print(f"compare.py: --output {args.output} exists: not replaced (choose another path)",
              file=sys.stderr)
        return 1

    import numpy as np
    from framework.engine import bicubic, load_model, upscale
    from framework.engine.run.runlog import detail_box, labelled_strip
    from framework.engine.config.schema import load_config
    from framework.engine.inference.zoo import load_zoo
    from framework.io.image import write_image
    from framework.metrics.measure import measure
    from framework.registry import DATASETS

    load_zoo()
    cfg = load_config(args.config)
    scale, val = cfg["scale"], cfg["datasets"]["val"]
    if not val:
        print(f"compare.py: {args.config}: datasets.val is not set", file=sys.stderr)
        return 1
    dataset = DATASETS.build(val, scale=scale)
    if not 0 <= args.image < len(dataset):
        print(f"compare.py: --image {args.image}: datasets.val has {len(dataset)} images", file=sys.stderr)
        return 1
    item = dataset.get(args.image)
    gt = item["gt"]
    y0, y1, x0, x1 = detail_box(gt, args.crop)

    def panel(label, image):
        psnr = measure(image, gt, ["psnr"], scale, True)["psnr"]
        return f"{label} {psnr:.2f}", image[:, y0:y1, x0:x1]

    panels = [panel("bicubic", np.clip(bicubic(item["lq"], scale), 0, 1))]
    for label, path in args.weights:
        model, _ = load_model(path, fallback_spec=cfg["model"], key=args.key)
        panels.append(panel(label, np.clip(upscale(model, item["lq"]), 0, 1)))
    panels.append(("HR", gt[:, y0:y1, x0:x1]))
    write_image(args.output, labelled_strip(panels))
    print(f"{args.output}: {' | '.join(label for label, _ in panels)} ({Path(str(item['name'])).name}, "
          f"PSNR-Y dB)")
    return 0


if __name__ == "__main__":
    from framework.io.config import ConfigError
    try:
        sys.exit(main())
    except (ConfigError, OSError, ValueError, KeyError) as exc:  # named by their messages
        sys.exit(f"compare.py: {exc}")
