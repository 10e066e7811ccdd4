"""framework/nn/lpips.py against its torch twin (tests/twins/lpips.py, the lpips package's module
structure): the package's state_dict keys, distances, spatial maps and input gradients; the loss;
the refusals."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import framework as sg  # noqa: E402
from framework.nn.lpips import LPIPS, LPIPSLoss  # noqa: E402
from framework.registry import LOSSES  # noqa: E402
from tests.twins import lpips as twin  # noqa: E402


def _pair(rng, size=40):
    return (rng.random((2, 3, size, size), dtype=np.float32), rng.random((2, 3, size, size), dtype=np.float32))


def _models(net, tmp_path, spatial=False):
    torch.manual_seed(3)
    t = twin.LPIPS(net, spatial=spatial)
    with torch.no_grad():
        for k in range(t.L):
            getattr(t, f"lin{k}").model[1].weight.abs_()
    backbone, lin = twin.files(t, tmp_path)
    return t, LPIPS(net, spatial=spatial, weights=lin, backbone_weights=backbone)


@pytest.mark.parametrize("net, spatial", [("alex", False), ("alex", True), ("vgg", False)])
def test_values_and_input_gradients_match_the_twin(net, spatial, tmp_path):
    t, m = _models(net, tmp_path, spatial)
    assert set(m.state_dict()) == set(t.state_dict())
    x, y = _pair(np.random.default_rng(0))
    X, Y = sg.tensor(x, requires_grad=True), sg.tensor(y, requires_grad=True)
    out = m(X, Y, normalize=True)
    tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    ref = t(tx, ty, normalize=True)
    assert out.shape == tuple(ref.shape) == ((2, 1, 40, 40) if spatial else (2, 1, 1, 1))
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=2e-5, atol=1e-9)
    g = np.random.default_rng(1).random(out.shape, dtype=np.float32)
    (out * sg.tensor(g)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    for ours, theirs in ((X, tx), (Y, ty)):
        scale = np.abs(theirs.grad.numpy()).max()
        np.testing.assert_allclose(ours.grad.data, theirs.grad.numpy(), rtol=0, atol=1e-4 * scale)


def test_frozen_and_a_loss(tmp_path):
    t, m = _models("alex", tmp_path)
    assert not any(p.requires_grad for p in m.parameters())
    m.train()
    assert not m.training  # the linear layers' dropout never runs
    backbone, lin = str(tmp_path / "backbone.pth"), str(tmp_path / "lin.pth")
    loss = LOSSES.build({"type": "LPIPSLoss", "loss_weight": 0.5, "net": "alex", "weights": lin,
                         "backbone_weights": backbone})
    x, y = _pair(np.random.default_rng(2))
    X = sg.tensor(x, requires_grad=True)
    value = loss(X, sg.tensor(y))
    with torch.no_grad():
        ref = 0.5 * t(torch.tensor(x), torch.tensor(y), normalize=True).mean()
    assert float(value.data) == pytest.approx(float(ref), rel=2e-5)
    value.backward()
    assert np.abs(X.grad.data).max() > 0
    LPIPSLoss.check_files({"net": "alex", "weights": lin, "backbone_weights": backbone})


def test_refusals(tmp_path, monkeypatch):
    monkeypatch.delenv("SRGRAD_LPIPS_VGG_WEIGHTS", raising=False)
    with pytest.raises(ValueError, match=r"LPIPS: version must be '0.1'"):
        LPIPS("alex", version="0.0")
    with pytest.raises(ValueError, match=r"net"):
        LPIPS("squeezenet")
    _models("alex", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"LPIPSLoss: no weights file given. Download https://github.com/"
                       r"richzhang/PerceptualSimilarity/raw/master/lpips/weights/v0.1/vgg.pth.*SRGRAD_LPIPS_VGG_WEIGHTS"):
        LPIPSLoss.check_files({"net": "vgg", "backbone_weights": str(tmp_path / "backbone.pth")})
    # another net's backbone file: the shapes say so
    with pytest.raises(ValueError, match=r"LPIPS: .*backbone.pth: features.0.weight has shape \(64, 3, 11, 11\)"):
        LPIPS("vgg", weights=str(tmp_path / "lin.pth"), backbone_weights=str(tmp_path / "backbone.pth"))
