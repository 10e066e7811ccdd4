"""Weights whose values cannot be right are refused at load, naming the tensor (issue 37 point 6):
a non-finite value in any tensor, and an index table (an integer buffer such as HAT's
relative_position_index_SA) that is not the one the model computes from its spec. Through
load_into, the one path every command takes: srgrad-infer, srgrad-convert weights,
srgrad-export and train.pretrained."""
import textwrap

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework.engine.commands.cli import infer_main, train_main
from framework.engine.commands.convert import main as convert_main
from framework.engine.commands.export import main as export_main
from framework.registry import MODELS
from framework.loading import load_into
from framework.weights import CheckpointError, load_weights, save_weights, write_pth

SPEC = {"type": "ESPCN", "scale": 2, "num_feat": [4, 4]}
BAD = "first_part.2.weight"
HAT = {"type": "HAT", "scale": 2, "embed_dim": 8, "depths": [1], "num_heads": [2],
       "window_size": 4, "img_size": 8, "mlp_ratio": 2, "compress_ratio": 2, "squeeze_factor": 4,
       "drop_path_rate": 0.0}


def _nan_weights(tmp_path, suffix=".safetensors", value=np.nan):
    state = MODELS.build(SPEC).state_dict()
    state[BAD] = state[BAD].copy()
    state[BAD][1, 2, 0, 1] = value
    path = tmp_path / f"nan{suffix}"
    if suffix == ".pth":
        write_pth(path, {"params": state})
    else:
        save_weights(path, state, model=SPEC, scale=2)
    return path


def _one_line(capsys) -> str:
    """The error line (the last; a line before it may say which model was detected)."""
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and err.splitlines()[-1].startswith("error: "), err
    return err.splitlines()[-1]


@pytest.mark.parametrize("suffix,value", [(".safetensors", np.nan), (".pth", np.nan),
                                          (".safetensors", -np.inf)])
def test_load_into_names_the_non_finite_tensor(tmp_path, suffix, value):
    path = _nan_weights(tmp_path, suffix, value)
    model = MODELS.build(SPEC)
    before = {k: v.copy() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError) as err:
        load_into(model, path, where="train.pretrained")
    assert str(err.value) == (f"train.pretrained: {path}: tensor {BAD} holds 1 non-finite value "
                              f"(NaN or inf) of 144, at index (1, 2, 0, 1): refused (weights of "
                              f"a training that diverged, or a damaged file)")
    assert all((model.state_dict()[k] == v).all() for k, v in before.items())  # untouched


def test_srgrad_infer_refuses_nan_weights(tmp_path, capsys):
    from PIL import Image
    path = _nan_weights(tmp_path)
    Image.fromarray(np.full((8, 8, 3), 100, np.uint8)).save(tmp_path / "lr.png")
    out = tmp_path / "sr.png"
    assert infer_main(["--weights", str(path), "--input", str(tmp_path / "lr.png"),
                       "--output", str(out)]) == 1
    assert _one_line(capsys) == (f"error: {path}: tensor {BAD} holds 1 non-finite value (NaN or "
                                 f"inf) of 144, at index (1, 2, 0, 1): refused (weights of a "
                                 f"training that diverged, or a damaged file)")
    assert not out.exists()


def test_srgrad_convert_and_export_refuse_nan_weights(tmp_path, capsys):
    path = _nan_weights(tmp_path, ".pth")
    assert convert_main(["weights", str(path), str(tmp_path / "out.safetensors")]) == 1
    assert f"tensor {BAD} holds 1 non-finite value" in _one_line(capsys)
    assert not (tmp_path / "out.safetensors").exists()
    assert export_main(["--weights", str(path), "--output", str(tmp_path / "m.onnx")]) == 1
    assert f"tensor {BAD} holds 1 non-finite value" in _one_line(capsys)
    assert not (tmp_path / "m.onnx").exists()


def test_train_pretrained_refuses_nan_weights(tmp_path, capsys, tiny_train):
    path = _nan_weights(tmp_path)
    config = tmp_path / "cfg.yaml"
    config.write_text(textwrap.dedent(f"""\
        name: t
        scale: 2
        run_root: {tmp_path / 'runs'}
        model: {SPEC}
        datasets:
          train: {{type: HRImageDataset, root: {tiny_train}, gt_size: 8}}
        train:
          total_iters: 1
          batch_size: 2
          optimizer: {{type: Adam, lr: 1e-3}}
          pretrained: {{path: {path}}}
        """))
    assert train_main([str(config), "--no-progress"]) == 2
    err = _one_line(capsys)
    assert f"train.pretrained: {path}: tensor {BAD} holds 1 non-finite value" in err, err
    assert not (tmp_path / "runs").exists()


# -- index tables ---------------------------------------------------------------------------------
def _hat_file(tmp_path, change):
    state = MODELS.build(HAT).state_dict()
    change(state)
    path = tmp_path / "hat.safetensors"
    save_weights(path, state, model=HAT, scale=2)
    return path


def test_a_hat_index_table_read_as_nan_is_refused(tmp_path):
    def nan(state):  # an index buffer stored as float, one entry NaN (it crashed inference)
        table = state["relative_position_index_SA"].astype(np.float32)
        table[3, 5] = np.nan
        state["relative_position_index_SA"] = table
    path = _hat_file(tmp_path, nan)
    with pytest.raises(CheckpointError, match=r"tensor relative_position_index_SA holds 1 "
                                              r"non-finite value \(NaN or inf\) of 256, at index "
                                              r"\(3, 5\)"):
        load_into(MODELS.build(HAT), path)


@pytest.mark.parametrize("entry,value,why", [
    ((0, 0), 10 ** 6, "out of range"), ((2, 7), 3.5, "not integral"), ((1, 1), 0, "in range")])
def test_a_hat_index_table_must_be_the_models_own(tmp_path, entry, value, why):
    def change(state):
        table = state["relative_position_index_OCA"].astype(np.float64)
        table[entry] = value
        state["relative_position_index_OCA"] = table
    path = _hat_file(tmp_path, change)
    model = MODELS.build(HAT)
    own = model.state_dict()["relative_position_index_OCA"]
    with pytest.raises(CheckpointError) as err:
        load_into(model, path)
    assert str(err.value) == (
        f"{path}: tensor relative_position_index_OCA is an index table (an integer buffer HAT "
        f"computes from its spec) and differs from the model's: 1 of {own.size} entries, first at "
        f"index {entry} (file {value:g}, model {own[entry]}): refused (a damaged file, or weights "
        f"of other settings)"), why


def test_good_weights_still_load_and_counters_are_checked(tmp_path):
    path = _hat_file(tmp_path, lambda state: None)  # the control: the model's own tables load
    load_into(MODELS.build(HAT), path)
    bn = {"type": "VGGStyleDiscriminator", "num_in_ch": 3, "num_feat": 4, "input_size": 128}
    state = MODELS.build(bn).state_dict()
    counter = next((k for k in state if k.endswith("num_batches_tracked")), None)
    if counter is None:
        pytest.skip("no model with a BatchNorm counter")
    state[counter] = np.array(-1, np.int64)
    path = tmp_path / "bn.safetensors"
    save_weights(path, state, model=bn, scale=1)
    with pytest.raises(CheckpointError, match=rf"tensor {counter} is a counter and holds -1"):
        load_into(MODELS.build(bn), path)
    assert load_weights(path)[0][counter] == -1  # reading alone is not refused


def test_basicsr_pretrain_network_g_refuses_nan_weights(tmp_path, capsys, monkeypatch):
    """BasicSR's option file: path.pretrain_network_g (translated to train.pretrained)."""
    from tests.framework.engine.test_train_basicsr_options import _options
    monkeypatch.chdir(tmp_path)
    state = MODELS.build({"type": "MSRResNet", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 4,
                          "num_block": 1, "scale": 2}).state_dict()
    state["conv_last.bias"] = np.array([0, np.inf, 0], np.float32)
    weights = tmp_path / "net_g.pth"
    write_pth(weights, {"params": state})
    options = _options(tmp_path)
    options.write_text(options.read_text().replace("pretrain_network_g: ~",
                                                   f"pretrain_network_g: {weights}"))
    assert train_main([str(options), "--no-progress"]) == 2
    assert f"train.pretrained: {weights}: tensor conv_last.bias holds 1 non-finite value (NaN or " \
           f"inf) of 3, at index (1,)" in _one_line(capsys)
    assert not (tmp_path / "runs").exists()
