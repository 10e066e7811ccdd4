"""Tiny generated images and configs for the engine tests (a few 32-48 px images, a tiny FSRCNN)."""
import textwrap

import numpy as np
import pytest
from PIL import Image

from tests.conftest import smooth_image

TINY_MODEL = "{type: FSRCNN, d: 8, s: 4, m: 1}"


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """data/train: three 48x48 RGB PNGs; data/val: a 32x32 RGB and a 32x32 gray PNG."""
    root = tmp_path_factory.mktemp("tiny_data")
    rng = np.random.default_rng(0)
    (root / "train").mkdir()
    (root / "val").mkdir()
    for i in range(3):
        Image.fromarray(smooth_image(rng, 48, 48, 3)).save(root / "train" / f"t{i}.png")
    Image.fromarray(smooth_image(rng, 32, 32, 3)).save(root / "val" / "v_rgb.png")
    Image.fromarray(smooth_image(rng, 32, 32, 1)[..., 0]).save(root / "val" / "v_gray.png")
    return root


def config_text(data, run_root, iters=5, every=5, model=TINY_MODEL, extra=""):
    return textwrap.dedent(f"""\
        name: tiny
        scale: 2
        seed: 3
        run_root: {run_root}
        model: {model}
        datasets:
          train: {{type: HRImageDataset, root: {data / 'train'}, gt_size: 16}}
          val: {{type: HRImageDataset, root: {data / 'val'}}}
        train:
          total_iters: {iters}
          batch_size: 2
          optimizer: {{type: Adam, lr: 1e-2}}
          scheduler: {{type: CosineAnnealingLR, T_max: 6, eta_min: 1e-4}}
          log_every: 1
        val: {{every: {every}}}
        checkpoint: {{every: {every}, keep: 2}}
        """) + extra


@pytest.fixture
def make_config(tmp_path, tiny_data):
    """make_config(**kw) -> path of a config written into tmp_path (run_root = tmp_path/runs)."""
    def make(name="cfg.yaml", **kw):
        path = tmp_path / name
        path.write_text(config_text(tiny_data, tmp_path / "runs", **kw))
        return path
    return make
