"""Dynamic ONNX graphs that are right at every size: the export runs a dynamic graph at sizes of
every residue class of its size rules (issue 37.10: two traces above a model's minimum size missed
the padding up to it), and the window-attention family builds its padding, window partition and
shifted-window mask from the input's Shape (issue 44.4), checked at every residue of the window."""
from __future__ import annotations

import numpy as np
import pytest

import framework.functional as F
from framework.onnx import ExportError, export
from tests.models.cases import SMALL, build

from ._util import Lambda, check, image, ort_run, require_onnx, srgrad_run

require_onnx()


def _small_doubles(m, x):  # below 12 rows the result doubles: no traced size shows it
    return x * 2.0 if x.shape[2] < 12 else x + 0.0


def test_a_size_rule_the_two_traces_do_not_show_is_caught(tmp_path):
    model = Lambda(_small_doubles)
    with pytest.raises(ExportError, match=r"dynamic axes are impossible: the graph traced at "
                                          r"16x16 differs from srgrad by 1\.\d+ at 3x\d+ .*nothing written"):
        export(model, image(1, 3, 16, 16, lo=1.0, hi=2.0), tmp_path / "m.onnx", dynamic=True)
    assert not (tmp_path / "m.onnx").exists()
    with pytest.warns(UserWarning, match=r"fixed-size export at \(1, 3, 16, 16\): the graph traced"):
        report = export(model, image(1, 3, 16, 16), tmp_path / "m.onnx")  # default: fixed size
    assert not report.dynamic and report.input_shape == [1, 3, 16, 16] and not report.checked_sizes


def test_check_sizes_cover_every_residue_of_the_size_rules():
    from framework.onnx.export import check_sizes
    sizes = check_sizes(16, 16, {4, 3})  # period 12
    for axis in (0, 1):
        small = [s[axis] for s in sizes if s[axis] < 16]
        large = [s[axis] for s in sizes if s[axis] > 16]
        assert sorted(n % 12 for n in small) == sorted(n % 12 for n in large) == list(range(12))
    assert all(h != w for h, w in sizes) and (16, 16) not in sizes
    big = check_sizes(64, 64, {32})  # above 16: every class small, parity only large
    assert len(big) == 34 and {s[0] % 2 for s in big if s[0] > 64} == {0, 1}


def test_realcugan_is_right_below_its_minimum_size(tmp_path):
    """issue 37.10: exported above spandrel's 32-pixel minimum, the graph skipped the padding up
    to it (ONNX Runtime differed by 0.27 at 23x31, 0.005 at 24x32, exit 0). The padding is now one
    pad_to_requirement computed from the Shape."""
    model, _ = build("RealCUGAN", 2)
    report, ops = check(model, image(1, 3, 36, 40), tmp_path, [image(1, 3, 23, 31, seed=1),
                                                                image(1, 3, 24, 32, seed=2),
                                                                image(1, 3, 5, 3, seed=3)],
                        atol=1e-4, dynamic=True)
    assert report.dynamic and "Range" in ops and any(h < 32 for h, _ in report.checked_sizes)


WINDOWED = {"SwinIR": 4, "HAT": 4, "Swin2SR": 4, "DAT": 4, "OmniSR": 4}  # SMALL's window sides


@pytest.mark.parametrize("name", sorted(WINDOWED))
def test_window_attention_family_is_dynamic_at_every_residue_of_the_window(tmp_path, name):
    """issue 44.4: one graph (exported at img_size, where SwinIR-style models read their stored
    mask) that ONNX Runtime runs like srgrad at heights and widths of every residue class of the
    window (twice over), within 1e-4."""
    model, _ = build(name, 2, 3, small=True)
    model.eval()
    size = SMALL[name].get("img_size", 8)
    ws = WINDOWED[name]
    others = [image(1, 3, 2 * ws + 1 + r, 4 * ws - r, seed=r) for r in range(2 * ws)]
    report, ops = check(model, image(1, 3, size, size), tmp_path, others, atol=1e-4, dynamic=True)
    assert report.dynamic
    for axis in (0, 1):
        assert {s[axis] % ws for s in report.checked_sizes} == set(range(ws))
    assert "Shape" in ops


def test_swinir_mask_is_built_in_the_graph(tmp_path):
    """The shifted-window mask is not a constant of the traced size: no initializer holds it."""
    import onnx
    from onnx import numpy_helper
    model, _ = build("SwinIR", 2, 3, small=True)
    export(model, image(1, 3, 8, 8), tmp_path / "m.onnx", dynamic=True)
    graph = onnx.load(str(tmp_path / "m.onnx")).graph
    arrays = [numpy_helper.to_array(i) for i in graph.initializer]
    assert not [a.shape for a in arrays if a.ndim and (a == -100).any()]  # only the scalar -100
    assert {"Range", "Equal", "Where"} <= {n.op_type for n in graph.node}


@pytest.mark.parametrize("mode", ["reflect", "replicate", "constant"])
def test_pad_to_multiple_is_exact_where_the_padding_reaches_the_image_size(tmp_path, mode):
    """A reflect padding as wide as the image falls back to replication in srgrad; the graph does
    the same (ONNX's reflect Pad refuses it): traced at 9x10, run at 1x2 and 3x3."""
    model = Lambda(lambda m, x: F.pad_to_multiple(x, 4, mode=mode, border=1) * 1.0)
    check(model, image(1, 2, 9, 10), tmp_path, [image(1, 2, 1, 2, seed=1), image(2, 2, 3, 3, seed=2)],
          dynamic=True)


def test_reshape_reads_a_size_from_the_shape(tmp_path):
    """(B, C, H W) -> (B, C, H, W) after a flatten: H is no number of the graph."""
    def unflatten(m, x):
        b, c, h, w = x.shape
        t = F.reshape(x, (b, c, h * w)) * 2.0
        return F.reshape(t, (b, c, h, w))
    report, ops = check(Lambda(unflatten), image(1, 2, 6, 7), tmp_path, [image(3, 2, 11, 4, seed=1)],
                        dynamic=True)
    assert report.dynamic and "Shape" in ops
    np.testing.assert_array_equal(ort_run(tmp_path / "m.onnx", image(1, 2, 5, 9))[0],
                                  srgrad_run(Lambda(unflatten), image(1, 2, 5, 9))[0])
