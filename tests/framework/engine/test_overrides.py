"""What a --set override changes beyond its value (framework/engine/config/overrides.py): the gt_usm roles
of a nulled loss, and --fit-schedule's scaled schedules."""
from pathlib import Path

import pytest

from framework.engine.commands.cli import train_main
from framework.engine.config.schema import load_config
from framework.io.config import ConfigError

REPO = Path(__file__).resolve().parents[3]


def test_the_stage2_configs_own_override_works(monkeypatch, tmp_path):
    """configs/realesrgan_compact_x4.yaml says: without VGG weights, --set
    train.losses.perceptual=null. gt_usm still listed perceptual, and the override failed."""
    monkeypatch.delenv("SRGRAD_VGG19_WEIGHTS", raising=False)
    config = REPO / "configs" / "realesrgan_compact_x4.yaml"
    assert "--set train.losses.perceptual=null" in config.read_text()
    notes = []
    cfg = load_config(config, ["train.losses.perceptual=null"], notes=notes)
    assert cfg["train"]["losses"]["perceptual"] is None and cfg["train"]["gt_usm"] == ["pixel"]
    assert notes == ["train.gt_usm: 'perceptual' dropped, its loss train.losses.perceptual was set "
                     "to null"]
    # a role listed for a loss the file itself does not have, no override involved: an error
    lines = config.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("    perceptual:"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("      "))
    (tmp_path / "x.yaml").write_text("".join(lines[:start] + lines[end:]))
    with pytest.raises(ConfigError, match="train.gt_usm: 'perceptual' is listed but there is no "
                                          "train.losses.perceptual"):
        load_config(tmp_path / "x.yaml")


def _scheduled(tmp_path, scheduler, total=1000):
    path = tmp_path / "cfg.yaml"
    path.write_text(f"""\
name: t
scale: 2
model: {{type: ESPCN, num_feat: [4, 4]}}
datasets:
  train: {{type: HRImageDataset, root: {REPO / 'data' / 'train'}, gt_size: 8}}
train:
  total_iters: {total}
  batch_size: 2
  optimizer: {{type: Adam, lr: 2e-4}}
  scheduler: {scheduler}
""")
    return path


@pytest.mark.parametrize("scheduler, key, scaled", [
    ("{type: MultiStepLR, milestones: [500, 750], gamma: 0.5}", "milestones", [50, 75]),
    ("{type: CosineAnnealingRestartLR, periods: [250, 250, 500], restart_weights: [1, 1, 1]}",
     "periods", [25, 25, 50]),
    ("{type: CosineAnnealingLR, T_max: 1000, warmup_iters: 30}", "T_max", 100),
    ("{type: StepLR, step_size: 5, gamma: 0.5}", "step_size", 1),  # at least 1
])
def test_fit_schedule_scales_the_iteration_counts(tmp_path, scheduler, key, scaled):
    path = _scheduled(tmp_path, scheduler)
    plain = load_config(path, ["train.total_iters=100"])
    assert plain["train"]["scheduler"][key] != scaled  # without the flag: as written
    notes = []
    cfg = load_config(path, ["train.total_iters=100"], notes=notes, fit_schedule=True)
    assert cfg["train"]["scheduler"][key] == scaled
    assert any(n.startswith(f"train.scheduler.{key}: ") and "--fit-schedule: x0.1, total_iters "
               "1000 -> 100" in n for n in notes), notes
    if key == "T_max":
        assert cfg["train"]["scheduler"]["warmup_iters"] == 3
    assert load_config(path, [], fit_schedule=True) == load_config(path)  # nothing to fit


def test_srgrad_train_fit_schedule_ends_the_horizon_warning(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _scheduled(tmp_path, "{type: CosineAnnealingLR, T_max: 1000}")
    assert train_main([str(path), "--set", "train.total_iters=2", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "warning: train.scheduler: T_max 1000 differs from total_iters 2" in err
    assert "or pass --fit-schedule to scale it with --set train.total_iters" in err
    (tmp_path / "runs").rename(tmp_path / "first")
    assert train_main([str(path), "--set", "train.total_iters=2", "--fit-schedule",
                       "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "note: train.scheduler.T_max: 1000 -> 2 (--fit-schedule: x0.002" in err
    assert "warning" not in err
