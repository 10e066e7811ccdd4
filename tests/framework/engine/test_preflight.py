"""srgrad-train's checks before anything starts (framework/engine/config/preflight.py): files a config
names that only training reads. The config itself validates without them."""
from framework.engine.commands.cli import train_main
from framework.engine.config.schema import load_config


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


def test_a_mismatched_pretrained_d_is_said_before_anything_starts(tmp_path, tiny_data):
    """A GAN's train.pretrained_d was only loaded once the run had begun (after precompiling)."""
    import textwrap

    import pytest

    from framework import random
    from framework.engine.config.preflight import check_pretrained
    from framework.io.config import ConfigError
    from framework.registry import MODELS
    from framework.weights import write_pth

    from .test_gan import D_SPEC, G_SPEC
    random.manual_seed(0)
    wider = MODELS.build({**D_SPEC, "num_feat": 8})
    pth = tmp_path / "net_d.pth"
    write_pth(pth, {"params": wider.state_dict()})
    path = tmp_path / "gan.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: gan
        scale: 2
        model: {G_SPEC}
        model_d: {D_SPEC}
        datasets:
          train: {{type: HRImageDataset, root: {tiny_data / 'train'}, gt_size: 16}}
        train:
          total_iters: 1
          batch_size: 2
          optimizer: {{type: Adam, lr: 1.0e-3}}
          optimizer_d: {{type: Adam, lr: 1.0e-3}}
          losses: {{pixel: {{type: L1Loss}}, gan: {{type: GANLoss, gan_type: vanilla}}}}
          pretrained_d: {{path: {pth}}}
        """))
    cfg = load_config(path)
    state = random.default_generator().bit_generator.state
    with pytest.raises(ConfigError, match=f"^{path}: train.pretrained_d: {pth} does not fit"):
        check_pretrained(cfg, path)
    assert random.default_generator().bit_generator.state == state  # the run's weights are drawn as without the check
    check_pretrained(load_config(path, ["train.pretrained_d.strict=false"]), path)  # file reads
    wider_cfg = load_config(path, ["model_d.num_feat=8"])
    check_pretrained(wider_cfg, path)  # it fits that discriminator
