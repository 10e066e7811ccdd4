"""srgrad-train's checks before anything starts (framework/engine/preflight.py): files a config
names that only training reads. The config itself validates without them."""
from framework.engine.cli import train_main
from framework.engine.schema import load_config


def test_a_missing_vgg_file_stops_training_at_once_but_not_validation(make_tiny_config, tmp_path,
                                                                      capsys, monkeypatch):
    monkeypatch.delenv("SRGRAD_VGG19_WEIGHTS", raising=False)
    config = make_tiny_config()
    text = config.read_text().replace(
        "  log_every: 1\n",
        "  log_every: 1\n  losses:\n    pixel: {type: L1Loss}\n"
        "    perceptual: {type: PerceptualLoss, layer_weights: {conv1_2: 1.0}}\n")
    config.write_text(text)
    cfg = load_config(config)  # what srgrad-convert / -eval / -degrade / -infer --config do
    assert cfg["train"]["losses"]["perceptual"]["type"] == "PerceptualLoss"
    assert train_main([str(config), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"error: {config}: train.losses.perceptual: PerceptualLoss: no VGG19 weights given. " \
           f"Download torchvision's pretrained vgg19" in err
    assert "SRGRAD_VGG19_WEIGHTS=/path/to/vgg19-dcbb9e9d.pth" in err
    assert not (tmp_path / "runs").exists()  # nothing started, nothing written
    monkeypatch.setenv("SRGRAD_VGG19_WEIGHTS", str(tmp_path / "gone.pth"))
    assert train_main([str(config), "--no-progress"]) == 2
    assert "SRGRAD_VGG19_WEIGHTS='" in capsys.readouterr().err
