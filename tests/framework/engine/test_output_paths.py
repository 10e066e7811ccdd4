"""One rule for every output path of every command (framework/engine/commands/outputs.py): an output is
compared with the inputs as spelled (normalised) and where the write lands (resolved through the
part that exists), so `nosuch/../x.png` is x.png even before `nosuch` exists, and a link on the way
is followed as the kernel follows it. `srgrad-eval --csv nosuch/../x.png` turned the evaluated image
into CSV text (issue 37); each command is checked here with such spellings."""
import os

import numpy as np
import pytest
from PIL import Image

import models  # noqa: F401  registers the architectures
from framework.engine import build_model
from framework.engine.commands.outputs import OutputError, check_output
from framework.nn import init
from framework.weights import save_weights

from tests.conftest import smooth_image

SPEC = {"type": "FSRCNN", "d": 8, "s": 4, "m": 1}


@pytest.fixture
def here(tmp_path, monkeypatch):
    """tmp_path as the current folder, holding net.safetensors and hr/a.png (32x28)."""
    monkeypatch.chdir(tmp_path)
    init.manual_seed(0)
    save_weights(tmp_path / "net.safetensors", build_model(SPEC, scale=2).state_dict(),
                 model={**SPEC, "scale": 2}, scale=2)
    (tmp_path / "hr").mkdir()
    Image.fromarray(smooth_image(np.random.default_rng(1), 32, 28)).save(tmp_path / "hr" / "a.png")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "deep" / "er")
    return tmp_path


def _unchanged(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def test_landing_resolves_through_the_existing_part(here):
    from framework.engine.commands.outputs import exists, landing
    assert landing("nosuch/../hr/a.png") == here / "hr" / "a.png"
    assert landing("nosuch/x/../../hr/./a.png") == here / "hr" / "a.png"
    # a link, then "..": the kernel goes to the link target's parent, not back to here
    assert landing("link/../x.png") == here / "deep" / "x.png"
    assert landing("link/nosuch/../../x.png") == here / "deep" / "x.png"
    assert landing("nosuch/..") == here and landing("hr/") == here / "hr"
    assert exists("nosuch/../hr/a.png") and not exists("nosuch/../hr/b.png")


@pytest.mark.parametrize("spelling", ["nosuch/../hr/a.png", "hr/nosuch/../a.png",
                                      "link/nosuch/../../../hr/a.png"])
def test_check_output_refuses_an_input_however_spelled(here, spelling):
    for overwrite in (False, True):
        with pytest.raises(OutputError, match=f"refusing to write --csv {spelling}: it is the "
                                              f"input image hr/a.png"):
            check_output(spelling, "--csv", [("input image", "hr/a.png")], overwrite)
    assert not (here / "nosuch").exists() and not (here / "hr" / "nosuch").exists()


def test_eval_csv(here, capsys):
    from framework.engine.commands.cli import eval_main
    before = _unchanged(here)
    for csv_path, what in (("nosuch/../hr/a.png", "input image hr/a.png"),
                           ("nosuch2/../net.safetensors", "--weights file net.safetensors")):
        for extra in ([], ["--overwrite"]):
            assert eval_main(["--no-save", "--weights", "net.safetensors", "--input", "hr/a.png",
                              "--csv", csv_path, "--no-progress", *extra]) == 2
            err = capsys.readouterr().err
            assert f"refusing to write --csv {csv_path}: it is the {what}" in err, err
    (here / "old.csv").write_text("mine")
    assert eval_main(["--no-save", "--weights", "net.safetensors", "--input", "hr/a.png", "--csv",
                      "nosuch/../old.csv", "--no-progress"]) == 2
    assert "--csv nosuch/../old.csv exists; pass --overwrite" in capsys.readouterr().err
    assert _unchanged(here) == {**before, here / "old.csv": b"mine"}
    assert not (here / "nosuch").exists() and not (here / "nosuch2").exists()


def test_eval_results_folder(here, capsys):
    """An earlier evaluation's results folder spelled through a folder that does not exist is
    still found: the new one goes to <name>_2 (it replaced the earlier images)."""
    from framework.engine.commands.cli import eval_main
    args = ["--weights", "net.safetensors", "--input", "hr", "--csv", "s.csv", "--no-progress"]
    assert eval_main([*args, "--results", "res"]) == 0
    image = here / "res" / "net" / "visualization" / "hr" / "a_net.png"
    image.write_bytes(b"kept")
    assert eval_main([*args, "--results", "nosuch/../res", "--overwrite"]) == 0
    assert image.read_bytes() != b"kept"  # --overwrite: replaced, as asked
    image.write_bytes(b"kept")
    os.remove("s.csv")
    assert eval_main([*args, "--results", "nosuch2/../res"]) == 0
    capsys.readouterr()
    assert image.read_bytes() == b"kept"
    assert (here / "res" / "net_2" / "visualization" / "hr" / "a_net.png").is_file()


def test_export_output(here, capsys):
    pytest.importorskip("onnx")
    from framework.engine.commands.export import main
    before = _unchanged(here)
    assert main(["--weights", "net.safetensors", "--output", "nosuch/../net.safetensors",
                 "--overwrite"]) == 2
    assert "refusing to write --output nosuch/../net.safetensors: it is the --weights file" in \
        capsys.readouterr().err
    assert _unchanged(here) == before and not (here / "nosuch").exists()
    assert not (here / "deep" / "er" / "nosuch").exists()


def test_convert_outputs(here, capsys):
    from framework.engine.commands.convert import main
    (here / "o.yml").write_text("name: x\nmodel_type: SRModel\nscale: 2\n")
    before = _unchanged(here)
    assert main(["weights", "net.safetensors", "nosuch/../net.safetensors", "--overwrite"]) == 2
    assert "refusing to write OUT nosuch/../net.safetensors: it is the input" in \
        capsys.readouterr().err
    assert main(["options", "o.yml", "-o", "nosuch/../o.yml", "--overwrite"]) == 2
    assert "refusing to write --output nosuch/../o.yml: it is the input" in capsys.readouterr().err
    (here / "kept.safetensors").write_bytes(b"mine")
    assert main(["weights", "net.safetensors", "nosuch/../kept.safetensors"]) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert _unchanged(here) == {**before, here / "kept.safetensors": b"mine"}


def test_degrade_output_folder(here, capsys):
    from framework.engine.commands.degrade import main
    (here / "c.yaml").write_text(
        "name: look\nscale: 2\nmodel: {type: FSRCNN, d: 8, s: 4, m: 1}\n"
        "datasets:\n  train: {type: RealESRGANDataset, root: nowhere, gt_size: 16, "
        "crop_pad_size: 32}\n"
        "train: {total_iters: 10, batch_size: 1, optimizer: {type: Adam, lr: 1.0e-3}}\n")
    before = _unchanged(here)
    assert main(["--config", "c.yaml", "--input", "hr", "--output", "nosuch/../hr",
                 "--no-progress"]) == 2
    assert "--output nosuch/../hr is the --input folder" in capsys.readouterr().err
    assert _unchanged(here) == before and sorted(os.listdir("hr")) == ["a.png"]


def test_prepare_output_folder(here, capsys):
    from framework.data.prepare import main
    before = _unchanged(here)
    for out in ("nosuch/../hr", "link/nosuch/../../../hr/sub"):
        assert main(["--input", "hr", "--output", out, "--no-progress"]) == 2
        assert "would be the input folder" in capsys.readouterr().err
    assert _unchanged(here) == before and sorted(os.listdir("hr")) == ["a.png"]


def test_infer_and_zssr_outputs(here, capsys):
    from framework.engine.commands.cli import infer_main
    from framework.engine.zeroshot.zssr import main as zssr_main
    before = _unchanged(here)
    for spelling in ("nosuch/../hr/a.png", "link/nosuch/../../../hr/a.png"):
        assert infer_main(["--weights", "net.safetensors", "--input", "hr/a.png", "--output",
                           spelling, "--overwrite", "--no-progress"]) == 2
        assert "it is the input hr/a.png" in capsys.readouterr().err
        assert zssr_main(["--input", "hr/a.png", "--output", spelling, "--overwrite"]) == 2
        assert "it is the input hr/a.png" in capsys.readouterr().err
    assert _unchanged(here) == before and not (here / "nosuch").exists()
    assert not (here / "deep" / "er" / "nosuch").exists()
