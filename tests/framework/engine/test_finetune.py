"""Starting from published weights (train.pretrained, a .pth or a safetensors file) and keeping an
EMA of the weights (train.ema_decay): what a fine-tune run starts from, what it saves, how it
resumes."""
import csv

import numpy as np
import pytest

from framework.engine import Trainer, load_model, upscale
from framework.engine.commands.cli import train_main
from framework.engine.config.schema import load_config
from framework.weights import checkpoint as ckpt
from framework.weights import CheckpointError
from framework.weights import write_pth
from framework.metrics import measure

from .conftest import TINY_MODEL


def _train(path, overrides=(), **kw):
    return Trainer(load_config(path, overrides), progress=False, **kw).fit()


@pytest.fixture
def published(make_config, tmp_path):
    """Weights trained elsewhere, handed over as a BasicSR .pth {'params': ..., 'params_ema': ...}
    (params_ema deliberately different, to see which one is used)."""
    _train(make_config("pre.yaml", iters=2, every=2), ["name=pre"])
    state, _ = ckpt.load_weights(tmp_path / "runs" / "pre" / "net_latest.safetensors")
    pth = tmp_path / "net_g_pre.pth"
    write_pth(pth, {"params": state, "params_ema": {k: v * 0.5 for k, v in state.items()}})
    return pth, state


def test_fine_tune_starts_at_the_loaded_weights(make_config, tmp_path, tiny_data, published):
    pth, state = published
    path = _with_pretrained(make_config, "ft.yaml", f"{{path: {pth}, key: params}}", iters=2,
                            every=2)
    _train(path)
    run = tmp_path / "runs" / "tiny"
    with open(run / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    # iteration 0: the validation of the loaded weights, before any step
    assert rows[0]["iteration"] == "0" and rows[0]["loss"] == ""
    model, _ = load_model(pth, key="params", scale=2)
    for k, v in state.items():
        np.testing.assert_array_equal(model.state_dict()[k], v)
    psnr = []
    from framework.data import HRImageDataset
    val = HRImageDataset(tiny_data / "val", scale=2)
    for i in range(len(val)):
        item = val.get(i)
        sr = np.clip(upscale(model, item["lq"]), 0, 1)
        psnr.append(measure(sr, item["gt"], ["psnr"], 2, True)["psnr"])
    assert float(rows[0]["psnr_y"]) == pytest.approx(float(np.mean(psnr)), abs=5e-5)  # csv: 6 digits
    assert rows[1]["iteration"] == "1" and rows[-1]["iteration"] == "2"


def _with_pretrained(make_config, name, block, **kw):
    path = make_config(name, **kw)
    path.write_text(path.read_text().replace("  log_every: 1\n", f"  log_every: 1\n  pretrained: {block}\n"))
    return path


def test_default_key_of_a_basicsr_file_is_params_ema(make_config, tmp_path, published):
    pth, state = published
    path = _with_pretrained(make_config, "ft.yaml", f"{{path: {pth}}}", iters=1, every=1)
    t = Trainer(load_config(path), progress=False)
    t._load_pretrained()
    for k, v in state.items():
        np.testing.assert_allclose(t.model.state_dict()[k], v * 0.5, rtol=0, atol=0)


def test_a_mismatch_names_keys_shapes_and_what_the_file_holds(make_config, tmp_path, published):
    pth, _ = published
    path = _with_pretrained(make_config, "ft.yaml", f"{{path: {pth}, key: params}}", iters=1,
                            model="{type: FSRCNN, d: 12, s: 4, m: 1}")
    t = Trainer(load_config(path), progress=False)
    with pytest.raises(CheckpointError) as exc:
        t.fit()
    msg = str(exc.value)
    assert msg.startswith(f"train.pretrained: {pth} does not fit the model FSRCNN"), msg
    assert "first_part.0.weight: file (8, 3, 5, 5) vs model (12, 3, 5, 5)" in msg, msg
    assert "The file holds FSRCNN(" in msg and "d=8" in msg, msg
    assert "train.pretrained.strict: false" in msg


def test_non_strict_loads_what_fits_and_lists_the_rest(make_config, tmp_path, published, capsys):
    pth, state = published
    path = _with_pretrained(make_config, "ft.yaml", f"{{path: {pth}, key: params, strict: false}}",
                            iters=1, model="{type: FSRCNN, d: 8, s: 4, m: 2}")
    t = Trainer(load_config(path), progress=False)
    t._load_pretrained()
    own = t.model.state_dict()
    for k, v in state.items():
        if k in own and own[k].shape == v.shape and "mid_part" not in k:
            np.testing.assert_array_equal(own[k], v)
    err = capsys.readouterr().err
    assert f"train.pretrained: loaded " in err and f"tensors from {pth}; skipped" in err, err
    assert "(not in the file)" in err


def test_missing_file_is_one_line_naming_the_key(make_config, tmp_path, capsys):
    path = _with_pretrained(make_config, "ft.yaml", f"{{path: {tmp_path / 'nope.pth'}}}", iters=1)
    assert train_main([str(path), "--no-progress"]) == 2  # a config problem, said before the run
    err = capsys.readouterr().err
    assert f"train.pretrained.path: {tmp_path / 'nope.pth'} does not exist" in err, err


def test_a_mismatch_is_said_before_kernels_compile(make_config, tmp_path, published, capsys,
                                                   monkeypatch):
    """srgrad-train loaded train.pretrained after precompiling (~11 s on a fresh machine) and only
    then reported a mismatch; it is checked before precompile starts, nothing written."""
    from framework.engine.run import precompile
    started = []
    monkeypatch.setattr(precompile, "ensure", lambda *a, **k: started.append(a))
    pth, _ = published
    path = _with_pretrained(make_config, "ft.yaml", f"{{path: {pth}, key: params}}", iters=1,
                            model="{type: FSRCNN, d: 12, s: 4, m: 1}")
    assert train_main([str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: train.pretrained: {pth} does not fit the model FSRCNN" in err, err
    assert started == [] and not (tmp_path / "runs" / "tiny").exists()
    ok = _with_pretrained(make_config, "ok.yaml", f"{{path: {pth}, key: params}}", iters=1)
    assert train_main([str(ok), "--no-progress"]) == 0 and len(started) == 1


def test_resume_ignores_pretrained(make_config, tmp_path, published):
    pth, _ = published
    path = _with_pretrained(make_config, "ft.yaml", f"{{path: {pth}}}", iters=2, every=1)
    _train(path, ["train.total_iters=1"])
    pth.unlink()  # a resumed run has its own weights: the file is not read again
    assert _train(path, resume="auto")["iteration"] == 2


def _ema_config(make_config, name, iters, every):
    path = make_config(name, iters=iters, every=every)
    path.write_text(path.read_text().replace("  log_every: 1\n", "  log_every: 1\n  ema_decay: 0.5\n"))
    return path


def test_ema_is_validated_saved_as_params_ema_and_resumes_exactly(make_config, tmp_path, capsys):
    straight = _ema_config(make_config, "a.yaml", 4, 2)
    _train(straight, ["name=straight"])
    _train(straight, ["name=split", "train.total_iters=2"])
    _train(straight, ["name=split"], resume="auto")
    runs = tmp_path / "runs"
    for name in ("net_latest.safetensors", "checkpoints/iter_00000004.safetensors"):
        for key in ("params", "params_ema"):
            a, _ = ckpt.load_weights(runs / "straight" / name, key)
            b, _ = ckpt.load_weights(runs / "split" / name, key)
            for k in a:
                np.testing.assert_array_equal(a[k], b[k])
    weights, info = ckpt.load_weights(runs / "straight" / "net_latest.safetensors")
    assert info["key"] == "params_ema"  # inference uses the EMA by default, as Real-ESRGAN
    plain, _ = ckpt.load_weights(runs / "straight" / "net_latest.safetensors", "params")
    assert any(not np.array_equal(weights[k], plain[k]) for k in weights)
    assert "val (EMA weights)" in capsys.readouterr().err


def test_turning_ema_on_when_resuming_starts_it_from_the_weights(make_config, tmp_path, capsys):
    path = make_config("a.yaml", iters=2, every=2)
    _train(path, ["train.total_iters=2"])
    _train(path, ["train.total_iters=3", "train.ema_decay=0.9"], resume="auto")
    assert "holds no EMA weights: the EMA starts from its weights" in capsys.readouterr().err
    ema, _ = ckpt.load_weights(tmp_path / "runs" / "tiny" / "net_latest.safetensors", "params_ema")
    assert ema
