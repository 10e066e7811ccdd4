"""What a tile costs (issue 28): wall and CPU time of srgrad-infer's path (upscale_file) on six images
of 179-566 px through a realesr-general-x4v3-sized SRVGGNetCompact (64 features, 32 convolutions,
PReLU, x4, seeded random weights), untiled and with --tile 64, 128 and 256 (--tile-overlap 16).

    python scripts/tile_cost.py                 # the machine as it is
    python scripts/tile_cost.py --busy 2        # plus two processes spinning on the cores
    python scripts/tile_cost.py --tiles 64 --repeat 1 --markdown out.md

A tiled run carries more LR pixels than the image (each tile's context): `pixels` is that total
over the images' pixels. `wall/px` and `cpu/px` divide a tiled run's time by the untiled run's
times that factor: a tile costs what its pixels cost when these are near 1 (the target: <= 1.3).
CPU time is this process's, all threads. The settings run interleaved (untiled, 64, 128, 256,
untiled, ...), each a median of --repeat runs after one warm-up of every setting. The busy
processes are started here and ended here (by their process ids).
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "scripts"))

from benchmark import machine  # noqa: E402  the CPU, BLAS core, numba target, knobs, load
from framework.engine.inference.upscale import tile_boxes, upscale_file  # noqa: E402
from framework.nn import init  # noqa: E402

# The bundled training images, each resized (bicubic) to this longer side: 179-566 px.
SIZES = {"astronaut.png": 256, "brick.png": 179, "coffee.png": 320, "grass.png": 400,
         "hubble_deep_field.jpg": 566, "rocket.jpg": 480}
SPEC = {"type": "SRVGGNetCompact", "num_feat": 64, "num_conv": 32, "scale": 4, "act_type": "prelu"}
OVERLAP = 16


def make_images(folder: pathlib.Path, only=None) -> list:
    """[(path, h, w)] of the bundled images resized to SIZES (those named in `only`), written
    into `folder` (made)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, side in SIZES.items():
        if only and pathlib.Path(name).stem not in only:
            continue
        img = Image.open(ROOT / "data" / "train" / name)
        scale = side / max(img.size)
        img = img.resize((round(img.width * scale), round(img.height * scale)), Image.BICUBIC)
        path = folder / (pathlib.Path(name).stem + ".png")
        img.save(path)
        out.append((path, img.height, img.width))
    return out


def pixel_factor(images, tile) -> float:
    """LR pixels the tiles carry (context included) over the images' pixels."""
    carried = sum((e[1] - e[0]) * (e[3] - e[2]) for _, h, w in images
                  for _, e in tile_boxes(h, w, tile, OVERLAP))
    return carried / sum(h * w for _, h, w in images)


def run_all(model, info, images, tile, out_dir) -> tuple:
    wall, cpu = time.perf_counter(), time.process_time()
    for path, _, _ in images:
        upscale_file(model, info, path, out_dir / path.name, tile, OVERLAP)
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv=None) -> int:
    from framework import malloc
    malloc.tune()  # as the commands run (srgrad_cli.run)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiles", nargs="+", default=["none", "64", "128", "256"],
                    help="tile sizes (none: untiled, needed for the ratios)")
    ap.add_argument("--busy", type=int, default=0, help="spinning processes to start (default 0)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=[pathlib.Path(n).stem for n in SIZES],
                    help="these images only (default: all six)")
    ap.add_argument("--markdown", help="also write the table to this file")
    args = ap.parse_args(argv)
    tiles = [None if t == "none" else int(t) for t in args.tiles]
    from framework.engine import build_model
    from framework.engine.inference.zoo import load_zoo
    load_zoo()
    init.manual_seed(0)
    model = build_model(SPEC).eval()
    info = {"scale": 4, "model": SPEC}
    busy = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            (tmp / "out").mkdir()
            images = make_images(tmp / "in", args.only)
            small = [min(images, key=lambda im: im[1] * im[2])]
            for tile in tiles:  # warm-up: every kernel each setting needs, compiled or loaded
                run_all(model, info, small, tile, tmp / "out")
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(args.busy)]
            load_before = os.getloadavg()[0]
            times = {t: [] for t in tiles}
            for _ in range(args.repeat):
                for tile in tiles:
                    times[tile].append(run_all(model, info, images, tile, tmp / "out"))
            load_after = os.getloadavg()[0]
    finally:
        for p in busy:
            p.kill()
            p.wait()
    med = {t: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for t, v in times.items()}
    px = sum(h * w for _, h, w in images)
    lines = [*machine(), "",
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
             f"{args.busy} busy processes; load average {load_before:.1f} -> {load_after:.1f}; "
             f"{len(images)} images, {px} LR pixels, SRVGGNetCompact 64 x 32 x4, overlap {OVERLAP}; "
             f"median of {args.repeat}; command: python scripts/tile_cost.py "
             f"{' '.join(argv if argv is not None else sys.argv[1:])}", "",
             "| tile | pixels | wall s | CPU s | wall/px | cpu/px |", "|---|---:|---:|---:|---:|---:|"]
    base = med.get(None)
    for tile in tiles:
        factor = pixel_factor(images, tile)
        wall, cpu = med[tile]
        ratios = ("", "") if base is None else \
            (f"{wall / (base[0] * factor):.2f}", f"{cpu / (base[1] * factor):.2f}")
        lines.append(f"| {tile or 'untiled'} | {factor:.2f}x | {wall:.2f} | {cpu:.2f} | "
                     f"{ratios[0]} | {ratios[1]} |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
