"""SeemoRe: the original's keys in order, parity with the twin (spandrel's own SeemoRe: output and
every gradient of an L1 loss, float64 and float32, train() and eval() at batch 1) for each lr_space,
topk 1 and 2, with and without the channel shuffle, recursive 1 and 2; the routing per image; .pth
round trips both ways; shapes (the padding to 16 and the crop); errors; detection (round trips,
traiNNer-redux's seemore_t, the published sizes' keywords); and the done-when check: files built by
spandrel 0.4.2's own SeemoRe class through srgrad-infer give spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import detect
from framework.registry import MODELS

from . import basicsr_checks as checks
from .published_checks import check_pth_both_ways
from .spandrel_checks import check_spandrel_file

SMALL = {"type": "SeemoRe", "embedding_dim": 8, "num_layers": 1, "num_experts": 3}
# the original softmaxes the router's logits in float32 (dtype=torch.float) even in float64: a
# float64 rounding difference of a logit can move a weight by one float32 ulp (6e-8 of it)
F64_ROUTED = 1e-7


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


def test_state_dict_keys_are_the_originals():
    keys = checks.check_keys(spec(2, num_experts=1))
    rme, sme = "body.0.local_block.", "body.0.global_block."
    moe = rme + "block."
    ffn = ["ffn.fn_1.0.weight", "ffn.fn_1.0.bias", "ffn.fn_2.0.weight", "ffn.fn_2.0.bias",
           "ffn.gate.weight", "ffn.gate.bias"]
    assert keys == [
        "conv_1.weight", "conv_1.bias", rme + "norm_1.weight", rme + "norm_1.bias",
        *[moe + k for k in ("conv_1.0.weight", "conv_1.0.bias", "conv_1.2.weight", "conv_1.2.bias",
                            "agg_conv.0.weight", "agg_conv.0.bias", "conv.0.weight", "conv.0.bias",
                            "conv.1.weight", "conv.1.bias", "conv_2.0.conv.0.weight",
                            "conv_2.0.conv.0.bias", "conv_2.0.conv.1.weight", "conv_2.0.conv.1.bias",
                            "moe_layer.experts.0.conv_1.weight", "moe_layer.experts.0.conv_1.bias",
                            "moe_layer.experts.0.conv_2.weight", "moe_layer.experts.0.conv_2.bias",
                            "moe_layer.experts.0.conv_3.weight", "moe_layer.experts.0.conv_3.bias",
                            "moe_layer.gate.body.2.weight", "proj.weight", "proj.bias")],
        rme + "norm_2.weight", rme + "norm_2.bias", *[rme + k for k in ffn],
        sme + "norm_1.weight", sme + "norm_1.bias",
        *[sme + "block." + k for k in ("proj.weight", "proj.bias", "to_qv.0.weight", "to_qv.0.bias",
                                       "attn.conv.0.weight", "attn.conv.0.bias", "attn.conv.1.weight",
                                       "attn.conv.1.bias")],
        sme + "norm_2.weight", sme + "norm_2.bias", *[sme + k for k in ffn],
        "norm.weight", "norm.bias", "conv_2.weight", "conv_2.bias", "upsampler.0.weight",
        "upsampler.0.bias"]
    sd = checks.build(spec(3, num_experts=4, lr_space="exp", global_kernel_size=7)).state_dict()
    assert [sd[f"{moe}moe_layer.experts.{e}.conv_1.weight"].shape[0] for e in range(4)] == [2, 4, 8, 16]
    assert sd[sme + "block.attn.conv.0.weight"].shape == (8, 1, 1, 7)
    assert sd[sme + "block.attn.conv.1.weight"].shape == (8, 1, 7, 1)
    assert sd["upsampler.0.weight"].shape == (27, 8, 3, 3)


PARITY = [(2, {}), (3, {"lr_space": "exp", "use_shuffle": False, "recursive": 1, "topk": 2,
                        "global_kernel_size": 5}),
          (1, {"lr_space": "double", "num_experts": 2, "num_layers": 2, "img_range": 2.0})]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,kw", PARITY)
def test_matches_the_twin(scale, kw, dtype):
    """train(): output and every gradient; eval() (the original's path for one image, which runs
    only the chosen experts and so leaves the others without a gradient): the output."""
    tol = F64_ROUTED if dtype == np.float64 else None
    checks.check_parity(spec(scale, **kw), (2, 3, 16, 17), dtype, tolerance=tol)
    checks.check_eval_output(spec(scale, **kw), (1, 3, 18, 16), dtype, tolerance=tol)


def test_each_image_is_routed_by_its_own_weights():
    """A batch of two images whose routers pick different experts gives each image the output it
    gets alone (the original's eval() would apply the first image's experts to both). The router
    is set to separate the two images' mean features f_a, f_b: rows d and -d with
    d = f_a / |f_a| - f_b / |f_b| (d f_a > 0 > d f_b), so image a takes expert 0 and b expert 1."""
    model = checks.build(spec(2, num_experts=4)).eval()
    gate = model.body[0].local_block.block.moe_layer.gate
    seen = []
    forward = gate.forward
    gate.forward = lambda x: seen.append(x.data.mean(axis=(2, 3))) or forward(x)
    rng = np.random.default_rng(0)
    x = sg.tensor(np.concatenate([rng.uniform(0, 1, (1, 3, 16, 16)), np.zeros((1, 3, 16, 16))]),
                  dtype=np.float32)
    with sg.no_grad():
        model(x)
        fa, fb = seen[0]
        d = fa / np.linalg.norm(fa) - fb / np.linalg.norm(fb)
        gate.body[2].weight.data[...] = np.stack([d, -d, 0 * d, 0 * d]) * 10
        seen.clear()
        both = model(x).data
        alone = [model(x[i:i + 1]).data[0] for i in range(2)]
    picks = np.argmax(np.asarray(seen[0]) @ gate.body[2].weight.data.T, axis=1)
    assert list(picks) == [0, 1]
    np.testing.assert_allclose(both, np.stack(alone), rtol=0, atol=1e-6)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 16, 16))


def test_pth_round_trips(tmp_path):
    checks.check_pth_round_trip(spec(3), (1, 3, 5, 6), tmp_path)
    # one expert: a weight of exactly 1 (the float32 softmax would otherwise move float64 by 1e-8)
    check_pth_both_ways(spec(2, num_experts=1), (1, 3, 16, 20), tmp_path)


@pytest.mark.parametrize("scale,hw,want", [(2, (5, 3), (10, 6)), (3, (17, 16), (51, 48)),
                                           (1, (1, 2), (1, 2))])
def test_output_shapes(scale, hw, want):
    y = checks.build(spec(scale, in_chans=1))(sg.tensor(np.zeros((2, 1, *hw), np.float32)))
    assert y.shape == (2, 1, *want) and y.dtype == np.float32


@pytest.mark.parametrize("kw,match", [
    ({"in_chans": 4}, r"SeemoRe: in_chans must be 3 or 1"),
    ({"embedding_dim": 7}, r"SeemoRe: use_shuffle needs an even embedding_dim, got 7"),
    ({"global_kernel_size": 4}, r"SeemoRe: global_kernel_size must be odd"),
    ({"lr_space": "log"}, r"SeemoRe: lr_space must be one of"),
    ({"topk": 4}, r"SeemoRe: topk 4 is more than the 3 experts"),
    ({"img_range": 0}, r"SeemoRe: img_range must be"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build({**SMALL, **kw})


@pytest.mark.parametrize("kw", [
    {"scale": 4, "lr_space": "exp", "global_kernel_size": 7},
    {"scale": 3, "in_chans": 1, "num_layers": 2, "num_experts": 4, "lr_space": "double"},
    {"scale": 1, "num_experts": 1},
])
def test_detect_round_trip(kw):
    s = spec(**kw)
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "SeemoRe"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("scale", "in_chans", "num_layers", "num_experts", "embedding_dim", "lr_space",
              "global_kernel_size"):
        if k in s:
            assert got[k] == s[k], k
    assert (got["use_shuffle"], got["recursive"], got["topk"], got["img_range"]) == (True, 2, 1, 1.0)


@pytest.mark.parametrize("kw,want", [
    ({"num_layers": 6, "embedding_dim": 36}, (True, 2)),  # SeemoRe-T (traiNNer-redux's seemore_t)
    ({"num_layers": 16, "embedding_dim": 48}, (False, 1)),  # SeemoRe-L
])
def test_detects_the_published_sizes(kw, want):
    twins = pytest.importorskip("tests.twins")
    model = twins.build_twin({"type": "SeemoRe", "num_experts": 3, "lr_space": "exp", **kw})
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    got = MODELS.get("SeemoRe").detect(shapes, {})
    assert (got["use_shuffle"].value, got["recursive"].value) == want
    assert got["use_shuffle"].quiet and got["lr_space"] == "exp" and got["num_experts"] == 3
    assert {k: got[k] for k in ("scale", "in_chans", "global_kernel_size")} == \
        {"scale": 4, "in_chans": 3, "global_kernel_size": 11}


SPANDREL = [  # (keywords of spandrel's SeemoRe, input size, the key the file is saved under)
    ({"scale": 4, "num_experts": 3, "num_layers": 6, "embedding_dim": 36, "lr_space": "exp"},
     (20, 27), None),  # SeemoRe-T x4
    ({"scale": 2, "num_experts": 3, "num_layers": 16, "embedding_dim": 48, "lr_space": "exp",
      "use_shuffle": False, "recursive": 1}, (9, 17), "params"),  # SeemoRe-L x2
    ({"scale": 3, "num_experts": 4, "num_layers": 1, "embedding_dim": 16, "lr_space": "linear",
      "global_kernel_size": 7}, (16, 13), "params_ema"),
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("SeemoRe")
    torch.manual_seed(0)
    network = module.SeemoRe(**kw)
    with torch.no_grad():  # norms start at 1 / 0: perturb all
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    check_spandrel_file(module, network, tmp_path, size, wrap)
