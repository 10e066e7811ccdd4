"""Each converter against srgrad, through ONNX Runtime: conv (groups, dilation, stride, padding,
transposed with output_padding), activations, elementwise with broadcasting and constants, shape ops,
pads, pools, pixel (un)shuffle, reductions, matmul, batch_norm. Sizes are odd; where the graph allows,
one dynamic graph is checked at a second size too."""
from __future__ import annotations

import numpy as np
import pytest

import framework.functional as F
from framework import nn
from framework.nn import init

from ._util import Lambda, check, image, require_onnx

require_onnx()


def rand(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def P(*shape, seed=1):
    return nn.Parameter(rand(*shape, seed=seed))


CONV = [  # (conv2d kwargs, weight shape for 4 input channels)
    (dict(padding=1), (6, 4, 3, 3)),
    (dict(stride=2, padding=(1, 2)), (5, 4, 3, 3)),
    (dict(dilation=2, padding=2), (6, 2, 3, 3)),  # groups 2
    (dict(padding="same"), (3, 4, 4, 2)),  # even kernel: the odd pixel at the bottom/right
    (dict(stride=(2, 3), dilation=(1, 2)), (4, 1, 3, 3)),  # groups 4 (depthwise)
]


@pytest.mark.parametrize("kw,wshape", CONV)
def test_conv2d(tmp_path, kw, wshape):
    groups = 4 // wshape[1]
    model = Lambda(lambda m, x: F.conv2d(x, m.w, m.b, groups=groups, **kw), w=P(*wshape),
                   b=P(wshape[0], seed=2))
    rep, ops = check(model, image(1, 4, 9, 11), tmp_path, [image(2, 4, 12, 7, seed=3)])
    assert ops == ["Conv"] and rep.dynamic


@pytest.mark.parametrize("kw,wshape", [
    (dict(stride=3, padding=4, output_padding=2), (4, 3, 9, 9)),  # FSRCNN's last layer
    (dict(stride=2, padding=1, output_padding=1, groups=2), (4, 2, 3, 3)),
    (dict(stride=2, dilation=2, output_padding=1), (4, 1, 3, 3)),
])
def test_conv_transpose2d(tmp_path, kw, wshape):
    model = Lambda(lambda m, x: F.conv_transpose2d(x, m.w, None, **kw), w=P(*wshape))
    rep, ops = check(model, image(1, 4, 5, 7), tmp_path, [image(2, 4, 6, 4, seed=3)])
    assert ops == ["ConvTranspose"] and rep.dynamic


ACTIVATIONS = [
    ("relu", lambda m, x: F.relu(x), ["Relu"]),
    ("leaky", lambda m, x: F.leaky_relu(x, 0.2), ["LeakyRelu"]),
    ("prelu_c", lambda m, x: F.prelu(x, m.w), ["Reshape", "PRelu"]),
    ("prelu_1", lambda m, x: F.prelu(x, m.w1), ["PRelu"]),
    ("sigmoid", lambda m, x: F.sigmoid(x), ["Sigmoid"]),
    ("tanh", lambda m, x: F.tanh(x), ["Tanh"]),
    ("gelu", lambda m, x: F.gelu(x), ["Mul", "Erf", "Mul", "Add", "Mul"]),
    ("gelu_tanh", lambda m, x: F.gelu(x, approximate="tanh"), None),
    ("silu", lambda m, x: F.silu(x), ["Sigmoid", "Mul"]),
    ("mish", lambda m, x: F.mish(x), ["Mish"]),
    ("softplus", lambda m, x: F.softplus(x), ["Softplus", "Greater", "Where"]),
    ("softplus_beta", lambda m, x: F.softplus(x, beta=2, threshold=1.5),  # both branches
     ["Mul", "Softplus", "Div", "Greater", "Where"]),
    ("group_norm", lambda m, x: F.group_norm(x, 3, m.w, m.w),
     ["Reshape", "InstanceNormalization", "Shape", "Reshape", "Reshape", "Mul", "Reshape", "Add"]),
    ("group_norm_1", lambda m, x: F.group_norm(x, 1), ["Reshape", "InstanceNormalization", "Shape",
                                                       "Reshape"]),
]


@pytest.mark.parametrize("name,fn,ops", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activations(tmp_path, name, fn, ops):
    model = Lambda(fn, w=P(3), w1=P(1))
    rep, got = check(model, image(1, 3, 5, 4, lo=-3, hi=3), tmp_path, [image(2, 3, 6, 7, lo=-3, hi=3)])
    if ops is not None:
        assert got == ops
    assert rep.dynamic


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20_is_one_node(tmp_path, approximate):
    model = Lambda(lambda m, x: F.gelu(x, approximate=approximate))
    _, ops = check(model, image(1, 2, 3, 5, lo=-4, hi=4), tmp_path, opset=20)
    assert ops == ["Gelu"]


def test_mish_below_opset_18_is_the_formula(tmp_path):
    _, ops = check(Lambda(lambda m, x: F.mish(x)), image(1, 2, 3, 5, lo=-6, hi=6), tmp_path, opset=17)
    assert ops == ["Softplus", "Tanh", "Mul"]


def _elementwise(m, x):
    y = (x - m.mean) * 255.0 + m.b          # constants broadcast (EDSR's mean shift)
    y = y / (F.abs(x) + 1.0) - F.neg(x) ** 2.0
    y = F.maximum(y, x * 0.5) + F.minimum(F.exp(x), 2.0 - x)
    y = y + F.sqrt(F.abs(x)) * F.log(F.abs(x) + 0.5)
    return F.clamp(y, -3.0, 40.0) + F.clamp(x, max=0.1) + F.where(m.mask, x, y)


def test_elementwise(tmp_path):
    model = Lambda(_elementwise, mean=np.asarray([0.1, 0.2, 0.3], np.float32).reshape(1, 3, 1, 1),
                   b=P(3, 1, 1), mask=np.array([True, False, True]).reshape(3, 1, 1))
    rep, ops = check(model, image(1, 3, 5, 7, lo=-1), tmp_path, [image(2, 3, 4, 9, lo=-1)], atol=3e-5)
    assert {"Sub", "Mul", "Add", "Div", "Neg", "Pow", "Max", "Min", "Exp", "Sqrt", "Log", "Abs",
            "Clip", "Where"} <= set(ops)
    assert rep.dynamic


def test_cast_in_fp16_graph_stays_float16(tmp_path):
    model = Lambda(lambda m, x: F.cast(F.cast(x, np.float64), np.float32) * 2.0)
    rep, ops = check(model, image(1, 2, 3, 3), tmp_path, atol=1e-3, fp16=True)
    assert ops.count("Cast") == 4  # input, the two model casts (to float16), output


SHAPES = [
    ("flatten", lambda m, x: F.flatten(x, 1) * 2.0, True),
    ("reshape", lambda m, x: F.reshape(x, (x.shape[0], 2, -1)), True),
    ("permute", lambda m, x: F.permute(x, (0, 2, 3, 1)), True),
    ("transpose", lambda m, x: F.transpose(x, 2, 3), True),
    ("slices", lambda m, x: x[:, 1:, ::2, -3:], True),
    ("reverse", lambda m, x: x[:, ::-1, 1:-1, ::-2], True),
    ("int_none_ellipsis", lambda m, x: x[0, None, ..., 1], True),
    ("int_array", lambda m, x: x[:, [2, 0, 2]], True),
    ("bool_array", lambda m, x: x[:, np.array([True, False, True, True])], True),
    ("last", lambda m, x: x[..., -1], True),
    ("cat", lambda m, x: F.cat([x, x * 2.0, m.c], axis=1), False),
    ("cat_dyn", lambda m, x: F.cat([x, F.relu(x)], axis=1), True),
    ("stack", lambda m, x: F.stack([x, F.neg(x)], axis=2), True),
]


@pytest.mark.parametrize("name,fn,dynamic", SHAPES, ids=[s[0] for s in SHAPES])
def test_shape_ops(tmp_path, name, fn, dynamic):
    model = Lambda(fn, c=rand(1, 2, 5, 6))
    if dynamic:
        rep, _ = check(model, image(1, 4, 5, 6), tmp_path, [image(2, 4, 6, 7, seed=4)])
    else:  # a constant of the traced size: the default export warns and fixes the size
        with pytest.warns(UserWarning, match="fixed-size export"):
            rep, _ = check(model, image(1, 4, 5, 6), tmp_path)
    assert rep.dynamic == dynamic


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("opset", [18, 19])
def test_pad(tmp_path, mode, opset):
    model = Lambda(lambda m, x: F.pad(x, (1, 2, 3, 0), mode=mode, value=0.5)
                   if mode == "constant" else F.pad(x, (1, 2, 3, 0), mode=mode))
    rep, ops = check(model, image(1, 2, 5, 4), tmp_path, [image(2, 2, 4, 7)], opset=opset)
    assert rep.dynamic
    assert ("Pad" in ops) == (mode != "circular" or opset >= 19)


POOLS = [
    ("avg", lambda m, x: F.avg_pool2d(x, 3, 2, 1), "AveragePool"),
    ("avg_ceil", lambda m, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), "AveragePool"),
    ("avg_exclude", lambda m, x: F.avg_pool2d(x, (3, 2), (2, 1), (1, 0), count_include_pad=False),
     "AveragePool"),
    ("avg_2", lambda m, x: F.avg_pool2d(x, 2), "AveragePool"),
    ("global", lambda m, x: F.adaptive_avg_pool2d(x, 1), "GlobalAveragePool"),
    ("max", lambda m, x: F.max_pool2d(x, 3, 2, 1), "MaxPool"),
    ("max_dil_ceil", lambda m, x: F.max_pool2d(x, 2, 2, 1, dilation=2, ceil_mode=True), "MaxPool"),
]


@pytest.mark.parametrize("name,fn,op", POOLS, ids=[p[0] for p in POOLS])
def test_pools(tmp_path, name, fn, op):
    rep, ops = check(Lambda(fn), image(1, 2, 9, 8), tmp_path, [image(2, 2, 11, 13, seed=5)])
    assert ops == [op] and rep.dynamic


def test_adaptive_pool_to_other_size_is_a_fixed_size_table(tmp_path):
    model = Lambda(lambda m, x: F.adaptive_avg_pool2d(x, (4, 2)))
    with pytest.warns(UserWarning, match="weight tables"):
        rep, ops = check(model, image(1, 2, 10, 5), tmp_path)  # rows start 0, 2, 5, 7: no AveragePool
    assert not rep.dynamic and "weight tables" in rep.reason and "MatMul" in ops
    from framework.onnx import ExportError, export
    with pytest.raises(ExportError, match="adaptive_avg_pool2d"):
        export(model, image(1, 2, 10, 5), tmp_path / "d.onnx", dynamic=True)


def test_adaptive_max_pool(tmp_path):
    """Global -> GlobalMaxPool and equal windows (SAFMN's h // 2^i of a multiple of 8) -> MaxPool,
    both one graph at any size; overlapping windows (10 -> 4, 5 -> 3) -> a Gather of each window
    and a ReduceMax per axis, fixed-size."""
    rep, ops = check(Lambda(lambda m, x: F.adaptive_max_pool2d(x, 1)), image(1, 2, 9, 8), tmp_path,
                     [image(2, 2, 11, 13, seed=5)])
    assert ops == ["GlobalMaxPool"] and rep.dynamic
    def safmn(m, x):  # padded to a multiple of 4, then 1/4 of the size: 4x4 windows at any size
        x = F.pad_to_multiple(x, 4)
        return F.adaptive_max_pool2d(x, (x.shape[2] // 4, x.shape[3] // 4))
    rep, ops = check(Lambda(safmn), image(1, 2, 16, 24), tmp_path, [image(2, 2, 23, 8, seed=5)])
    assert ops[-1] == "MaxPool" and rep.dynamic
    model = Lambda(lambda m, x: F.adaptive_max_pool2d(x, (4, 3)))
    with pytest.warns(UserWarning, match="overlapping windows"):
        rep, ops = check(model, image(1, 2, 10, 5, lo=-1), tmp_path)
    assert not rep.dynamic and ops.count("Gather") == 2 and ops.count("ReduceMax") == 2


def test_max_pool_indices(tmp_path):
    model = Lambda(lambda m, x: F.max_pool2d(x, 2, return_indices=True))
    with pytest.warns(UserWarning, match="indices"):
        rep, _ = check(model, image(1, 3, 6, 5), tmp_path)
    assert not rep.dynamic  # the per-plane index needs the plane size


@pytest.mark.parametrize("channels", [1, 3])
def test_pixel_shuffle_and_unshuffle(tmp_path, channels):
    model = Lambda(lambda m, x: F.pixel_shuffle(F.pixel_unshuffle(x, 2) * m.s, 2), s=P(channels * 4, 1, 1))
    rep, ops = check(model, image(1, channels, 6, 4), tmp_path, [image(2, channels, 8, 10)])
    assert ops[0] == "SpaceToDepth" and ops[-1] == "DepthToSpace" and rep.dynamic
    assert ("Gather" in ops) == (channels > 1)


@pytest.mark.parametrize("fn", [
    # / 64: the second trace's sums (36 x 70 pixels, ~1300) keep float32's rounding under 1e-4
    lambda m, x: F.sum(x, axis=(2, 3), keepdims=True) / 64 + F.mean(x, axis=1, keepdims=True),
    lambda m, x: F.max(x, axis=3) * F.mean(x),
    lambda m, x: F.sum(x) + x,
])
def test_reductions(tmp_path, fn):
    rep, _ = check(Lambda(fn), image(1, 2, 3, 5), tmp_path, [image(2, 2, 4, 4)])
    assert rep.dynamic


@pytest.mark.parametrize("fn,want", [
    (lambda m, x: x.min(dim=1, keepdim=True) + x, "ReduceMin"),
    (lambda m, x: x.var(dim=(2, 3), keepdim=True) + x, "ReduceMean"),  # unbiased: count - 1
    (lambda m, x: x.std(dim=1) * 2, "Sqrt"),
    (lambda m, x: F.var(x, axis=3, ddof=0), "ReduceMean"),
    (lambda m, x: (x.argmax(dim=1, keepdim=True) + x.argmin(dim=3).unsqueeze(3)).to(np.float32),
     "ArgMax"),
    (lambda m, x: x.argmax().to(np.float32) + x.sum(), "ArgMax"),
    (lambda m, x: m.s.expand(-1, -1, 1, 1) * x + x.clone(), "Expand"),
], ids=["min", "var", "std", "var_ddof0", "argmax_argmin", "argmax_flat", "expand_clone"])
def test_torch_habit_reductions_and_views(tmp_path, fn, want):
    model = Lambda(fn, s=P(1, 2, 1, 1))
    rep, ops = check(model, image(1, 2, 3, 5), tmp_path, [image(2, 2, 4, 4)])
    assert want in ops and rep.dynamic, ops


def test_matmul_gemm_and_batched(tmp_path):
    model = Lambda(lambda m, x: F.matmul(F.matmul(x, m.a), m.b) + F.matmul(F.reshape(x, (15, 4)), m.c)
                   .reshape((1, 3, 5, 2)), a=P(4, 6), b=P(6, 2), c=P(4, 2))
    _, ops = check(model, image(1, 3, 5, 4), tmp_path, dynamic=False)
    assert ops.count("MatMul") == 2 and ops.count("Gemm") == 1


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm(tmp_path, training):
    bn = nn.BatchNorm2d(3, track_running_stats=not training)
    bn.weight.data[:] = [0.5, 2.0, -1.0]
    bn.bias.data[:] = [0.1, 0.2, 0.3]
    if not training:
        bn.running_mean.data[:] = [0.4, 0.5, 0.6]
        bn.running_var.data[:] = [0.2, 1.5, 3.0]
    rep, ops = check(bn, image(2, 3, 5, 4), tmp_path, [image(3, 3, 6, 7)])
    assert ("BatchNormalization" in ops) != training and rep.dynamic


# -- the ops of the attention models (SwinIR), and the size-independent pad/crop ---------------
class _Attention(nn.Module):
    """LayerNorm -> Linear (any leading dims) -> split into q, k, v -> softmax(q k^T) v -> a rolled,
    log-softmaxed output: every new converter in one small graph."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.qkv = nn.Linear(4, 12)
        self.proj = nn.Linear(4, 4, bias=False)

    def forward(self, x):  # x (N, C=4, H, W) -> tokens (N, H W, 4)
        t = F.permute(F.flatten(x, 2), (0, 2, 1))
        q, k, v = F.chunk(self.qkv(self.norm(t)), 3, dim=-1)
        attn = F.softmax(q @ F.transpose(k, -2, -1) * 0.5, dim=-1)
        y = self.proj(F.roll(attn @ v, 2, 1))
        return F.log_softmax(y, dim=-1)


@pytest.mark.parametrize("mode,border", [("reflect", 3), ("replicate", 0), ("replicate", 2),
                                         ("constant", 0)])
def test_pad_to_multiple_keeps_its_mode_and_border(tmp_path, mode, border):
    """Real-CUGAN's pad: a border on every side plus the multiple at the bottom/right, one graph
    whatever the size; replicate is exported as edge (it was exported as reflect), reflect as a
    Gather of the reflected rows (exact where the padding reaches the image size)."""
    def fn(m, x):
        return F.pad_to_multiple(x, 2, mode=mode, border=border) * 2.0
    rep, ops = check(Lambda(fn), image(1, 2, 5, 7), tmp_path, [image(2, 2, 8, 9, seed=1)])
    assert rep.dynamic and ("Gather" if mode == "reflect" else "Pad") in ops


def test_layer_norm_linear_softmax_roll_split_dynamic(tmp_path):
    init.manual_seed(3)
    rep, ops = check(_Attention(), image(1, 4, 3, 5), tmp_path, [image(2, 4, 4, 4, seed=1)])
    assert rep.dynamic
    for op in ("LayerNormalization", "Split", "Softmax", "LogSoftmax", "MatMul", "Concat"):
        assert op in ops, (op, ops)


def test_linear_on_a_matrix_is_gemm(tmp_path):
    init.manual_seed(4)
    model = Lambda(lambda m, x: m.fc(F.flatten(x, 1)), fc=nn.Linear(12, 5))
    rep, ops = check(model, image(2, 3, 2, 2), tmp_path, dynamic=False)  # features fix H and W
    assert "Gemm" in ops and "MatMul" not in ops


@pytest.mark.parametrize("multiple,scale", [(2, 1), (4, 2)])
def test_pad_to_multiple_and_crop_to_stay_dynamic(tmp_path, multiple, scale):
    """The size-independent pad/crop pair (RRDBNet x2/x1, SwinIR's window padding): one graph for
    every size, odd sizes included."""
    def fn(m, x):
        y = F.pad_to_multiple(x, multiple) * 2.0
        if scale > 1:
            y = F.interpolate(y, scale_factor=scale, mode="nearest")
        return F.crop_to(y, x, scale)
    rep, ops = check(Lambda(fn), image(1, 2, 5, 7), tmp_path,
                     [image(2, 2, 8, 9, seed=1), image(1, 2, 6, 4, seed=2)])
    assert rep.dynamic and "Gather" in ops and "Slice" in ops


HABITS = [  # issue 42's new ops: (name, fn, expected node types)
    ("flip", lambda m, x: F.flip(x, (1, 3)), ["Slice"]),
    ("repeat", lambda m, x: F.repeat(x, 1, 2, 1, 1, 3), ["Unsqueeze", "Tile"]),
    ("einsum", lambda m, x: F.einsum("nchw,dc->ndhw", x, m.w), ["Einsum"]),
    ("unfold", lambda m, x: F.unfold(x, 3, padding=1, stride=2), ["Conv", "Reshape"]),
    ("fold", lambda m, x: F.fold(F.unfold(x, 2), x.shape[2:], 2), ["Conv", "Reshape", "Col2Im"]),
    ("floordiv", lambda m, x: (x - 0.5) // 0.3, None),
    ("remainder", lambda m, x: (x - 0.5) % 0.3, None),
    ("setitem", lambda m, x: F.index_put(x, (slice(None), 1, slice(0, 2), slice(0, 3)), m.w[0]),
     None),
]


@pytest.mark.parametrize("name,fn,ops", HABITS, ids=[h[0] for h in HABITS])
def test_habit_ops(tmp_path, name, fn, ops):
    model = Lambda(fn, w=P(2, 3))
    _, got = check(model, image(1, 3, 5, 4), tmp_path)
    if ops is not None:
        assert got == ops


@pytest.mark.parametrize("k", [1, 2])
def test_keep_topk(tmp_path, k):
    """TopK + ScatterElements: the k largest of each row kept (ties: the lower index, as srgrad),
    one graph for another batch size."""
    model = Lambda(lambda m, x: F.keep_topk(F.mean(x, (2, 3)), k) * 2.0)
    x = image(2, 5, 3, 4)
    x[1, 1:3] = 0.5  # a tie
    rep, ops = check(model, x, tmp_path, [image(3, 5, 2, 2, seed=3)])
    assert {"TopK", "ScatterElements"} <= set(ops)
