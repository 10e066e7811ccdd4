"""export() end to end: every registered model through one dynamic graph right at every size,
initializers equal to the state_dict, no training-only nodes, custom Functions with and without a
converter, size-dependent graphs (refused with dynamic=True, warned and fixed by default), values
computed outside the graph caught by the second check, fp16, atomic and safe writing."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures

import framework as sg
import framework.functional as F
from framework import autograd, nn
from framework.onnx import (ConversionError, ExportError, export, register_converter,
                            converter_for)
from framework.registry import MODELS
from framework.card import card
from framework.nn import init
from tests.models.cases import build, card_cases

from ._util import Lambda, check, image, op_types, ort_run, require_onnx, srgrad_run

require_onnx()

# One small spec per image model (its card's role SR or restoration: not the discriminators and
# KernelGAN's networks); a card's fixed_onnx marks a graph that holds for one input size (ZSSRNet:
# MATLAB imresize exported as its weight tables).
IMAGE_MODELS = {}
for _spec in card_cases():
    if card(_spec).role in ("SR", "restoration") and card(_spec).in_channels == 3:
        IMAGE_MODELS.setdefault(_spec["type"], _spec)


@pytest.mark.parametrize("name", sorted(IMAGE_MODELS))
def test_every_model_one_dynamic_graph_right_at_every_size(tmp_path, name):
    """Every model exports one dynamic graph (issue 44: the window-attention family too) that the
    export itself ran at sizes of both parities below and above the example (issue 37.10), and
    that ONNX Runtime runs like srgrad at other odd and even sizes and a batch of two."""
    spec = IMAGE_MODELS[name]
    if name == "ATD":  # torch's CPU order of equal categories has no ONNX node: the stable order
        spec = {**spec, "category_order": "stable"}
    fixed = card(spec).fixed_onnx
    if fixed:
        pytest.skip(f"{name}: one graph per input size ({fixed})")
    init.manual_seed(0)
    model = MODELS.build(spec)
    model.eval()  # BatchNorm with its statistics (DAT), as the export traces it
    scale = card(spec).scale
    path = tmp_path / f"{name}.onnx"
    report = export(model, image(1, 3, 16, 16), path, dynamic=True)
    assert report.dynamic and report.input_shape == ["batch", 3, "height", "width"]
    sizes = report.checked_sizes
    for axis in (0, 1):
        assert {s[axis] % 2 for s in sizes} == {0, 1}
        assert min(s[axis] for s in sizes) <= 4 and max(s[axis] for s in sizes) > 16
    for x in (image(1, 3, 23, 31, seed=1), image(1, 3, 24, 32, seed=2), image(2, 3, 12, 5, seed=3)):
        got, want = ort_run(path, x)[0], srgrad_run(model, x)[0]
        assert got.shape == want.shape == (x.shape[0], 3, x.shape[2] * scale, x.shape[3] * scale)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


@pytest.mark.parametrize("spec", [
    {"type": "RRDBNet", "scale": 2, "shuffle_factor": 1, "plus": True},  # the original ESRGAN's x2
    {"type": "RRDBNet", "scale": 8},
    {"type": "RCAN", "scale": 1, "unshuffle_mod": True, "rgb_mean": [0, 0, 0], "img_range": 1.0}])
def test_published_layouts_structures_export_as_one_dynamic_graph(tmp_path, spec):
    """The structures the published layouts need (x2 stages, ESRGAN+, traiNNer's unshuffle)."""
    small = {"RRDBNet": {"num_feat": 8, "num_block": 1, "num_grow_ch": 4},
             "RCAN": {"num_feat": 8, "num_group": 1, "num_block": 1, "squeeze_factor": 4}}
    kw = {k: v for k, v in spec.items() if k not in ("type", "scale")}
    model, _ = build(spec["type"], spec["scale"], 3, **small[spec["type"]], **kw)
    report, _ = check(model, image(1, 3, 7, 9), tmp_path, [image(2, 3, 5, 6, seed=1)], atol=1e-4,
                      dynamic=True)
    assert report.dynamic


@pytest.mark.parametrize("name", ["EDSR", "FSRCNN"])
def test_initializers_are_the_state_dict(tmp_path, name):
    import onnx
    from onnx import numpy_helper
    model, _ = build(name, 2, 3, small=True)
    report = export(model, image(1, 3, 6, 5), tmp_path / "m.onnx")
    graph = onnx.load(str(tmp_path / "m.onnx")).graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    state = model.state_dict()
    named = {k: v for k, v in inits.items() if not k.startswith("const_")}
    assert set(named) == set(state)
    for k, v in state.items():
        assert named[k].dtype == v.dtype and np.array_equal(named[k], v), k
    assert report.initializers == len(inits)
    # no training-only nodes; BatchNormalization (if any) in inference form
    assert not {"Dropout", "RandomNormal", "RandomUniform"} & {n.op_type for n in graph.node}
    assert all(a.name != "training_mode" or a.i == 0 for n in graph.node for a in n.attribute)


class _DropoutLike(sg.Function):
    """Stands in for a training-only op: applied in training mode only."""

    @staticmethod
    def forward(ctx, x):
        return x * x.dtype.type(2)

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_export_traces_in_eval_mode_and_restores_the_mode(tmp_path):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm2d(2)

        def forward(self, x):
            y = self.bn(x)
            return _DropoutLike.apply(y) if self.training else y

    net = Net()  # training mode, and _DropoutLike has no converter: eval mode must skip it
    export(net, image(1, 2, 4, 3), tmp_path / "m.onnx")
    assert op_types(tmp_path / "m.onnx") == ["BatchNormalization"]
    assert net.training and net.bn.training


def test_trace_frees_activations_and_keeps_computed_weights(tmp_path):
    """A trace holds no activation the model freed (a fixed-size export at a large size held them
    all: EDSR at 512x512, 9.9 GB), keeps their shapes, and keeps the values of a weight computed
    from parameters alone (converters such as ncnn's read it) and of the input and output."""
    import weakref

    from framework.onnx.trace import trace
    seen = []

    def fn(m, x):
        w = m.v * 2.0  # a computed weight: constants only
        h = F.conv2d(x, w, padding=1)
        seen.append(weakref.ref(h.data))
        return F.conv2d(F.relu(h), w, padding=1)

    model = Lambda(fn, v=nn.Parameter(image(3, 3, 3, 3, seed=1, lo=-1)))
    x = image(1, 3, 6, 5)
    t = trace(model, x)
    (wcall, c1, relu, c2) = t.calls
    assert seen[0]() is None and c1.outputs[0].released and relu.outputs[0].released
    assert c1.outputs[0].array.shape == (1, 3, 6, 5) and c1.outputs[0].array.strides == (0,) * 4
    assert not wcall.outputs[0].released
    np.testing.assert_array_equal(wcall.outputs[0].array, 2.0 * model.v.data)
    assert t.input.array is not None and not t.outputs[0].released
    np.testing.assert_array_equal(t.outputs[0].array, srgrad_run(model, x)[0])
    rep = export(model, x, tmp_path / "m.onnx")
    assert rep.max_abs_diff <= rep.tolerance and rep.dynamic


# -- custom Functions ------------------------------------------------------------------------------
class ChannelScaleFn(sg.Function):  # docs/STYLE.md's custom layer
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w[None, :, None, None]

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w[None, :, None, None], (g * x).sum(axis=(0, 2, 3))


class UnconvertedFn(ChannelScaleFn):
    pass


@register_converter(ChannelScaleFn)
def _channel_scale(g, call):
    w = g.node("Reshape", [g.input(1), g.const([-1, 1, 1])])
    return g.node("Mul", [g.input(0), w])


def test_custom_function_with_a_converter(tmp_path):
    model = Lambda(lambda m, x: F.relu(ChannelScaleFn.apply(x, m.w)), w=nn.Parameter([0.5, -2.0, 3.0]))
    rep, ops = check(model, image(1, 3, 5, 4, lo=-1), tmp_path, [image(2, 3, 3, 6, lo=-1)])
    assert ops == ["Reshape", "Mul", "Relu"] and rep.dynamic


def test_custom_function_without_a_converter_is_refused(tmp_path):
    model = Lambda(lambda m, x: UnconvertedFn.apply(x, m.w), w=nn.Parameter([1.0, 2.0]))
    with pytest.raises(ConversionError, match=r"no ONNX converter for Function .*UnconvertedFn.*"
                                              r"register_converter\(UnconvertedFn\)"):
        export(model, image(1, 2, 3, 3), tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()


def test_register_twice_is_an_error_unless_replaced():
    with pytest.raises(KeyError, match="already has a converter"):
        register_converter(ChannelScaleFn, lambda g, call: None)
    register_converter(ChannelScaleFn, _channel_scale)  # the same function again is fine
    assert converter_for(ChannelScaleFn) is _channel_scale


# -- dynamic axes ---------------------------------------------------------------------------------
def _pad_to_multiple(m, x):  # SwinIR-style: pad to a multiple of 4, amounts from the size
    h, w = x.shape[2:]
    return F.pad(x, (0, (-w) % 4, 0, (-h) % 4), mode="reflect") * 2.0


def _size_branch(m, x):  # value-independent but size-dependent control flow
    return x * 2.0 if x.shape[2] % 2 else F.relu(x) + 1.0


@pytest.mark.parametrize("fn,match", [(_pad_to_multiple, r"Pad\(widths=.*depends on the input size"),
                                      (_size_branch, "control flow")])
def test_size_dependent_graph(tmp_path, fn, match):
    model, x = Lambda(fn), image(1, 2, 5, 6)
    with pytest.raises(ExportError, match=match):
        export(model, x, tmp_path / "d.onnx", dynamic=True)
    with pytest.warns(UserWarning, match=match):
        rep = export(model, x, tmp_path / "m.onnx")
    assert not rep.dynamic and rep.input_shape == [1, 2, 5, 6]
    rep = export(model, x, tmp_path / "s.onnx", dynamic=False)
    assert not rep.dynamic and rep.reason == "a fixed size was asked"


def test_value_computed_outside_the_graph_is_caught(tmp_path):
    model = Lambda(lambda m, x: F.where(x > 0.5, x, x * 0.0))  # `x > 0.5` is no Function
    with pytest.raises(ExportError, match="outside any Function"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export(model, image(1, 1, 4, 4), tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()


def test_fp16(tmp_path):
    import onnx
    model, _ = build("EDSR", 2, 3, small=True)
    x = image(1, 3, 6, 7)
    rep = export(model, x, tmp_path / "m.onnx", fp16=True)
    graph = onnx.load(str(tmp_path / "m.onnx")).graph
    assert rep.fp16 and rep.dynamic and rep.tolerance >= 1e-2
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert {i.data_type for i in graph.initializer if not i.name.startswith("const_")} == {
        onnx.TensorProto.FLOAT16}
    want = srgrad_run(model, x)[0]
    got = ort_run(tmp_path / "m.onnx", x)[0]
    assert got.dtype == np.float32
    err = np.abs(got - want).max()
    assert 1e-6 < err <= rep.max_abs_diff <= rep.tolerance


def test_writing_is_safe(tmp_path):
    model = Lambda(lambda m, x: F.relu(x))
    path = tmp_path / "m.onnx"
    path.write_bytes(b"keep me")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export(model, image(1, 1, 2, 2), path)
    assert path.read_bytes() == b"keep me"
    rep = export(model, image(1, 1, 2, 2), path, overwrite=True)
    assert op_types(path) == ["Relu"] and rep.path == str(path)
    assert not list(tmp_path.glob("*.tmp"))
    assert autograd._tracer is None  # the hook is off again


@pytest.mark.parametrize("fp16", [False, True])
def test_outputs_the_input_and_one_value_twice(tmp_path, fp16):
    model = Lambda(lambda m, x: _twice(x))
    path = tmp_path / "m.onnx"
    rep = export(model, image(1, 2, 3, 4, lo=-1), path, fp16=fp16, output_names=["a", "b", "c"])
    x = image(2, 2, 5, 3, lo=-1)
    got = ort_run(path, x)
    assert rep.dynamic and len(got) == 3
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_allclose(got[0], np.maximum(x, 0) + 1, atol=1e-3 if fp16 else 0)
    np.testing.assert_allclose(got[2], x, atol=1e-3 if fp16 else 0)


def _twice(x):
    y = F.relu(x) + 1.0
    return y, y, x


@pytest.mark.parametrize("kw,error", [
    (dict(opset=16), ValueError), (dict(opset=999), ValueError), (dict(dynamic="yes"), TypeError),
    (dict(fp16=1), TypeError),
])
def test_bad_arguments(tmp_path, kw, error):
    with pytest.raises(error):
        export(Lambda(lambda m, x: F.relu(x)), image(1, 1, 2, 2), tmp_path / "m.onnx", **kw)


def test_float64_example_is_refused(tmp_path):
    with pytest.raises(TypeError, match="float32"):
        export(Lambda(lambda m, x: F.relu(x)), np.zeros((1, 1, 2, 2)), tmp_path / "m.onnx")
