"""The data path on a DIV2K-sized set: what a training sample costs from full 2040x1356 images and
from srgrad-prepare's sub-images, srgrad-prepare's throughput, how long an EDSR x2 step waits for
data with and without the Prefetcher, and the data side's peak memory.

The set: the bundled images (data/train, data/val) mirrored out to 2040x1356 RGB PNGs, 8 distinct
files, and 800 names that are hard links to them (DIV2K_train_HR's size and count without 5 GB of
disk; the page cache holds the 8 files, so decode and resize are measured, not the disk). Per-sample
rows draw distinct files. srgrad-prepare (default settings: 480/240, scales 2 3 4) runs on 8 of the
images; the sub-image rows read its output (also in the page cache).

Run through the harness: `python scripts/benchmark.py --only data --threads 2`; section options
after the harness's own:
    --data-dir DIR      where the set and the sub-images go (default: a temporary folder, removed
                        at the end; an existing DIR is reused and kept)
    --rounds 3          rounds of EDSR iterations: each round runs every loading mode in turn
                        (so that the machine's drift hits all modes), --per-round timed
    --per-round 2       iterations per mode, after one warm-up (the prefetcher's first batch);
                        the full-image rows run 2 rounds of 1
    --rss-batches 200   batches the peak-RSS child produces from the sub-images

No torch column: PyTorch has no counterpart here. The EDSR rows' ms is the whole iteration (waiting
for the batch + the step); the note splits it. The child for the RSS rows is this file:
`python scripts/bench_data.py --child DATA_DIR KIND BATCHES` prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent

TITLE = "Data path: DIV2K-sized set (800 x 2040x1356), EDSR x2, batch 16, gt_size 96"

SIZE = (1356, 2040)  # DIV2K HR's usual (height, width)
N_IMAGES, N_DISTINCT = 800, 8
BATCH, GT_SIZE, SCALE = 16, 96, 2
WAIT_TARGET = 0.10     # the step may wait for data at most this share of an iteration
RSS_TARGET_MB = 2048.0


def _options(rest):
    ap = argparse.ArgumentParser(prog="bench_data")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--per-round", type=int, default=2)
    ap.add_argument("--rss-batches", type=int, default=200)
    return ap.parse_known_args(rest)[0]


def _load_note() -> str:
    return "load avg %.1f" % os.getloadavg()[0]


def _make_set(root: pathlib.Path) -> pathlib.Path:
    """root/hr: N_IMAGES names over N_DISTINCT mirrored-out images (hard links). Reused if there."""
    from PIL import Image
    hr = root / "hr"
    if hr.is_dir() and len(list(hr.glob("*.png"))) == N_IMAGES:
        return hr
    hr.mkdir(parents=True, exist_ok=True)
    sources = sorted((REPO / "data" / "train").iterdir()) + sorted((REPO / "data" / "val").iterdir())
    sources = [p for p in sources if p.suffix.lower() in (".png", ".jpg")][:N_DISTINCT]
    distinct = []
    for k, src in enumerate(sources):
        img = np.asarray(Image.open(src).convert("RGB"))
        img = img[:SIZE[0], :SIZE[1]]
        # mirrored copies (no seams, so the PNG compresses like a photo, not like flat padding)
        big = np.pad(img, ((0, SIZE[0] - img.shape[0]), (0, SIZE[1] - img.shape[1]), (0, 0)),
                     mode="symmetric")
        path = root / f"distinct_{k}.png"
        Image.fromarray(big).save(path)
        distinct.append(path)
    for i in range(N_IMAGES):
        link = hr / f"{i + 1:04d}.png"
        if not link.exists():
            os.link(distinct[i % len(distinct)], link)
    return hr


def _per_sample_ms(dataset, count: int, stride: int):
    """ms of dataset.get(index, rng) (crop + augment included) over `count` indices `stride` apart
    (distinct files); (mean, min, max)."""
    times = []
    for k in range(count):
        rng = np.random.default_rng([0, k])
        t = time.perf_counter()
        dataset.get((k * stride) % len(dataset), rng)
        times.append(1e3 * (time.perf_counter() - t))
    return statistics.fmean(times), min(times), max(times)


def _edsr_step():
    """One EDSR x2 (edsr_x2.yaml's model) training iteration on a batch: L1 + Adam."""
    import models  # noqa: F401  registers the architectures
    import framework.functional as F
    from framework.nn import init
    from framework.optim import Adam
    from framework.registry import MODELS
    from framework.tensor import Tensor
    init.manual_seed(0)
    model = MODELS.build({"type": "EDSR", "scale": SCALE, "num_feat": 64, "num_block": 16,
                          "res_scale": 1.0})
    opt = Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.99))

    def step(batch):
        opt.zero_grad()
        F.l1_loss(model(Tensor(batch["lq"])), Tensor(batch["gt"])).backward()
        opt.step()
    return step


def _iterations(loader, step, workers: int, start: int, count: int):
    """Batches start .. start + count through Prefetcher(workers); the first warms up (kernels,
    buffers, the prefetcher's first batch); (wait, compute) seconds of the others."""
    from framework.data import Prefetcher
    waits, computes = [], []
    with Prefetcher(loader, start, start + count + 1, workers=workers, depth=2) as batches:
        for i in range(count + 1):
            t0 = time.perf_counter()
            batch = next(batches)
            t1 = time.perf_counter()
            step(batch)
            t2 = time.perf_counter()
            if i:
                waits.append(t1 - t0)
                computes.append(t2 - t1)
    return waits, computes


def _step_rows(label, loader, step, modes, rounds, per_round):
    """One row per loading mode (0 = synchronous); the modes take turns, round by round."""
    from benchmark import Row
    waits = {m: [] for m in modes}
    computes = {m: [] for m in modes}
    start = 0
    for _ in range(rounds):
        for workers in modes:
            w, c = _iterations(loader, step, workers, start, per_round)
            waits[workers] += w
            computes[workers] += c
            start += per_round + 1
    rows = []
    for workers in modes:
        wait, compute = sum(waits[workers]), sum(computes[workers])
        share = wait / (wait + compute)
        n = len(waits[workers])
        how = "synchronous" if workers == 0 else f"Prefetcher(workers={workers}, depth=2)"
        verdict = "met" if share < WAIT_TARGET else "MISSED"
        rows.append(Row(f"EDSR x2 iteration, {label}, {how}", 1e3 * (wait + compute) / n, None,
                        note=f"waits {1e3 * wait / n:.0f} ms = {100 * share:.1f}% (< 10% "
                             f"{verdict}), step {1e3 * compute / n:.0f} ms; mean of {n}; "
                             f"{_load_note()}"))
    return rows


def _rss_row(data_dir, kind, batches, threads):
    from benchmark import Row
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    cmd = [sys.executable, str(HERE / "bench_data.py"), "--child", str(data_dir), kind,
           str(batches)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"child {' '.join(cmd[2:])} failed:\n{out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    verdict = "met" if r["peak_mb"] < RSS_TARGET_MB else "MISSED"
    what = {"sub": "PairedImageDataset (sub-images)",
            "full": "HRImageDataset(cache=False) (full images)"}[kind]
    return Row(f"data side peak RSS [MB], {what} + Prefetcher(2), {batches} batches",
               r["peak_mb"], None,
               note=f"< {RSS_TARGET_MB:.0f} MB {verdict}; after imports {r['base_mb']:.0f} MB; "
                    f"{r['batches_per_s']:.2f} batches/s; {_load_note()}")


def run(args) -> list:
    from benchmark import Row
    from framework.data import BatchLoader, HRImageDataset, PairedImageDataset
    from framework.data.prepare import main as prepare
    opts = _options(getattr(args, "rest", []))
    keep = opts.data_dir is not None
    root = pathlib.Path(opts.data_dir or tempfile.mkdtemp(prefix="srgrad_bench_data_"))
    rows = []
    try:
        hr = _make_set(root)
        full = HRImageDataset(hr, scale=SCALE, gt_size=GT_SIZE, cache=False)
        _per_sample_ms(full, 1, 1)  # warm-up: imresize's kernels
        mean, lo, hi = _per_sample_ms(full, 2 * N_DISTINCT, 1)
        rows.append(Row("HRImageDataset(cache=False), full 2040x1356 image, per sample", mean,
                        None, note=f"min {lo:.0f}, max {hi:.0f}; x{BATCH} = "
                                   f"{BATCH * mean / 1e3:.1f} s per batch; {_load_note()}"))

        subset = root / "subset"
        subset.mkdir(exist_ok=True)
        for p in sorted(hr.iterdir())[:N_DISTINCT]:
            if not (subset / p.name).exists():
                os.link(p, subset / p.name)
        sub = root / "sub"
        fresh = not (sub / "HR").is_dir()
        t = time.perf_counter()
        code = prepare(["--input", str(subset), "--output", str(sub), "--workers",
                        str(args.threads), "--no-progress"])
        seconds = time.perf_counter() - t
        if code != 0:
            raise RuntimeError(f"srgrad-prepare failed with exit code {code}")
        n_sub = len(list((sub / "HR").iterdir()))
        files = n_sub * 4
        if fresh:
            rows.append(Row(f"srgrad-prepare, {N_DISTINCT} images -> {n_sub} sub-images x 4 files "
                            f"(workers {args.threads}), per image", 1e3 * seconds / N_DISTINCT,
                            None, note=f"{files / seconds:.0f} files/s; {N_IMAGES} images ~ "
                                       f"{N_IMAGES * seconds / N_DISTINCT / 60:.1f} min; "
                                       f"{_load_note()}"))

        paired = PairedImageDataset(sub / "HR", sub / "LR_bicubic" / f"X{SCALE}", scale=SCALE,
                                    gt_size=GT_SIZE, cache=False)
        _per_sample_ms(paired, 4, 1)
        mean, lo, hi = _per_sample_ms(paired, 64, 37)
        rows.append(Row("PairedImageDataset(cache=False), 480x480 sub-image, per sample", mean,
                        None, note=f"min {lo:.1f}, max {hi:.1f}; x{BATCH} = "
                                   f"{BATCH * mean:.0f} ms per batch; {_load_note()}"))

        step = _edsr_step()
        rows += _step_rows("sub-images", BatchLoader(paired, BATCH, seed=0), step, (0, 1, 2),
                           opts.rounds, opts.per_round)
        rows += _step_rows("full images", BatchLoader(full, BATCH, seed=0), step, (0, 2), 2, 1)
        rows.append(_rss_row(root, "sub", opts.rss_batches, args.threads))
        rows.append(_rss_row(root, "full", max(1, opts.rss_batches // 10), args.threads))
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def _rss_mb(field="VmRSS"):
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def child_main(argv):
    """Build the dataset, a BatchLoader and Prefetcher(workers=2, depth=2); produce the batches;
    print {"peak_mb", "base_mb", "batches_per_s"}."""
    data_dir, kind, batches = pathlib.Path(argv[0]), argv[1], int(argv[2])
    sys.path.insert(0, str(REPO))
    from framework import malloc
    malloc.tune()  # as the commands run (srgrad_cli.run)
    from framework.data import BatchLoader, HRImageDataset, PairedImageDataset, Prefetcher
    if kind == "sub":
        ds = PairedImageDataset(data_dir / "sub" / "HR", data_dir / "sub" / "LR_bicubic" /
                                f"X{SCALE}", scale=SCALE, gt_size=GT_SIZE, cache=False)
    else:
        ds = HRImageDataset(data_dir / "hr", scale=SCALE, gt_size=GT_SIZE, cache=False)
    base = _rss_mb()
    t = time.perf_counter()
    with Prefetcher(BatchLoader(ds, BATCH, seed=0), 0, batches, workers=2, depth=2) as p:
        for batch in p:
            assert batch["gt"].shape == (BATCH, 3, GT_SIZE, GT_SIZE)
    rate = batches / (time.perf_counter() - t)
    print(json.dumps({"peak_mb": _rss_mb("VmHWM"), "base_mb": base, "batches_per_s": rate}))


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    child_main(sys.argv[2:])
