"""framework.save / framework.load: state_dicts through safetensors + JSON, no pickle."""
import numpy as np
import pytest
import safetensors.numpy

import framework as sg
from framework import nn
from framework.weights import CheckpointError, save_weights
from framework.optim import Adam


def _model():
    sg.manual_seed(3)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 3, 3, padding=1))


def _step(model, opt):
    x = sg.tensor(np.random.default_rng(0).standard_normal((1, 3, 5, 5)).astype(np.float32))
    loss = (model(x) * model(x)).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def test_model_and_optimizer_round_trip_and_training_resumes_identically(tmp_path):
    model, twin = _model(), _model()
    opt = Adam(model.parameters(), lr=1e-2)
    _step(model, opt)
    sg.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "iter": 1}, tmp_path / "ck.pth")
    ck = sg.load(tmp_path / "ck.pth")
    assert ck["iter"] == 1 and set(ck) == {"model", "optimizer", "iter"}
    assert all(isinstance(v, np.ndarray) for v in ck["model"].values())
    assert sorted(ck["optimizer"]["state"]) == list(range(4))  # int keys come back as ints
    assert ck["optimizer"]["state"][0]["exp_avg"].dtype == np.float32
    twin.load_state_dict(ck["model"])
    opt2 = Adam(twin.parameters(), lr=1e-2)
    opt2.load_state_dict(ck["optimizer"])
    _step(model, opt)
    _step(twin, opt2)
    for (k, a), b in zip(model.state_dict().items(), twin.state_dict().values()):
        np.testing.assert_array_equal(a, b, err_msg=k)


def test_a_state_dict_file_is_plain_safetensors_named_by_its_keys(tmp_path):
    model = _model()
    sg.save(model.state_dict(), tmp_path / "m.safetensors")
    raw = safetensors.numpy.load_file(str(tmp_path / "m.safetensors"))
    assert sorted(raw) == sorted(model.state_dict())
    back = sg.load(tmp_path / "m.safetensors")
    assert list(back) == list(model.state_dict())  # order kept
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(back[k], v)


def test_values_of_every_kind(tmp_path):
    obj = {"a": [np.arange(3), (1.5, "s", None, True)], "n": {0: np.float32(2.5), "x": float("inf")},
           "t": sg.tensor([1.0, 2.0]), "e": np.zeros((0, 2)), "z": np.array(7, np.int64)}
    sg.save(obj, tmp_path / "o")
    back = sg.load(tmp_path / "o")
    np.testing.assert_array_equal(back["a"][0], np.arange(3))
    assert back["a"][1] == [1.5, "s", None, True]  # a tuple comes back a list (JSON)
    assert back["n"][0] == np.float32(2.5) and back["n"][0].dtype == np.float32
    assert back["n"]["x"] == float("inf")
    assert isinstance(back["t"], np.ndarray) and back["t"].tolist() == [1.0, 2.0]
    assert back["e"].shape == (0, 2) and back["z"].shape == () and back["z"] == 7
    sg.save([np.ones(2), 3], tmp_path / "l")
    out = sg.load(tmp_path / "l")
    assert out[0].tolist() == [1.0, 1.0] and out[1] == 3


@pytest.mark.parametrize("name", ["f.pth", "f.st"])
def test_a_module_is_refused_and_the_old_file_survives(tmp_path, name):
    path = tmp_path / name
    sg.save({"w": np.ones(2)}, path)
    with pytest.raises(TypeError, match="has type Linear"):
        sg.save({"w": nn.Linear(2, 2)}, path)
    assert sg.load(path)["w"].tolist() == [1.0, 1.0]
    assert not list(tmp_path.glob("*.tmp"))


def test_bad_objects_are_refused_and_the_old_file_survives(tmp_path):
    path = tmp_path / "f.safetensors"
    sg.save({"w": np.ones(2)}, path)
    with pytest.raises(ValueError, match="flatten to the same dotted name"):
        sg.save({"a.b": np.ones(1), "a": {"b": np.zeros(1)}}, path)
    with pytest.raises(ValueError, match="keys that differ only in type"):
        sg.save({"d": {1: 1, "1": 2}}, path)
    assert sg.load(path)["w"].tolist() == [1.0, 1.0]
    assert not list(tmp_path.glob("*.tmp"))


def test_load_reads_pytorch_and_other_weights_files_safely(tmp_path):
    torch = pytest.importorskip("torch")
    sd = {"conv.weight": torch.arange(6.0).reshape(2, 3), "conv.bias": torch.zeros(2)}
    torch.save({"params_ema": sd, "params": sd, "iter": 3}, tmp_path / "w.pth")
    got = sg.load(tmp_path / "w.pth")  # what torch.load returns, arrays as numpy
    assert sorted(got) == ["iter", "params", "params_ema"] and got["iter"] == 3
    assert sorted(got["params_ema"]) == ["conv.bias", "conv.weight"]
    np.testing.assert_array_equal(got["params_ema"]["conv.weight"], np.arange(6.0).reshape(2, 3))
    save_weights(tmp_path / "w.safetensors", {"k": np.ones(2, np.float32)}, model={"type": "X"})
    assert list(sg.load(tmp_path / "w.safetensors")) == ["k"]
    (tmp_path / "bad").write_bytes(b"\x80\x04not really a pickle")
    with pytest.raises(CheckpointError):
        sg.load(tmp_path / "bad")


@pytest.mark.parametrize("suffix", [".pth", ".pt", ".PTH"])
def test_a_pth_name_is_written_in_torch_saves_format(tmp_path, suffix):
    """torch.load reads what framework.save writes under a .pth/.pt name (it was safetensors)."""
    torch = pytest.importorskip("torch")
    model = _model()
    opt = Adam(model.parameters(), lr=1e-2, betas=(0.8, 0.9))
    _step(model, opt)
    path = tmp_path / f"m{suffix}"
    sg.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "iter": 1,
             "scale": np.float32(0.5), "note": None, "flags": (True, "x")}, path)
    got = torch.load(path, weights_only=True)
    assert got["iter"] == 1 and got["scale"] == 0.5 and got["note"] is None
    assert got["flags"] == (True, "x")
    assert list(got["model"]) == list(model.state_dict())
    for k, v in model.state_dict().items():
        assert got["model"][k].dtype == torch.float32
        np.testing.assert_array_equal(got["model"][k].numpy(), v, err_msg=k)
    state = opt.state_dict()
    assert sorted(got["optimizer"]["state"]) == sorted(state["state"])  # int keys
    np.testing.assert_array_equal(got["optimizer"]["state"][0]["exp_avg"].numpy(),
                                  state["state"][0]["exp_avg"])
    assert got["optimizer"]["param_groups"] == state["param_groups"]
    back = sg.load(path)  # and back into srgrad, as torch.load returns it
    twin = _model()
    twin.load_state_dict(back["model"])
    Adam(twin.parameters(), lr=1e-2).load_state_dict(back["optimizer"])
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(twin.state_dict()[k], v)


def test_torch_reads_a_bare_state_dict_into_its_own_module(tmp_path):
    torch = pytest.importorskip("torch")
    lin = nn.Linear(3, 2)
    sg.save(lin.state_dict(), tmp_path / "lin.pth")
    twin = torch.nn.Linear(3, 2)
    twin.load_state_dict(torch.load(tmp_path / "lin.pth", weights_only=True))
    np.testing.assert_array_equal(twin.weight.detach().numpy(), lin.weight.numpy())
    np.testing.assert_array_equal(twin.bias.detach().numpy(), lin.bias.numpy())


def test_load_takes_torch_load_keywords(tmp_path):
    """torch.load(path, map_location=..., weights_only=...) in a script runs unchanged; a GPU
    map_location is refused as everywhere in srgrad."""
    path = tmp_path / "m.pth"
    sg.save({"w": sg.ones(2)}, path)
    for kw in (dict(map_location="cpu", weights_only=True), dict(map_location=sg.device("cpu")),
               dict(map_location=lambda storage, loc: storage, weights_only=False, mmap=False)):
        assert sg.load(path, **kw)["w"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="CPU only"):
        sg.load(path, map_location="cuda:0")
    with pytest.raises(TypeError, match="weights_only must be a bool"):
        sg.load(path, weights_only="yes")
