"""srgrad-convert: weights in from PyTorch (BasicSR's layout), out to srgrad, back to PyTorch and to
plain safetensors, each loading strictly into the same model (the torch twin too); BasicSR option
files to configs."""
import textwrap

import numpy as np
import pytest

import models  # noqa: F401  registers the architectures
from framework.engine import build_model, load_model
from framework.engine.commands.convert import main
from framework.weights import load_weights
from framework.nn import init

SPEC = {"type": "RRDBNet", "num_feat": 8, "num_block": 1, "num_grow_ch": 4, "scale": 4}


@pytest.fixture
def basicsr_pth(tmp_path):
    """A BasicSR-style checkpoint written by torch.save: {'params': sd, 'params_ema': sd_ema}."""
    torch = pytest.importorskip("torch")
    init.manual_seed(0)
    sd = build_model(SPEC).state_dict()
    ema = {k: v + 0.5 for k, v in sd.items()}
    path = tmp_path / "net_g_latest.pth"
    torch.save({"params": {k: torch.from_numpy(v.copy()) for k, v in sd.items()},
                "params_ema": {k: torch.from_numpy(v.copy()) for k, v in ema.items()}}, path)
    return path, sd, ema


def test_pth_to_srgrad_and_back_to_torch(basicsr_pth, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    src, sd, ema = basicsr_pth
    out = tmp_path / "net.safetensors"
    assert main(["weights", str(src), str(out)]) == 0
    text = capsys.readouterr()
    assert "detected RRDBNet(" in text.err and "num_block=1" in text.err
    assert f"{src} -> {out}: RRDBNet x4, {len(sd)} tensors + params_ema" in text.out
    # the srgrad file carries the spec and both weight sets; EMA is the default, as Real-ESRGAN
    model, info = load_model(out)
    assert info["model"]["type"] == "RRDBNet" and info["key"] == "params_ema"
    for k, v in ema.items():
        np.testing.assert_array_equal(model.state_dict()[k], v)
    np.testing.assert_array_equal(load_weights(out, "params")[0]["conv_first.weight"],
                                  sd["conv_first.weight"])
    # back to PyTorch: BasicSR's layout, torch.load(weights_only=True), strict into the twin
    back = tmp_path / "net_g.pth"
    assert main(["weights", str(out), str(back)]) == 0
    obj = torch.load(back, weights_only=True)
    assert sorted(obj) == ["params", "params_ema"]
    twin = twins.build_twin(SPEC)
    twin.load_state_dict(obj["params_ema"], strict=True)
    for k, v in ema.items():
        np.testing.assert_array_equal(twin.state_dict()[k].numpy(), v)
    # --plain: bare keys for safetensors.torch.load_file + load_state_dict
    plain = tmp_path / "plain.safetensors"
    assert main(["weights", str(src), str(plain), "--plain", "--key", "params"]) == 0
    from safetensors.torch import load_file
    twin.load_state_dict(load_file(plain), strict=True)
    np.testing.assert_array_equal(twin.state_dict()["conv_first.weight"].numpy(),
                                  sd["conv_first.weight"])


def test_never_over_the_input_or_an_existing_file(basicsr_pth, tmp_path, capsys):
    src, _, _ = basicsr_pth
    before = src.read_bytes()
    assert main(["weights", str(src), str(src), "--overwrite"]) == 2
    assert "it is the input" in capsys.readouterr().err
    out = tmp_path / "x.safetensors"
    out.write_bytes(b"precious")
    assert main(["weights", str(src), str(out)]) == 2
    assert f"{out} exists; pass --overwrite" in capsys.readouterr().err
    assert out.read_bytes() == b"precious" and src.read_bytes() == before
    assert main(["weights", str(src), str(tmp_path / "x.bin")]) == 2
    assert "must end in .safetensors, .pth or .pt" in capsys.readouterr().err


EDSR_OPTIONS = textwrap.dedent("""\
    name: EDSR_Mx2_f64b16_DIV2K_300k_B16G1_wandb
    model_type: SRModel
    scale: 2
    num_gpu: 1
    manual_seed: 10
    datasets:
      train:
        name: DIV2K
        type: PairedImageDataset
        dataroot_gt: datasets/DF2K/DIV2K_train_HR_sub
        dataroot_lq: datasets/DF2K/DIV2K_train_LR_bicubic_X2_sub
        filename_tmpl: '{}'
        io_backend: {type: disk}
        gt_size: 96
        use_hflip: true
        use_rot: true
        num_worker_per_gpu: 6
        batch_size_per_gpu: 16
        dataset_enlarge_ratio: 100
        prefetch_mode: ~
    network_g:
      type: EDSR
      num_in_ch: 3
      num_out_ch: 3
      num_feat: 64
      num_block: 16
      upscale: 2
      res_scale: 1
      img_range: 255.
      rgb_mean: [0.4488, 0.4371, 0.4040]
    path: {pretrain_network_g: ~, strict_load_g: true, resume_state: ~}
    train:
      ema_decay: 0.999
      optim_g: {type: Adam, lr: !!float 1e-4, weight_decay: 0, betas: [0.9, 0.99]}
      scheduler: {type: MultiStepLR, milestones: [200000], gamma: 0.5}
      total_iter: 300000
      warmup_iter: -1
      pixel_opt: {type: L1Loss, loss_weight: 1.0, reduction: mean}
    val:
      val_freq: !!float 5e3
      save_img: false
      metrics:
        psnr: {type: calculate_psnr, crop_border: 2, test_y_channel: false}
    logger: {print_freq: 100, save_checkpoint_freq: !!float 5e3, use_tb_logger: true}
    dist_params: {backend: nccl, port: 29500}
    """)


def test_options_translate_validate_and_name_what_cannot_be_translated(tmp_path, capsys):
    src = tmp_path / "train_EDSR_Mx2.yml"
    src.write_text(EDSR_OPTIONS)
    out = tmp_path / "edsr.yaml"
    assert main(["options", str(src), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: num_gpu" in err and "note: dist_params" in err, err
    from framework.engine.config.schema import load_config
    cfg = load_config(out)
    assert cfg["model"]["type"] == "EDSR" and cfg["scale"] == 2 and cfg["seed"] == 10
    assert cfg["train"]["optimizer"]["lr"] == 1e-4 and cfg["train"]["total_iters"] == 300000
    assert cfg["val"]["y_channel"] is False and cfg["val"]["crop_border"] == 2
    gan = tmp_path / "gan.yml"  # a GAN model without its discriminator, optimizer and loss
    gan.write_text(EDSR_OPTIONS.replace("model_type: SRModel", "model_type: ESRGANModel"))
    assert main(["options", str(gan), "-o", str(tmp_path / "gan.yaml")]) == 2
    err = capsys.readouterr().err
    assert "network_d: missing" in err and "train.optim_d: missing" in err, err
    assert not (tmp_path / "gan.yaml").exists()
