"""Bad weights and checkpoints: another architecture (keys and shapes named), truncated files at
every kind of cut, and pickle / PyTorch / .npy files, refused without ever being unpickled."""
import io
import pickle
import re
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework.engine import load_model
from framework.engine.commands.cli import infer_main, train_main
from framework.weights import checkpoint as ckpt
from framework.loading import load_into
from framework.weights import CheckpointError
from framework.registry import MODELS

from tests.conftest import smooth_image


def espcn(num_feat=(4, 4)):
    return MODELS.build({"type": "ESPCN", "scale": 2, "num_feat": list(num_feat)})


def weights_file(tmp_path, model, name="w.safetensors", spec=None):
    path = tmp_path / name
    ckpt.save_weights(path, model.state_dict(), model=spec or {"type": "ESPCN", "scale": 2,
                                                                "num_feat": [4, 4]},
                      scale=2, dtype="float32")
    return path


@pytest.fixture
def lr_image(tmp_path):
    from PIL import Image
    path = tmp_path / "lr.png"
    Image.fromarray(smooth_image(np.random.default_rng(0), 8, 8)).save(path)
    return path


# -- another architecture -------------------------------------------------------------------------
def test_same_type_other_settings_names_every_shape(tmp_path):
    path = weights_file(tmp_path, espcn((8, 4)))
    with pytest.raises(CheckpointError) as exc:
        load_into(espcn((4, 4)), path)
    msg = str(exc.value)
    assert msg.startswith(f"{path} does not fit the model ESPCN (weights for a different "
                          f"architecture or settings?): shape mismatches: ")
    assert "first_part.0.weight: file (8, 3, 5, 5) vs model (4, 3, 5, 5)" in msg
    assert "first_part.0.bias: file (8,) vs model (4,)" in msg
    assert "first_part.2.weight: file (4, 8, 3, 3) vs model (4, 4, 3, 3)" in msg
    assert "missing keys" not in msg and "unexpected keys" not in msg


def test_other_architecture_names_missing_and_unexpected_keys(tmp_path):
    fsrcnn = MODELS.build({"type": "FSRCNN", "scale": 2, "d": 8, "s": 4, "m": 1})
    path = weights_file(tmp_path, fsrcnn)
    with pytest.raises(CheckpointError) as exc:
        load_into(espcn(), path)
    msg = str(exc.value)
    own, theirs = espcn().state_dict(), fsrcnn.state_dict()
    missing = [k for k in own if k not in theirs]
    unexpected = [k for k in theirs if k not in own]
    assert missing and unexpected
    assert f"missing keys: {', '.join(missing[:8])}" in msg  # in the model's order
    named = re.search(r"unexpected keys: (.*?)(, \.\.\. \((\d+) in all\))?; ", msg)
    assert named, msg
    assert set(named.group(1).split(", ")) <= set(unexpected)  # the first 8, in the file's order
    assert int(named.group(3) or len(named.group(1).split(", "))) == len(unexpected)
    shapes = [k for k in own if k in theirs and own[k].shape != theirs[k].shape]
    for k in shapes:
        assert f"{k}: file {tuple(theirs[k].shape)} vs model {tuple(own[k].shape)}" in msg


def test_the_model_is_unchanged_after_a_refused_load(tmp_path):
    path = weights_file(tmp_path, espcn((8, 4)))
    model = espcn()
    before = {k: v.copy() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError):
        load_into(model, path)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_infer_with_mismatching_weights_is_a_clear_error(tmp_path, lr_image, capsys):
    path = weights_file(tmp_path, espcn((8, 4)))
    code = infer_main(["--weights", str(path), "--model", "ESPCN", "--scale", "2",
                       "--model-arg", "num_feat=[4, 4]", "--input", str(lr_image), "--output",
                       str(tmp_path / "out.png"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "first_part.0.weight: file (8, 3, 5, 5) vs model (4, 3, 5, 5)" in err, err
    assert "Traceback" not in err and not (tmp_path / "out.png").exists()


def test_resume_from_a_checkpoint_of_another_model(make_tiny_config, tmp_path, capsys):
    other = tmp_path / "other.safetensors"
    fsrcnn = MODELS.build({"type": "FSRCNN", "scale": 2, "d": 8, "s": 4, "m": 1})
    ckpt.save_checkpoint(other, fsrcnn.state_dict(), None, None, iteration=3)
    cfg = make_tiny_config(iters=4, every=2)
    assert train_main([str(cfg), "--resume", str(other), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"error: {other} does not fit the model ESPCN" in err and "missing keys: " in err, err
    assert not list((tmp_path / "runs" / "tiny" / "checkpoints").glob("*"))


def test_unknown_model_type_in_the_weights_metadata(tmp_path, lr_image, capsys):
    path = weights_file(tmp_path, espcn(), spec={"type": "NoSuchNet", "scale": 2})
    code = infer_main(["--weights", str(path), "--input", str(lr_image), "--output",
                       str(tmp_path / "out.png"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "NoSuchNet" in err and "Known: " in err and "--import MODULE" in err, err


# -- truncated and corrupt files ------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkpoint_bytes(tmp_path_factory):
    from framework.optim import Adam
    model = espcn()
    opt = Adam(list(model.parameters()), lr=1e-3)
    for p in model.parameters():
        p.grad = type(p)(np.ones_like(p.data))
    opt.step()
    path = tmp_path_factory.mktemp("ckpt") / "iter.safetensors"
    ckpt.save_checkpoint(path, model.state_dict(), opt.state_dict(), None, iteration=1)
    return path.read_bytes()


def cut_points(data):
    n = int.from_bytes(data[:8], "little")
    return sorted({0, 1, 7, 8, 9, 8 + n // 2, 8 + n - 1, 8 + n, 8 + n + 1,
                   (8 + n + len(data)) // 2, len(data) - 1})


def test_every_truncation_is_named(tmp_path, checkpoint_bytes):
    path = tmp_path / "cut.safetensors"
    for keep in cut_points(checkpoint_bytes):
        path.write_bytes(checkpoint_bytes[:keep])
        for load in (ckpt.load_checkpoint, ckpt.load_weights):
            with pytest.raises(CheckpointError, match=rf"^{path} (is empty or truncated|is "
                                                       rf"truncated|is not a safetensors)"):
                load(path)


def test_corrupt_header_and_metadata_are_named(tmp_path, checkpoint_bytes):
    n = int.from_bytes(checkpoint_bytes[:8], "little")
    path = tmp_path / "bad.safetensors"
    header = bytearray(checkpoint_bytes)
    header[8 + n // 2] = ord("\x01")  # a control byte in the JSON
    path.write_bytes(bytes(header))
    with pytest.raises(CheckpointError, match=rf"^{path}"):
        ckpt.load_checkpoint(path)
    # header length pointing far past the end of the file
    path.write_bytes((2**40).to_bytes(8, "little") + checkpoint_bytes[8:])
    with pytest.raises(CheckpointError, match=rf"^{path} is truncated: its header needs"):
        ckpt.load_weights(path)


@pytest.mark.parametrize("resume", ["auto", "RUN_DIR"])
def test_truncated_latest_checkpoint_on_resume_falls_back_to_the_newest_that_loads(
        make_tiny_config, tmp_path, capsys, resume):
    """A latest checkpoint cut short outside srgrad (a copy cut short, a disk that lied about fsync)
    no longer stops `--resume auto` nor `--resume RUN_DIR` (which used to stop on it): it says which
    file it skipped and why, resumes from the newest checkpoint that loads and ends like an
    uninterrupted run. An explicit --resume FILE still refuses the damaged file."""
    cfg = make_tiny_config(iters=4, every=2)
    assert train_main([str(cfg), "--no-progress"]) == 0
    run = tmp_path / "runs" / "tiny"
    latest = run / "checkpoints" / "iter_00000004.safetensors"
    latest.write_bytes(latest.read_bytes()[:100])  # damaged outside srgrad (e.g. a bad copy)
    assert train_main([str(cfg), "--resume", str(latest), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"error: {latest} is truncated" in err and "Traceback" not in err, err
    args = [str(cfg), "--resume", "auto"] if resume == "auto" else ["--resume", str(run)]
    assert train_main(args + ["--set", "train.total_iters=6", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"warning: skipping checkpoint {latest}: {latest} is truncated" in err, err
    assert "(trying the one before)" in err
    assert f"resumed from {run / 'checkpoints' / 'iter_00000002.safetensors'} at iteration 2" in err
    assert train_main([str(cfg), "--set", "name=ref", "--set", "train.total_iters=6",
                       "--no-progress"]) == 0
    a = ckpt.load_checkpoint(run / "checkpoints" / "iter_00000006.safetensors")["model"]
    b = ckpt.load_checkpoint(tmp_path / "runs" / "ref" / "checkpoints" /
                             "iter_00000006.safetensors")["model"]
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


# -- pickle is never loaded -----------------------------------------------------------------------
class Payload:
    """Unpickling this creates the marker file (the classic pickle attack, harmless here)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def pickle_files(tmp_path, marker):
    """Hostile files of every pickle-bearing kind, each named like a weights file."""
    state = {"first_part.0.weight": Payload(marker)}
    files = {}
    for protocol in (0, 2, 4, 5):
        files[f"p{protocol}.safetensors"] = pickle.dumps(state, protocol=protocol)
    zbuf = io.BytesIO()  # the PyTorch .pt layout: a zip holding data.pkl
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps(state, protocol=2))
    files["torch.pt"] = zbuf.getvalue()
    nbuf = io.BytesIO()
    np.save(nbuf, np.array([Payload(marker)], dtype=object), allow_pickle=True)
    files["objects.npy"] = nbuf.getvalue()
    paths = []
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    return paths


def test_the_payload_works_when_unpickled(tmp_path):
    """Control: the payload really fires on unpickling (so the marker's absence below means it was
    never unpickled). Run in a child process, as any real unpickling would be."""
    marker = tmp_path / "control"
    data = pickle.dumps(Payload(marker), protocol=2)
    code = "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"
    subprocess.run([sys.executable, "-c", code], input=data, check=True)
    assert marker.exists()


@pytest.fixture
def no_unpickling(monkeypatch):
    """Belt and braces: any unpickling in this process fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("something tried to unpickle")
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)


def test_pickle_files_are_refused_and_never_unpickled(tmp_path, lr_image, capsys, make_tiny_config,
                                                      no_unpickling):
    """Weights loaders read PyTorch files through the safe reader (framework/weights/pth.py): a hostile
    pickle is refused naming what it wanted, by every loader and both commands; resuming takes
    srgrad checkpoints only; nothing is ever unpickled (the marker never appears)."""
    marker = tmp_path / "PWNED"
    cfg = make_tiny_config(iters=2, every=2)
    for path in pickle_files(tmp_path, marker):
        npy = path.suffix == ".npy" or path.name == "p0.safetensors"  # neither zip nor binary pickle
        refusal = rf"^{path} is not a safetensors file" if npy else rf"^refusing to load {path}: "
        for load in (ckpt.load_weights, load_model, lambda p: load_into(espcn(), p)):
            with pytest.raises(CheckpointError, match=refusal):
                load(path)
        with pytest.raises(CheckpointError, match=rf"^{path} is not a safetensors file"):
            ckpt.load_checkpoint(path)
        assert infer_main(["--weights", str(path), "--input", str(lr_image), "--output",
                           str(tmp_path / "out.png"), "--no-progress"]) == 1
        assert train_main([str(cfg), "--resume", str(path), "--no-progress"]) == 1
        err = capsys.readouterr().err
        assert f"error: {path} is not a safetensors file" in err, err
        assert (f"error: {path} is not a safetensors file" if npy else
                f"error: refusing to load {path}: it ") in err.splitlines()[0], err
        assert not marker.exists(), path


def test_real_torch_checkpoint_loads_safely(tmp_path, no_unpickling):
    """A torch.save'd state_dict (zip layout) loads into the model, values bit-equal, without
    unpickling (pickle is patched to fail here)."""
    torch = pytest.importorskip("torch")
    model = espcn()
    path = tmp_path / "model.pth"
    torch.save({"params": {k: torch.from_numpy(v.copy() + 1) for k, v in
                           model.state_dict().items()}}, path)
    target = espcn()
    load_into(target, path)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(target.state_dict()[k], v + 1)


def test_weights_metadata_cannot_make_srgrad_import_code(tmp_path, monkeypatch, lr_image):
    """A weights file's JSON may list `imports`, but loading weights imports nothing: only a
    config (--config) or --import on the command line names code to run."""
    (tmp_path / "evil_module.py").write_text(f"open({str(tmp_path / 'PWNED')!r}, 'w')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "w.safetensors"
    ckpt.save_weights(path, espcn().state_dict(), model={"type": "ESPCN", "scale": 2,
                                                         "num_feat": [4, 4]},
                      scale=2, imports=["evil_module"])
    model, info = load_model(path)
    assert infer_main(["--weights", str(path), "--input", str(lr_image), "--output",
                       str(tmp_path / "out.png"), "--no-progress"]) == 0
    assert "evil_module" not in sys.modules and not (tmp_path / "PWNED").exists()


def hostile_header(path, header: bytes, data=b""):
    path.write_bytes(len(header).to_bytes(8, "little") + header + data)
    return path


@pytest.mark.parametrize("kind", ["nested header", "nested metadata", "huge shape"])
def test_hostile_safetensors_headers_are_named(tmp_path, lr_image, capsys, kind):
    """JSON nested 100000 deep (Python's json recursion limit) in the header or in srgrad's
    metadata, or a tensor claiming 10^10 elements backed by 4 bytes: a CheckpointError naming the
    file, and a one-line error from srgrad-infer."""
    import json
    path = tmp_path / "hostile.safetensors"
    deep = "[" * 100_000 + "]" * 100_000
    if kind == "nested header":
        hostile_header(path, b'{"__metadata__": ' + deep.encode() + b"}")
    elif kind == "nested metadata":
        hostile_header(path, json.dumps({"__metadata__": {"format": "srgrad.weights/1",
                                                          "srgrad": deep}}).encode())
    else:
        hostile_header(path, json.dumps({"w": {"dtype": "F32", "shape": [100_000, 100_000],
                                               "data_offsets": [0, 4]}}).encode(), b"\0" * 4)
    for load in (ckpt.load_weights, ckpt.load_checkpoint, load_model):
        with pytest.raises(CheckpointError, match=rf"^{path}"):
            load(path)
    assert infer_main(["--weights", str(path), "--input", str(lr_image), "--output",
                       str(tmp_path / "out.png"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}") and "Traceback" not in err, err
