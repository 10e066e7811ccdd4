"""PerceptualLoss and VGGFeatureExtractor against torch twins of BasicSR's (torchvision's VGG
`features` built by hand with torch.nn, random weights written by torch.save): layer names, features,
perceptual and style losses for each criterion and their input gradients (float64), Real-ESRGAN's
layer weights at full depth, frozen weights, the weights file (argument, environment variable,
missing, wrong), config validation, dtypes."""
from __future__ import annotations

import contextlib
from collections import OrderedDict

import numpy as np
import pytest

import framework as sg
from framework import nn
from framework.nn.perceptual import vgg_layer_names
from framework.registry import LOSSES

torch = pytest.importorskip("torch")
tnn = torch.nn

CFG19 = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
         512, 512, 512, 512, "M"]
CFG11 = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]
# BasicSR's NAMES['vgg19'] (basicsr/archs/vgg_arch.py)
BASICSR_VGG19 = [
    "conv1_1", "relu1_1", "conv1_2", "relu1_2", "pool1", "conv2_1", "relu2_1", "conv2_2", "relu2_2",
    "pool2", "conv3_1", "relu3_1", "conv3_2", "relu3_2", "conv3_3", "relu3_3", "conv3_4", "relu3_4",
    "pool3", "conv4_1", "relu4_1", "conv4_2", "relu4_2", "conv4_3", "relu4_3", "conv4_4", "relu4_4",
    "pool4", "conv5_1", "relu5_1", "conv5_2", "relu5_2", "conv5_3", "relu5_3", "conv5_4", "relu5_4",
    "pool5"]
REALESRGAN = {"conv1_2": 0.1, "conv2_2": 0.1, "conv3_4": 1.0, "conv4_4": 1.0, "conv5_4": 1.0}


@contextlib.contextmanager
def one_torch_thread():
    """Run the twin on one torch thread, set just before it runs: numba's OpenMP layer leaves its
    thread count in the libgomp torch shares, and two torch threads then compete with numba's
    spinning ones (float64 backward 30x slower on this two-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def torch_features(cfg, batch_norm=False, stop=None):
    """torchvision's vgg*.features, by hand (torchvision is not installed), with kaiming-normal
    weights (activations keep their scale through the depth), random biases and BN statistics;
    `stop` cuts it after that many modules (a smaller file for the shallow tests)."""
    torch.manual_seed(0)
    layers, c = [], 3
    for v in cfg:
        if v == "M":
            layers.append(tnn.MaxPool2d(2, 2))
            continue
        conv = tnn.Conv2d(c, v, 3, padding=1)
        tnn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
        tnn.init.uniform_(conv.bias, -0.1, 0.1)
        layers.append(conv)
        if batch_norm:
            bn = tnn.BatchNorm2d(v)
            for t in (bn.weight, bn.running_var):
                tnn.init.uniform_(t, 0.5, 1.5)
            for t in (bn.bias, bn.running_mean):
                tnn.init.uniform_(t, -0.2, 0.2)
            layers.append(bn)
        layers.append(tnn.ReLU(inplace=True))
        c = v
    return tnn.Sequential(*layers[:stop])


def save_vgg(path, features, legacy=False):
    """What torchvision's file holds: features.* and the classifier (here one small stand-in)."""
    state = {f"features.{k}": v for k, v in features.state_dict().items()}
    state["classifier.0.weight"] = torch.zeros(2, 2)
    torch.save(state, str(path), _use_new_zipfile_serialization=not legacy)
    return str(path)


@pytest.fixture(scope="module")
def shallow(tmp_path_factory):
    """vgg19 features up to relu3_4 (index 17): 2.3 M weights instead of 20 M."""
    features = torch_features(CFG19, stop=18)
    return save_vgg(tmp_path_factory.mktemp("vgg") / "vgg19_shallow.pth", features), features


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    features = torch_features(CFG19)
    return save_vgg(tmp_path_factory.mktemp("vgg") / "vgg19-dcbb9e9d.pth", features), features


class TwinExtractor(tnn.Module):
    """BasicSR's VGGFeatureExtractor over the hand-built features."""

    def __init__(self, features, layers, names, use_input_norm=True, range_norm=False):
        super().__init__()
        self.layers, self.use_input_norm, self.range_norm = layers, use_input_norm, range_norm
        last = max(names.index(k) for k in layers)
        self.vgg_net = tnn.Sequential(OrderedDict(zip(names, list(features)[:last + 1])))
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def forward(self, x):
        x = (x + 1) / 2 if self.range_norm else x
        x = (x - self.mean) / self.std if self.use_input_norm else x
        out = {}
        for k, layer in self.vgg_net._modules.items():
            x = layer(x)
            if k in self.layers:
                out[k] = x.clone()
        return out


def twin_loss(ext, x, gt, layer_weights, perceptual_weight, style_weight, criterion):
    """BasicSR's PerceptualLoss.forward in torch."""
    xf, gf = ext(x), ext(gt.detach())

    def dist(a, b):
        if criterion == "fro":
            return torch.norm(a - b, p="fro")
        return (tnn.functional.l1_loss if criterion == "l1" else tnn.functional.mse_loss)(a, b)

    def gram(f):
        n, c, h, w = f.size()
        f = f.view(n, c, w * h)
        return f.bmm(f.transpose(1, 2)) / (c * h * w)

    percep = sum(dist(xf[k], gf[k]) * layer_weights[k] for k in xf) * perceptual_weight
    style = sum(dist(gram(xf[k]), gram(gf[k])) * layer_weights[k] for k in xf) * style_weight
    return percep, style


def images(shape, seed=0, low=0.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(low, 1, shape), rng.uniform(low, 1, shape)


def close(ours, theirs, what, rtol=1e-10):
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    err = np.abs(np.asarray(ours) - theirs).max()
    assert err <= rtol * max(np.abs(theirs).max(), 1e-300), f"{what}: {err:.3g}"


def test_layer_names_are_basicsrs_and_index_torchvisions_features():
    assert vgg_layer_names("vgg19") == BASICSR_VGG19
    assert vgg_layer_names() == BASICSR_VGG19
    for vgg_type, length in [("vgg11", 21), ("vgg13", 25), ("vgg16", 31), ("vgg19", 37), ("vgg19_bn", 53)]:
        assert len(vgg_layer_names(vgg_type)) == length  # len(torchvision's features)
    assert vgg_layer_names("vgg11_bn")[:4] == ["conv1_1", "bn1_1", "relu1_1", "pool1"]


def test_extractor_matches_the_twin(shallow):
    path, features = shallow
    layers = ["relu1_1", "conv2_2", "pool2", "conv3_4"]
    ours = nn.VGGFeatureExtractor(layers, weights=path).double()
    twin = TwinExtractor(features, layers, BASICSR_VGG19).double()
    assert [k for k, _ in ours.named_parameters()] == [k for k, _ in twin.named_parameters()]
    assert list(ours.state_dict()) == list(twin.state_dict())  # mean, std, then vgg_net.conv1_1...
    x = images((2, 3, 12, 10))[0]
    got = ours(sg.tensor(x))
    with one_torch_thread():
        want = twin(torch.from_numpy(x))
    assert list(got) == layers and got["pool2"].shape == (2, 128, 3, 2)
    for k in layers:
        close(got[k].data, want[k], k)


@pytest.mark.parametrize("criterion,style_weight,range_norm,use_input_norm", [
    ("l1", 0.0, False, True), ("l2", 0.5, False, True), ("fro", 2.0, True, True),
    ("l1", 1.0, True, False)])
def test_perceptual_and_style_loss_match_basicsr(shallow, criterion, style_weight, range_norm,
                                                 use_input_norm):
    path, features = shallow
    lw = {"conv1_2": 0.1, "relu2_1": 0.5, "conv3_4": 1.0}
    kw = dict(perceptual_weight=0.7, style_weight=style_weight, criterion=criterion)
    loss = nn.PerceptualLoss(lw, range_norm=range_norm, use_input_norm=use_input_norm, weights=path,
                             **kw).double()
    ext = TwinExtractor(features, list(lw), BASICSR_VGG19, use_input_norm, range_norm).double()
    a, b = images((2, 3, 9, 11), seed=1, low=-1.0 if range_norm else 0.0)
    x = sg.tensor(a, requires_grad=True)
    percep, style = loss(x, sg.tensor(b))
    (percep + style * 3.0 if style_weight else percep).backward()
    tx = torch.from_numpy(a.copy()).requires_grad_(True)
    with one_torch_thread():
        tpercep, tstyle = twin_loss(ext, tx, torch.from_numpy(b), lw, **kw)
        (tpercep + tstyle * 3.0 if style_weight else tpercep).backward()
    close(percep.data, tpercep, "perceptual loss")
    if style_weight:
        close(style.data, tstyle, "style loss")
    else:
        assert style is None
    close(x.grad.data, tx.grad, "input gradient")


def test_realesrgan_layer_weights_at_full_depth(full):
    """Real-ESRGAN's configuration (conv1_2 ... conv5_4) on the full vgg19 features: value and
    input gradient, float64; the file also loads in torch's legacy format."""
    path, features = full
    loss = nn.PerceptualLoss(REALESRGAN, weights=path).double()
    ext = TwinExtractor(features, list(REALESRGAN), BASICSR_VGG19).double()
    a, b = images((1, 3, 16, 16), seed=2)
    x = sg.tensor(a, requires_grad=True)
    percep, style = loss(x, sg.tensor(b))
    percep.backward()
    tx = torch.from_numpy(a.copy()).requires_grad_(True)
    with one_torch_thread():
        tpercep, _ = twin_loss(ext, tx, torch.from_numpy(b), REALESRGAN, 1.0, 0.0, "l1")
        tpercep.backward()
    assert style is None and percep.dtype == np.float64
    close(percep.data, tpercep, "perceptual loss")
    close(x.grad.data, tx.grad, "input gradient")


def test_float32_loss_stays_float32_and_the_vgg_is_frozen(shallow):
    path, _ = shallow
    loss = nn.PerceptualLoss({"conv2_2": 1.0}, weights=path, style_weight=1.0)
    assert all(not p.requires_grad for p in loss.parameters())
    loss.train()  # as a trainer calls it: the extractor stays in eval mode
    a, b = images((1, 3, 8, 8), seed=3)
    x = sg.tensor(a, dtype=np.float32, requires_grad=True)
    percep, style = loss(x, sg.tensor(b, dtype=np.float32))
    (percep + style).backward()
    assert percep.dtype == style.dtype == x.grad.dtype == np.float32
    assert np.abs(x.grad.data).sum() > 0
    assert all(p.grad is None for p in loss.parameters())
    assert not loss.vgg.vgg_net.training
    gen = nn.Conv2d(3, 3, 3)  # the generator's state_dict knows nothing of the loss
    assert list(gen.state_dict()) == ["weight", "bias"]


def test_batch_norm_variant_stays_in_eval_mode(tmp_path):
    features = torch_features(CFG11, batch_norm=True, stop=8)  # up to relu2_1
    path = save_vgg(tmp_path / "vgg11_bn.pth", features, legacy=True)
    ext = nn.VGGFeatureExtractor(["relu2_1"], vgg_type="vgg11_bn", weights=path).double()
    ext.train()
    ext.vgg_net.train()
    twin = TwinExtractor(features, ["relu2_1"], vgg_layer_names("vgg11_bn")).double().eval()
    x = images((2, 3, 8, 8), seed=4)[0]
    got = ext(sg.tensor(x))["relu2_1"]
    with one_torch_thread():
        close(got.data, twin(torch.from_numpy(x))["relu2_1"], "relu2_1")
    np.testing.assert_array_equal(ext.vgg_net.bn1_1.running_mean.data,
                                  features[1].running_mean.numpy())  # not moved by the forward


def test_the_environment_variable_points_at_the_weights(shallow, monkeypatch):
    path, _ = shallow
    monkeypatch.setenv("SRGRAD_VGG19_WEIGHTS", path)
    loss = nn.PerceptualLoss({"relu1_1": 1.0})
    assert loss.vgg.vgg_net.conv1_1.weight.shape == (64, 3, 3, 3)


def test_without_weights_the_error_says_where_to_get_them(monkeypatch, tmp_path):
    monkeypatch.delenv("SRGRAD_VGG19_WEIGHTS", raising=False)
    with pytest.raises(FileNotFoundError) as info:
        nn.PerceptualLoss({"conv5_4": 1.0})
    msg = str(info.value)
    assert msg.startswith("PerceptualLoss: no VGG19 weights given")
    assert "https://download.pytorch.org/models/vgg19-dcbb9e9d.pth" in msg
    assert "weights: /path/to/vgg19-dcbb9e9d.pth" in msg and "SRGRAD_VGG19_WEIGHTS=" in msg
    monkeypatch.setenv("SRGRAD_VGG19_WEIGHTS", str(tmp_path / "nowhere.pth"))
    with pytest.raises(FileNotFoundError, match="SRGRAD_VGG19_WEIGHTS=.*nowhere.pth' is not a file"):
        nn.PerceptualLoss({"conv5_4": 1.0})
    with pytest.raises(FileNotFoundError, match="weights=.*missing.pth' is not a file.*vgg16-397923af"):
        nn.PerceptualLoss({"conv5_3": 1.0}, vgg_type="vgg16", weights=str(tmp_path / "missing.pth"))


def test_a_file_of_another_network_is_refused(shallow, tmp_path):
    path, _ = shallow
    with pytest.raises(ValueError, match="has no 'features.19.weight' \\(for conv4_1\\)"):
        nn.PerceptualLoss({"conv4_1": 1.0}, weights=path)  # the shallow file stops at relu3_4
    narrow = save_vgg(tmp_path / "narrow.pth", torch_features([32, 64, "M"], stop=4))
    with pytest.raises(ValueError, match=r"features.0.weight has shape \(32, 3, 3, 3\), conv1_1.weight "
                                         r"needs \(64, 3, 3, 3\)"):
        nn.PerceptualLoss({"conv1_2": 1.0}, weights=narrow)


def test_config_validation_without_reading_the_weights(shallow, monkeypatch):
    path, _ = shallow
    monkeypatch.delenv("SRGRAD_VGG19_WEIGHTS", raising=False)
    ok = {"type": "PerceptualLoss", "layer_weights": REALESRGAN, "weights": path}
    assert LOSSES.check(ok) == []
    [(_, msg)] = LOSSES.check({**ok, "layer_weights": {"conv5_5": 1.0}})
    assert "vgg19 has no layer 'conv5_5'; did you mean 'conv5_4'?" in msg
    [(_, msg)] = LOSSES.check({**ok, "criterion": "L1"})
    assert "criterion must be one of 'l1', 'l2', 'fro', got 'L1'" in msg
    # the file is training's question (check_files, asked by srgrad-train before it starts), not
    # the config's: a config naming a missing file validates
    no_file = {"type": "PerceptualLoss", "layer_weights": REALESRGAN}
    assert LOSSES.check(no_file) == []
    with pytest.raises(FileNotFoundError, match="no VGG19 weights given.*SRGRAD_VGG19_WEIGHTS"):
        nn.PerceptualLoss.check_files({"layer_weights": REALESRGAN})
    nn.PerceptualLoss.check_files({"layer_weights": REALESRGAN, "weights": path})
    [(_, msg)] = LOSSES.check({**no_file, "weights": 3})
    assert "weights must be a path, got int" in msg


def test_argument_errors(shallow):
    path, _ = shallow
    with pytest.raises(TypeError, match="layer_weights must be a mapping"):
        nn.PerceptualLoss(["conv1_1"], weights=path)
    with pytest.raises(ValueError, match="vgg_type must be one of"):
        nn.PerceptualLoss({"conv1_1": 1.0}, vgg_type="vgg20", weights=path)
    with pytest.raises(TypeError, match=r"layer_weights\['conv1_1'\] must be a number"):
        nn.PerceptualLoss({"conv1_1": "1"}, weights=path)
    loss = nn.PerceptualLoss({"conv1_1": 1.0}, weights=path)
    x = sg.tensor(np.zeros((1, 3, 4, 4)))
    with pytest.raises(TypeError, match="input dtype float64 but the VGG is float32"):
        loss(x, x)
