"""NIQE, LPIPS and DISTS against their reference implementations' own numbers (BasicSR 1.4.2's
calculate_niqe; the lpips 0.1.4 package's LPIPS class; DISTS_pytorch 0.1's DISTS), recorded by scripts/reference_metrics.py
(its docstring has the command: the originals need scipy, cv2 and the packages' sources, which the
tests do not install)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import framework as sg
from framework.io.image import read_image
from framework.metrics import dists as dists_metric
from framework.metrics import lpips as lpips_metric
from framework.metrics import niqe
from framework.metrics.measure import higher_is_better
from framework.metrics.perceptual import _network
from framework.nn.dists import DISTS
from framework.nn.lpips import LPIPS
from framework.weights import write_pth

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import reference_metrics  # noqa: E402

# python scripts/reference_metrics.py --basicsr basicsr-1.4.2 --lpips lpips-0.1.4 --dists dists-0.1 \
#     --extra /tmp/refpkgs
# (2026-12-06; scipy 1.17.1, opencv-python-headless 5.1.0.95, torch 2.13.0, numpy 2.4.6)
NIQE = {"gravel.png|0": 4.333702108571559, "gravel.png|4": 4.3903088964442905,
        "ihc.png|0": 3.294139110588496, "ihc.png|4": 3.296737507007412,
        "astronaut.png|0": 3.06460685312984, "astronaut.png|4": 2.9905116397098337,
        "brick.png|0": 9.477539501671316, "brick.png|4": 9.829278871854406}
LPIPS_VALUES = {"alex": 0.0009399490081705153, "vgg": 0.000852694793138653}
DISTS_VALUE = 0.052798569202423096
# srgrad's NIQE halves the image with its own MATLAB-bicubic kernel in float32, BasicSR with
# torch's float32 mv: pixels differ by up to 2e-7, which moves the AGGD shape's table look-up by one
# grid step on a few blocks. Measured: at most 7e-4 on the eight cases above.
NIQE_TOL = 1e-3


@pytest.mark.parametrize("case", ["gravel.png|0", "brick.png|4", "ihc.png|0"])
def test_niqe_equals_basicsr(case):
    name, crop = case.split("|")
    folder = "val" if name in ("gravel.png", "ihc.png") else "train"
    img, _ = read_image(ROOT / "data" / folder / name)
    assert abs(niqe(img, None, crop_border=int(crop)) - NIQE[case]) < NIQE_TOL


def test_niqe_conventions():
    img, _ = read_image(ROOT / "data/val/gravel.png")
    assert not higher_is_better("niqe")
    # 8-bit quantised: a sub-level change of the float image changes nothing
    assert niqe(img, None) == niqe(np.clip(img + 0.4 / 255, 0, 1), None)
    with pytest.raises(ValueError, match=r"niqe: the image must be at least 96x96 after the border crop, got 95x100"):
        niqe(img[:, :95, :100], None)
    with pytest.raises(ValueError, match="niqe: needs 1 or 3 channels"):
        niqe(np.zeros((2, 100, 100), np.float32), None)


@pytest.mark.parametrize("net", ["alex", "vgg"])
def test_lpips_equals_the_lpips_package(net, tmp_path):
    backbone, lin = reference_metrics.seeded_state(net)
    write_pth(tmp_path / "backbone.pth", backbone)
    write_pth(tmp_path / "lin.pth", lin)
    model = LPIPS(net, weights=str(tmp_path / "lin.pth"), backbone_weights=str(tmp_path / "backbone.pth"))
    a, b = (sg.tensor(x[None]) for x in reference_metrics.pair())
    with sg.no_grad():
        assert float(model(a, b, normalize=True).data.reshape(-1)[0]) == pytest.approx(LPIPS_VALUES[net], rel=1e-4)
        assert float(model(a, a, normalize=True).data.reshape(-1)[0]) == 0.0


def test_dists_equals_the_dists_package(tmp_path, monkeypatch):
    backbone, ab = reference_metrics.seeded_dists()
    write_pth(tmp_path / "vgg16.pth", backbone)
    write_pth(tmp_path / "weights.pt", ab)
    model = DISTS(weights=str(tmp_path / "weights.pt"), backbone_weights=str(tmp_path / "vgg16.pth"))
    a, b = (sg.tensor(x[None]) for x in reference_metrics.pair())
    with sg.no_grad():
        assert float(model(a, b).data[0]) == pytest.approx(DISTS_VALUE, rel=1e-4)
    monkeypatch.setenv("SRGRAD_DISTS_BACKBONE", str(tmp_path / "vgg16.pth"))
    monkeypatch.setenv("SRGRAD_DISTS_WEIGHTS", str(tmp_path / "weights.pt"))
    _network.cache_clear()
    assert dists_metric(*reference_metrics.pair()) == pytest.approx(DISTS_VALUE, rel=1e-4)
    assert not higher_is_better("dists")
    _network.cache_clear()


def test_lpips_metric_reads_the_environment(tmp_path, monkeypatch):
    backbone, lin = reference_metrics.seeded_state("alex")
    write_pth(tmp_path / "b.pth", backbone)
    write_pth(tmp_path / "l.pth", lin)
    a, b = reference_metrics.pair()
    monkeypatch.delenv("SRGRAD_LPIPS_ALEX_BACKBONE", raising=False)
    monkeypatch.delenv("SRGRAD_LPIPS_ALEX_WEIGHTS", raising=False)
    _network.cache_clear()
    with pytest.raises(FileNotFoundError, match=r"no backbone file given. Download "
                       r"https://download.pytorch.org/models/alexnet-owt-7be5be79.pth.*SRGRAD_LPIPS_ALEX_BACKBONE"):
        lpips_metric(a, b)
    monkeypatch.setenv("SRGRAD_LPIPS_ALEX_BACKBONE", str(tmp_path / "b.pth"))
    monkeypatch.setenv("SRGRAD_LPIPS_ALEX_WEIGHTS", str(tmp_path / "l.pth"))
    # the pair is already 8-bit: the metric's quantisation keeps it
    assert lpips_metric(a, b) == pytest.approx(LPIPS_VALUES["alex"], rel=1e-4)
    assert not higher_is_better("lpips")
    with pytest.raises(ValueError, match=r"lpips: the image must be at least 31x31 after the border crop"):
        lpips_metric(a[:, :30], b[:, :30])
    _network.cache_clear()
