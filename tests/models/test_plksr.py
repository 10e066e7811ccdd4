"""PLKSR: the original's keys in order for every channel mixer and large-kernel type, the published
sizes' parameter counts, parity with the torch twin (train(): output and every gradient in float64 and
float32; eval(): the output, the original's in-place partial conv having no backward), the partial
conv by hand, an Adam step, .pth both ways, published files through the inference path, ONNX export,
detection (spandrel's rule and the keywords it cannot read), errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.registry import MODELS
from framework.detect import detect
from models.plksr import PLKConv2d

from . import basicsr_checks as checks
from . import pth_checks

SMALL = {"type": "PLKSR", "dim": 8, "n_blocks": 2, "kernel_size": 7}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


VARIANTS = [spec(), spec(3, ccm_type="DCCM", use_ea=False), spec(1, ccm_type="ICCM", with_idt=True),
            spec(2, lk_type="SparsePLK", n_blocks=1), spec(4, lk_type="SparsePLK", use_max_kernel=True,
                                                          sparse_kernels=[3, 5], sparse_dilations=[2, 1]),
            spec(2, lk_type="RectSparsePLK", kernel_size=9, split_ratio=0.5)]
IDS = [f"{i}" for i in range(len(VARIANTS))]


def test_state_dict_keys_are_the_originals():
    block = ["channe_mixer.0.weight", "channe_mixer.0.bias", "channe_mixer.2.weight", "channe_mixer.2.bias",
             "lk.conv.weight", "lk.conv.bias", "attn.f.0.weight", "attn.f.0.bias", "refine.weight",
             "refine.bias"]
    want = ["feats.0.weight", "feats.0.bias"] + [f"feats.{i}.{k}" for i in (1, 2) for k in block] + [
        "feats.3.weight", "feats.3.bias"]
    assert checks.check_keys(spec()) == want
    sd = checks.build(spec(3)).state_dict()
    assert sd["feats.1.lk.conv.weight"].shape == (2, 2, 7, 7)  # int(8 x 0.25) channels
    assert sd["feats.3.weight"].shape == (27, 8, 3, 3)


@pytest.mark.parametrize("s", VARIANTS, ids=IDS)
def test_keys_and_shapes_equal_the_twins(s):
    checks.check_keys(s)


def _conv(cin, cout, kh, kw=None):
    return cin * cout * kh * (kw or kh) + cout


@pytest.mark.parametrize("n_blocks,k,ea,want", [(28, 17, True, 7_386_096), (12, 13, False, 2_370_544)])
def test_published_sizes(n_blocks, k, ea, want):
    """PLKSR (DCCM, 28 blocks, 17x17 on 16 of 64 channels, EA) and PLKSR-tiny (12 blocks, 13x13, no
    EA) at x4, layer by layer."""
    block = _conv(64, 128, 3) + _conv(128, 64, 3) + _conv(16, 16, k) + (_conv(64, 64, 3) if ea else 0) + _conv(64, 64, 1)
    count = _conv(3, 64, 3) + n_blocks * block + _conv(64, 48, 3)
    s = {"type": "PLKSR", "n_blocks": n_blocks, "kernel_size": k, "use_ea": ea, "ccm_type": "DCCM"}
    assert checks.build(s).num_parameters() == count == want


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("s", VARIANTS, ids=IDS)
def test_matches_the_twin_in_train(s, dtype):
    checks.check_parity(s, (2, 3, 6, 5), dtype)


@pytest.mark.parametrize("s", VARIANTS, ids=IDS)
def test_matches_the_twin_in_eval(s):
    """eval(): the original writes the partial conv in place (no backward there): outputs only."""
    checks.check_eval_output(s, (2, 3, 7, 6))


def test_partial_conv_by_hand():
    """The large kernel changes the first `dim` channels only; the others pass through bit for bit,
    and so does their gradient."""
    layer = PLKConv2d(2, 3).double()
    x = sg.tensor(np.random.default_rng(0).standard_normal((1, 5, 4, 4)), requires_grad=True)
    y = layer(x)
    np.testing.assert_array_equal(y.data[:, 2:], x.data[:, 2:])
    np.testing.assert_allclose(y.data[:, :2], layer.conv(sg.tensor(x.data[:, :2])).data, rtol=0, atol=0)
    g = np.random.default_rng(1).standard_normal(y.shape)
    y.backward(g)
    np.testing.assert_array_equal(x.grad.data[:, 2:], g[:, 2:])


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_both_ways(tmp_path):
    pth_checks.check_pth_both_ways(spec(3, ccm_type="DCCM"), (1, 3, 5, 6), tmp_path)


@pytest.mark.parametrize("s", [
    {"type": "PLKSR", "dim": 16, "n_blocks": 2, "scale": 4, "ccm_type": "DCCM", "kernel_size": 17},  # PLKSR
    {"type": "PLKSR", "dim": 16, "n_blocks": 2, "scale": 2, "ccm_type": "DCCM", "kernel_size": 13,
     "use_ea": False},  # PLKSR-tiny's layout
])
def test_published_files_run_through_inference(s, tmp_path):
    want = {**s, "split_ratio": 0.25, "lk_type": "PLK", "use_ea": s.get("use_ea", True)}
    pth_checks.check_published_file_infers(s, (1, 3, 6, 5), tmp_path, want)


def test_export_to_onnx(tmp_path):
    ops = pth_checks.check_export_cli(spec(2, ccm_type="DCCM"), (9, 11), tmp_path, other_shape=(2, 3, 6, 5))
    assert {"Conv", "Split", "Concat", "DepthToSpace"} <= set(ops)


@pytest.mark.parametrize("s", VARIANTS[:4] + [VARIANTS[5], spec(2, dim=12, split_ratio=0.3),
                                               spec(2, dim=48, split_ratio=7 / 48, n_blocks=1)], ids=str)
def test_detect_round_trip(s):
    """Every keyword the weights tell comes back (split_ratio as a value giving the same channels);
    with_idt (no weight of its own) is read as False, the original's convention."""
    state = checks.build(s).state_dict()
    got = detect(state)
    model = MODELS.build(got)
    model.load_state_dict(state, strict=True)
    assert int(got["dim"] * got["split_ratio"]) == int(s["dim"] * s.get("split_ratio", 0.25))
    for k in ("dim", "n_blocks", "scale", "kernel_size", "lk_type", "use_ea", "ccm_type"):
        if k in s and not (k == "kernel_size" and s.get("lk_type") == "SparsePLK"):
            assert got[k] == s[k], k
    assert got.get("with_idt", False) is False


def test_detect_sparse_plk_needs_what_the_weights_cannot_tell():
    """SparsePLK's dilations and use_max_kernel change no weight shape: the original's default four
    5x5 convs are read with its default dilations (as spandrel); other kernels ask for them."""
    s = VARIANTS[4]  # [3, 5] with dilations [2, 1] plus a max-kernel conv
    state = checks.build(s).state_dict()
    with pytest.raises(ValueError, match=r"sparse_dilations \(SparsePLK's dilations change no weight"):
        detect(state)
    got = detect(state, use_max_kernel=True, sparse_dilations=[2, 1])
    assert got["sparse_kernels"] == [3, 5] and got["kernel_size"] == 7
    MODELS.build(got).load_state_dict(state, strict=True)


def test_detect_reads_spandrels_files():
    twins = pytest.importorskip("tests.twins")
    sd = twins.build_twin({"type": "PLKSR", "dim": 64, "n_blocks": 2, "scale": 4, "ccm_type": "DCCM"}).state_dict()
    assert {"feats.0.weight", "feats.1.lk.conv.weight", "feats.1.refine.weight",
            "feats.1.channe_mixer.0.weight"} <= set(sd)  # spandrel's KeyCondition
    assert detect(sd) == {"type": "PLKSR", "dim": 64, "n_blocks": 2, "scale": 4, "ccm_type": "DCCM",
                          "use_ea": True, "lk_type": "PLK", "kernel_size": 17, "split_ratio": 0.25}


@pytest.mark.parametrize("kw,error,match", [
    ({"dim": 0}, ValueError, r"PLKSR: dim must be a positive int"),
    ({"kernel_size": 8}, ValueError, r"PLKSR: kernel_size must be odd"),
    ({"split_ratio": 0.01}, ValueError, r"PLKSR: split_ratio 0.01 leaves int\(dim \* split_ratio\) = 0"),
    ({"split_ratio": 1.5}, ValueError, r"PLKSR: split_ratio must be in \(0, 1\]"),
    ({"ccm_type": "dccm"}, ValueError, r"PLKSR: ccm_type must be one of .*did you mean 'DCCM'"),
    ({"lk_type": "Sparse"}, ValueError, r"PLKSR: lk_type must be one of"),
    ({"sparse_kernels": [5, 4]}, ValueError, r"PLKSR: sparse_kernels must be odd"),
    ({"sparse_dilations": [1, 2]}, ValueError, r"PLKSR: sparse_dilations must be a list of 4 ints"),
    ({"use_ea": 1}, TypeError, r"PLKSR: use_ea must be a bool"),
    ({"upscaling_factor": 4}, TypeError, r"upscaling_factor"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "PLKSR", **kw})
