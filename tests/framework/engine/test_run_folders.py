"""Where a run goes (issue 37): `name` is one folder name under run_root (`--set name=..` put the
run in run_root's parent and replaced the user's config.yaml and metrics.csv there), and a run
adopts only a folder srgrad made: a new or empty one (marked with .srgrad-run), a marked one, or a
run folder of an srgrad from before the marker (config.yaml beside checkpoints in srgrad's format).
Any other folder is the user's: refused in one line, every file left as it was."""
import os

import pytest

from framework.engine import Trainer
from framework.engine.commands.cli import train_main
from framework.engine.run.runfolder import TrainingError
from framework.engine.config.schema import load_config

MARKER = ".srgrad-run"  # framework.engine.run.runfolder.MARKER: the name is part of the run format


def _files(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["..", "../x", "a/b", "ABS", "", ".", "a\\b"])
def test_a_run_name_is_one_folder_name(make_config, tmp_path, capsys, name):
    if name == "ABS":  # an absolute path (in tmp_path: where the old code put the run)
        name = str(tmp_path / "abs")
    cfg = make_config(iters=1, every=1)
    (tmp_path / "runs").mkdir()
    (tmp_path / "config.yaml").write_text("the user's\n")  # what `name=..` replaced
    before = _files(tmp_path)
    assert train_main([str(cfg), "--set", f"name={name}", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: invalid config:\n  {cfg}: name: ") and err.count("\n") == 2, err
    assert "is a path, not a name" in err or "is not a name" in err or "expected a str" in err, err
    assert _files(tmp_path) == before and sorted((tmp_path / "runs").iterdir()) == []


def test_a_folder_of_the_users_is_refused(make_config, tmp_path, capsys):
    cfg = make_config(iters=1, every=1)
    mine = tmp_path / "runs" / "foo"
    mine.mkdir(parents=True)
    (mine / "config.yaml").write_text("the user's own config\n")
    (mine / "notes.txt").write_text("mine\n")
    before = _files(tmp_path)
    for resume in ([], ["--resume", "auto"], ["--resume", str(mine)]):
        assert train_main([str(cfg), "--set", "name=foo", "--no-progress", *resume]) == 1
        err = capsys.readouterr().err
        assert err == (f"error: run folder {mine} holds files srgrad did not make (config.yaml, "
                       f"notes.txt): refusing to train there (config.yaml, metrics.csv and "
                       f"checkpoints would replace files of those names); choose another name "
                       f"with --set name=NEW_NAME, or empty the folder\n"), err
        assert _files(tmp_path) == before
    with pytest.raises(TrainingError, match="holds files srgrad did not make"):  # the API too
        Trainer(load_config(cfg, ["name=foo"]), progress=False).fit()
    assert _files(tmp_path) == before


def test_new_empty_marked_and_old_run_folders_are_adopted(make_config, tmp_path):
    cfg = make_config(iters=2, every=1)
    run = tmp_path / "runs" / "tiny"
    run.mkdir(parents=True)  # empty: adopted, and marked
    Trainer(load_config(cfg, ["datasets.val=null"]), progress=False).fit()
    assert (run / MARKER).is_file()
    # a run folder of an srgrad before the marker: config.yaml and checkpoints; resumed and marked
    (run / MARKER).unlink()
    longer = load_config(cfg, ["datasets.val=null", "train.total_iters=3"])
    assert Trainer(longer, resume="auto", progress=False).fit()["iteration"] == 3
    assert (run / MARKER).is_file()
    # without srgrad's checkpoints, config.yaml and metrics.csv are not proof: refused
    other = tmp_path / "runs" / "other"
    other.mkdir()
    for name in ("config.yaml", "metrics.csv"):
        (other / name).write_bytes((run / name).read_bytes())
    (other / "checkpoints").mkdir()
    (other / "checkpoints" / "iter_00000001.safetensors").write_bytes(b"not a checkpoint")
    if hasattr(os, "mkfifo"):  # a FIFO is not opened (the check would block on it)
        os.mkfifo(other / "checkpoints" / "iter_00000002.safetensors")
    before = _files(other)  # (rglob's is_file is False for the FIFO)
    for resume in (None, "auto"):
        with pytest.raises(TrainingError, match="holds files srgrad did not make"):
            Trainer(load_config(cfg, ["name=other", "datasets.val=null"]), resume=resume,
                    progress=False).fit()
    assert _files(other) == before


def test_model_names_and_suffixes_of_the_commands_are_names(tmp_path, capsys):
    """-n NAME names eval's results folder and CSV; --suffix goes into each output file's name."""
    import numpy as np
    from PIL import Image
    import models  # noqa: F401  registers the architectures
    from framework.engine import build_model
    from framework.engine.commands.cli import eval_main, infer_main
    from framework.engine.zeroshot.zssr import main as zssr_main
    from framework.weights import save_weights
    spec = {"type": "FSRCNN", "d": 8, "s": 4, "m": 1}
    save_weights(tmp_path / "w.safetensors", build_model(spec, scale=2).state_dict(),
                 model={**spec, "scale": 2}, scale=2)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.png")
    (tmp_path / "out").mkdir()
    for main in (infer_main, eval_main):
        with pytest.raises(SystemExit) as exc:
            main(["-n", "../../x", "--input", str(tmp_path / "a.png")])
        assert exc.value.code == 2
        assert "-n/--model-name/--model_name: '../../x' is a path, not a name" in \
            capsys.readouterr().err
    for main, extra in ((infer_main, ["--weights", str(tmp_path / "w.safetensors")]),
                        (zssr_main, [])):
        for suffix, why in (("/../../x", "would make a path"), ("{nope}", "KeyError")):
            assert main(["--input", str(tmp_path / "a.png"), "--output", str(tmp_path / "out"),
                         "--suffix", suffix, *extra]) == 2
            err = capsys.readouterr().err
            assert err.startswith("error: --suffix: ") and why in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.png", "out", "w.safetensors"]
