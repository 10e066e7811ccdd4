"""Swift-SRGAN's ONNX export: separable convs, BatchNorm with trained running statistics (eval),
PReLU, tanh, as one dynamic graph that ONNX Runtime runs like srgrad at two sizes."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from tests.models.cases import build

from ._util import check, image, require_onnx

require_onnx()


@pytest.mark.parametrize("scale,channels", [(2, 3), (4, 1)])
def test_dynamic_export_runs_like_srgrad(tmp_path, scale, channels):
    model, _ = build("SwiftSRGAN", scale, channels, num_channels=8, num_blocks=2)
    model.train()
    with sg.no_grad():  # running statistics away from 0 / 1
        for _ in range(2):
            model(image(2, channels, 8, 8) * 3.0)
    report, ops = check(model, image(2, channels, 7, 9), tmp_path,
                        others=[image(1, channels, 5, 4)], dynamic=True, atol=1e-5)
    assert report.output_shapes == [["batch", channels, "output_height", "output_width"]]
    assert {"BatchNormalization", "PRelu", "Tanh", "DepthToSpace"} <= set(ops) or \
        {"PRelu", "Tanh", "DepthToSpace"} <= set(ops), ops
    assert not np.allclose(model.residual[0].block1.bn.running_var.data, 1.0)
