"""A PyTorch user's first hour, written the torch way: every line runs, with torch's meaning."""
import numpy as np
import pytest

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


def test_import_framework_loads_its_subpackages():
    """`import torch` makes torch.optim and torch.nn reachable; `import framework` does the same."""
    import subprocess
    import sys
    code = ("import framework as sg; print(sg.optim.Adam.__name__, sg.nn.Conv2d.__name__, "
            "sg.data.DataLoader.__name__, sg.functional.conv2d.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["Adam", "Conv2d", "DataLoader", "conv2d"]


def test_top_level_names_a_torch_user_reaches_for():
    x = sg.tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True)
    for name in ("cat", "stack", "where", "clamp", "exp", "log", "sqrt", "abs", "sum", "mean",
                 "max", "min", "matmul", "maximum", "minimum", "pow", "argmax", "argmin", "var",
                 "std", "flatten", "reshape", "permute", "transpose", "squeeze", "unsqueeze",
                 "chunk", "split", "roll", "relu", "sigmoid", "tanh", "softmax", "log_softmax"):
        assert getattr(sg, name) is getattr(F, name), name  # the same functions, differentiable
    assert sg.cat([x, x], dim=1).shape == (2, 4) and sg.stack([x, x]).shape == (2, 2, 2)
    y = sg.where(x > 0, x, sg.zeros_like(x)).sum() + sg.clamp(x, min=0).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0, 0.0], [2.0, 2.0]])
    assert sg.clip is sg.clamp and sg.is_tensor(x) and not sg.is_tensor(x.numpy())
    assert sg.numel(x) == 4 and sg.allclose(x, x.detach() + 1e-9) and sg.equal(x, x.detach())
    assert not sg.equal(x, sg.ones(2, 2)) and not sg.equal(x, x[0])
    with sg.inference_mode():
        assert not (x * 2).requires_grad
    assert sg.float32 == np.float32 and sg.float == np.float32 and sg.long == np.int64
    assert sg.get_default_dtype() == np.float32
    assert x.to(sg.float64).dtype == np.float64 and sg.ones(2, dtype=sg.long).dtype == np.int64


def test_device_and_cuda_read_as_in_torch():
    device = sg.device("cuda" if sg.cuda.is_available() else "cpu")
    assert device.type == "cpu" and sg.cuda.device_count() == 0
    sg.cuda.manual_seed_all(0)  # nothing to seed: a no-op, as torch without a GPU
    model = nn.Linear(2, 1).to(device)
    x = sg.randn(3, 2, device=device)
    assert model(x).shape == (3, 1) and x.to(device).device == "cpu"
    with pytest.raises(ValueError, match="srgrad runs on the CPU only"):
        model.to(sg.device("cuda"))


def test_tensor_dtype_rules_are_torchs():
    """torch.tensor keeps a float64 numpy array float64, makes Python floats float32, and torch
    has float16 where srgrad's kernels do not: refused with a clear message, never cast."""
    assert sg.tensor(np.random.rand(2, 3)).dtype == np.float64
    assert sg.tensor([0.5, 1.5]).dtype == np.float32 and sg.tensor(2.0).dtype == np.float32
    assert sg.tensor(np.ones(2, np.float32)).dtype == np.float32
    assert sg.tensor([1, 2]).dtype == np.int64 and sg.tensor([True]).dtype == np.bool_
    for make in (lambda: sg.tensor(np.ones(2, np.float16)), lambda: sg.tensor([1.0], dtype=sg.half),
                 lambda: sg.from_numpy(np.ones(2, np.float16)), lambda: sg.ones(2).half(),
                 lambda: nn.Parameter(np.ones(2, np.float16)), lambda: sg.ones(2).to(sg.float16)):
        with pytest.raises(ValueError, match="float16 is not supported"):
            make()
    with pytest.raises(ValueError, match="dtype complex128 is not supported"):
        sg.tensor(np.ones(2, complex))


def test_tensor_methods_a_torch_user_reaches_for():
    x = sg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]] and x.t().shape == (3, 2)
    assert x.add(1, alpha=2).tolist()[0] == [3.0, 4.0, 5.0] and x.sub(x).numpy().sum() == 0
    assert x.mul(2).div(4).neg().tolist()[1] == [-2.0, -2.5, -3.0]
    assert x.long().dtype == np.int64 and x.int().dtype == np.int32 and x.bool().dtype == np.bool_
    assert x.type() == "float32" and x.type(np.float64).dtype == np.float64
    assert x.is_floating_point() and not x.long().is_floating_point() and x.element_size() == 4
    assert x.new_zeros(2).dtype == np.float32 and x.new_ones((1, 2)).tolist() == [[1.0, 1.0]]
    assert x.new_full((2,), 7.0).tolist() == [7.0, 7.0] and x.new_tensor([1]).dtype == np.float32
    np.testing.assert_allclose(x.sigmoid().numpy(), 1 / (1 + np.exp(-x.numpy())), rtol=1e-6)
    assert x.relu().tanh().shape == (2, 3) and x.maximum(sg.full((3,), 2.5)).numpy().min() == 2.5
    with pytest.raises(ValueError, match="t: expects a tensor with <= 2 dimensions"):
        sg.zeros(1, 2, 3).t()
