"""Inference graphs under autocast('bf16') on AMX: convolutions hand each other bfloat16 planes
(framework/capture/_planes.py). The replay must be the eager bf16 forward's bits, with the plane
hand-off actually taken (Cats read in place, producers writing planes), and only where it is the
same computation."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F
import models  # noqa: F401  registers every architecture
from framework import precision
from framework.capture import Capture, _planes
from framework.functional import _direct_amx
from framework.functional.activation import LeakyReLUFunction, PReLUFunction, ReLUFunction
from framework.functional.pixel_shuffle import PixelShuffleFunction
from framework.functional.resample import ResampleFunction
from framework.functional.elementwise import Add, Mul
from framework.functional.shape import Cat
from framework.nn import Module, init
from framework.registry import MODELS

needs_amx = pytest.mark.skipif(not precision.support().amx_bf16,
                               reason="AMX-BF16: this CPU or OS has no AMX tiles")

CONFIGS = {  # AMX-route sizes (16 channels or more on every conv's image side but the first)
    "RRDBNet": {"type": "RRDBNet", "scale": 2, "num_feat": 32, "num_block": 1, "num_grow_ch": 16},
    "RRDBNet-grow32": {"type": "RRDBNet", "scale": 4, "num_feat": 32, "num_block": 1, "num_grow_ch": 32},
    "EDSR": {"type": "EDSR", "scale": 2, "num_feat": 32, "num_block": 2},
    "MSRResNet": {"type": "MSRResNet", "scale": 2, "num_feat": 32, "num_block": 2},
    "RCAN": {"type": "RCAN", "scale": 2, "num_feat": 32, "num_group": 1, "num_block": 2, "squeeze_factor": 8},
    "SRVGGNetCompact": {"type": "SRVGGNetCompact", "scale": 4, "num_feat": 32, "num_conv": 4, "act_type": "prelu"},
}


def _replays(model, x, calls=4):
    """Eager bf16 output, then `calls` calls through a Capture (2 record, the rest replay)."""
    cap = Capture([model], train=False)
    with sg.no_grad(), sg.autocast("bf16"):
        eager = model(x).data.copy()
        outs = [cap(lambda t: {"sr": model(t)}, x)["sr"].data.copy() for _ in range(calls)]
    return eager, outs, cap


def _closed_over(fn):
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            yield cell.cell_contents
        except ValueError:  # a variable never assigned on this path
            pass


def _kinds(graph):
    names = [getattr(op[0], "__qualname__", "") for op in graph.forward]
    arenas, laid = set(), set()
    for op in graph.forward:
        for v in _closed_over(op[0]):
            if isinstance(v, _planes._Arena) and op[0].__qualname__.startswith("_layout_op"):
                laid.add(id(v))
            for a in (v, *(v if isinstance(v, tuple) else ())):
                if isinstance(a, _planes._Arena):
                    arenas.add(id(a))
    shuffled = 0  # convolutions writing their reader's planes pixel-shuffled
    for op in graph.forward:
        free = getattr(getattr(op[0], "__code__", None), "co_freevars", ())
        cells = {n: c.cell_contents for n, c in zip(free, op[0].__closure__ or ()) if n in ("write", "shuffle")}
        shuffled += cells.get("write") is not None and cells.get("shuffle", 1) > 1
    plans = [getattr(op[0], "planes", (None, {}))[1] for op in graph.forward]
    return {"planes": sum(p.get("read") is not None or p.get("write") is not None for p in plans),
            "tile convs": sum(n.startswith("_conv_forward") for n in names), "shuffled planes": shuffled,
            "layouts": sum(n.startswith("_layout_op") for n in names),
            "cats": sum(op[0] is Cat.forward for op in graph.forward), "arenas": len(arenas),
            "relus": sum(op[0] is ReLUFunction.forward for op in graph.forward),
            "prelus": sum(op[0] is PReLUFunction.forward for op in graph.forward),
            "resamples": sum(op[0] is ResampleFunction.forward for op in graph.forward),
            "leakys": sum(op[0] is LeakyReLUFunction.forward for op in graph.forward),
            "shuffles": sum(op[0] is PixelShuffleFunction.forward for op in graph.forward),
            "kept": sum(getattr(op[0], "planes", (None, {}))[1].get("keep") is not None for op in graph.forward),
            "repeat writers": sum("write_repeat" in getattr(op[0], "planes", (None, {}))[1] for op in graph.forward),
            "phases": sum("phases" in getattr(op[0], "planes", (None, {}))[1] for op in graph.forward),
            "laid out into": len(laid)}


@needs_amx
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_bf16_graph_with_planes_is_the_eager_bits(name):
    init.manual_seed(0)
    model = MODELS.build(CONFIGS[name])
    model.eval()
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, 3, 21, 26)).astype(np.float32))
    eager, outs, cap = _replays(model, x)
    assert cap.replays == 2, cap.status()
    for out in outs:
        assert np.array_equal(out.view(np.uint32), eager.view(np.uint32))
    kinds = _kinds(cap.graphs[0])
    assert kinds["planes"] > 0
    if name.startswith("RRDBNet"):  # each dense block's 4 Cats read in place, x laid out once,
        # and the 3 blocks (one after another, the same regions) share one arena
        assert kinds["cats"] == 0 and kinds["layouts"] == 3 and kinds["laid out into"] == 1, kinds
        # the two nearest x2 upsamplings: each read by its conv_up only, which reads the small value's
        # own planes phase by phase (neither the float32 array of the upsampled image nor its planes):
        # conv_up1 lays out the trunk's output, and writes its own output's planes, phase by phase,
        # where conv_up2 reads them (x2 too: its input pixel-unshuffled by 2)
        assert kinds["resamples"] == 0 and kinds["repeat writers"] == 0 and kinds["phases"] == 2, kinds
        # each dense block's `x5 * 0.2 + x` done by its conv_5's epilogue, the RRDB's by one
        # scale_add pass, the trunk's add by conv_body: no Mul or Add op is left
        assert not any(op[0] in (Add.forward, Mul.forward) for op in cap.graphs[0].forward)
        assert sum("residual_scale" in op[2] for op in cap.graphs[0].forward) == 3
        # the 16-channel values in regions of 8 planes, each conv reading its span in whole blocks
        # that end at it: 32 + 16 k channels take 1, 2, 2, 3, 3 blocks (not 1, 2, 3, 4, 5)
        starts = [op[0].planes[1]["read"][1][2] for op in cap.graphs[0].forward if hasattr(op[0], "planes")
                  and op[0].planes[1].get("read") is not None]
        dense = [(0,), (0, 8), (0, 16), (0, 16, 24), (0, 16, 32)] if name == "RRDBNet" else \
            [(0,), (0, 16), (0, 16, 32), (0, 16, 32, 48), (0, 16, 32, 48, 64)]
        assert starts[:15] == dense * 3, starts
    if name == "RCAN":  # each block's conv -> ReLU -> conv: the ReLU done by the first conv's epilogue;
        # the channel attention's ReLU between its 1x1 convs (not the direct route) stays, one per block
        # (every conv on planes: the two blocks' 4, the group's last conv, conv_after_body reading the
        # group's kept planes, the upsampler, the last conv); each block's scale_add writes the planes
        # of the conv after it (the second block's first, the group's last)
        assert kinds["relus"] == 2 and kinds["planes"] == kinds["tile convs"] == 8, kinds
        assert sum(getattr(op[0], "__name__", "") == "scale_add_planes" for op in cap.graphs[0].forward) == 2
    if name == "SRVGGNetCompact":  # conv -> PReLU -> conv: each PReLU done by the conv before it (its
        # own per-channel slopes), but the first (after conv_first: 3 channels, float32); the
        # output's `+ interpolate(x, nearest)` done by the shuffled last conv from x itself
        assert kinds["prelus"] == 1 and kinds["planes"] == 5 and kinds["resamples"] == 0, kinds
        assert not any(op[0] is Add.forward for op in cap.graphs[0].forward)
    if name == "MSRResNet":  # conv_hr -> LeakyReLU -> conv_last (3 outputs, on tiles): the LeakyReLU
        # done by conv_hr's epilogue (PReLU's formula, one slope); upconv -> PixelShuffle -> LeakyReLU:
        # both done by upconv's epilogue; conv_first's (3 channels, float32 direct) by its relu_slope
        assert kinds["leakys"] == 0 and kinds["shuffles"] == 0, kinds
    if name in ("EDSR", "RCAN"):  # the upsampler's conv stores its output pixel-shuffled
        assert kinds["shuffles"] == 0, kinds
    # EDSR's and RCAN's upsampler writes the last conv's planes shuffled, MSRResNet's conv_hr's
    # (SRVGGNetCompact's is the last conv; RRDBNet's upsampling is nearest)
    assert kinds["shuffled planes"] == (name in ("EDSR", "RCAN", "MSRResNet")), kinds
    if name == "EDSR":  # each body block's first conv writes the second's planes; 2 blocks, 1 arena;
        # and every conv reads or writes planes (conv_first, 3 channels, is float32)
        assert kinds["planes"] == kinds["tile convs"] == 7 and kinds["layouts"] == 0, kinds
    # a value a conv stores (its residual add fused) and something else reads too is also written as
    # the planes of the conv that reads it: EDSR's and MSRResNet's next block, EDSR's conv_after_body
    # and upsampler, MSRResNet's upsampler, RCAN's conv_after_body and upsampler (its blocks end in a
    # scale_add); RRDBNet's dense blocks read a Cat of laid out values (no such conv reader)
    assert kinds["kept"] == {"EDSR": 3, "MSRResNet": 2, "RCAN": 2}.get(name, 0), kinds


@needs_amx
@pytest.mark.parametrize("N, C, O, H, W", [(1, 64, 64, 20, 33), (2, 32, 37, 9, 14), (1, 16, 21, 40, 40)])
def test_a_kept_output_writes_the_planes_its_layout_would(N, C, O, H, W):
    # run(keep=True): y as without planes (its residual times a number included), and dst's region
    # holds layout(y)'s pairs (an odd last channel paired with 0), the planes around it untouched
    rng = np.random.default_rng(O)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((O, C, 3, 3)) * 0.1).astype(np.float32)
    res = rng.standard_normal((N, O, H, W)).astype(np.float32)
    wa, (Wp, _, S) = _direct_amx.pack_weight(w), _direct_amx.plane_geometry((H, W), (3, 3))
    xp = np.empty((N, wa.shape[1] * 16, S), np.uint32)
    _direct_amx.layout(x, xp, 0, (1, 1), Wp)
    b = rng.standard_normal(wa.shape[2]).astype(np.float32)
    plain = _direct_amx.run(xp, 0, wa, b, O, (H, W), (3, 3), 0.1, 2)
    y0 = _direct_amx.run(xp, 0, wa, b, O, (H, W), (3, 3), 0.1, 2, residual=res, residual_scale=np.float32(0.2))
    assert np.array_equal(y0.view(np.uint32), np.add(np.multiply(plain, np.float32(0.2)), res).view(np.uint32))
    K = -(-O // 32) * 16
    want = np.zeros((N, K, S), np.uint32)
    _direct_amx.layout(y0, want, 0, (1, 1), Wp)
    dst = np.full((N, K + 3, S), 7, np.uint32)
    dst[:, 2:2 + K] = 0  # an arena's region: zero where nothing writes
    geo = np.array([2, 1, 1, Wp])
    y1 = _direct_amx.run(xp, 0, wa, b, O, (H, W), (3, 3), 0.1, 2, dst=dst, dgeo=geo, residual=res,
                         residual_scale=np.float32(0.2), keep=True)
    assert np.array_equal(y1.view(np.uint32), y0.view(np.uint32))
    assert np.array_equal(dst[:, 2:2 + K], want) and (dst[:, :2] == 7).all() and (dst[:, 2 + K:] == 7).all()
    with pytest.raises(ValueError, match="residual"):  # a residual with planes needs the output kept
        _direct_amx.run(xp, 0, wa, b, O, (H, W), (3, 3), 0.1, 2, dst=dst, dgeo=geo, residual=res)
    with pytest.raises(ValueError, match="do not hold"):
        _direct_amx.run(xp, 0, wa, b, O, (H, W), (3, 3), 0.1, 2, dst=dst[:, :(O + 1) // 2], dgeo=geo, keep=True)
    with pytest.raises(ValueError, match="residual_scale"):
        _direct_amx.run(xp, 0, wa, b, O, (H, W), (3, 3), 0.1, 2, residual_scale=0.5)


@needs_amx
def test_a_prepared_tile_call_gives_runs_bits_and_refuses_other_shapes():
    # prepare: run's checks and constants once (a graph's convolution); its call gives run's bits
    # and takes only arrays of the shapes it was prepared for
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 32, 9, 14)).astype(np.float32)
    w = (rng.standard_normal((20, 32, 3, 3)) * 0.1).astype(np.float32)
    res = rng.standard_normal((1, 20, 9, 14)).astype(np.float32)
    wa, (Wp, _, S) = _direct_amx.pack_weight(w), _direct_amx.plane_geometry((9, 14), (3, 3))
    xp = np.zeros((1, 16, S), np.uint32)
    _direct_amx.layout(x, xp, 0, (1, 1), Wp)
    b = np.zeros(wa.shape[2], np.float32)
    go = _direct_amx.prepare(xp.shape, 0, wa, b, 20, (9, 14), (3, 3), 0.1, rshape=res.shape, residual_scale=0.5)
    want = _direct_amx.run(xp, 0, wa, b, 20, (9, 14), (3, 3), 0.1, 2, residual=res, residual_scale=0.5)
    assert np.array_equal(go(xp, 2, None, res).view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="were prepared"):
        go(np.zeros((1, 16, S + 1), np.uint32), 2, None, res)
    with pytest.raises(ValueError, match="were prepared"):
        go(xp, 2, None, res[:, :, :-1])
    with pytest.raises(ValueError, match="were prepared"):
        go(xp, 2, None, res.astype(np.float64))


@needs_amx
@pytest.mark.parametrize("shuffle, geo, count, length", [
    (1, (0, 1, 1, 16), 16, 160), (2, (0, 1, 1, 30), 4, 570)])  # each just holding the output
def test_planes_that_cannot_hold_the_output_are_refused_before_the_kernel(shuffle, geo, count, length):
    # numba checks no bounds: a writer's planes (every pair it writes, plain or shuffled) are checked
    # in Python first; each case below is one plane, one element or one column short
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 16, 9, 14)).astype(np.float32)
    w = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    wa, (Wp, _, S) = _direct_amx.pack_weight(w), _direct_amx.plane_geometry((9, 14), (3, 3))
    xp = np.zeros((1, 16, S), np.uint32)
    _direct_amx.layout(x, xp, 0, (1, 1), Wp)
    b = np.zeros(wa.shape[2], np.float32)

    def write(count, length, geo):
        dst = np.zeros((1, count, length), np.uint32)
        _direct_amx.run(xp, 0, wa, b, 32, (9, 14), (3, 3), None, 2, dst, np.array(geo, np.int64), shuffle=shuffle)
        return dst

    assert write(count, length, geo).any()
    for short in [(count - 1, length, geo), (count, length - 1, geo), (count, length, (1, *geo[1:])),
                  (count, length, (0, 1, 3, geo[3]))]:
        with pytest.raises(ValueError, match="do not hold"):
            write(*short)


def test_blocks_over_regions_of_8_planes_end_at_the_span():
    # a span of regions (8 planes for <= 16 channels) read in whole blocks of 16 planes, none past
    # the span; each channel weighted in the first block that holds its plane
    assert _direct_amx.block_starts(16) == (0,) and _direct_amx.block_starts(24) == (0, 8)
    assert _direct_amx.block_starts(40) == (0, 16, 24) and _direct_amx.block_starts(48) == (0, 16, 32)
    assert _direct_amx.block_starts(8) == (0,)  # the caller keeps a lone small region 16 planes long
    pos = _direct_amx.block_positions((0, 16, 24), np.array([0, 15, 16, 31, 32, 39]))
    assert pos.tolist() == [0, 1, 30, 31, 32, 33, 62, 63, 80, 81, 94, 95]


@needs_amx
@pytest.mark.parametrize("sizes, O", [((32, 16, 16), 16), ((32, 16, 16, 16, 16), 32), ((16, 32, 16, 6), 21)])
def test_a_read_of_small_regions_is_the_convolution_of_their_concatenation(sizes, O):
    # RRDBNet's dense block: values of 16 channels in regions of 8 planes, a conv reading the span in
    # blocks that end at it (zero weights where a block reads a plane twice): the bits of the conv of
    # the concatenated values, because each tile product sums the same pairs as the eager one (a
    # run of pairs moved within a tile keeps its bits; split over two tiles it does not: tdpbf16ps
    # rounds once per tile product, not per pair)
    rng = np.random.default_rng(len(sizes))
    H, W, N = 13, 17, 2
    values = [rng.standard_normal((N, c, H, W)).astype(np.float32) for c in sizes]
    x = np.concatenate(values, axis=1)
    w = (rng.standard_normal((O, x.shape[1], 3, 3)) * 0.1).astype(np.float32)
    b = np.zeros(_direct_amx.out_blocks(O), np.float32)
    Wp, _, S = _direct_amx.plane_geometry((H, W), (3, 3))
    eager = _direct_amx.correlate(x, w, (H, W), (1, 1), None, None, 2)
    regions = [_direct_amx.out_blocks(c) // 2 for c in sizes]
    first = np.cumsum([0, *regions])
    arena = np.full((N, first[-1] + 5, S), 0x7F80, np.uint32)  # planes outside the span: not read
    for v, p, k in zip(values, first, regions):
        _direct_amx.layout(v, arena, p, (1, 1), Wp, planes=k)
    starts = _direct_amx.block_starts(first[-1])
    positions = np.concatenate([_direct_amx.block_positions(starts, p + np.arange(-(-c // 2)))[:c]
                                for c, p in zip(sizes, first)])
    wa = _direct_amx.pack_weight(w, positions, 32 * len(starts))
    y = _direct_amx.run(arena, 0, wa, b, O, (H, W), (3, 3), None, 2, starts=starts)
    assert np.array_equal(y.view(np.uint32), eager.view(np.uint32))
    with pytest.raises(ValueError, match="blocks of 16 planes"):
        _direct_amx.run(arena, 6, wa, b, O, (H, W), (3, 3), None, 2, starts=starts)
    with pytest.raises(ValueError, match="planes from plane"):
        _direct_amx.layout(values[0], arena, first[-1], (1, 1), Wp, planes=8)


@needs_amx
@pytest.mark.parametrize("C, O, H, W, rh, rw", [(32, 32, 20, 33, 2, 2), (32, 37, 9, 14, 2, 2), (16, 12, 10, 11, 3, 2)])
def test_a_conv_writes_the_planes_of_its_outputs_nearest_upsampling(C, O, H, W, rh, rw):
    # run(repeat=(rh, rw)) into planes: layout(y, repeat)'s bits (each pair rounded once, written rh
    # x rw times; channels past O zero), without y or the upsampled array
    rng = np.random.default_rng(C + O)
    x = rng.standard_normal((2, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((O, C, 3, 3)) * 0.1).astype(np.float32)
    wa, (Wp, _, S) = _direct_amx.pack_weight(w), _direct_amx.plane_geometry((H, W), (3, 3))
    xp = np.empty((2, wa.shape[1] * 16, S), np.uint32)
    _direct_amx.layout(x, xp, 0, (1, 1), Wp)
    b = np.zeros(wa.shape[2], np.float32)
    b[:O] = rng.standard_normal(O)
    y = _direct_amx.run(xp, 0, wa, b, O, (H, W), (3, 3), 0.2, 2)
    Wp2, _, S2 = _direct_amx.plane_geometry((H * rh, W * rw), (3, 3))
    K = -(-O // 32) * 16
    want = np.zeros((2, K, S2), np.uint32)
    _direct_amx.layout(y, want, 0, (1, 1), Wp2, repeat=(rh, rw))
    dst, geo = np.zeros((2, K, S2), np.uint32), np.array([0, 1, 1, Wp2])
    assert _direct_amx.run(xp, 0, wa, b, O, (H, W), (3, 3), 0.2, 2, dst=dst, dgeo=geo, repeat=(rh, rw)) is None
    assert np.array_equal(dst, want)
    with pytest.raises(ValueError, match="repeat"):
        _direct_amx.run(xp, 0, wa, b, O, (H, W), (3, 3), 0.2, 2, repeat=(rh, rw))
    with pytest.raises(ValueError, match="do not hold"):
        _direct_amx.run(xp, 0, wa, b, O, (H, W), (3, 3), 0.2, 2, dst=dst[:, :, :S2 // 2], dgeo=geo, repeat=(rh, rw))


@needs_amx
@pytest.mark.parametrize("C, O, H, W, rh, rw, slope", [(32, 32, 9, 14, 2, 2, 0.2), (16, 12, 5, 11, 2, 2, None),
                                                     (48, 40, 4, 7, 3, 3, 0.0), (32, 16, 6, 5, 2, 3, "prelu")])
def test_a_read_in_phases_is_the_convolution_of_the_nearest_upsampling(C, O, H, W, rh, rw, slope):
    # run(phases=(rh, rw)) from the planes of x itself: the planes the same conv writes from the
    # layout of x's nearest upsampling (each output's taps read the pixels the repetition repeats, in
    # the same order: the same sums), with channel magnitudes e^-3..e^3 (a sum split differently
    # would change bits)
    rng = np.random.default_rng(C + O + rh)
    x = (rng.standard_normal((2, C, H, W)) * np.exp(np.linspace(-3, 3, C))[None, :, None, None]).astype(np.float32)
    w = (rng.standard_normal((O, C, 3, 3)) * 0.1).astype(np.float32)
    s = rng.uniform(0, 0.3, O).astype(np.float32) if slope == "prelu" else slope
    wa = _direct_amx.pack_weight(w)
    b = np.zeros(wa.shape[2], np.float32)
    b[:O] = rng.standard_normal(O)
    big = (H * rh, W * rw)
    Wp, _, S = _direct_amx.plane_geometry(big, (3, 3))
    up = np.zeros((2, wa.shape[1] * 16, S), np.uint32)
    _direct_amx.layout(x, up, 0, (1, 1), Wp, repeat=(rh, rw))
    K, geo = _direct_amx.out_blocks(O) // 2, np.array([0, 1, 1, Wp])
    want = np.zeros((2, K, S), np.uint32)
    _direct_amx.run(up, 0, wa, b, O, big, (3, 3), s, 2, dst=want, dgeo=geo)
    Wps, _, Ss = _direct_amx.plane_geometry((H, W), (3, 3))
    own = np.zeros((2, wa.shape[1] * 16, Ss), np.uint32)
    _direct_amx.layout(x, own, 0, (1, 1), Wps)
    got = np.zeros((2, K, S), np.uint32)
    assert _direct_amx.run(own, 0, wa, b, O, big, (3, 3), s, 2, dst=got, dgeo=geo, phases=(rh, rw)) is None
    assert want.any() and np.array_equal(got, want)
    for bad in ({"dst": None, "dgeo": None}, {"keep": True}, {"repeat": (2, 2)}):
        with pytest.raises(ValueError, match="phases"):
            _direct_amx.run(own, 0, wa, b, O, big, (3, 3), s, 2, **{"dst": got, "dgeo": geo, **bad}, phases=(rh, rw))
    with pytest.raises(ValueError, match="phases"):  # sizes that are not the factors' multiples
        _direct_amx.run(own, 0, wa, b, O, (big[0] + 1, big[1]), (3, 3), s, 2, dst=got, dgeo=geo, phases=(rh, rw))


@pytest.mark.parametrize("N, C, H, W, per_image", [(1, 32, 9, 14, False), (2, 37, 5, 8, True)])
def test_a_scale_add_writes_the_planes_its_layout_would(N, C, H, W, per_image):
    # _direct_amx.scale_add_pairs: elementwise.scale_add's values, and layout's pairs of them (an odd
    # last channel paired with 0) in dst's region, the planes around it untouched (no tile op: any CPU)
    from framework.functional import elementwise
    rng = np.random.default_rng(C)
    a, x = (rng.standard_normal((N, C, H, W)).astype(np.float32) for _ in range(2))
    s = rng.uniform(0, 1, (N if per_image else 1, C, 1, 1)).astype(np.float32)
    Wp, _, S = _direct_amx.plane_geometry((H, W), (3, 3))
    K = -(-C // 32) * 16
    dst = np.full((N, 2 + K + 1, S), 7, np.uint32)
    dst[:, 2:2 + K] = 0
    geo = np.array([2, 1, 1, Wp])
    out = _direct_amx.scale_add_pairs(a, s, x, dst, geo)
    assert np.array_equal(out.view(np.uint32), elementwise.scale_add(a, s, x).view(np.uint32))
    want = np.zeros((N, K, S), np.uint32)
    _direct_amx.layout(out, want, 0, (1, 1), Wp)
    assert np.array_equal(dst[:, 2:2 + K], want) and (dst[:, :2] == 7).all() and (dst[:, 2 + K:] == 7).all()
    with pytest.raises(ValueError, match="do not hold"):
        _direct_amx.scale_add_pairs(a, s, x, dst[:, :3], geo)


class _TwoReaders(Module):
    """x -> a (3x3) -> b; a is read by a 3x3 conv and by a 5x5 conv (two geometries: no shared
    planes for a), and c = cat(a, b) is also the graph's second output (kept as float32)."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(3)
        self.w = [sg.tensor((rng.standard_normal(s) * 0.2).astype(np.float32))
                  for s in ((32, 16, 3, 3), (32, 32, 3, 3), (16, 32, 5, 5), (16, 64, 3, 3))]

    def forward(self, x):
        a = F.conv2d(x, self.w[0], padding=1, relu_slope=0.0)
        b = F.conv2d(a, self.w[1], padding=1, relu_slope=0.0)
        c = F.cat([a, b], axis=1)
        return F.conv2d(a, self.w[2], padding=2) + F.conv2d(c, self.w[3], padding=1)[:, :16], c


@needs_amx
def test_planes_are_shared_only_where_every_reader_takes_the_same_layout():
    model = _TwoReaders()
    x = sg.tensor(np.random.default_rng(1).uniform(0, 1, (1, 16, 13, 11)).astype(np.float32))
    cap = Capture([model], train=False)
    with sg.no_grad(), sg.autocast("bf16"):
        y, c = model(x)
        got = [cap(lambda t: dict(zip(("y", "c"), model(t))), x) for _ in range(3)]
    assert cap.replays == 1, cap.status()
    for g in got:
        assert np.array_equal(g["y"].data, y.data) and np.array_equal(g["c"].data, c.data)
    kinds = _kinds(cap.graphs[0])
    # a's readers differ (3x3 pad 1 and 5x5 pad 2, and the Cat is an output): no group holds a;
    # b's only reader is the Cat, read by nothing that takes planes. Only keep_planes applies: a's
    # first conv reader reads the planes a's conv writes beside a
    assert kinds["planes"] == 1 and kinds["kept"] == 1 and kinds["cats"] == 1, kinds


class _OddCat(Module):
    """x -> a (17 channels) -> b (16); a conv reads cat(a, b): a's region (32 channels) has a gap
    before b, so the tiles would not sum the eager Cat's pairs (its pair 8 is a's last channel and
    b's first)."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(4)
        self.w = [sg.tensor((rng.standard_normal(s) * 0.2).astype(np.float32))
                  for s in ((17, 16, 3, 3), (16, 17, 3, 3), (16, 33, 3, 3))]

    def forward(self, x):
        a = F.conv2d(x, self.w[0], padding=1, relu_slope=0.0)
        b = F.conv2d(a, self.w[1], padding=1, relu_slope=0.0)
        return F.conv2d(F.cat([a, b], axis=1), self.w[2], padding=1)


@needs_amx
def test_a_cat_whose_values_leave_gaps_in_their_regions_is_not_read_in_place():
    model = _OddCat()
    x = sg.tensor(np.random.default_rng(1).uniform(0, 1, (1, 16, 13, 11)).astype(np.float32))
    eager, outs, cap = _replays(model, x)
    assert cap.replays == 2, cap.status()
    for out in outs:
        assert np.array_equal(out.view(np.uint32), eager.view(np.uint32))
    assert _kinds(cap.graphs[0])["cats"] == 1


@needs_amx
def test_a_graph_per_precision_fp32_after_bf16_is_fp32():
    init.manual_seed(0)
    model = MODELS.build(CONFIGS["EDSR"])
    model.eval()
    x = sg.tensor(np.random.default_rng(2).uniform(0, 1, (1, 3, 12, 10)).astype(np.float32))
    with sg.no_grad():
        fp32 = model(x).data.copy()
    eager, outs, cap = _replays(model, x, calls=3)
    with sg.no_grad():
        again = [cap(lambda t: {"sr": model(t)}, x)["sr"].data for _ in range(3)]
    assert not np.array_equal(fp32, eager)
    assert all(np.array_equal(o, eager) for o in outs)
    assert all(np.array_equal(a, fp32) for a in again)
    assert len(cap.graphs) == 2 and cap.replays == 2, cap.status()


@needs_amx
def test_a_convolution_writes_the_planes_its_reader_would_lay_out():
    """_direct_amx.run's pair epilogue gives `layout`'s bits of the float32 output, at an offset
    into a larger arena, and a reader from that offset gives the float32 route's output."""
    rng = np.random.default_rng(4)
    for C, O, H, W, k, slope in ((32, 48, 20, 23, 3, 0.2), (16, 33, 9, 31, 3, None), (40, 32, 12, 12, 5, 0.0)):
        x = rng.standard_normal((1, C, H, W)).astype(np.float32)
        w = (rng.standard_normal((O, C, k, k)) * 0.2).astype(np.float32)
        b = rng.standard_normal(O).astype(np.float32)
        y = _direct_amx.correlate(x, w, (H, W), (k // 2, k // 2), b, slope, 2)
        Wp2, _, S2 = _direct_amx.plane_geometry((H, W), (3, 3))
        region = -(-O // 32) * 16
        want = np.full((1, 8 + region + 4, S2), 7, np.uint32)
        _direct_amx.layout(y, want, 8, (1, 1), Wp2)
        got = np.full_like(want, 7)
        got[:, 8:8 + region] = 0  # a fresh arena region: zero
        wa = _direct_amx.pack_weight(w)
        bias = np.zeros(wa.shape[2], np.float32)
        bias[:O] = b
        Wp, _, S = _direct_amx.plane_geometry((H, W), (k, k))
        xp = np.empty((1, wa.shape[1] * 16, S), np.uint32)
        _direct_amx.layout(x, xp, 0, (k // 2, k // 2), Wp)
        assert _direct_amx.run(xp, 0, wa, bias, O, (H, W), (k, k), slope, 2, got,
                               np.array([8, 1, 1, Wp2], np.int64)) is None
        assert np.array_equal(got, want)
        w2 = (rng.standard_normal((16, O, 3, 3)) * 0.2).astype(np.float32)
        out = _direct_amx.run(got, 8, _direct_amx.pack_weight(w2), np.zeros(32, np.float32), 16, (H, W), (3, 3),
                              None, 2)
        assert np.array_equal(out, _direct_amx.correlate(y, w2, (H, W), (1, 1), None, None, 2))


@needs_amx
@pytest.mark.parametrize("C, O, r, slope", [(32, 64, 2, 0.1), (16, 27, 3, None), (48, 48, 4, 0.0), (32, 20, 2, None)])
def test_an_upsampler_writes_its_readers_planes_shuffled(C, O, r, slope):
    """_direct_amx.run with planes and a shuffle by r gives `layout`'s bits of the shuffled float32
    output (an odd channel count pairs its last channel with 0), and writes nothing past its region."""
    rng = np.random.default_rng(O)
    H, W = 7, 11
    x = rng.standard_normal((2, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((O, C, 3, 3)) * 0.2).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    y = F.pixel_shuffle(sg.tensor(_direct_amx.correlate(x, w, (H, W), (1, 1), b, slope, 2)), r).numpy()
    Wp2, _, S2 = _direct_amx.plane_geometry((H * r, W * r), (3, 3))
    region = -(-(O // (r * r)) // 32) * 16
    want = np.full((2, 5 + region + 3, S2), 7, np.uint32)
    want[:, 5:5 + region] = 0
    _direct_amx.layout(y, want, 5, (1, 1), Wp2)
    got = np.full_like(want, 7)
    got[:, 5:5 + region] = 0  # a fresh arena region: zero
    wa = _direct_amx.pack_weight(w)
    bias = np.zeros(wa.shape[2], np.float32)
    bias[:O] = b
    Wp, _, S = _direct_amx.plane_geometry((H, W), (3, 3))
    xp = np.empty((2, wa.shape[1] * 16, S), np.uint32)
    _direct_amx.layout(x, xp, 0, (1, 1), Wp)
    assert _direct_amx.run(xp, 0, wa, bias, O, (H, W), (3, 3), slope, 2, got, np.array([5, 1, 1, Wp2], np.int64),
                           shuffle=r) is None
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="residual"):
        _direct_amx.run(xp, 0, wa, bias, O, (H, W), (3, 3), slope, 2, got, np.array([5, 1, 1, Wp2], np.int64),
                        residual=y, shuffle=r)


def test_outside_bf16_the_pass_changes_nothing():
    """Under float32 (or without AMX) share_planes returns the ops as they were."""
    ops, classes = [("op",)], [None]
    assert _planes.share_planes(ops, classes, graph=None) == (ops, classes)


@needs_amx
def test_the_tile_epilogue_applies_prelu_slopes_per_channel():
    """_direct_amx.run with an array slope: PReLU's formula (a v where v <= 0) per output channel,
    into y and into the next convolution's planes; one IEEE product per value, so exact."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 32, 11, 14)).astype(np.float32)
    w = (rng.standard_normal((40, 32, 3, 3)) * 0.2).astype(np.float32)
    a = rng.uniform(-0.5, 0.5, 40).astype(np.float32)
    plain = _direct_amx.correlate(x, w, (11, 14), (1, 1), None, None, 2)
    want = np.where(plain <= 0, a[None, :, None, None] * plain, plain)
    assert np.array_equal(_direct_amx.correlate(x, w, (11, 14), (1, 1), None, a, 2), want)
    assert (plain < 0).any() and (a < 0).any()


class _Upsamplings(Module):
    """Four upsamplings of x, each read by a 3x3 conv: nearest x2 (folded: the conv lays out x
    itself, repeated), nearest to (2H, 3W) (folded, two factors), nearest x1.5 and bilinear x2 (not
    repetitions: they stay), and a nearest x2 that an add reads too (stays)."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(6)
        self.w = [sg.tensor((rng.standard_normal((16, 32, 3, 3)) * 0.2).astype(np.float32)) for _ in range(5)]

    def forward(self, x):
        H, W = x.shape[2:]
        ups = [F.interpolate(x, scale_factor=2, mode="nearest"), F.interpolate(x, size=(2 * H, 3 * W)),
               F.interpolate(x, scale_factor=1.5, mode="nearest"),
               F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)]
        outs = [F.conv2d(u, w, padding=1, relu_slope=0.0) for u, w in zip(ups, self.w)]
        shared = F.interpolate(x, scale_factor=2, mode="nearest")
        return (*outs, F.conv2d(shared, self.w[4], padding=1) + shared[:, :16])


@needs_amx
def test_a_conv_lays_out_the_nearest_upsampling_it_alone_reads():
    model = _Upsamplings()
    x = sg.tensor(np.random.default_rng(7).uniform(-1, 1, (2, 32, 7, 9)).astype(np.float32))
    cap = Capture([model], train=False)
    with sg.no_grad(), sg.autocast("bf16"):
        eager = [t.data.copy() for t in model(x)]
        got = [cap(lambda t: {str(i): o for i, o in enumerate(model(t))}, x) for _ in range(3)]
    assert cap.replays == 1, cap.status()
    for g in got:
        assert all(np.array_equal(g[str(i)].data.view(np.uint32), e.view(np.uint32)) for i, e in enumerate(eager))
    assert _kinds(cap.graphs[0])["resamples"] == 3  # x1.5, bilinear and the shared x2 stay
    # the layout of the repetition from the small image is the layout of the repeated array
    Wp, _, S = _direct_amx.plane_geometry((14, 27), (3, 3))
    big = x.data.repeat(2, axis=2).repeat(3, axis=3)
    want, got = np.full((2, 16, S), 7, np.uint32), np.full((2, 16, S), 7, np.uint32)
    _direct_amx.layout(big, want, 0, (1, 1), Wp)
    _direct_amx.layout(x.data, got, 0, (1, 1), Wp, (2, 3))
    assert np.array_equal(got, want)
    with pytest.raises(ValueError, match="does not fit"):
        _direct_amx.layout(x.data, got, 0, (1, 1), Wp - 3, (2, 3))


class _Residual(Module):
    """y = conv(x) + x (x the graph's input: no planes group) and z = conv2(relu-conv1(y)) + y (the
    second conv reads planes): both adds done by the tile epilogue."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(8)
        self.w = [sg.tensor((rng.standard_normal((32, 32, 3, 3)) * 0.2).astype(np.float32)) for _ in range(3)]

    def forward(self, x):
        y = F.conv2d(x, self.w[0], padding=1) + x
        return F.conv2d(F.conv2d(y, self.w[1], padding=1, relu_slope=0.0), self.w[2], padding=1) + y


@needs_amx
def test_a_residual_add_is_done_by_the_tile_epilogue():
    model = _Residual()
    x = sg.tensor(np.random.default_rng(9).uniform(-1, 1, (2, 32, 9, 14)).astype(np.float32))
    cap = Capture([model], train=False)
    with sg.no_grad(), sg.autocast("bf16"):
        eager = model(x).data.copy()
        got = [cap(lambda t: {"y": model(t)}, x)["y"].data for _ in range(3)]
    assert cap.replays == 1, cap.status()
    assert all(np.array_equal(g.view(np.uint32), eager.view(np.uint32)) for g in got)
    graph = cap.graphs[0]
    assert not any(op[0] is Add.forward for op in graph.forward)  # both adds fused
    names = [getattr(op[0], "__qualname__", "") for op in graph.forward]
    # every AMX conv packed once (a _conv_forward); y's second reader, conv 1, reads the planes conv 0
    # writes beside y (keep_planes), and conv 1 writes conv 2's
    assert sum(n.startswith("_conv2d") for n in names) == 0 and sum(n.startswith("_conv_forward") for n in names) == 3
    assert _kinds(graph)["kept"] == 1 and _kinds(graph)["planes"] == 2
    with pytest.raises(ValueError, match="residual"):
        _direct_amx.correlate(x.data, model.w[0].data, (9, 14), (1, 1), None, None, 2, residual=x.data[:, :16])


class _Upsampler(Module):
    """conv (32 -> 64) -> pixel_shuffle(2) -> PReLU (16 weights) -> conv, and conv -> pixel_shuffle
    read by an add too (the activation-free store, the shuffle's output read twice)."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(10)
        self.w = [sg.tensor((rng.standard_normal(s) * 0.2).astype(np.float32))
                  for s in ((64, 32, 3, 3), (32, 16, 3, 3), (64, 32, 3, 3))]
        self.a = sg.tensor(rng.uniform(-0.5, 0.5, 16).astype(np.float32))

    def forward(self, x):
        y = F.prelu(F.pixel_shuffle(F.conv2d(x, self.w[0], padding=1), 2), self.a)
        z = F.pixel_shuffle(F.conv2d(x, self.w[2], padding=1), 2)
        return F.conv2d(y, self.w[1], padding=1), z + z


@needs_amx
def test_an_upsampler_conv_stores_its_output_shuffled_and_activated():
    model = _Upsampler()
    x = sg.tensor(np.random.default_rng(11).uniform(-1, 1, (2, 32, 6, 9)).astype(np.float32))
    cap = Capture([model], train=False)
    with sg.no_grad(), sg.autocast("bf16"):
        eager = [t.data.copy() for t in model(x)]
        got = [cap(lambda t: dict(zip("ab", model(t))), x) for _ in range(3)]
    assert cap.replays == 1, cap.status()
    for g in got:
        for name, e in zip("ab", eager):
            assert np.array_equal(g[name].data.view(np.uint32), e.view(np.uint32))
    kinds = _kinds(cap.graphs[0])
    assert kinds["shuffles"] == 0 and kinds["prelus"] == 0, kinds
    Wp, _, S = _direct_amx.plane_geometry((6, 9), (3, 3))
    xp = np.zeros((2, 16, S), np.uint32)
    with pytest.raises(ValueError, match="pixel shuffle"):
        _direct_amx.run(xp, 0, _direct_amx.pack_weight(model.w[1].data[:, :, :, :]), np.zeros(32, np.float32), 32,
                        (6, 9), (3, 3), None, 2, shuffle=3)
