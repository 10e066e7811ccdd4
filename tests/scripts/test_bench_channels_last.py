"""scripts/bench_channels_last.py: the channels-last AMX forward it measures computes the planes
kernel's bits (the same tile products in the same order), at shapes with row ends and padding inside
blocks and channels of magnitudes e^-3..e^3; where a sum or a layout is off, some output differs."""
import sys
from pathlib import Path

import numpy as np
import pytest

from framework import precision

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
bench_channels_last = pytest.importorskip("bench_channels_last")

needs_amx = pytest.mark.skipif(not precision.support().amx_bf16,
                               reason="AMX-BF16: this CPU or OS has no AMX tiles")


@needs_amx
@pytest.mark.parametrize("C, O, H, W", [(32, 32, 5, 21), (64, 32, 7, 9), (32, 64, 3, 40)])
@pytest.mark.parametrize("mode", [0, 3])
def test_the_channels_last_kernel_gives_the_planes_kernels_bits(C, O, H, W, mode):
    assert bench_channels_last.same_bits(C, O, H, W, seed=H, mode=mode)


@needs_amx
def test_the_layouts_put_each_value_where_the_kernel_reads_it():
    x, w, bias, xs, wb, dst, offsets, Wp, Q = bench_channels_last.case(32, 32, 5, 21, np.random.default_rng(1))
    assert wb.shape == (9, 1, 1, 16, 64)
    # pair k of output o at [k, 2 o + half]: channel 2k + half of output o at tap 0
    assert wb[0, 0, 0, 3, 2 * 5 + 1] == bench_channels_last.round_bits(w[5, 7, 0, 0])
    assert xs[0, 0, Wp + 1 + 4, 6] == bench_channels_last.round_bits(x[0, 6, 0, 4])
