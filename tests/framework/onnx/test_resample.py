"""interpolate through ONNX: every mode and option ONNX's Resize can express becomes one Resize node
that ONNX Runtime runs to srgrad's values (odd sizes, up and down, scale_factor and size); what it
cannot (lanczos, area, MATLAB imresize, antialias with align_corners, where ORT's rule differs) is
exported as weight tables, equal to srgrad at the traced size and refused with dynamic axes."""
from __future__ import annotations

import numpy as np
import pytest

import framework.functional as F
from framework.onnx import ExportError, export

from ._util import Lambda, check, image, ort_run, require_onnx, srgrad_run

require_onnx()

CONFIGS = [("nearest", None, False), ("nearest-exact", None, False)] + [
    (mode, ac, aa) for mode in ("bilinear", "bicubic") for ac in (False, True) for aa in (False, True)]
GEOMETRY = [dict(scale_factor=2), dict(scale_factor=3), dict(scale_factor=0.5),
            dict(scale_factor=1 / 3), dict(scale_factor=(2, 0.5)), dict(size=(11, 4)),
            dict(size=(1, 13))]


def _model(**kw):
    return Lambda(lambda m, x: F.interpolate(x, **kw))


@pytest.mark.filterwarnings("ignore:export. fixed-size")
@pytest.mark.parametrize("geo", GEOMETRY, ids=[str(g) for g in GEOMETRY])
@pytest.mark.parametrize("mode,align_corners,antialias", CONFIGS)
def test_interpolate_equals_srgrad(tmp_path, mode, align_corners, antialias, geo):
    model = _model(mode=mode, align_corners=align_corners, antialias=antialias, **geo)
    x = image(1, 2, 7, 9)
    rep, ops = check(model, x, tmp_path)
    if rep.dynamic:  # one graph, checked at another odd size too
        other = image(2, 2, 9, 5, seed=1)
        np.testing.assert_allclose(ort_run(rep.path, other)[0], srgrad_run(model, other)[0],
                                   rtol=0, atol=1e-5)
    if antialias and align_corners and ops != ["Resize"]:
        # ORT maps antialiased samples with align_corners, torch (and srgrad) do not
        assert "MatMul" in ops and "ONNX Runtime's Resize differs" in rep.notes[0]
        return
    assert ops == ["Resize"]
    if not (antialias and align_corners):  # one Resize valid at every size
        assert rep.dynamic, rep.reason


@pytest.mark.parametrize("fn", [
    lambda m, x: F.interpolate(x, scale_factor=2, mode="lanczos"),
    lambda m, x: F.interpolate(x, scale_factor=0.5, mode="lanczos", antialias=True),
    lambda m, x: F.interpolate(x, size=(3, 4), mode="area"),
    lambda m, x: F.imresize(x, 0.5),
    lambda m, x: F.imresize(x, 3, kernel="lanczos3"),
], ids=["lanczos_up", "lanczos_aa_down", "area", "imresize_down", "imresize_up"])
def test_weight_table_fallback(tmp_path, fn):
    model, x = Lambda(fn), image(1, 3, 7, 9)
    rep, ops = check(model, x, tmp_path, dynamic=False)
    assert "Resize" not in ops and "MatMul" in ops and not rep.dynamic
    with pytest.raises(ExportError, match="weight tables.*7x9 input only"):
        export(model, x, tmp_path / "dyn.onnx", dynamic=True)
    assert not (tmp_path / "dyn.onnx").exists()


def test_opset_17_has_no_antialias_resize(tmp_path):
    model = _model(scale_factor=0.5, mode="bilinear", antialias=True)
    rep, ops = check(model, image(1, 1, 8, 6), tmp_path, dynamic=False, opset=17)
    assert ops == ["MatMul", "MatMul"] and rep.opset == 17
    rep, ops = check(_model(scale_factor=2, mode="bicubic"), image(1, 1, 5, 3), tmp_path, opset=17)
    assert ops == ["Resize"] and rep.dynamic
