"""GAN training (framework/engine/run/recipes/gan.py): two iterations equal Real-ESRGAN's optimize_parameters run
on torch twins with the same weights and data (float64, the generator held back by
net_d_init_iters in the first), every term logged, a run killed with SIGKILL resumes bit for bit,
and the config checks that need the GAN losses registered."""
import csv
import re
import signal
import textwrap

import numpy as np
import pytest

from framework.engine import Trainer
from framework.engine.run.recipes import GANRecipe
from framework.engine.config.schema import load_config
from framework.weights import checkpoint as ckpt
from framework.io.config import ConfigError

G_SPEC = {"type": "SRVGGNetCompact", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 4,
          "num_conv": 2, "act_type": "prelu"}
D_SPEC = {"type": "UNetDiscriminatorSN", "num_in_ch": 3, "num_feat": 4, "skip_connection": True}
LAYERS = {"conv1_2": 0.5, "conv2_2": 1.0}


@pytest.fixture(scope="module")
def vgg(tmp_path_factory):
    """A shallow VGG19 `features` (through relu2_2) with random weights, as torchvision's file."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    layers, c = [], 3
    for v in [64, 64, "M", 128, 128]:
        if v == "M":
            layers.append(torch.nn.MaxPool2d(2, 2))
            continue
        conv = torch.nn.Conv2d(c, v, 3, padding=1)
        torch.nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
        layers += [conv, torch.nn.ReLU()]
        c = v
    features = torch.nn.Sequential(*layers)
    path = tmp_path_factory.mktemp("vgg") / "vgg19.pth"
    torch.save({f"features.{k}": v for k, v in features.state_dict().items()}, path)
    return path, features


def gan_config(tmp_path, root, vgg_path, iters=2, extra=""):
    path = tmp_path / "gan.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: gan
        scale: 2
        seed: 4
        dtype: float64
        run_root: {tmp_path / 'runs'}
        model: {G_SPEC}
        model_d: {D_SPEC}
        datasets:
          train: {{type: HRImageDataset, root: {root}, gt_size: 16}}
        train:
          total_iters: {iters}
          batch_size: 2
          optimizer: {{type: Adam, lr: 1.0e-3, betas: [0.9, 0.99]}}
          optimizer_d: {{type: Adam, lr: 2.0e-3, betas: [0.9, 0.99]}}
          losses:
            pixel: {{type: L1Loss, loss_weight: 1.0}}
            perceptual: {{type: PerceptualLoss, layer_weights: {LAYERS}, perceptual_weight: 1.0,
                          style_weight: 0.5, weights: {vgg_path}}}
            gan: {{type: GANLoss, gan_type: vanilla, loss_weight: 0.1}}
          net_d_init_iters: 1
          ema_decay: 0.9
          log_every: 1
          loader: {{workers: 0}}
        checkpoint: {{every: 1, keep: 5}}
        """) + extra)
    return path


def _torch_twin_run(t, vgg_features, batches):
    """Real-ESRGAN's RealESRGANModel.optimize_parameters (+ model_ema) on torch twins."""
    import torch
    from tests.twins import build_twin
    torch.set_num_threads(1)
    g = build_twin({**G_SPEC, "scale": 2}).double()
    d = build_twin(D_SPEC).double()
    g.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in t.model.state_dict().items()})
    d.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in t.recipe.net_d.state_dict().items()})
    ema = {k: v.detach().clone() for k, v in g.named_parameters()}
    opt_g = torch.optim.Adam(g.parameters(), lr=1e-3, betas=(0.9, 0.99))
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-3, betas=(0.9, 0.99))
    feats = vgg_features.double()
    # BasicSR's buffers are float32 (torch.Tensor([...])), cast with the network
    mean = torch.Tensor([0.485, 0.456, 0.406]).double().view(1, 3, 1, 1)
    std = torch.Tensor([0.229, 0.224, 0.225]).double().view(1, 3, 1, 1)
    names = {2: "conv1_2", 7: "conv2_2"}  # conv outputs, before their ReLU (BasicSR's names)

    def features(x):
        out, x = {}, (x - mean) / std
        for i, layer in enumerate(feats):
            x = layer(x)
            if i in names:
                out[names[i]] = x.clone()
        return out

    def gram(f):
        n, c, h, w = f.shape
        f = f.view(n, c, h * w)
        return f.bmm(f.transpose(1, 2)) / (c * h * w)

    def perceptual(x, gt):
        xf, gf = features(x), features(gt.detach())
        l1 = torch.nn.functional.l1_loss
        return (sum(l1(xf[k], gf[k]) * w for k, w in LAYERS.items()),
                0.5 * sum(l1(gram(xf[k]), gram(gf[k])) * w for k, w in LAYERS.items()))

    def gan(pred, real, is_disc):
        target = torch.ones_like(pred) if real else torch.zeros_like(pred)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(pred, target)
        return loss if is_disc else loss * 0.1

    logs = []
    for current_iter, batch in enumerate(batches, start=1):
        lq, gt = (torch.from_numpy(np.asarray(batch[k], np.float64)) for k in ("lq", "gt"))
        log = {}
        for p in d.parameters():
            p.requires_grad = False
        opt_g.zero_grad()
        output = g(lq)
        if current_iter % 1 == 0 and current_iter > 1:  # net_d_iters 1, net_d_init_iters 1
            l_pix = torch.nn.functional.l1_loss(output, gt)
            l_percep, l_style = perceptual(output, gt)
            l_gan = gan(d(output), True, False)
            total = l_pix + l_percep + l_style + l_gan
            total.backward()
            opt_g.step()
            log.update(loss=total.item(), l_g_pix=l_pix.item(), l_g_percep=l_percep.item(),
                       l_g_style=l_style.item(), l_g_gan=l_gan.item())
        for p in d.parameters():
            p.requires_grad = True
        opt_d.zero_grad()
        real_pred = d(gt)
        l_d_real = gan(real_pred, True, True)
        l_d_real.backward()
        fake_pred = d(output.detach().clone())
        l_d_fake = gan(fake_pred, False, True)
        l_d_fake.backward()
        opt_d.step()
        with torch.no_grad():
            for k, p in g.named_parameters():
                ema[k].mul_(0.9).add_(p, alpha=1 - 0.9)
        log.update(l_d_real=l_d_real.item(), l_d_fake=l_d_fake.item(),
                   out_d_real=real_pred.mean().item(), out_d_fake=fake_pred.mean().item())
        logs.append(log)
    return g, d, ema, logs


def _close(ours, theirs, what, rtol=1e-9):
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    err = np.abs(np.asarray(ours) - theirs).max()
    assert err <= rtol * max(np.abs(theirs).max(), 1e-12), f"{what}: {err:.3g}"


def test_two_gan_iterations_equal_realesrgans_on_torch_twins(tmp_path, tiny_train, vgg):
    pytest.importorskip("torch")
    pytest.importorskip("tests.twins")
    t = Trainer(load_config(gan_config(tmp_path, tiny_train, vgg[0])), progress=False)
    assert isinstance(t.recipe, GANRecipe)
    batches = [t.loader.get_batch(i) for i in range(2)]
    g, d, ema, logs = _torch_twin_run(t, vgg[1], batches)
    ours = []
    for batch in batches:
        ours.append(t._train_step(batch))
        t.iteration += 1
    assert "loss" not in ours[0] and set(ours[0]) == {"l_d_real", "l_d_fake", "out_d_real",
                                                      "out_d_fake"}  # D only, as net_d_init_iters
    for i, (mine, theirs) in enumerate(zip(ours, logs)):
        assert set(mine) == set(theirs)
        for k in theirs:
            _close(mine[k], theirs[k], f"iteration {i + 1} {k}")
    for k, v in g.state_dict().items():
        _close(t.model.state_dict()[k], v, f"G {k}")
    for k, v in d.state_dict().items():  # weight_orig, and the spectral norms' u and v buffers
        _close(t.recipe.net_d.state_dict()[k], v, f"D {k}")
    for k, v in ema.items():
        _close(t.recipe.ema.state_dict()[k], v, f"EMA {k}")


def test_gan_run_logs_every_term_and_saves_both_networks(tmp_path, tiny_train, vgg):
    path = gan_config(tmp_path, tiny_train, vgg[0], iters=3)
    Trainer(load_config(path), progress=False).fit()
    run = tmp_path / "runs" / "gan"
    with open(run / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["iteration"] for r in rows] == ["1", "2", "3"]
    assert rows[0]["l_g_gan"] == "" and float(rows[0]["l_d_real"]) > 0  # D only at iteration 1
    for key in ("loss", "l_g_pix", "l_g_percep", "l_g_style", "l_g_gan", "l_d_real", "l_d_fake",
                "out_d_real", "out_d_fake"):
        assert np.isfinite(float(rows[-1][key])), key
    state = ckpt.load_checkpoint(run / "checkpoints" / "iter_00000003.safetensors")
    assert state["net_d"] and state["model_ema"] and state["optimizer_d"]["state"]
    assert any(k.endswith("weight_u") for k in state["net_d"])
    weights, info = ckpt.load_weights(run / "net_latest.safetensors")
    assert info["key"] == "params_ema" and not any(k.startswith("conv1.weight_orig") for k in weights)


def test_killed_gan_run_resumes_bit_for_bit(tmp_path, tiny_train, vgg):
    from tests.reliability.conftest import run_train, start_train
    path = gan_config(tmp_path, tiny_train, vgg[0], iters=4)
    ref = tmp_path / "ref.yaml"
    ref.write_text(path.read_text().replace("name: gan", "name: ref"))
    assert run_train([ref], timeout=300).returncode == 0
    run = tmp_path / "runs" / "gan"
    proc = start_train([path])
    import time
    deadline = time.monotonic() + 240
    while not (run / "checkpoints" / "iter_00000002.safetensors").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    result = run_train([path, "--resume", "auto"], timeout=300)
    assert result.returncode == 0, result.stderr
    a = ckpt.load_checkpoint(run / "checkpoints" / "iter_00000004.safetensors")
    b = ckpt.load_checkpoint(tmp_path / "runs" / "ref" / "checkpoints" / "iter_00000004.safetensors")
    for part in ("model", "model_ema", "net_d"):
        assert a[part].keys() == b[part].keys()
        for k in a[part]:
            np.testing.assert_array_equal(a[part][k], b[part][k], err_msg=f"{part}.{k}")
    for part in ("optimizer", "optimizer_d"):
        for (ka, va), (kb, vb) in zip(sorted(a[part]["state"].items()),
                                      sorted(b[part]["state"].items())):
            for name in va:
                np.testing.assert_array_equal(va[name], vb[name])


@pytest.mark.parametrize("recipe", ["sr", "gan"])
def test_the_sharpened_target_is_taken_where_each_stage_takes_it(tmp_path, tiny_data, recipe):
    """Real-ESRGAN's GAN model sharpens the target after the crop (RealESRGANModel.feed_data:
    gt_usm = usm_sharpener(gt) after paired_random_crop); stage 1 (RealESRNetModel) crops the
    sharpened HR image, as the dataset's gt_usm does. They differ within the USM's reach (25 px)
    of the crop's border: here, everywhere in a 32 px crop. srgrad used the dataset's for both."""
    from framework.data.degradations import usm_sharp
    gan = recipe == "gan"
    path = tmp_path / "usm.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: usm
        scale: 2
        dtype: float64
        run_root: {tmp_path / 'runs'}
        model: {G_SPEC}
        datasets:
          train: {{type: RealESRGANDataset, root: {tiny_data / 'train'}, gt_size: 32,
                   crop_pad_size: 48, gt_usm: true}}
        train:
          total_iters: 1
          batch_size: 2
          optimizer: {{type: Adam, lr: 1.0e-3}}
          losses: {{pixel: {{type: L1Loss}}}}
          gt_usm: [pixel]
        """) + (f"model_d: {D_SPEC}\n" if gan else ""))
    overrides = ["train.losses.gan={type: GANLoss, gan_type: vanilla, loss_weight: 0.1}",
                 "train.optimizer_d={type: Adam, lr: 1.0e-3}"] if gan else []
    t = Trainer(load_config(path, overrides), progress=False)
    assert type(t.recipe).__name__ == ("GANRecipe" if gan else "SRRecipe")
    batch = t.loader.get_batch(0)
    targets, pixel = [], t.recipe.criteria["pixel"]
    t.recipe.criteria["pixel"] = lambda sr, target: targets.append(target.data.copy()) or \
        pixel(sr, target)
    t._train_step(batch)
    crop_then_sharpen = usm_sharp(np.asarray(batch["gt"], np.float64))
    sharpen_then_crop = np.asarray(batch["gt_usm"], np.float64)
    assert np.abs(crop_then_sharpen - sharpen_then_crop).max() > 0.01  # the two are not alike
    np.testing.assert_array_equal(targets[0], crop_then_sharpen if gan else sharpen_then_crop)


@pytest.mark.parametrize("change,match", [
    ("train.losses.gan={type: L1Loss}", "train.losses.gan: L1Loss is not a GAN loss (type GANLoss)"),
    ("train.losses.pixel={type: GANLoss, gan_type: vanilla}",
     "train.losses.pixel: GANLoss is a GAN loss: it belongs under train.losses.gan"),
    ("model_d=null", "train.losses.gan: a GAN loss needs a discriminator: add model_d"),
    ("train.optimizer_d=null", "train.optimizer_d: missing: model_d is trained by its own optimizer"),
    ("train.losses.gan=null", "model_d: a discriminator needs train.losses.gan"),
])
def test_gan_config_checks(tmp_path, tiny_train, vgg, change, match):
    with pytest.raises(ConfigError, match=re.escape(match)):
        load_config(gan_config(tmp_path, tiny_train, vgg[0]), [change])
