"""engine/run/precompile.py: the dry run lists a run's kernel signatures without compiling, the children
compile them into the cache, and the run itself then compiles nothing."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

import framework.data  # noqa: F401  (registers the datasets)
from framework import _jit
from framework.engine.run import precompile
from framework.engine.config.schema import load_config, parse_config
from framework.functional import _im2col
from framework.registry import DATASETS, RECIPES


def test_recording_lists_calls_and_runs_nothing():
    dst = np.full(4, -1.0, np.float32)
    with _jit.recording() as calls:
        assert _im2col._zero(dst, 0, 4) is None
    assert (dst == -1).all()  # not run
    assert [(d, str(s)) for d, s in calls] == [
        (_im2col._zero, "(Array(float32, 1, 'C', False, aligned=True), int64, int64)")]
    _im2col._zero(dst, 0, 4)  # outside: runs again
    assert (dst == 0).all()


def test_the_dry_run_lists_the_signatures_of_a_step(make_tiny_config):
    cfg = load_config(make_tiny_config(), [])
    items = precompile._dry_run(cfg)
    names = {f"{d.py_func.__module__.rsplit('.', 1)[-1]}.{d.py_func.__name__}" for d, _ in items}
    # ESPCN with 4 features: im2col convs (below the direct route's channel floor), tanh, pixel shuffle,
    # L1, and the data path's imresize
    assert {"_im2col.im2col", "_im2col.col2im", "activation._tanh_grad_kernel",
            "pixel_shuffle._permute", "loss._reduced_kernel", "resample._resample_planes"} <= names
    assert all(str(sig).count("float32") for _, sig in items if "resample" not in str(sig))
    assert len(items) == len({(id(d), s) for d, s in items})  # no duplicates
    parallel = [d.targetoptions.get("parallel", False) for d, _ in items]
    assert parallel == sorted(parallel, reverse=True)  # parallel kernels (slowest to build) first


def test_srgrad_train_precompiles_once_and_then_compiles_nothing(make_tiny_config, tmp_path):
    config = make_tiny_config(iters=1)
    env = dict(os.environ, SRGRAD_PRECOMPILE="1", NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               NUMBA_DEBUG_CACHE="1")
    cmd = [sys.executable, "-c", "from framework.engine.commands.cli import train; train()", str(config),
           "--no-progress"]
    first = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    done = re.search(r"compiled (\d+) of (\d+) kernel signatures", first.stdout)
    assert done and int(done[1]) == int(done[2]) > 5, first.stdout[-3000:]
    after = first.stdout[done.end():]
    assert "data saved to" not in after  # the run compiled nothing itself
    assert "data loaded from" in after   # it read the children's machine code
    # the marker: a second run of the config starts no children
    second = subprocess.run(cmd + ["--set", "name=again"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "compiling this run's kernels" not in second.stdout
    assert "data saved to" not in second.stdout


def test_a_failing_dry_run_costs_nothing_but_time(make_tiny_config, tmp_path, monkeypatch):
    config = make_tiny_config()
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    said = []
    reports = precompile.run(config, ["model.type=NoSuchModel"], jobs=1, say=said.append)
    assert "error" in reports[0] and "NoSuchModel" in reports[0]["error"]
    assert "skipped, the run compiles as it goes" in said[-1]


def test_srgrad_precompile_ahead_of_time_leaves_srgrad_train_nothing_to_do(make_tiny_config, tmp_path):
    config = make_tiny_config(iters=1)
    env = dict(os.environ, SRGRAD_PRECOMPILE="1", NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               NUMBA_DEBUG_CACHE="1")
    aot = subprocess.run([sys.executable, "-m", "framework.engine.run.precompile", str(config), "--jobs", "1"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert aot.returncode == 0, aot.stderr[-3000:]
    assert re.search(r"compiled (\d+) of \1 kernel signatures", aot.stdout), aot.stdout[-2000:]
    run = subprocess.run([sys.executable, "-c", "from framework.engine.commands.cli import train; train()",
                          str(config), "--no-progress"], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "compiling this run's kernels" not in run.stdout  # the marker was written
    assert "data saved to" not in run.stdout and "data loaded from" in run.stdout


def test_the_marker_follows_what_decides_the_kernels(make_tiny_config, monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    config = make_tiny_config()
    marker = precompile._marker(load_config(config, []))
    same = ["train.total_iters=3", "train.batch_size=3", "train.log_every=2", "name=other",
            "train.optimizer.lr=0.5"]
    assert precompile._marker(load_config(config, same)) == marker
    for change in ("model.num_feat=[8, 4]", "dtype=float64", "train.loss.type=MSELoss"):
        assert precompile._marker(load_config(config, [change])) != marker, change


# -- every registered dataset and recipe --------------------------------------------------------
def _paired(root, tmp_path):
    gt, lq = tmp_path / "gt", tmp_path / "lq"
    gt.mkdir()
    lq.mkdir()
    for path in sorted(root.glob("*.png")):
        image = Image.open(path)
        image.save(gt / path.name)
        image.resize((8, 8), Image.BICUBIC).save(lq / path.name)
    return f"{{type: PairedImageDataset, gt_root: {gt}, lq_root: {lq}, gt_size: 8}}"


# a training set of each registered dataset on tiny_train's 16x16 images (a new dataset needs its
# entry here), and what each recipe adds to a config
DATASET_BLOCKS = {
    "HRImageDataset": lambda root, tmp: f"{{type: HRImageDataset, root: {root}, gt_size: 8}}",
    "PairedImageDataset": _paired,
    "RealESRGANDataset": lambda root, tmp: f"{{type: RealESRGANDataset, root: {root}, gt_size: 8, "
                                           f"crop_pad_size: 16, gt_usm: true}}",
    "ZSSRDataset": lambda root, tmp: f"{{type: ZSSRDataset, path: {sorted(root.glob('*.png'))[0]}, "
                                     f"crop_size: 8}}",
    "GaussianNoiseDataset": lambda root, tmp: f"{{type: GaussianNoiseDataset, root: {root}, sigma: 25, "
                                              f"gt_size: 8}}",
    "JPEGDataset": lambda root, tmp: f"{{type: JPEGDataset, root: {root}, gt_size: 8}}",
}
X1 = ("GaussianNoiseDataset", "JPEGDataset")  # restoration: scale 1
RECIPE_KEYS = {
    "sr": ("", ""),
    "gan": ("model_d: {type: UNetDiscriminatorSN, num_in_ch: 3, num_feat: 4}\n",
            "  optimizer_d: {type: Adam, lr: 1.0e-3}\n"
            "  losses: {pixel: {type: L1Loss}, gan: {type: GANLoss, gan_type: vanilla}}\n"),
    "zssr": ("", ""),
    "fbcnn": ("", "  losses: {pixel: {type: L1Loss}, qf: {type: L1Loss, loss_weight: 0.001}}\n"),
}
ONE_IMAGE = ("ZSSRDataset", "zssr")  # ZSSR's recipe and its father/son pairs go together
# FBCNN's recipe needs its model (the QF predictor) and a dataset that gives the QF
QF = ("JPEGDataset", "fbcnn", "{type: FBCNN, nc: [4, 4, 4, 512], nb: 1}")


@pytest.mark.parametrize("recipe", RECIPES.names())
# every dataset a run can train on (not an LR-only test set: SingleImageDataset, has_gt False)
@pytest.mark.parametrize("dataset", [n for n in DATASETS.names()
                                     if getattr(DATASETS.get(n), "has_gt", True)])
def test_the_dry_run_works_for_every_dataset_and_recipe(dataset, recipe, tiny_train, tmp_path):
    """`srgrad-precompile` failed on every RealESRGANDataset config: its dry run skipped every
    kernel call, and the dataset uses a kernel's result in Python (TypeError on None). The batch is
    now fetched with its kernels running, the recipe's dry step recorded."""
    assert dataset in DATASET_BLOCKS and recipe in RECIPE_KEYS, "add the new one to the tables"
    if (dataset == ONE_IMAGE[0]) != (recipe == ONE_IMAGE[1]):
        pytest.skip("recipe zssr trains on a ZSSRDataset only, and a ZSSRDataset only with it")
    if recipe == QF[1] and dataset != QF[0]:
        pytest.skip("recipe fbcnn trains on a JPEGDataset (its qf) only")
    top, train = RECIPE_KEYS[recipe]
    block = DATASET_BLOCKS[dataset](tiny_train, tmp_path)
    sharp = "  gt_usm: [pixel]\n" if "gt_usm: true" in block else ""
    cfg = parse_config(textwrap.dedent(f"""\
        name: dry
        scale: {1 if dataset in X1 else 2}
        run_root: {tmp_path / 'runs'}
        model: {QF[2] if recipe == QF[1] else '{type: ESPCN, num_feat: [4, 4]}'}
        datasets:
          train: {block}
        """) + top + textwrap.dedent("""\
        train:
          total_iters: 2
          batch_size: 2
          optimizer: {type: Adam, lr: 1.0e-3}
        """) + train + sharp)
    items = precompile._dry_run(cfg)
    names = {f"{d.py_func.__module__.rsplit('.', 1)[-1]}.{d.py_func.__name__}" for d, _ in items}
    # the generator's step and forward (im2col convs, tanh (FBCNN's beta), pixel shuffle, L1)
    assert {"_im2col.im2col", "_im2col.col2im", "activation._tanh_grad_kernel",
            "loss._reduced_kernel"} <= names, names
    assert dataset in X1 or "pixel_shuffle._permute" in names, names
    if recipe == "gan":  # the discriminator's leaky ReLUs, forward and backward
        assert {"activation._leaky_relu_kernel", "activation._leaky_relu_grad_kernel"} <= names
    if dataset == "RealESRGANDataset":  # the degradation's blur, noise and sinc, and the USM
        assert {"filtering._correlate", "noise._levels_used", "sinc._j1_flat"} <= names, names
    assert len(items) == len({(id(d), s) for d, s in items})


def test_a_factorys_variants_are_claimed_apart(tmp_path):
    """_direct.py's weight-gradient drivers for 16- and 32-channel registers share a qualname and an
    argument signature: each is claimed (and so compiled) once, neither stands in for the other."""
    from framework.functional import _direct
    a, b = _direct._weight_grad_tasks_kernel(32, 8), _direct._weight_grad_tasks_kernel(16, 8)
    assert a.py_func.__qualname__ == b.py_func.__qualname__
    sig = "(same signature)"
    assert precompile._claim(str(tmp_path), a, sig) and precompile._claim(str(tmp_path), b, sig)
    assert not precompile._claim(str(tmp_path), a, sig)  # a second claim of the same one is refused
