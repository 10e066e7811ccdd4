"""A PyTorch user's first hour, written the torch way: every line runs, with torch's meaning."""
import numpy as np

import framework as sg
import framework.functional as F
from framework import nn
from framework.data import DataLoader
from framework.optim import SGD


class Pairs:
    def __init__(self, n):
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((n, 3)).astype(np.float32)
        self.y = (self.x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def test_the_first_hour(tmp_path):
    sg.manual_seed(0)
    sg.set_num_threads(sg.get_num_threads())
    device = "cpu"
    model = nn.Linear(3, 1)
    optimizer = SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Pairs(32), batch_size=4, shuffle=True)
    first = None
    for epoch in range(5):
        for x, y in loader:
            x, y = sg.tensor(x).to(device), sg.tensor(y).to(device)
            pred = model(x)
            loss = ((pred - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            first = loss.item() if first is None else first
    assert loss.item() < 0.01 * first
    x = sg.tensor(Pairs(4).x)
    assert x.size() == (4, 3) and x.size(1) == 3 and x.numel() == 12
    assert x.sum(dim=1, keepdim=True).shape == (4, 1) and x.unsqueeze(0).shape == (1, 4, 3)
    assert x.mean(dim=0).shape == (3,) and x.argmax(dim=1).shape == (4,)
    np.testing.assert_allclose(F.softmax(x, dim=-1).sum(dim=-1).numpy(), 1.0, rtol=1e-6)
    before = model.weight.numpy().copy()
    with sg.no_grad():
        for p in model.parameters():
            p.mul_(0.5)
    np.testing.assert_array_equal(model.weight.numpy(), before * 0.5)
    sg.save(model.state_dict(), tmp_path / "model.pth")
    again = nn.Linear(3, 1)
    again.load_state_dict(sg.load(tmp_path / "model.pth"))
    np.testing.assert_array_equal(again.weight.numpy(), model.weight.numpy())
    sg.save(optimizer.state_dict(), tmp_path / "opt.pth")
    SGD(again.parameters(), lr=0.1).load_state_dict(sg.load(tmp_path / "opt.pth"))
