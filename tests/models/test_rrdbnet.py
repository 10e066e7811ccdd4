"""RRDBNet: BasicSR's keys (conv_first sees num_in_ch * 1, 4, 16 channels at x4, x2, x1), shapes,
BasicSR's init (kaiming normal x 0.1 in the dense blocks), parity with the torch twin (output and
every gradient of an L1 loss) at every scale, with the original ESRGAN repository's structures (no
unshuffle at x1/x2, x8, ESRGAN+), Real-ESRGAN's padding of sides the pixel unshuffle does not
divide, an Adam step, a .pth round trip, errors; the published layouts (the original ESRGAN
repository's model.N and RRDB_trunk keys, BasicSR's keys without unshuffle) loaded with no model
named. Not in the generic tests of test_models.py, which build x3."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.registry import MODELS

from . import basicsr_checks as checks

SMALL = {"type": "RRDBNet", "num_feat": 8, "num_block": 1, "num_grow_ch": 4}


def spec(scale=4, channels=3, **kw):
    return {**SMALL, "scale": scale, "num_in_ch": channels, "num_out_ch": channels, **kw}


def test_state_dict_keys_are_basicsrs():
    rdb = [f"body.0.rdb{r}.conv{c}" for r in (1, 2, 3) for c in range(1, 6)]
    convs = ["conv_first", *rdb, "conv_body", "conv_up1", "conv_up2", "conv_hr", "conv_last"]
    assert checks.check_keys(spec(4)) == [f"{c}.{p}" for c in convs for p in ("weight", "bias")]
    sd = checks.build(spec(4)).state_dict()
    # dense connections: conv_i sees num_feat + (i - 1) * num_grow_ch channels
    assert [sd[f"body.0.rdb2.conv{i}.weight"].shape for i in range(1, 6)] == [
        (4, 8, 3, 3), (4, 12, 3, 3), (4, 16, 3, 3), (4, 20, 3, 3), (8, 24, 3, 3)]


@pytest.mark.parametrize("scale,channels,first_in", [(4, 3, 3), (2, 3, 12), (1, 3, 48), (2, 1, 4),
                                                     (1, 1, 16)])
def test_pixel_unshuffle_widens_conv_first(scale, channels, first_in):
    s = spec(scale, channels)
    assert checks.check_keys(s)[0] == "conv_first.weight"
    assert checks.build(s).conv_first.weight.shape == (8, first_in, 3, 3)


def test_published_size():
    """RealESRGAN_x4plus / ESRGAN (23 blocks, 64 features, 32 growth): 16,697,987 parameters,
    counted as the 0-block network plus 23 blocks (building all 23 would be slow)."""
    base, one = (checks.build({"type": "RRDBNet", "num_block": n}).num_parameters() for n in (0, 1))
    assert base + 23 * (one - base) == 16_697_987


@pytest.mark.parametrize("scale,channels,in_hw,out_shape", [
    (4, 3, (5, 3), (2, 3, 20, 12)), (4, 1, (5, 3), (2, 1, 20, 12)), (2, 3, (6, 4), (2, 3, 12, 8)),
    (1, 3, (8, 4), (2, 3, 8, 4)), (1, 1, (4, 12), (2, 1, 4, 12))])
def test_output_shape(scale, channels, in_hw, out_shape):
    y = checks.build(spec(scale, channels))(sg.tensor(np.zeros((2, channels, *in_hw), np.float32)))
    assert y.shape == out_shape and y.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,channels,hw,kw", [
    (4, 3, (5, 3), {}), (2, 1, (6, 4), {}), (1, 3, (4, 8), {}), (8, 3, (3, 2), {}),
    (2, 3, (3, 4), {"shuffle_factor": 1}), (1, 3, (4, 3), {"shuffle_factor": 1}),
    (2, 3, (4, 4), {"shuffle_factor": 2, "plus": True})])
def test_matches_the_twin(scale, channels, hw, kw, dtype):
    checks.check_parity(spec(scale, channels, **kw), (2, channels, *hw), dtype)


@pytest.mark.parametrize("kw,ups", [({"scale": 8}, 3), ({"scale": 2, "shuffle_factor": 1}, 1),
                                    ({"scale": 1, "shuffle_factor": 1}, 0),
                                    ({"scale": 1, "shuffle_factor": 2}, 1)])
def test_x2_stages_are_log2_of_scale_times_unshuffle(kw, ups):
    keys = checks.check_keys(spec(**kw))
    assert [k for k in keys if k.startswith("conv_up")] == [
        f"conv_up{i}.{p}" for i in range(1, ups + 1) for p in ("weight", "bias")]


def test_plus_adds_esrgan_plus_1x1_skips():
    keys = checks.check_keys(spec(4, plus=True))
    assert "body.0.rdb3.conv1x1.weight" in keys and "body.0.rdb3.conv1x1.bias" not in keys


def test_init_is_basicsrs():
    """Dense-block convs: kaiming normal x 0.1, zero bias; the others: torch's default."""
    s = spec(4, num_feat=32, num_grow_ch=16)
    rdb = {f"body.0.rdb{r}.conv{c}.weight" for r in (1, 2, 3) for c in range(1, 6)}
    checks.check_init_matches_twin(s, normal_scaled=rdb)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_round_trip(tmp_path):
    checks.check_pth_round_trip(spec(1), (1, 3, 4, 8), tmp_path)


@pytest.mark.parametrize("kw,error,match", [
    ({"scale": 3}, ValueError, r"RRDBNet: scale 3 x shuffle_factor 1 = 3 is not a power of two"),
    ({"scale": 2, "shuffle_factor": 3}, ValueError, r"scale 2 x shuffle_factor 3 = 6 is not"),
    ({"shuffle_factor": 0}, ValueError, r"RRDBNet: shuffle_factor must be a positive int"),
    ({"plus": 1}, TypeError, r"RRDBNet: plus must be"),
    ({"scale": None}, TypeError, r"RRDBNet: scale must be a positive int"),
    ({"num_grow_ch": 0}, ValueError, r"RRDBNet: num_grow_ch must be a positive int"),
    ({"num_block": -1}, ValueError, r"RRDBNet: num_block must be an int >= 0"),
    ({"num_in_ch": "3"}, TypeError, r"RRDBNet: num_in_ch must be a positive int"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "RRDBNet", **kw})


@pytest.mark.parametrize("scale,hw", [(2, (5, 4)), (1, (6, 7)), (1, (1, 2))])
def test_sides_the_unshuffle_does_not_divide_are_padded_as_real_esrgan_does(scale, hw):
    """Real-ESRGAN's inference: reflect-pad bottom/right to a multiple of 2 (x2) or 4 (x1), run
    BasicSR's model, crop (replicate when the image is too small to reflect)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    s = spec(scale)
    model = checks.build(s).double()
    twin = twins.twin_of(model, s)
    (h, w), r = hw, {2: 2, 1: 4}[scale]
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, h, w))
    pad_h, pad_w = -h % r, -w % r
    mode = "reflect" if pad_h < h and pad_w < w else "replicate"
    with torch.no_grad():
        padded = torch.nn.functional.pad(torch.from_numpy(x), (0, pad_w, 0, pad_h), mode=mode)
        want = twin(padded)[:, :, :h * scale, :w * scale].numpy()
    xt = sg.tensor(x, requires_grad=True)
    y = model(xt)
    assert y.shape == (1, 3, h * scale, w * scale)
    np.testing.assert_allclose(y.data, want, rtol=0, atol=1e-12)
    y.sum().backward()
    assert xt.grad.shape == x.shape and np.abs(xt.grad.data).sum() > 0


def test_kaiming_init_outside_the_dense_blocks():
    """init="kaiming": trunk and upsampling convs ~ N(0, 2 / (1.04 fan_in)), conv_last x 0.1, zero
    biases; the dense blocks as BasicSR's (0.1-scaled kaiming) either way."""
    from framework.nn import init
    init.manual_seed(0)
    model = MODELS.build(spec(4, num_feat=32, num_block=1, num_grow_ch=16, init="kaiming"))
    params = dict(model.named_parameters())
    for name in ("conv_first", "conv_body", "conv_up1", "conv_up2", "conv_hr", "conv_last"):
        w = params[f"{name}.weight"].numpy().astype(np.float64)
        want = np.sqrt(2.0 / (1.04 * np.prod(w.shape[1:]))) * (0.1 if name == "conv_last" else 1.0)
        np.testing.assert_allclose(w.std(), want, rtol=0.1, err_msg=name)
        assert not params[f"{name}.bias"].numpy().any()
    w = params["body.0.rdb1.conv1.weight"].numpy().astype(np.float64)
    np.testing.assert_allclose(w.std(), 0.1 * np.sqrt(2.0 / np.prod(w.shape[1:])), rtol=0.1)
    with pytest.raises(ValueError, match="RRDBNet: init must be one of"):
        MODELS.build(spec(4, init="xavier"))


# -- published layouts, loaded with no model named ---------------------------------------------------
LAYOUT_CASES = [  # (twin keywords, stages, the spec detection must find)
    ({"in_nc": 3, "out_nc": 3}, 2, {"scale": 4}),
    ({"in_nc": 3, "out_nc": 3}, 1, {"scale": 2, "shuffle_factor": 1}),
    ({"in_nc": 3, "out_nc": 3}, 0, {"scale": 1, "shuffle_factor": 1}),
    ({"in_nc": 3, "out_nc": 3}, 3, {"scale": 8}),
    ({"in_nc": 1, "out_nc": 1, "plus": True}, 2, {"scale": 4, "num_in_ch": 1, "num_out_ch": 1,
                                                  "plus": True}),
    ({"in_nc": 3, "out_nc": 3, "shuffle_factor": 2}, 2, {"scale": 2}),  # x2plus, old keys
]


@pytest.mark.parametrize("fmt", ["zip", "legacy"])
@pytest.mark.parametrize("kw,stages,want", LAYOUT_CASES)
def test_original_esrgan_layout_loads_and_matches_its_twin(kw, stages, want, fmt, tmp_path):
    """model.0, model.1.sub.N.RDB1.conv1.0, model.3/6/8/10 (RRDB_ESRGAN_x4.pth as first released and
    the community's ESRGAN files) at x1, x2, x4, x8, ESRGAN+ and with a pixel unshuffle."""
    torch = pytest.importorskip("torch")
    from tests.twins.esrgan import ESRGANSequential
    from .published import assert_close, run_published
    torch.manual_seed(0)
    twin = ESRGANSequential(nf=8, nb=2, gc=4, stages=stages, **kw)
    c = kw["in_nc"]
    ours, ref, info, said = run_published(twin, tmp_path, fmt, (1, c, 4, 6))
    assert info["layout"].startswith("the original ESRGAN repository's first layout")
    assert info["model"] == {"type": "RRDBNet", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 8,
                             "num_block": 2, "num_grow_ch": 4, **want}
    assert "detected RRDBNet(" in said[0]
    assert "(in the original ESRGAN repository's first layout (model.N))" in said[0]
    assert_close(ours, ref)


@pytest.mark.parametrize("stages", [1, 2])
def test_later_esrgan_layout_loads_and_matches_its_twin(stages, tmp_path):
    """conv_first, RRDB_trunk, trunk_conv, upconv1(/2), HRconv, conv_last: RRDB_ESRGAN_x4.pth,
    BSRGAN (its x2 has upconv1 only), RealSR."""
    torch = pytest.importorskip("torch")
    from tests.twins.esrgan import ESRGANTrunk
    from .published import assert_close, run_published
    torch.manual_seed(1)
    ours, ref, info, _ = run_published(ESRGANTrunk(nf=8, nb=1, gc=4, stages=stages), tmp_path)
    assert info["layout"].startswith("the later ESRGAN / BSRGAN / RealSR layout")
    assert info["model"]["scale"] == 2 ** stages
    assert info["model"].get("shuffle_factor") == (1 if stages == 1 else None)
    assert_close(ours, ref)


@pytest.mark.parametrize("kw", [{"scale": 1, "shuffle_factor": 1}, {"scale": 2, "shuffle_factor": 1},
                                {"scale": 8}])
def test_basicsr_keys_without_unshuffle_load_and_match_the_twin(kw, tmp_path):
    """BasicSR's keys with 0, 1 or 3 x2 stages (spandrel's and the community's x1/x2/x8)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    from .published import assert_close, run_published
    torch.manual_seed(2)
    twin = twins.build_twin(spec(**kw))
    ours, ref, info, _ = run_published(twin, tmp_path)
    assert "layout" not in info and info["model"]["scale"] == kw["scale"]
    assert_close(ours, ref)


def test_a_broken_original_layout_names_the_layout(tmp_path):
    """An original-layout file with a stray entry: the refusal says it has that layout's keys."""
    torch = pytest.importorskip("torch")
    from framework.engine import load_model
    from framework.weights import CheckpointError
    from tests.twins.esrgan import ESRGANSequential
    from .published import save_pth
    twin = ESRGANSequential(nf=8, nb=1, gc=4, stages=2)
    twin.model.append(torch.nn.Conv2d(3, 3, 1))  # model.11: 12 entries, not 5 + 3 per stage
    path = save_pth(twin, tmp_path / "odd.pth", "zip")
    with pytest.raises(CheckpointError) as err:
        load_model(path, say=lambda m: None)
    msg = str(err.value)
    assert "detect: no architecture srgrad has matches this state_dict (model.0.weight" in msg, msg
    assert ("It has the keys of the original ESRGAN repository's first layout (model.N) (e.g. "
            "RRDB_ESRGAN_x4.pth as first released") in msg, msg
    assert "which RRDBNet reads, but: model.* has 12 entries: not 5 + 3 per x2 upsampling" in msg
