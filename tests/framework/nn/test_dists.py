"""framework/nn/dists.py against its torch twin (tests/twins/dists.py, the DISTS package's module
structure): keys, distances and input gradients; the loss; the refusals."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import framework as sg  # noqa: E402
from framework.nn.dists import DISTS, DISTSLoss  # noqa: E402
from framework.registry import LOSSES  # noqa: E402
from tests.twins import dists as twin  # noqa: E402


def test_values_and_gradients_match_the_twin_and_the_loss(tmp_path):
    torch.manual_seed(5)
    t = twin.DISTS()
    backbone, weights = twin.files(t, tmp_path)
    m = DISTS(weights=weights, backbone_weights=backbone)
    assert set(m.state_dict()) == set(t.state_dict())
    rng = np.random.default_rng(0)
    x, y = rng.random((2, 3, 37, 41), dtype=np.float32), rng.random((2, 3, 37, 41), dtype=np.float32)
    X = sg.tensor(x, requires_grad=True)
    out = m(X, sg.tensor(y))
    tx = torch.tensor(x, requires_grad=True)
    ref = t(tx, torch.tensor(y))
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-5)
    (out * sg.tensor(np.array([1.0, -2.0], np.float32))).sum().backward()
    (ref * torch.tensor([1.0, -2.0])).sum().backward()
    np.testing.assert_allclose(X.grad.data, tx.grad.numpy(), rtol=0, atol=1e-4 * np.abs(tx.grad.numpy()).max())
    loss = LOSSES.build({"type": "DISTSLoss", "loss_weight": 2.0, "weights": weights, "backbone_weights": backbone})
    with torch.no_grad():
        assert float(loss(sg.tensor(x), sg.tensor(y)).data) == pytest.approx(2 * float(t(tx, torch.tensor(y)).mean()),
                                                                           rel=1e-5)
    assert not any(p.requires_grad for p in m.parameters())


def test_refusals(tmp_path, monkeypatch):
    monkeypatch.delenv("SRGRAD_DISTS_WEIGHTS", raising=False)
    with pytest.raises(FileNotFoundError, match=r"DISTSLoss: no weights file given. Download https://github.com/"
                       r"dingkeyan93/DISTS/raw/master/DISTS_pytorch/weights.pt.*SRGRAD_DISTS_WEIGHTS"):
        DISTSLoss.check_files({"backbone_weights": __file__})
    torch.save({"alpha": torch.zeros(1, 3, 1, 1)}, tmp_path / "w.pt")
    with pytest.raises(ValueError, match=r"DISTS: .*w.pt: alpha has shape \(1, 3, 1, 1\), needs \(1, 1475, 1, 1\)"):
        DISTS(weights=str(tmp_path / "w.pt"), backbone_weights=__file__)
    torch.save({"alpha": torch.full((1, 1475, 1, 1), float("nan")), "beta": torch.zeros(1, 1475, 1, 1)},
               tmp_path / "w.pt")
    with pytest.raises(ValueError, match=r"DISTS: .*w.pt: alpha holds non-finite values"):
        DISTS(weights=str(tmp_path / "w.pt"), backbone_weights=__file__)
