"""framework.capture: a captured training step and a captured inference graph give the same bits as
the eager engine, for every registered model; what cannot be captured runs eagerly and says why."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F
import models  # noqa: F401  registers every architecture
from framework.capture import Capture
from framework.nn import init
from framework.optim import Adam
from framework.card import card
from framework.registry import MODELS

from ..models.cases import SMALL, build, card_cases

# Small builds of the registered models that tests/models/cases.py does not make small, and of the
# networks that are not x`scale` SR models (discriminators, KernelGAN's pair): spec, LR side, scale
# of the target (0: the loss is the output's mean).
OTHER = {
    "RRDBNet": ({"type": "RRDBNet", "scale": 2, "num_feat": 8, "num_block": 1, "num_grow_ch": 4}, 8, 2),
    "SPAN": ({"type": "SPAN", "scale": 2, "feature_channels": 8, "num_blocks": 1}, 8, 2),
    "RealCUGAN": ({"type": "RealCUGAN", "scale": 2, "fast": True}, 40, 2),
    "UNetDiscriminatorSN": ({"type": "UNetDiscriminatorSN", "num_in_ch": 3, "num_feat": 4}, 16, 0),
    "VGGStyleDiscriminator": ({"type": "VGGStyleDiscriminator", "num_in_ch": 3, "num_feat": 4,
                               "input_size": 128}, 128, 0),
    "MMRealSR": ({"type": "MMRealSR", "num_feat": 8, "num_block": 1, "num_grow_ch": 4,
                  "num_feats": [8], "num_blocks": [1], "downscales": [2]}, 8, 4),  # x4 only
    "KernelGANGenerator": ({"type": "KernelGANGenerator", "G_chan": 4}, 16, 0),
    "KernelGANDiscriminator": ({"type": "KernelGANDiscriminator", "D_chan": 4, "D_n_layers": 3}, 16, 0),
    "DnCNN": ({"type": "DnCNN", "in_nc": 3, "out_nc": 3, "nc": 6, "nb": 4}, 16, 1),
    "FBCNN": ({"type": "FBCNN", "nc": [4, 4, 4, 512], "nb": 1}, 8, 1),  # 512: the original's
    # Uformer pads to a 128 square: windows of 2 keep it small; KBNet's defaults are the published
    # SIDD model (142M parameters)
    "Uformer": ({"type": "Uformer", "embed_dim": 4, "depths": [1] * 9, "num_heads": [1] * 9,
                 "win_size": 2, "drop_path_rate": 0.0}, 16, 1),
    "KBNet": ({"type": "KBNet", "width": 4, "middle_blk_num": 1, "enc_blk_nums": [1],
               "dec_blk_nums": [1]}, 16, 1),
}
# Networks whose training step cannot be captured, and why (checked: the reason is reported): none
# now. Batch norm's running statistics and spectral norm's power iteration are updated by ops that
# declare them their state, which a replay repeats (DnCNN, DCTLSA, DAT, SwiftSRGAN,
# VGGStyleDiscriminator, UNetDiscriminatorSN, KernelGANDiscriminator replay).
EAGER = {}


def _network(name):
    """(model, LR side, target scale) of a small build of registered model `name`."""
    if name in OTHER:
        spec, side, scale = OTHER[name]
        init.manual_seed(0)
        return MODELS.build(spec), side, scale
    scale = _scale_of(name)
    model, _ = build(name, scale, 3, small=name in SMALL)
    return model, 8 if scale > 1 else 16, scale


def _scale_of(name):
    """2, or 1 for a restoration network (its card says so: NAFNet, DRUNet, SCUNet)."""
    spec = next((s for s in card_cases() if s["type"] == name), None)
    return 1 if spec is not None and card(spec).role == "restoration" else 2


def _train(name, capture: bool, steps=4):
    model, side, scale = _network(name)
    model.train()
    # KAIR's U-Nets (DRUNet, SCUNet: no normalisation) diverge to 1e27 on random targets at 1e-2;
    # a run compared in infinities would prove little, so the losses must stay finite
    opt = Adam(model.parameters(), lr=1e-4 if name in ("DRUNet", "SCUNet") else 1e-2)
    cap = Capture([model], enabled=capture)
    losses = []
    for i in range(steps):
        rng = np.random.default_rng(i)
        x = sg.tensor(rng.uniform(0, 1, (2, 3, side, side)).astype(np.float32))
        y = sg.tensor(rng.uniform(0, 1, (2, 3, side * scale, side * scale)).astype(np.float32))

        def step(x, y):
            out = model(x)
            return {"loss": F.l1_loss(out, y) if scale else (out * out).mean()}

        opt.zero_grad()
        losses.append(cap(step, x, y)["loss"].data.copy())
        opt.step()
    assert np.isfinite(losses).all() and max(losses) < 1e3, (name, losses)
    return model, opt, losses, cap


def _assert_same_run(a, b):
    (ma, oa, la, _), (mb, ob, lb, _) = a, b
    assert all(np.array_equal(x, y) for x, y in zip(la, lb))
    for (n, p), q in zip(ma.named_parameters(), mb.parameters()):
        assert np.array_equal(p.data, q.data), n
        assert (p.grad is None) == (q.grad is None), n
        assert p.grad is None or np.array_equal(p.grad.data, q.grad.data), n
    # the buffers too: batch norm's running statistics and counter, updated by the replayed op
    buffers = [(n, b) for n, b in ma.named_buffers() if b is not None]
    assert [n for n, _ in buffers] == [n for n, b in mb.named_buffers() if b is not None]
    for (n, b), c in zip(buffers, (b for _, b in mb.named_buffers() if b is not None)):
        assert b.data.dtype == c.data.dtype and np.array_equal(b.data, c.data), n
    sa, sb = oa.state_dict()["state"], ob.state_dict()["state"]
    assert sa.keys() == sb.keys()
    for k in sa:
        for key in sa[k]:
            assert np.array_equal(sa[k][key], sb[k][key]), (k, key)


@pytest.mark.parametrize("name", MODELS.names())
def test_captured_step_is_bit_identical_to_eager(name):
    eager = _train(name, capture=False)
    captured = _train(name, capture=True)
    cap = captured[3]
    if name in EAGER:
        assert cap.replays == 0 and EAGER[name] in cap.reason, cap.status()
    else:
        assert cap.replays == 2, cap.status()  # steps 1-2 record, 3-4 replay
    _assert_same_run(eager, captured)


@pytest.mark.parametrize("name", MODELS.names())
def test_captured_inference_is_bit_identical_to_eager(name):
    model, side, _ = _network(name)
    model.eval()
    cap = Capture([model], train=False)
    for i in range(4):  # calls 1-2 record, 3-4 replay
        x = sg.tensor(np.random.default_rng(i).uniform(0, 1, (1, 3, side, side)).astype(np.float32))
        with sg.no_grad():
            eager = model(x).data
            got = cap(lambda x: {"sr": model(x)}, x)["sr"].data
        assert got.dtype == eager.dtype and np.array_equal(got, eager), i
    assert cap.replays == 2, cap.status()


def _inference_graph(name):
    model, _ = build(name, 2, 3, small=True)
    model.eval()
    cap = Capture([model], train=False)
    x = sg.tensor(np.zeros((1, 3, 8, 8), np.float32))
    with sg.no_grad():
        for _ in range(2):
            cap(lambda x: {"sr": model(x)}, x)
    (graph,) = cap.graphs
    return graph


def test_inference_graph_packs_the_direct_routes_weights_once():
    from framework.functional.conv import Conv2dFunction
    graph = _inference_graph("EDSR")
    forwards = [op[0] for op in graph.forward]
    lowered = [f for f in forwards if f.__qualname__.startswith("_conv2d")]
    # EDSR small: the first conv (3 -> 16: 27 products), 4 body convs, conv_after_body and the
    # upsampler's 16 -> 64; the last conv (to 3 channels) stays on im2col (not the direct route)
    assert len(lowered) == 7 and forwards.count(Conv2dFunction.forward) == 1


def test_inference_graph_computes_constant_ops_once():
    graph = _inference_graph("SwinIR")  # the relative-position bias gathered from its table
    fused = [op for op in graph.forward if op[0].__qualname__.endswith("fused")]
    # conv_after_body(...) + x: one Add done by its conv; each block's x + mlp(...) by its fc2
    blocks = sum(1 for op in graph.forward if op[0].__qualname__.startswith("WindowAttention"))
    assert blocks > 1 and len(fused) == 1 + blocks
    from framework.functional.activation import LeakyReLUFunction
    assert not any(op[0] is LeakyReLUFunction.forward for op in graph.forward)  # conv_before_upsample's
    assert len(graph.forward) == len(graph.meta) - 6 - len(fused) - 1  # LeakyReLU: done by its conv


def _linear_case(seed=0):
    init.manual_seed(seed)
    return sg.nn.Linear(4, 3)


def _run_capture(fn, model, calls=3, shape=(2, 4)):
    cap = Capture([model])
    for i in range(calls):
        x = sg.tensor(np.random.default_rng(i).standard_normal(shape).astype(np.float32))
        model.zero_grad()
        cap(lambda x: {"loss": fn(model, x)}, x)
    return cap


@pytest.mark.parametrize("fn,reason", [
    (lambda m, x: F.dropout(m(x), 0.5).sum(), "DropoutFunction: its mask is drawn afresh"),
    (lambda m, x: m(x).clone().mul_(2).sum(), "in-place op (mul_)"),
    # Python that branches on the data: a different op on the second call
    (lambda m, x: (m(x).exp() if x.data[0, 0] > 0.2 else m(x)).sum(), "data-dependent control flow"),
    # a constant computed from the data outside the ops
    (lambda m, x: (m(x) * sg.tensor(x.data.sum())).sum(), "tensor made outside the ops"),
    (lambda m, x: (m(x) * float(x.data.sum())).sum(), "argument 1 differs"),
])
def test_what_is_not_static_runs_eagerly_with_the_reason(fn, reason):
    cap = _run_capture(fn, _linear_case())
    assert cap.replays == 0 and reason in cap.reason, cap.reason
    assert cap.status().startswith("eager: ")


def test_a_buffer_changed_outside_the_ops_runs_eagerly_with_the_reason():
    """A module buffer updated by Python in the step (not by an op that declares it its state, as
    batch norm's statistics and spectral norm's vectors are) would not be updated by a replay."""
    model = _linear_case()
    model.register_buffer("seen", sg.tensor(np.zeros(1, np.float32)))

    def fn(m, x):
        m.seen.data += 1
        return m(x).sum()

    cap = _run_capture(fn, model)
    assert cap.replays == 0 and "the buffer 0.seen changes during the step outside the ops" \
        in cap.reason, cap.reason
    assert model.seen.data[0] == 3  # every call ran eagerly


def _two_losses(capture: bool, steps=4):
    """Capture(roots=("a", "b")) over `steps` calls: the gradients after each, and the capture."""
    model = _linear_case()
    cap = Capture([model], roots=("a", "b"), enabled=capture)

    def fn(x, y):
        h = model(x)
        return {"a": (h * h).mean(), "b": model(y).abs().sum(), "h": h}

    grads = []
    for i in range(steps):
        rng = np.random.default_rng(i)
        x, y = (sg.tensor(rng.standard_normal((2, 4)).astype(np.float32)) for _ in range(2))
        model.zero_grad()
        cap(fn, x, y)
        grads.append([p.grad.data.copy() for p in model.parameters()])
    return cap, grads


def test_two_roots_run_their_backward_passes_in_turn():
    """roots=("a", "b") is a.backward() then b.backward() (GAN's discriminator on real, then
    fake): each leaf's gradient is a's, then b's added. Replays equal eager bit for bit."""
    cap, got = _two_losses(True)
    _, want = _two_losses(False)
    assert cap.replays == 2, cap.reason
    for g, w in zip(got, want):
        assert all(np.array_equal(a, b) for a, b in zip(g, w))
    # the eager reference by hand, for the last step: the two backward calls in turn
    model = _linear_case()
    rng = np.random.default_rng(3)
    x, y = (sg.tensor(rng.standard_normal((2, 4)).astype(np.float32)) for _ in range(2))
    h = model(x)
    (h * h).mean().backward()
    first = [p.grad.data.copy() for p in model.parameters()]
    model(y).abs().sum().backward()
    assert all(np.array_equal(a, b) for a, b in zip(got[-1], [p.grad.data for p in model.parameters()]))
    assert not all(np.array_equal(a, b) for a, b in zip(first, got[-1]))  # b's part was added


def test_a_new_shape_is_a_new_graph_and_the_guards_rerecord():
    model = _linear_case()
    cap = _run_capture(lambda m, x: m(x).sum(), model)
    assert cap.replays == 1 and len(cap.graphs) == 1
    for _ in range(3):
        cap(lambda x: {"loss": model(x).sum()}, sg.tensor(np.ones((5, 4), np.float32)))
    assert cap.replays == 2 and len(cap.graphs) == 2
    model.bias.requires_grad_(False)  # a frozen parameter: the graphs no longer apply
    model.zero_grad()
    out = cap(lambda x: {"loss": model(x).sum()}, sg.tensor(np.ones((5, 4), np.float32)))
    assert cap.replays == 2 and model.bias.grad is None and model.weight.grad is not None
    assert np.array_equal(model.weight.grad.data, np.full((3, 4), 5, np.float32))
    assert out["loss"].shape == ()


def test_the_recorder_ignores_other_threads():
    import threading
    model = _linear_case()
    stop = threading.Event()

    def busy():  # another thread's ops (a batch prefetcher's degradations) while the step records
        while not stop.is_set():
            F.relu(sg.tensor(np.ones(3, np.float32)))
    t = threading.Thread(target=busy)
    t.start()
    try:
        cap = _run_capture(lambda m, x: m(x).sum(), model, calls=4)
    finally:
        stop.set()
        t.join()
    assert cap.replays == 2, cap.reason


def test_tiled_inference_through_captured_graphs_is_bit_identical():
    from framework.engine.inference import upscale as inference
    model, _ = build("EDSR", 2, 3, small=True)
    model.eval()
    lq = np.random.default_rng(0).uniform(0, 1, (3, 48, 45)).astype(np.float32)  # 16 inner tiles
    eager = inference.upscale(model, lq, tile=8, overlap=2)
    inference.capture_inference(model)  # as srgrad-infer and srgrad-eval do
    captured = inference.upscale(model, lq, tile=8, overlap=2)
    assert np.array_equal(captured, eager)
    cap = inference._CAPTURES[model]
    assert cap.replays > 0 and len(cap.graphs) > 1, cap.status()
    assert len(cap._packed) == 7  # EDSR small's direct-route convs (all but the last), packed once for every shape


@pytest.mark.skipif(not sg.precision.support().avx512_bf16,
                    reason=f"bfloat16 kernels: {sg.precision.support().reason}")
def test_a_captured_inference_graph_runs_in_the_calls_precision():
    """The precision is part of a capture's signature: under autocast('bf16') the calls record
    and replay their own graph (the bf16 routes, as eager; on AMX with planes between the
    convolutions: test_capture_planes.py), and a later float32 call replays the float32 graph
    (srgrad-infer --bf16 registers its model too)."""
    model, _ = build("EDSR", 2, 3, small=True)
    model.eval()
    x = sg.tensor(np.random.default_rng(1).uniform(0, 1, (1, 3, 12, 10)).astype(np.float32))
    with sg.no_grad():
        fp32 = model(x).data.copy()
        with sg.autocast("bf16"):
            bf16 = model(x).data.copy()
    assert not np.array_equal(fp32, bf16)
    cap = Capture([model], train=False)
    with sg.no_grad():
        for _ in range(2):
            cap(lambda x: {"sr": model(x)}, x)  # recorded in float32
        with sg.autocast("bf16"):
            replayed = [cap(lambda x: {"sr": model(x)}, x)["sr"] for _ in range(3)]  # recorded, replayed
        again = cap(lambda x: {"sr": model(x)}, x)["sr"]
    assert cap.replays == 2 and len(cap.graphs) == 2, cap.status()
    for r in replayed:
        assert np.array_equal(np.asarray(getattr(r, "data", r)), bf16)
    assert np.array_equal(np.asarray(getattr(again, "data", again)), fp32)


def test_batch_norm_statistics_are_replayed_and_a_replaced_buffer_records_again():
    """Batch norm's running statistics and counter are the op's state: a replay updates the
    module's own arrays as the eager step does (momentum None: the cumulative average, counted
    in the op); a buffer whose array was replaced (an assignment to .data) is recorded again, not
    replayed into the old array."""
    from framework import nn
    runs = []
    for capture in (False, True):
        init.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4, momentum=None))
        opt = Adam(model.parameters(), lr=1e-2)
        cap = Capture([model], enabled=capture)
        bn = model[1]
        means = []
        for i in range(5):
            if i == 3:  # a new array for the running mean, as a loader may assign one
                bn.running_mean.data = bn.running_mean.data.copy()
            x = sg.tensor(np.random.default_rng(i).normal(1.5, 2.0, (2, 3, 6, 6)).astype(np.float32))
            opt.zero_grad()
            cap(lambda x: {"loss": F.mean(F.mul(model(x), model(x)))}, x)
            opt.step()
            means.append(bn.running_mean.data.copy())
            if capture and i == 3:
                assert cap.replays == 1  # step 3 replayed; step 4 (the new array) recorded again
        runs.append((means, bn.running_var.data.copy(), int(bn.num_batches_tracked.data), cap))
    (eager_means, eager_var, eager_n, _), (means, var, n, cap) = runs
    assert eager_n == n == 10  # two forwards a step, five steps
    assert all(np.array_equal(a, b) for a, b in zip(eager_means, means))
    assert np.array_equal(eager_var, var)
    assert not np.array_equal(means[1], means[2])  # the replayed step moved them
    assert cap.replays == 1, cap.status()


def test_an_inference_recording_frees_each_intermediate_as_the_eager_run_does():
    """A recording names each op's arguments as it runs and holds no op's output: at 512 x 512
    SRVGGNetCompact's recorded inference held every activation (2.5 GB where the eager run needs
    0.3 GB). Here an intermediate dropped by the function is freed during the recorded call."""
    import weakref
    alive = []

    def fn(x):
        y = F.relu(x)
        first = weakref.ref(y.data)
        y = F.mul(y, y)  # the only reference to relu's output goes
        alive.append(first() is not None)
        return {"out": F.add(y, x)}

    cap = Capture([], train=False)
    x = sg.tensor(np.linspace(-1, 1, 48, dtype=np.float32).reshape(1, 3, 4, 4))
    with sg.no_grad():
        outs = [cap(fn, x)["out"].data for _ in range(3)]
    assert alive == [False, False]  # the two recorded calls; the third replays
    assert cap.replays == 1
    expected = np.maximum(x.data, 0) ** 2 + x.data
    assert all(np.array_equal(o, expected) for o in outs)


class _ResidualCases(sg.nn.Module):
    """Residual adds after a direct-route conv (16 -> 16 channels, 3x3): `case` picks the pattern."""

    def __init__(self, case):
        super().__init__()
        init.manual_seed(3)
        self.conv, self.case = sg.nn.Conv2d(16, 16, 3, padding=1), case
        self.shift = sg.nn.Parameter(sg.tensor(np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16, 1, 1)))

    def forward(self, x):
        c = self.conv(x)
        if self.case == "input + conv":  # fused: the other operand exists before the conv
            return x + c
        if self.case == "conv + earlier":
            return c + F.relu(x)  # relu(x), recorded after the conv, reads only x: moved before it, fused
        if self.case == "conv + two ops later":  # relu reads x * 2, also made after the conv: stays
            return c + F.relu(x * 2.0)
        if self.case == "read twice":
            return (c + x) * c
        if self.case == "broadcast":
            return c + self.shift
        return F.relu(x + c)  # "then relu": fused, the relu reads the conv's slot


@pytest.mark.parametrize("case, fused", [("input + conv", True), ("conv + earlier", True),
                                         ("conv + two ops later", False),
                                         ("read twice", False), ("broadcast", False),
                                         ("then relu", True)])
def test_an_add_after_a_direct_conv_is_fused_only_where_it_is_the_same_bits(case, fused):
    """The inference graph does `x + conv(x)` in the conv's store (one op fewer) where the Add is
    the conv output's only reader and its other operand has the output's shape and exists before
    the conv (or is made by an op that can run before it: moved); otherwise the Add stays. Either
    way every replay equals eager, bit for bit."""
    model = _ResidualCases(case)
    model.eval()
    cap = Capture([model], train=False)
    rng = np.random.default_rng(7)
    for i in range(4):  # calls 1-2 record, 3-4 replay
        x = sg.tensor(rng.standard_normal((2, 16, 9, 13)).astype(np.float32))
        with sg.no_grad():
            eager = model(x).data
            got = cap(lambda x: {"y": model(x)}, x)["y"].data
        assert got.dtype == eager.dtype and np.array_equal(got, eager), (case, i)
    assert cap.replays == 2, cap.status()
    (graph,) = cap.graphs
    recorded = len(graph.meta)
    assert len(graph.forward) == recorded - (1 if fused else 0), case
    assert any(op[0].__qualname__.endswith("fused") for op in graph.forward) == fused


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_leaky_relu_after_a_direct_conv_is_done_by_the_conv(precision):
    """conv (3 -> 16, the direct route, float32 under bf16 too: an image's layer) -> LeakyReLU is one
    op in an inference graph (the conv's relu_slope: the LeakyReLU kernel's formula, NaN and
    negative values included), a conv whose output is read twice keeps its LeakyReLU; the bits of
    eager either way."""
    from framework import precision as prec
    from framework.functional.activation import LeakyReLUFunction
    if precision == "bf16" and not prec.support().avx512_bf16:
        pytest.skip(f"bfloat16 kernels: {prec.support().reason}")
    rng = np.random.default_rng(14)
    w = [sg.tensor((rng.standard_normal((16, 3, 3, 3)) * 0.5).astype(np.float32)) for _ in range(2)]

    class Head(sg.nn.Module):
        def forward(self, x):
            a = F.leaky_relu(F.conv2d(x, w[0], padding=1), 0.1)  # fused
            c = F.conv2d(x, w[1], padding=1)
            z = F.leaky_relu(F.conv2d(x, w[0], padding=1), 0.0)  # slope 0 (-0 for a negative): stays
            return a + F.leaky_relu(c, 0.2) + c + z  # c read twice: its LeakyReLU stays

    x = rng.uniform(-1, 1, (2, 3, 9, 14)).astype(np.float32)
    x[1, 2, 4, 5] = np.nan
    model = Head()
    cap = Capture([model], train=False)
    with sg.no_grad(), sg.autocast(precision):
        eager = model(sg.tensor(x)).data.copy()
        got = [cap(lambda t: {"y": model(t)}, sg.tensor(x))["y"].data for _ in range(3)]
    assert cap.replays == 1, cap.status()
    assert np.isnan(eager).any() and (eager < 0).any()
    assert all(np.array_equal(g.view(np.uint32), eager.view(np.uint32)) for g in got)
    ops = cap.graphs[0].forward
    assert sum(op[0] is LeakyReLUFunction.forward for op in ops) == 2
    assert [op[2].get("relu_slope") for op in ops if "geo" in op[2]] == [0.1, None, None]


def test_the_direct_convs_residual_store_is_the_add_of_its_output():
    """_direct.correlate(residual=r) against the conv then np.add, on shapes whose rows end inside
    a vector (the masked lanes), with relu fused and without, and a mismatched residual refused."""
    from framework.functional import _direct
    rng = np.random.default_rng(2)
    for (n, c, h, w), slope in [((1, 16, 5, 7), None), ((2, 24, 11, 37), 0.0), ((1, 16, 33, 3), 0.2)]:
        x = rng.standard_normal((n, c, h, w)).astype(np.float32)
        wt = rng.standard_normal((20, c, 3, 3)).astype(np.float32)
        b = rng.standard_normal(20).astype(np.float32)
        r = rng.standard_normal((n, 20, h, w)).astype(np.float32)
        tiles, elems = [(0, n, 0, h)], _direct.buffer_elems([(0, n, 0, h)], c, w, 3, 3, np.float32)
        plain = _direct.correlate(x, wt, (h, w), (1, 1), b, slope, tiles, elems)
        fused = _direct.correlate(x, wt, (h, w), (1, 1), b, slope, tiles, elems, residual=r)
        assert np.array_equal(fused, np.add(plain, r)), (n, c, h, w, slope)
    with pytest.raises(ValueError, match="residual"):
        _direct.correlate(x, wt, (h, w), (1, 1), b, None, tiles, elems, residual=r[:, :5])


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_transformer_blocks_residual_add_is_done_by_its_linear(precision):
    """`x + fc2(gelu(fc1(norm(x))))` (SwinIR's MLP branch): in an inference graph fc2 adds x as it
    stores its product (bf16: _gemm_bf16's store, else linear's chunks), on either side of the Add,
    with a bias and without, and `fc(x) * 0.5 + x` too; a product read twice keeps its Add. Bit for
    bit against the eager ops, NaN included."""
    from framework import precision as prec
    from framework.functional.elementwise import Add
    if precision == "bf16" and not prec.support().amx_bf16:
        pytest.skip("AMX-BF16: this CPU or OS has no AMX tiles")
    rng = np.random.default_rng(21)
    fc1, fc2, fc3 = sg.nn.Linear(24, 48), sg.nn.Linear(48, 24), sg.nn.Linear(24, 24, bias=False)
    norm = sg.nn.LayerNorm(24)

    class Block(sg.nn.Module):
        def forward(self, x):
            x = x + fc2(F.gelu(fc1(norm(x))))  # fused: the residual on the right
            x = fc3(x) + x  # fused: on the left, no bias
            x = fc3(x) * 0.5 + x  # fused with the scale (np.multiply then np.add, as eager)
            y = fc3(x)  # read twice: its Add stays
            return y + x + y

    x = rng.standard_normal((2, 37, 24)).astype(np.float32)  # 74 rows: not whole tiles
    x[1, 3, 5] = np.nan
    model = Block()
    cap = Capture([model], train=False)
    with sg.no_grad(), sg.autocast(precision):
        eager = model(sg.tensor(x)).data.copy()
        got = [cap(lambda t: {"y": model(t)}, sg.tensor(x))["y"].data for _ in range(3)]
    assert cap.replays == 1, cap.status()
    assert np.isnan(eager).sum() > 1 and np.isfinite(eager).sum() > 0.9 * eager.size
    assert all(np.array_equal(g.view(np.uint32), eager.view(np.uint32)) for g in got)
    ops = cap.graphs[0].forward
    assert sum(op[0].__qualname__.endswith("fused") for op in ops) == 3
    assert sum(op[0] is Add.forward for op in ops) == 2


def test_a_linear_reads_and_writes_its_rows_through_norms_and_row_moves():
    """Under bf16 on AMX a transformer block's `norm -> reshape -> roll -> window_partition -> qkv`
    is one op (the linear gathers and normalises its rows: _rows.py), as is `proj -> window_reverse
    -> roll -> reshape -> x + ...` (the rows stored where the moves put them, x added there) and
    `norm2 -> fc1`; a move read twice, a norm over two axes and a roll that does not keep rows
    whole (over the channels) stay. Bit for bit against the eager ops, NaN included."""
    from framework import precision as prec
    from framework.functional.elementwise import Add
    from framework.functional.normalization import LayerNormFunction
    from framework.functional.attention import WindowPartitionFunction
    from framework.functional.shape import RollFunction
    if not prec.support().amx_bf16:
        pytest.skip("AMX-BF16: this CPU or OS has no AMX tiles")
    rng = np.random.default_rng(22)
    C, h, w, ws = 24, 8, 12, 4
    qkv, proj, fc1, fc2 = (sg.nn.Linear(a, b) for a, b in ((C, C), (C, C), (C, 2 * C), (2 * C, C)))
    norm1, norm2, norm3 = sg.nn.LayerNorm(C), sg.nn.LayerNorm(C), sg.nn.LayerNorm((w, C))
    for m in (norm1, norm2):  # weights other than ones and zeros
        m.weight.data[:] = rng.uniform(0.5, 1.5, C).astype(np.float32)
        m.bias.data[:] = rng.standard_normal(C).astype(np.float32)

    class Block(sg.nn.Module):
        def forward(self, x):  # x (1, h w, C)
            y = F.roll(F.reshape(norm1(x), (1, h, w, C)), (-2, -2), (1, 2))
            y = proj(qkv(F.window_partition(y, ws)))  # qkv: rows gathered, normalised
            y = F.roll(F.window_reverse(y, ws, h, w), (2, 2), (1, 2))
            x = x + F.reshape(y, (1, h * w, C))  # proj: rows scattered onto x
            x = x + fc2(F.gelu(fc1(norm2(x))))  # fc1: normalised rows; fc2: the residual
            z = F.reshape(x, (1, h, w, C))
            t = F.window_partition(z, ws)  # t read twice: this move stays (qkv adds t in its store)
            u = qkv(t) + t
            v = qkv(F.roll(z, 1, 3))  # a roll of the channels: not whole rows
            n = qkv(norm3(z))  # a norm over (w, C): not the linear's rows
            return x, u, v, n

    x = rng.standard_normal((1, h * w, C)).astype(np.float32)
    x[0, 5, 7] = np.nan
    model = Block()
    cap = Capture([model], train=False)
    with sg.no_grad(), sg.autocast("bf16"):
        eager = [t.data.copy() for t in model(sg.tensor(x))]
        got = [cap(lambda t: dict(zip("xuvn", model(t))), sg.tensor(x)) for _ in range(3)]
    assert cap.replays == 1, cap.status()
    for e, name in zip(eager, "xuvn"):
        assert np.isnan(e).any() and np.isfinite(e).sum() > 0.5 * e.size, name
        assert all(np.array_equal(g[name].data.view(np.uint32), e.view(np.uint32)) for g in got), name
    ops = cap.graphs[0].forward
    rows = [op for op in ops if op[0].__qualname__.startswith("_rows_forward")]
    assert len(rows) == 3  # qkv (norm1 and its moves), proj (its moves and the Add), fc1 (norm2)
    assert sum(op[0] is LayerNormFunction.forward for op in ops) == 1  # norm3's
    assert sum(op[0] is RollFunction.forward for op in ops) == 1  # the channels' roll
    assert sum(op[0] is WindowPartitionFunction.forward for op in ops) == 1  # t's
    assert sum(op[0] is Add.forward for op in ops) == 0


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_convs_output_times_a_number_plus_x_is_done_by_the_conv(precision):
    """RRDBNet's dense block ends `x5 * 0.2 + x`: in an inference graph the convolution makes it
    (on AMX tiles by its epilogue: np.multiply's then np.add's values), the number on either side;
    the same on a value no conv makes (the RRDB's `out * 0.2 + x`) is one scale_add pass; a product
    read twice stays. Bit for bit against the eager ops."""
    from framework import precision as prec
    from framework.functional.elementwise import Add, Mul
    if precision == "bf16" and not prec.support().amx_bf16:
        pytest.skip("AMX-BF16: this CPU or OS has no AMX tiles")
    rng = np.random.default_rng(13)
    w = [sg.tensor((rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)) for _ in range(3)]

    class Block(sg.nn.Module):
        def forward(self, x):
            a = F.conv2d(x, w[0], padding=1) * 0.2 + x  # fused into the conv
            b = x + 0.3 * F.conv2d(a, w[1], padding=1)  # the number first, the add's operands swapped
            c = (a + b) * 0.2 + x  # not a conv's output: one scale_add pass
            d = F.conv2d(c, w[2], padding=1) * 0.5  # read twice: the Mul stays, the adds too
            return d + c + d

    x = sg.tensor(rng.uniform(-1, 1, (2, 32, 9, 14)).astype(np.float32))
    model = Block()
    cap = Capture([model], train=False)
    with sg.no_grad(), sg.autocast(precision):
        eager = model(x).data.copy()
        got = [cap(lambda t: {"y": model(t)}, x)["y"].data for _ in range(3)]
    assert cap.replays == 1, cap.status()
    assert all(np.array_equal(g.view(np.uint32), eager.view(np.uint32)) for g in got)
    ops = cap.graphs[0].forward
    scaled = [op[2]["residual_scale"] for op in ops if "residual_scale" in op[2]]
    assert [float(v) for v in scaled] == [np.float32(0.2), np.float32(0.3)]
    # (under bf16 the scale_add also writes the planes its conv reader takes: scale_add_planes)
    assert sum(getattr(op[0], "__name__", "") in ("_scale_add", "scale_add_planes") for op in ops) == 1
    assert sum(op[0] is Mul.forward for op in ops) == 1 and sum(op[0] is Add.forward for op in ops) == 3  # a + b too


def test_an_inference_graph_scales_and_adds_in_one_pass():
    """x * s + skip (a channel attention's scale and its block's residual, RCAN's RCAB) is one pass
    in an inference graph (elementwise.scale_add): the values of the Mul then the Add, bit for bit;
    a Mul read twice, or by an Add whose other operand is made after it, stays."""
    from framework.functional.elementwise import Add, Mul

    class Block(sg.nn.Module):
        def forward(self, x):
            s = F.sigmoid(x.mean(dim=(2, 3), keepdim=True))
            y = x * s + x  # fused
            z = s * y  # read twice: stays
            return (z + z) + y * s  # y * s + (z + z): the other operand is made before: fused

    x = sg.tensor(np.random.default_rng(12).standard_normal((2, 5, 7, 9)).astype(np.float32))
    model = Block()
    cap = Capture([model], train=False)
    with sg.no_grad():
        eager = model(x).data.copy()
        got = [cap(lambda t: {"y": model(t)}, x)["y"].data for _ in range(3)]
    assert cap.replays == 1, cap.status()
    assert all(np.array_equal(g.view(np.uint32), eager.view(np.uint32)) for g in got)
    ops = cap.graphs[0].forward
    assert sum(getattr(op[0], "__name__", "") == "_scale_add" for op in ops) == 2
    assert sum(op[0] is Mul.forward for op in ops) == 1 and sum(op[0] is Add.forward for op in ops) == 1


@pytest.mark.parametrize("N, C, O, H, bias", [(1, 32, 4, 1, True), (1, 4, 32, 1, True), (2, 24, 3, 3, False),
                                              (3, 3, 5, 2, False), (1, 32, 16, 12, True), (1, 64, 8, 100, True)])
def test_a_small_pointwise_conv_is_im2cols_matmul_without_its_python(N, C, O, H, bias):
    """A 1x1 conv small enough for one im2col tile (RCAN's channel attention on a 1x1 map) replays
    as the route's own matmul on the same views (the flipped kernel's where O < C) plus the bias:
    the eager bits; a larger one (the last two cases: BLAS held to one thread for it, or more than
    one tile's products) stays the op."""
    from framework.functional.conv import Conv2dFunction

    rng = np.random.default_rng(N * 100 + C)
    conv = sg.nn.Conv2d(C, O, 1, bias=bias)
    x = sg.tensor(rng.standard_normal((N, C, H, H + 1)).astype(np.float32))
    cap = Capture([conv], train=False)
    with sg.no_grad():
        eager = conv(x).data.copy()
        got = [cap(lambda t: {"y": conv(t)}, x)["y"].data.copy() for _ in range(3)]
    assert cap.replays == 1, cap.status()
    assert all(g.shape == eager.shape and np.array_equal(g.view(np.uint32), eager.view(np.uint32)) for g in got)
    np.testing.assert_allclose(got[0], np.einsum("oc,nchw->nohw", conv.weight.data[:, :, 0, 0].astype(np.float64),
                                                  x.data) + (conv.bias.data[None, :, None, None] if bias else 0),
                               rtol=1e-5, atol=1e-5)
    names = [getattr(op[0], "__qualname__", "") for op in cap.graphs[0].forward]
    small = N * H * (H + 1) * C * O < 1 << 16  # conv._BLAS_SERIAL_MACS: on the calling thread, BLAS as it is
    assert names.count("_pointwise.<locals>.forward") == small and (Conv2dFunction.forward in
                                                                    [op[0] for op in cap.graphs[0].forward]) != small, names
