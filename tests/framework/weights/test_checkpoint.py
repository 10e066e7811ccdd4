"""Checkpoints: pickle-free round trip, atomic writes, clear errors for foreign, truncated and
mismatching files."""
import os
import pickle

import numpy as np
import pytest

from framework.weights import checkpoint as ckpt
from framework.loading import load_into
from framework.weights import CheckpointError
from framework.nn import Module, Parameter


class Tiny(Module):
    def __init__(self, n=3):
        super().__init__()
        self.weight = Parameter(np.arange(2 * n, dtype=np.float32).reshape(n, 2))
        self.bias = Parameter(np.full(n, 0.5, np.float32))


def _opt_state():
    return {"state": {0: {"step": 3, "exp_avg": np.linspace(0, 1, 6, dtype=np.float32),
                          "beta_prod": np.float32(0.81)}},
            "param_groups": [{"lr": 2e-4, "betas": (0.9, 0.999), "eps": 1e-8, "params": [0, 1],
                              "amsgrad": False, "note": None}]}


def test_checkpoint_round_trip_is_exact(tmp_path):
    m = Tiny()
    path = tmp_path / "c.safetensors"
    ckpt.save_checkpoint(path, m.state_dict(), _opt_state(), {"last_epoch": 7, "base_lrs": [2e-4]},
                         iteration=7, rng=None, config_hash="abc")
    back = ckpt.load_checkpoint(path)
    assert back["iteration"] == 7 and back["config_hash"] == "abc" and back["rng"] is None
    np.testing.assert_array_equal(back["model"]["weight"], m.weight.data)
    st = back["optimizer"]["state"]["0"]
    assert st["step"] == 3
    np.testing.assert_array_equal(st["exp_avg"], np.linspace(0, 1, 6, dtype=np.float32))
    # numpy scalars keep their dtype (a float64 round trip would break bit-exact resume)
    assert isinstance(st["beta_prod"], np.float32) and st["beta_prod"] == np.float32(0.81)
    group = back["optimizer"]["param_groups"][0]
    assert group["lr"] == 2e-4 and group["betas"] == [0.9, 0.999] and group["note"] is None
    assert back["scheduler"] == {"last_epoch": 7, "base_lrs": [2e-4]}


def test_weights_round_trip_with_model_spec(tmp_path):
    m = Tiny()
    m.weight.data += 1.0
    ckpt.save_weights(tmp_path / "w.safetensors", m.state_dict(), model={"type": "Tiny", "scale": 2})
    fresh = Tiny()
    info = load_into(fresh, tmp_path / "w.safetensors")
    assert info["model"] == {"type": "Tiny", "scale": 2}
    np.testing.assert_array_equal(fresh.weight.data, m.weight.data)


def test_state_with_objects_is_refused(tmp_path):
    with pytest.raises(TypeError, match="optimizer.state.x.*set"):
        ckpt.save_checkpoint(tmp_path / "c.safetensors", Tiny().state_dict(),
                             {"state": {"x": {1, 2}}})


def test_failed_write_leaves_previous_checkpoint_intact(tmp_path, monkeypatch):
    path = tmp_path / "c.safetensors"
    ckpt.save_checkpoint(path, Tiny().state_dict(), iteration=1)
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    m = Tiny()
    m.weight.data *= 2
    with pytest.raises(OSError, match="cannot write .*c.safetensors.*intact"):
        ckpt.save_checkpoint(path, m.state_dict(), iteration=2)
    assert path.read_bytes() == before
    assert not (tmp_path / "c.safetensors.tmp").exists()
    monkeypatch.undo()
    assert ckpt.load_checkpoint(path)["iteration"] == 1


def test_hostile_pickle_is_refused_without_loading(tmp_path):
    """Weights loading reads PyTorch files through the safe reader: a pickle that would run code is
    refused naming what it wanted, and nothing runs; resuming takes srgrad checkpoints only."""
    class Boom:
        def __reduce__(self):  # would run if anything unpickled the file
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"weight": Boom()}))
    with pytest.raises(CheckpointError, match=r"refusing to load .*evil\.pt: it references "
                                              r"\w+\.system, which a weights file never needs"):
        load_into(Tiny(), path)
    with pytest.raises(CheckpointError, match="evil.pt is not a safetensors file"):
        ckpt.load_checkpoint(path)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("keep", [0, 5, 60])
def test_truncated_file_is_named(tmp_path, keep):
    good = tmp_path / "w.safetensors"
    ckpt.save_weights(good, Tiny().state_dict())
    bad = tmp_path / "cut.safetensors"
    bad.write_bytes(good.read_bytes()[:keep] if keep else b"")
    with pytest.raises(CheckpointError, match="cut.safetensors.*(truncated|empty)"):
        ckpt.load_weights(bad)


def test_truncated_tensor_data_is_named(tmp_path):
    good = tmp_path / "w.safetensors"
    ckpt.save_weights(good, Tiny().state_dict())
    bad = tmp_path / "cut.safetensors"
    bad.write_bytes(good.read_bytes()[:-4])
    with pytest.raises(CheckpointError, match=r"cut.safetensors is truncated: its tensors need \d+"):
        ckpt.load_weights(bad)


def test_different_architecture_names_keys_and_shapes(tmp_path):
    path = tmp_path / "w.safetensors"
    ckpt.save_weights(path, Tiny(3).state_dict())
    with pytest.raises(CheckpointError, match=r"weight: file \(3, 2\) vs model \(4, 2\).*"
                                              r"bias: file \(3,\) vs model \(4,\)"):
        load_into(Tiny(4), path)

    class Other(Module):
        def __init__(self):
            super().__init__()
            self.weight = Parameter(np.zeros((3, 2), np.float32))
            self.gamma = Parameter(np.zeros(3, np.float32))

    with pytest.raises(CheckpointError, match=r"missing keys: gamma; unexpected keys: bias"):
        load_into(Other(), path)


def test_weights_file_cannot_resume_training(tmp_path):
    path = tmp_path / "net_latest.safetensors"
    ckpt.save_weights(path, Tiny().state_dict())
    with pytest.raises(CheckpointError, match="not an srgrad training checkpoint"):
        ckpt.load_checkpoint(path)
