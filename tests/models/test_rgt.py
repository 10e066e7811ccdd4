"""RGT: the original's keys in order, parity with the torch twin (output and every gradient of an
L1 loss, float64 and float32) in training (one reduction at 16 px) and evaluation (two), padded
and shifted rectangle windows, an Adam step, a .pth round trip, errors (sizes the original cannot
run; below 16 px padded as spandrel's call API pads), detection (round trips, the published rgt / rgt_s layouts, the heads rule) and the done-when
check: files built by spandrel 0.4.2's own RGT class through srgrad-infer give spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.card import card
from framework.detect import detect, identify
from framework.registry import MODELS

from . import basicsr_checks as checks
from .spandrel_checks import check_spandrel_file

# group 0: blocks 0 (L-SA), 1 (RG-SA), 2 (L-SA, shifted); group 1: blocks 0 (L-SA, shifted), 1
SMALL = {"type": "RGT", "img_size": 8, "embed_dim": 32, "split_size": [2, 4], "depth": [3, 2],
         "num_heads": [4, 2], "mlp_ratio": 2.0, "drop_path_rate": 0.0}


def spec(**kw):
    return {**SMALL, "scale": 2, **kw}


def test_state_dict_keys_are_the_originals():
    keys = checks.check_keys(spec())
    for key in ("layers.0.blocks.0.gamma", "layers.0.blocks.0.attn.get_v.weight",
                "layers.0.blocks.0.attn.attns.1.pos.pos3.2.weight",
                "layers.0.blocks.1.attn.reduction1.weight", "layers.0.blocks.1.attn.norm_act.0.bias",
                "layers.0.blocks.1.attn.cpe.weight", "layers.1.blocks.1.mlp.sg.conv.weight",
                "upsample.0.weight", "conv_last.weight"):
        assert key in keys, key
    assert [k for k in keys if "attn_mask" in k] == [
        f"layers.{i}.blocks.{j}.attn.attn_mask_{m}" for i, j in ((0, 2), (1, 0)) for m in (0, 1)]


PARITY = [({}, (2, 3, 16, 18)),  # training: one reduction to 4x4
          ({"split_size": [4, 2], "resi_connection": "3conv", "scale": 3, "qkv_bias": False,
            "c_ratio": 0.25, "num_heads": [4, 4]}, (2, 3, 17, 21)),
          ({"in_chans": 1, "depth": [2], "num_heads": [2], "scale": 4, "mlp_ratio": 1.5}, (1, 1, 16, 16))]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw,shape", PARITY)
def test_matches_the_twin(kw, shape, dtype):
    # float32: a bias gradient sums every output pixel's gradient, in another order than torch's
    # (5.7e-7 against a 1e-5 bound of 5.3e-7 once): 3e-5 of the largest value
    checks.check_parity(spec(**kw), shape, dtype, tolerance=3e-5 if dtype == np.float32 else None)


@pytest.mark.parametrize("shape", [(1, 3, 16, 17), (1, 3, 17, 64)])
def test_matches_the_twin_in_eval_mode(shape):
    """Evaluation reduces twice (17 px -> 1 row), every gradient too."""
    checks.check_parity(spec(), shape, np.float64, train=False)


def test_eval_mode_matches_the_twin_with_dropout():
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    s = spec(drop_path_rate=0.5, drop_rate=0.3, attn_drop_rate=0.3)
    model = checks.build(s).to(np.float64).eval()
    twin = twins.twin_of(model, s).eval()
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 18, 16))
    with sg.no_grad(), torch.no_grad():
        checks.assert_close(model(sg.tensor(x)).data, twin(torch.from_numpy(x)).numpy(), np.float64,
                            "output")


def test_attention_dropout_runs_the_unfused_path():
    """attn_drop_rate > 0 in training: the same seed gives the same output, another seed
    another, and p -> 0 the fused path's output."""
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, 3, 16, 16)), dtype=np.float64)
    outs = []
    for rate, seed in ((0.5, 3), (0.5, 3), (0.5, 4), (1e-12, 3), (0.0, 3)):
        model = checks.build(spec(attn_drop_rate=rate)).to(np.float64)
        sg.manual_seed(seed)
        with sg.no_grad():
            outs.append(model(x).data)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], outs[2])
    np.testing.assert_allclose(outs[3], outs[4], rtol=0, atol=1e-10)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(), (2, 3, 16, 16))


def test_pth_round_trip(tmp_path):
    checks.check_pth_round_trip(spec(), (1, 3, 16, 20), tmp_path)


def test_gamma_starts_at_1e_4():
    model = checks.build(spec())
    np.testing.assert_array_equal(model.layers[0].blocks[1].gamma.data, np.float32(1e-4))


@pytest.mark.parametrize("train,shape", [(False, (1, 3, 9, 21)), (True, (2, 3, 4, 13))])
def test_sides_below_16_are_padded_as_spandrel_pads_them(train, shape):
    """Below 16 px the input is padded to 16 (reflect, then replicate) and the output cropped."""
    checks.check_parity(spec(), shape, np.float64, train=train)


@pytest.mark.parametrize("training,shape,match", [
    (False, (1, 3, 16, 1100), r"RGT: the input \(after padding\) is 16x1100: .* reduces it 3 times "
                              r"by 4 .* both sides must be >= 64"),
    (True, (1, 3, 16, 300), r"is 16x300: .* reduces it 3 times"),
])
def test_sizes_the_original_cannot_run_are_refused(training, shape, match):
    model = checks.build(spec(embed_dim=16, num_heads=[2, 2], depth=[2, 0])).train(training)
    with pytest.raises(ValueError, match=match), sg.no_grad():
        model(sg.tensor(np.zeros(shape, np.float32)))


@pytest.mark.parametrize("kw,match", [
    ({"embed_dim": 31, "num_heads": [1, 1]}, r"RGT: embed_dim must be even"),
    ({"split_size": [1, 4]}, r"RGT: split_size"),
    ({"img_size": 6}, r"img_size 6 must be a multiple of both split_size sides"),
    ({"num_heads": [3, 2]}, r"num_heads 3 must divide embed_dim 32 and cr"),
    ({"num_heads": [1, 2]}, r"num_heads 1 must be at least 2"),
    ({"c_ratio": 0.1}, r"num_heads 4 must divide embed_dim 32 and cr = int\(embed_dim \* c_ratio\) = 3"),
    ({"c_ratio": 0}, r"RGT: c_ratio"),
    ({"mlp_ratio": 1.0 / 32}, r"the spatial gate needs an even number"),
    ({"scale": 5}, r"RGT: scale"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build({**spec(), **kw})


@pytest.mark.parametrize("kw", [
    {},
    {"in_chans": 1, "qkv_bias": False, "resi_connection": "3conv", "mlp_ratio": 1.5,
     "split_size": [4, 4], "img_size": 12, "scale": 3, "c_ratio": 0.25, "num_heads": [4, 4]},
    {"depth": [1, 2], "num_heads": [6, 4], "embed_dim": 48, "scale": 4, "split_size": [2, 6],
     "img_size": 12, "c_ratio": 1 / 3},
])
def test_detect_round_trip(kw):
    s = spec(**{"drop_path_rate": 0.1, **kw})
    state = checks.build(s).state_dict()
    match = identify(state)
    got = match.spec
    assert got["type"] == "RGT"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("embed_dim", "scale", "resi_connection", "qkv_bias", "in_chans", "mlp_ratio",
              "img_size", "depth", "num_heads", "split_size", "c_ratio"):
        want = s.get(k, {"resi_connection": "1conv", "qkv_bias": True, "in_chans": 3,
                         "c_ratio": 0.5}.get(k))
        want = tuple(want) if isinstance(want, list) else want
        assert got[k] == pytest.approx(want) if k == "c_ratio" else got[k] == want, k
    assert any(n.startswith("split_size") for n in match.notes) == (s["split_size"][0] != s["split_size"][1])


def test_the_heads_rule_is_spandrels_and_said_when_the_weights_cannot_tell():
    """pos3 gives half the heads: 2 x 2 = 4 divides 40, so 4 (spandrel's rule), and 5 would fit the
    RG-SA block as well (40 and cr 20 divisible): said. Given num_heads 5, that file loads."""
    s = spec(embed_dim=40, num_heads=[5, 2], split_size=[2, 2])
    state = checks.build(s).state_dict()
    match = identify(state)
    assert match.spec["num_heads"] == (4, 2)
    assert any(n.startswith("num_heads") and "spandrel's rule" in n for n in match.notes)
    assert list(detect(state, num_heads=[5, 2])["num_heads"]) == [5, 2]


def test_a_file_with_the_other_split_order_is_refused_on_load():
    state = checks.build(spec(split_size=[4, 2])).state_dict()
    got = detect(state)
    assert got["split_size"] == (2, 4)
    with pytest.raises(ValueError, match=r"RGT.load_state_dict: .*file's split_size is \(4, 2\)"):
        MODELS.build(got).load_state_dict(state)
    MODELS.build(detect(state, split_size=[4, 2])).load_state_dict(state)


# traiNNer-redux's rgt and rgt_s (embed 180, 6 heads, mlp_ratio 2, split (8, 32), c_ratio 0.5; 8 or
# 6 groups of 6 blocks): the layout, from the twin's keys, cut to 2 groups of 2 blocks
@pytest.mark.parametrize("scale", [2, 4])
def test_detects_the_published_layout(scale):
    twins = pytest.importorskip("tests.twins")
    s = {"type": "RGT", "img_size": 64, "embed_dim": 180, "depth": [2, 2], "num_heads": [6, 6],
         "mlp_ratio": 2.0, "split_size": [8, 32], "c_ratio": 0.5, "resi_connection": "1conv",
         "scale": scale}
    got = detect(twins.build_twin(s).state_dict())
    want = {k: tuple(v) if isinstance(v, list) else v for k, v in s.items()}
    assert {k: got[k] for k in want} == want


def test_card_of_the_published_sizes():
    """RGT x4 13.3M parameters and RGT-S 10.2M (the paper's 13.37M / 10.20M, x4), minimum 16 px."""
    base = {"type": "RGT", "embed_dim": 180, "mlp_ratio": 2.0, "split_size": [8, 32], "scale": 4}
    rgt = card({**base, "depth": [6] * 8, "num_heads": [6] * 8})
    rgt_s = card({**base, "depth": [6] * 6, "num_heads": [6] * 6})
    assert round(rgt.parameters / 1e6, 2) == 13.37 and round(rgt_s.parameters / 1e6, 2) == 10.20
    assert rgt.pad_minimum == 16 and rgt.fixed_onnx
    # RG-SA's weights: 6 heads x N x N' with N' = (1024 // 64)^2 at 1024 px (three reductions)
    assert rgt.largest_activation(1024, 1024) >= 6 * 1024 * 1024 * 16 * 16


SPANDREL = [  # (keywords of spandrel's RGT, input size, the key the file is saved under)
    # rgt / rgt_s's groups at the published width, x4 (groups differ only in number)
    ({"embed_dim": 180, "depth": [2, 2], "num_heads": [6, 6], "split_size": [8, 32],
      "mlp_ratio": 2.0, "upscale": 4}, (20, 27), None),
    # x2, 3conv, no qkv bias, square windows, a 3-block group, a params_ema file; 12 px: padded
    ({"embed_dim": 24, "depth": [3], "num_heads": [4], "split_size": [4, 4], "mlp_ratio": 2.0,
      "upscale": 2, "resi_connection": "3conv", "qkv_bias": False}, (12, 33), "params_ema"),
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("RGT")
    torch.manual_seed(0)
    network = module.RGT(img_size=64, c_ratio=0.5, **kw)
    with torch.no_grad():  # gamma 1e-4 and LayerNorms at 1 / 0: perturb every value
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    check_spandrel_file(module, network, tmp_path, size, wrap)
