"""OmniSR: the original's keys in order (spandrel's detection keys; no relative-position index in the
state_dict), the published size's parameter count, the window / grid partitions and the channel
attention's groups worked by hand, parity with the torch twin (spandrel's network under its 16-pixel
size requirement) for window sizes, pe and bias on and off, gray images, padded sizes, output and
every gradient in float64 and float32; detection (spandrel's rule, window from the bias table, the
original's 8 without pe); .pth both ways; a published-layout file through srgrad's inference with
no model spec (thop's counters in it); errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.registry import MODELS
from framework.detect import detect
from models.omnisr import BlockMerge, BlockPartition

from . import basicsr_checks as checks
from . import published_checks


def spec(**kw):
    return {"type": "OmniSR", "num_feat": 8, "window_size": 4, "scale": 2, **kw}


def test_keys_are_the_originals():
    keys = checks.check_keys(spec())
    block = "residual_layer.0.residual_layer.0.layer"
    assert {f"{block}.0.fn.0.weight", "input.weight", "up.0.weight", f"{block}.0.fn.4.gate.1.weight",
            f"{block}.2.fn.rel_pos_bias.weight", f"{block}.5.fn.temperature",
            f"{block}.11.fn.qkv_dwconv.weight", "residual_layer.0.esa.conv4.bias"} <= set(keys)
    assert not any("rel_pos_indices" in k for k in keys)
    sd = checks.build(spec()).state_dict()
    assert sd[f"{block}.2.fn.rel_pos_bias.weight"].shape == (49, 4)  # (2 * 4 - 1)^2 offsets, 4 heads
    assert sd["residual_layer.0.esa.conv1.weight"].shape == (16, 8, 1, 1)  # max(8 // 4, 16)
    checks.check_keys(spec(pe=False, bias=False, block_num=2, res_num=2, num_in_ch=1, num_out_ch=4))


@pytest.mark.parametrize("scale,total,paper", [(2, 784_604, 771_724), (4, 805_376, 792_496)])
def test_published_parameter_count(scale, total, paper):
    """OmniSR (64 features, 5 OSAGs of 1 block, window 8): the paper's 772K (x2) and 792K (x4) are
    thop's counts, which skip the LayerNorm2d weights, the bias tables (Embedding) and the
    temperatures: 2,576 per OSAG."""
    model = checks.build({"type": "OmniSR", "res_num": 5, "scale": scale})
    skipped = sum(v.size for k, v in model.state_dict().items()
                  if "rel_pos_bias" in k or "temperature" in k
                  or (k.endswith(("norm.weight", "norm.bias")) and v.ndim == 1
                      and k.split(".layer.")[1].split(".")[0] in ("4", "5", "6", "10", "11", "12")))
    assert skipped == 5 * 2_576
    assert model.num_parameters() == total and total - skipped == paper


@pytest.mark.parametrize("grid", [False, True])
def test_partitions_by_hand(grid):
    """An 8x8 map, windows of 4: window (x, y) holds pixels (4x + i, 4y + j), or, for the grid,
    (2i + x, 2j + y); merge inverts it."""
    v = np.arange(64.0).reshape(1, 1, 8, 8)
    t = BlockPartition(4, grid)(sg.tensor(v)).data
    assert t.shape == (1, 2, 2, 4, 4, 1)
    for x, y, i, j in [(0, 1, 2, 3), (1, 0, 0, 1), (1, 1, 3, 3)]:
        r, c = (2 * i + x, 2 * j + y) if grid else (4 * x + i, 4 * y + j)
        assert t[0, x, y, i, j, 0] == v[0, 0, r, c]
    np.testing.assert_array_equal(BlockMerge(grid)(sg.tensor(t)).data, v)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw,shape", [
    ({}, (2, 3, 16, 8)),
    ({"window_size": 2, "pe": False, "bias": False, "block_num": 2, "res_num": 2}, (1, 3, 18, 17)),
    ({"num_feat": 12, "num_in_ch": 1, "num_out_ch": 1, "scale": 3, "window_size": 8}, (1, 1, 7, 12)),
])
def test_matches_the_twin(kw, shape, dtype):
    checks.check_parity(spec(**kw), shape, dtype)


@pytest.mark.parametrize("kw,needs", [
    ({}, {}), ({"num_feat": 12, "window_size": 8, "res_num": 2, "block_num": 2, "scale": 4}, {}),
    ({"pe": False, "bias": False, "scale": 3, "num_in_ch": 1, "num_out_ch": 1, "window_size": 8}, {}),
    ({"pe": False, "window_size": 2}, {"window_size": 2}),
    ({"num_in_ch": 3, "num_out_ch": 4, "scale": 2}, {})])
def test_detect(kw, needs):
    """Every keyword spandrel reads; without pe the window is the original's 8 unless given."""
    sd = checks.build(spec(**kw)).state_dict()
    want = {"type": "OmniSR", "num_in_ch": 3, "num_out_ch": 3, "block_num": 1, "pe": True,
            "res_num": 1, "bias": True, **spec(**kw)}
    assert detect(sd, **needs) == want
    if needs:  # the default 8 builds the same shapes: the window is the caller's to give
        assert detect(sd)["window_size"] == 8


def test_pth_both_ways(tmp_path):
    published_checks.check_pth_both_ways(spec(scale=3), (1, 3, 9, 6), tmp_path)


def test_published_file_runs_without_a_model_spec(tmp_path):
    """With thop's counters, as the published files (spandrel drops them too)."""
    torch = pytest.importorskip("torch")
    counters = {f"{m}{c}": torch.zeros(1, dtype=torch.float64) for m in ("", "input.", "up.0.")
                for c in ("total_ops", "total_params")}
    published_checks.check_published_file({"type": "OmniSR", "num_feat": 16, "window_size": 8,
                                           "scale": 2}, (1, 3, 12, 9), tmp_path, extra=counters)


def test_init_is_torchs():
    """torch's defaults, as the original (its own init is commented out): convs and linears
    uniform, the bias tables N(0, 1) (nn.Embedding's), temperatures ones."""
    model = checks.build({"type": "OmniSR", "num_feat": 32, "window_size": 8})
    sd = model.state_dict()
    block = "residual_layer.0.residual_layer.0.layer"
    table = sd[f"{block}.2.fn.rel_pos_bias.weight"]
    assert table.shape == (225, 4) and abs(table.std() - 1) < 0.1 and abs(table.mean()) < 0.15
    np.testing.assert_array_equal(sd[f"{block}.5.fn.temperature"], 1)
    qkv = sd[f"{block}.2.fn.to_qkv.weight"]
    assert np.abs(qkv).max() <= 1 / np.sqrt(32) and np.abs(qkv).max() > 0.95 / np.sqrt(32)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(), (2, 3, 8, 8))


@pytest.mark.parametrize("kw,error,match", [
    ({"num_feat": 10}, ValueError, r"OmniSR: num_feat must be a multiple of 4 \(the attentions' heads\)"),
    ({"window_size": 0}, ValueError, r"OmniSR: window_size must be a positive int"),
    ({"pe": 1}, TypeError, r"OmniSR: pe must be"),
    ({"up_scale": 2}, TypeError, r"up_scale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build(spec(**kw))
