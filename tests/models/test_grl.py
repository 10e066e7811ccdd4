"""GRL: the original's keys in order, parity with the torch twin (spandrel 0.4.2's own network:
output and every gradient of an L1 loss, float64 and float32) for every upsampler and the
published layouts' keywords (local connection, separable-conv qkv, every anchor projection in one
stage and in steps, every conv_type, stripe groups, the "r" init's residual scale), the padding
(reflect, zeros below the pad), a .pth round trip, errors, detection and the done-when check:
files built by spandrel 0.4.2's own GRL class through srgrad-infer give spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

from framework.detect import identify

from . import basicsr_checks as checks
from .spandrel_checks import check_spandrel_file

# window 4, stripes 8 x 8 with anchors at 1/2: a 7x9 input pads to 8x16 (img_size: the twin
# then uses its stored float buffers, which follow .to(float64); it builds float32 ones for other
# sizes)
SMALL = {"type": "GRL", "img_size": (8, 16), "embed_dim": 16, "depths": [4], "num_heads_window": [2],
         "num_heads_stripe": [2], "window_size": 4, "stripe_size": [8, 8],
         "anchor_window_down_factor": 2, "stripe_shift": True, "mlp_ratio": 2, "drop_path_rate": 0.0}


def spec(upsampler="pixelshuffledirect", scale=2, **kw):
    return {**SMALL, "upsampler": upsampler, "scale": scale, **kw}


def test_state_dict_keys_are_the_originals():
    checks.check_keys(spec("pixelshuffle", 2, local_connection=True, embed_dim=36, depths=[2]))
    checks.check_keys(spec("nearest+conv", 4, qkv_proj_type="separable_conv", conv_type="3conv",
                           anchor_proj_type="separable_conv", anchor_one_stage=False, depths=[1, 1],
                           num_heads_window=[2, 4], num_heads_stripe=[1, 2]))


@pytest.mark.parametrize("upsampler,scale", [("pixelshuffle", 2), ("pixelshuffledirect", 3),
                                             ("nearest+conv", 4), ("", 1)])
def test_matches_the_twin(upsampler, scale):
    checks.check_parity(spec(upsampler, scale), (2, 3, 7, 9), np.float64)


@pytest.mark.parametrize("upsampler,scale", [("pixelshuffle", 2), ("pixelshuffledirect", 4)])
def test_matches_the_twin_in_float32(upsampler, scale):
    """float32 within 1e-3 of the largest gradient: the bias gradients sum an L1 loss's signs
    through cosine attention (logits scaled by 10) and cancel to ~1e-3 of their terms (the x4
    nearest+conv, whose 64-channel convs at 28x36 sum longer chains, differs by ~4e-3: float64
    above holds every upsampler at the default bound)."""
    checks.check_parity(spec(upsampler, scale), (2, 3, 7, 9), np.float32, tolerance=1e-3)


@pytest.mark.parametrize("kw,shape,tolerance", [
    ({"local_connection": True, "embed_dim": 36, "depths": [2], "conv_type": "1conv1x1"}, (1, 3, 7, 9), None),
    ({"qkv_proj_type": "separable_conv", "qkv_bias": False, "anchor_proj_type": "conv2d",
      "conv_type": "3conv", "anchor_window_down_factor": 4, "init_method": "r"}, (1, 3, 8, 13), None),
    ({"anchor_proj_type": "separable_conv", "anchor_one_stage": False, "conv_type": "linear",
      "depths": [1, 2], "num_heads_window": [1, 2], "num_heads_stripe": [4, 1]}, (1, 3, 5, 16), None),
    ({"anchor_proj_type": "patchmerging", "anchor_one_stage": False,
      "anchor_window_down_factor": 4}, (1, 3, 8, 9), None),
    ({"anchor_proj_type": "patchmerging"}, (1, 3, 8, 9), None),
    ({"anchor_proj_type": "maxpool", "in_channels": 1, "out_channels": 1, "img_range": 255.0},
     (1, 1, 7, 9), None),
    # float32 tables whose log2 differs from torch's by an ulp: the output by ~1e-9 of itself
    ({"anchor_proj_type": "conv2d", "anchor_one_stage": False, "stripe_shift": False,
      "pretrained_window_size": [6, 6], "pretrained_stripe_size": [12, 10]}, (1, 3, 7, 9), 1e-8),
    # traiNNer-redux's layout (stripe_groups: a stripe of half the padded width); square, as the
    # original runs it (its vertical stripes' tables are the horizontal ones reversed)
    ({"img_size": (16, 16), "window_size": 4, "stripe_size": [4, None], "stripe_groups": [None, 2],
      "anchor_window_down_factor": 2}, (1, 3, 13, 14), None),
])
def test_matches_the_twin_in_more_settings(kw, shape, tolerance):
    checks.check_parity(spec(**kw), shape, np.float64, tolerance=tolerance)


def test_x1_with_other_output_channels_matches_the_twin():
    checks.check_parity(spec("", 1, in_channels=1, out_channels=2), (1, 1, 7, 9), np.float64)


def test_zero_padding_below_the_pad_matches_the_twin():
    """A 5x3 input pads to 8x16 with zeros (the original's reflect fails: pad >= side)."""
    checks.check_parity(spec(img_size=(8, 8)), (1, 3, 5, 3), np.float64)


def test_eval_mode_matches_the_twin_with_drop_path():
    checks.check_parity(spec(drop_path_rate=0.5, drop_rate=0.2), (1, 3, 7, 9), np.float64, train=False)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec("pixelshuffle", 2), (2, 3, 8, 8))


def test_pth_round_trip(tmp_path):
    checks.check_pth_round_trip(spec("nearest+conv", 4), (1, 3, 5, 6), tmp_path)


@pytest.mark.parametrize("kw,match", [
    ({"upsampler": "nearest+conv", "scale": 2}, r"'nearest\+conv' makes x4 only"),
    ({"embed_dim": 18}, r"must divide embed_dim / 2 = 9, got 2"),
    ({"embed_dim": 15}, r"embed_dim must be even"),
    ({"stripe_size": [12, 8]}, r"pads to a multiple of 12"),
    ({"stripe_size": [None, 8]}, r"stripe_size has None where stripe_groups"),
    ({"anchor_proj_type": "avgpool", "anchor_one_stage": False}, r"runs in one stage only"),
    ({"anchor_proj_type": "conv2d", "anchor_window_down_factor": 3}, r"only for an even df"),
    ({"anchor_proj_type": "patchmerging", "anchor_window_down_factor": 4}, r"must be 2, got 4"),
    ({"euclidean_dist": True}, r"euclidean_dist must be False"),
    ({"attn_drop_rate": 0.1}, r"attn_drop_rate must be 0 \(srgrad's GRL fuses its attention"),
    ({"out_channels": 1}, r"out_channels must be 3"),
    ({"local_connection": True}, r"embed_dim must be >= 18"),
    ({"init_method": "w"}, r"init_method must be one of"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=f"^GRL: .*{match}"):
        checks.build(spec(**kw))


@pytest.mark.parametrize("kw", [
    {},
    {"upsampler": "pixelshuffle", "scale": 4, "local_connection": True, "embed_dim": 36},
    {"upsampler": "nearest+conv", "scale": 4, "qkv_proj_type": "separable_conv", "conv_type": "3conv"},
    {"upsampler": "", "scale": 1, "anchor_proj_type": "conv2d", "anchor_window_down_factor": 4,
     "conv_type": "linear", "in_channels": 1, "out_channels": 1},
    {"anchor_proj_type": "patchmerging", "anchor_one_stage": False, "anchor_window_down_factor": 4,
     "conv_type": "1conv1x1"},
    {"anchor_proj_type": "separable_conv", "anchor_one_stage": True, "anchor_window_down_factor": 2,
     "qkv_bias": False},
])
def test_detect_round_trip_with_the_buffers(kw):
    """A file that holds the original's buffers (as official ones do) tells window, stripe and down
    factor: detection gives every keyword back and drops the buffers."""
    twins = pytest.importorskip("tests.twins")
    s = spec(**{**kw, "img_size": (16, 16)})
    twin = twins.build_twin(s)
    twin._non_persistent_buffers_set.clear()  # the buffers saved, as in the official files
    state = twin.state_dict()
    assert "table_sh" in state
    match = identify(state)
    keys = [k for k in s if k not in ("type", "img_size", "drop_path_rate")]
    assert {k: match.spec[k] for k in keys} == {k: (tuple(v) if isinstance(v, list) else v)
                                                 for k, v in s.items() if k in keys} | {
        k: match.spec[k] for k in keys if k not in s}
    assert match.notes == []
    assert "table_sh" not in match.convert(state)


def test_detect_says_the_windows_it_assumes():
    twins = pytest.importorskip("tests.twins")
    state = twins.build_twin(spec("pixelshuffle", 2, window_size=8, stripe_size=[8, 8])).state_dict()
    match = identify(state)
    assert match.spec["window_size"] == 32 and match.spec["stripe_size"] == (64, 64)
    assert match.spec["anchor_window_down_factor"] == 4 and match.spec["anchor_proj_type"] == "avgpool"
    assert len(match.notes) == 1 and "window_size=32" in match.notes[0] and "grl_t" in match.notes[0]
    given = identify(state, window_size=8, stripe_size=(8, 8), anchor_window_down_factor=2)
    assert given.notes == [] and given.spec["window_size"] == 8


@pytest.mark.parametrize("prefix", ["model.", "model_g."])
def test_detect_reads_the_training_checkpoints(prefix):
    twins = pytest.importorskip("tests.twins")
    s = spec("", 1, img_size=(16, 16))
    twin = twins.build_twin(s)
    twin._non_persistent_buffers_set.clear()
    state = {prefix + k: v for k, v in twin.state_dict().items()}
    if prefix == "model_g.":
        state["model_d.conv.weight"] = state["model_g.conv_first.weight"]
    match = identify(state)
    assert match.spec["window_size"] == 4 and match.spec["stripe_size"] == (8, 8)
    assert set(match.convert(state)) == set(checks.build(s).state_dict())


# (spandrel's GRL keywords, saved with its buffers, input (h, w), the key the file is saved under):
# tiny widths in the published keyword patterns (tiny: pixelshuffledirect, small: pixelshuffle,
# base: local connection; the official window / stripe / df read from the buffers)
SPANDREL = [
    ({"embed_dim": 16, "upscale": 4, "upsampler": "pixelshuffledirect", "depths": [2, 2],
      "num_heads_window": [2, 2], "num_heads_stripe": [2, 2]}, True, (13, 11), None),   # tiny
    ({"embed_dim": 24, "upscale": 2, "upsampler": "pixelshuffle", "depths": [2, 1],
      "num_heads_window": [2, 2], "num_heads_stripe": [2, 2]}, True, (9, 14), "params"),  # small
    ({"embed_dim": 36, "upscale": 2, "upsampler": "pixelshuffle", "depths": [1, 2, 1],
      "num_heads_window": [3, 3, 3], "num_heads_stripe": [3, 3, 3], "local_connection": True},
     True, (11, 8), None),                                                              # base
    ({"embed_dim": 16, "upscale": 4, "upsampler": "nearest+conv", "depths": [2],
      "num_heads_window": [2], "num_heads_stripe": [2]}, True, (8, 9), None),           # real-world
    # no buffers: spandrel's x1 rule (window 8, stripes 8 x 8, df 4)
    ({"embed_dim": 16, "upscale": 1, "upsampler": "", "depths": [2], "num_heads_window": [2],
      "num_heads_stripe": [2], "window_size": 8, "stripe_size": [8, 8],
      "anchor_window_down_factor": 4}, False, (12, 10), None),
]


@pytest.mark.parametrize("kw,buffers,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, buffers, size, wrap, tmp_path):
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("GRL")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    base = {"window_size": 4, "stripe_size": [8, 8], "anchor_window_down_factor": 2,
            "stripe_shift": True, "mlp_ratio": 2.0, "img_size": 16}
    network = module.GRL(**{**base, **kw})
    if buffers:
        network._non_persistent_buffers_set.clear()
    check_spandrel_file(module, network, tmp_path, size, wrap)


def test_a_trainner_redux_file_runs_with_its_windows_given():
    """traiNNer-redux's grl_t / grl_s / grl_b save no buffers and train with window 8, stripe_size
    (8, None), stripe_groups (None, 4), which the note names: given as keywords (--model-arg),
    the detected model is the twin's network."""
    twins = pytest.importorskip("tests.twins")
    redux = {"window_size": 8, "stripe_size": [8, None], "stripe_groups": [None, 4],
             "anchor_window_down_factor": 4}
    s = spec("pixelshuffledirect", 4, img_size=(16, 16), **redux)
    state = twins.build_twin(s).state_dict()
    assert "window_size=8 stripe_size=[8,null] stripe_groups=[null,4]" in identify(state).notes[0]
    match = identify(state, **redux)
    assert match.notes == []
    assert {k: match.spec[k] for k in redux} == redux  # the given keywords, as given
    checks.check_parity({**s, **{k: match.spec[k] for k in redux}}, (1, 3, 16, 13), np.float64)


def test_fairscale_keywords_are_accepted_and_change_nothing():
    """traiNNer-redux's grl_* pass fairscale_checkpoint / offload_to_cpu (activation checkpointing:
    memory only): accepted, the same network."""
    import framework as sg
    a = checks.build(spec())
    b = checks.build(spec(fairscale_checkpoint=True, offload_to_cpu=True))
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, 3, 8, 8)), dtype=np.float32)
    with sg.no_grad():
        np.testing.assert_array_equal(a(x).data, b(x).data)
    with pytest.raises(ValueError, match=r"^GRL: fairscale_checkpoint"):
        checks.build(spec(fairscale_checkpoint="yes"))


def test_the_base_size_card_counts_the_papers_parameters():
    """GRL-B x4 (built by spandrel's class: 20,201,299 parameters, the paper's 20.2M; building it
    here takes ~20 s on a loaded machine, so its layout is tested at tiny widths above)."""
    from framework.card import card
    spec = {"type": "GRL", "scale": 4, "embed_dim": 180, "depths": [4, 4, 8, 8, 8, 4, 4],
            "num_heads_window": [3] * 7, "num_heads_stripe": [3] * 7, "local_connection": True,
            "upsampler": "pixelshuffle", "window_size": 32, "stripe_size": [64, 64],
            "anchor_window_down_factor": 4, "mlp_ratio": 2.0, "stripe_shift": True}
    assert card(spec).parameters == 20201299


@pytest.mark.parametrize("name,kw,params", [
    ("small", {"embed_dim": 128, "depths": [4] * 4, "num_heads_window": [2] * 4,
               "num_heads_stripe": [2] * 4, "upsampler": "pixelshuffle"}, 3487715),
    ("tiny", {"embed_dim": 64, "depths": [4] * 4, "num_heads_window": [2] * 4,
              "num_heads_stripe": [2] * 4, "upsampler": "pixelshuffledirect"}, 906192),
])
def test_detects_the_published_sizes(name, kw, params):
    """GRL-S / -T x4 as spandrel's class builds them (the paper's 3.49M / 0.91M),
    without buffers: every keyword, the official window 32 and stripes 64 x 64 said."""
    from tests.twins._spandrel import spandrel_architecture
    from framework.card import card
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    official = {"window_size": 32, "stripe_size": [64, 64], "anchor_window_down_factor": 4,
                "mlp_ratio": 2.0, "stripe_shift": True}
    net = spandrel_architecture("GRL").GRL(upscale=4, img_size=64, **official, **kw)
    state = net.state_dict()
    assert sum(p.numel() for p in net.parameters()) == params
    match = identify(state)
    want = {**official, **kw, "scale": 4, "embed_dim": kw["embed_dim"]}
    assert {k: match.spec[k] for k in want} == {k: tuple(v) if isinstance(v, list) else v
                                                for k, v in want.items()}
    assert card(match.spec).parameters == params
    assert "window_size=32" in match.notes[0]


@pytest.mark.parametrize("preset,params", [("grl_b", 20201299), ("grl_s", 3487715),
                                           ("grl_t", 906192)])
def test_trainner_redux_presets(preset, params):
    """traiNNer-redux's grl_b / grl_s / grl_t (`network_g: {type: grl_t}`): its defaults in
    srgrad's keywords, the published sizes' parameter counts at x4."""
    from framework.card import card
    from framework.engine.config.redux_archs import PRESETS
    kind, values = PRESETS[preset]
    spec = {"type": kind, "scale": 4, **values}
    assert kind == "GRL" and card(spec).parameters == params
    assert values["stripe_groups"] == [None, 4] and values["window_size"] == 8
    if preset == "grl_t":
        assert sum(p.data.size for p in checks.build(spec).parameters()) == params
