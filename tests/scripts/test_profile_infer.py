"""scripts/profile_infer.py: srgrad's per-category times of one image add up to its total and name
the model's ops, the wrapped forwards are put back, and ONNX Runtime's profile is read into the
same categories (its convs counted), leaving no temporary folder behind."""
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
profile_infer = pytest.importorskip("profile_infer")


def _espcn():
    import bench_models as bm
    spec, _ = bm.CASES["ESPCN"]
    return bm._ours_model(spec), np.random.default_rng(0).uniform(0, 1, (1, 3, 12, 12)).astype(np.float32)


def test_srgrad_categories_add_up_and_the_forwards_are_put_back():
    from framework.functional.conv import Conv2dFunction
    before = Conv2dFunction.__dict__["forward"]
    model, lq = _espcn()
    total, cats = profile_infer.ours(model, lq, repeat=2)
    assert list(cats) == list(profile_infer.CATEGORIES)
    assert cats["conv"] > 0 and cats["shuffle/resize"] > 0  # ESPCN: convs, then a pixel shuffle
    assert cats["concat/layout"] == 0
    # "rest" is the mean total minus the ops: the categories add up to the mean run
    assert abs(sum(cats.values()) - total) < 0.5 * total
    assert Conv2dFunction.__dict__["forward"] is before


def test_onnxruntime_profile_is_read_into_the_categories(monkeypatch, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model, lq = _espcn()
    total, cats, version = profile_infer.onnxruntime(model, lq, threads=1, repeat=2)
    assert version and total > 0
    assert cats["conv"] > 0 and cats["conv"] < 2 * total
    assert list(tmp_path.iterdir()) == []  # the export and the profile were removed
