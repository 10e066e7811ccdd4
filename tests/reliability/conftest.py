"""Tiny images and configs for the reliability tests, and srgrad-train run as a subprocess."""
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
DRIVER = HERE / "train_driver.py"


def smooth_image(rng, h, w, channels=3):
    """uint8 (h, w, channels) of low-frequency waves plus a little noise."""
    y, x = np.mgrid[0:h, 0:w] / max(h, w)
    planes = [0.5 + 0.35 * np.sin(2 * np.pi * (fx * x + fy * y) + ph)
              + 0.05 * rng.standard_normal((h, w))
              for fx, fy, ph in rng.uniform(1, 6, (channels, 3))]
    return (np.clip(np.stack(planes, -1), 0, 1) * 255).round().astype(np.uint8)


@pytest.fixture(scope="session")
def tiny_train(tmp_path_factory):
    """A folder of three 16x16 RGB PNGs."""
    root = tmp_path_factory.mktemp("tiny_train")
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray(smooth_image(rng, 16, 16)).save(root / f"t{i}.png")
    return root


def config_text(train_root, run_root, iters=6, every=1, keep=2, extra="", train_extra=""):
    """A tiny ESPCN x2 run: 8x8 crops, batch 2, Adam + cosine schedule, no validation set.
    `train_extra` is added to the datasets.train mapping (e.g. ", bad_files: skip")."""
    return textwrap.dedent(f"""\
        name: tiny
        scale: 2
        seed: 5
        run_root: {run_root}
        model: {{type: ESPCN, num_feat: [4, 4]}}
        datasets:
          train: {{type: HRImageDataset, root: {train_root}, gt_size: 8{train_extra}}}
        train:
          total_iters: {iters}
          batch_size: 2
          optimizer: {{type: Adam, lr: 1e-2}}
          scheduler: {{type: CosineAnnealingLR, T_max: {iters}, eta_min: 1e-4}}
          log_every: 1
        checkpoint: {{every: {every}, keep: {keep}}}
        """) + extra


@pytest.fixture
def make_config(tmp_path, tiny_train):
    """make_config(name="cfg.yaml", train_root=tiny_train, **config_text keywords) -> path;
    run_root is tmp_path/runs."""
    def make(name="cfg.yaml", train_root=None, **kw):
        path = tmp_path / name
        path.write_text(config_text(train_root or tiny_train, tmp_path / "runs", **kw))
        return path
    return make


def driver_env(**extra):
    env = dict(os.environ)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start_train(args, **env):
    """Popen of srgrad-train (through train_driver.py) with stdout/stderr captured."""
    return subprocess.Popen([sys.executable, str(DRIVER), *map(str, args), "--no-progress"],
                            cwd=REPO, env=driver_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run_train(args, timeout=120, **env):
    """Run srgrad-train to the end: CompletedProcess with text stdout/stderr."""
    return subprocess.run([sys.executable, str(DRIVER), *map(str, args), "--no-progress"],
                          cwd=REPO, env=driver_env(**env), capture_output=True, text=True,
                          timeout=timeout)
