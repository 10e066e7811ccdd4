"""DiffJPEG inside an exported model: a clear refusal (it is a training-time degradation), and no
file written."""
from __future__ import annotations

import pytest

from framework import nn
from framework.onnx import ConversionError, export

from ._util import image, require_onnx

require_onnx()


def test_diffjpeg_in_a_model_is_refused_clearly(tmp_path):
    model = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.DiffJPEG(quality=60))
    with pytest.raises(ConversionError, match=r"DiffJPEG \(F.diff_jpeg / nn.DiffJPEG\) is not "
                                              r"exported to ONNX: it simulates JPEG compression"):
        export(model, image(1, 3, 16, 16), tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()
