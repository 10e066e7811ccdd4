"""One GAN training step, srgrad vs a PyTorch twin (issue 18): Real-ESRGAN's optimize_parameters at
the sizes of configs/realesrgan_compact_x4.yaml (SRVGGNetCompact num_feat 32, num_conv 8, prelu, x4;
UNetDiscriminatorSN num_feat 32 with skip connections; batch 8 of 16x16 LR -> 64x64 GT), float32.

One step: the generator update (L1 and perceptual against the USM-sharpened GT, vanilla GAN loss
weight 0.1 through the frozen discriminator, Adam lr 1e-4 betas (0.9, 0.99)), then the
discriminator update on the real GT and the detached fake, then the generator's EMA (0.999).
srgrad's side is the GAN trainer itself: a Trainer (its gan recipe) built from the shipped config
(sizes and paths overridden) and its own `_train_step` on a prepared batch, which includes the USM
of the target (RealESRGANModel sharpens it in feed_data, outside optimize_parameters). The torch side is Real-ESRGAN's
RealESRGANModel.optimize_parameters + model_ema written out on the twins of tests/twins, same
weights. The perceptual loss's VGG19 has random weights (timing does not depend on them): both
sides read the same torchvision-keyed file, written to a temporary folder.

Rows: the whole step; the generator part alone; the discriminator part alone (on a fixed fake).
The parts are built from the trainer's public pieces (its networks, loss modules and optimizers)
and do not include what only the whole step does (the EMA, the loss values read for the log, the
trainer's finite checks), so (2) + (3) is a little under (1).

Run through the harness: `python scripts/benchmark.py --only gan --threads 2`; section options
after the harness's own:
    --batch 8                    LR patches per step
    --gt 64                      GT patch side (LR side = gt / 4)
    --no-perceptual              drop the VGG term (L1 + GAN only)
"""
from __future__ import annotations

import argparse
import dataclasses
import pathlib
import tempfile

import numpy as np

from benchmark import Row, time_pair

REPO = pathlib.Path(__file__).resolve().parent.parent
CONFIG = REPO / "configs" / "realesrgan_compact_x4.yaml"

TITLE = "GAN step (Real-ESRGAN's optimize_parameters, configs/realesrgan_compact_x4.yaml), float32"


def _options(rest):
    ap = argparse.ArgumentParser(prog="bench_gan")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--gt", type=int, default=64, help="GT patch side, a multiple of 4 (LR = gt / 4)")
    ap.add_argument("--perceptual", action=argparse.BooleanOptionalAction, default=True)
    opts = ap.parse_known_args(rest)[0]
    if opts.batch < 1 or opts.gt < 4 or opts.gt % 4:
        ap.error(f"--batch must be >= 1 and --gt a positive multiple of 4, got {opts.batch}, {opts.gt}")
    return opts


# -- the shared inputs: a random VGG19 file, a batch ----------------------------------------------

def write_vgg19(path, layers, seed: int = 0):
    """torchvision's vgg19 `features` through the deepest of `layers` (BasicSR names), random
    Kaiming-normal weights, saved as torchvision's file (`features.<i>.weight` / `.bias`) at
    `path`. Returns the torch Sequential."""
    import torch
    from framework.nn.perceptual import vgg_layer_names
    names = vgg_layer_names("vgg19")
    last = max(names.index(k) for k in layers)
    cfg = iter([64, 64, 128, 128, 256, 256, 256, 256] + [512] * 8)
    gen = torch.Generator().manual_seed(seed)
    modules, channels = [], 3
    for name in names[:last + 1]:
        if name.startswith("conv"):
            out = next(cfg)
            conv = torch.nn.Conv2d(channels, out, 3, padding=1)
            with torch.no_grad():
                conv.weight.normal_(0.0, (2.0 / (channels * 9)) ** 0.5, generator=gen)
                conv.bias.uniform_(-0.01, 0.01, generator=gen)
            modules.append(conv)
            channels = out
        elif name.startswith("relu"):
            modules.append(torch.nn.ReLU())
        else:
            modules.append(torch.nn.MaxPool2d(2, 2))
    features = torch.nn.Sequential(*modules).requires_grad_(False).eval()
    torch.save({f"features.{k}": v for k, v in features.state_dict().items()}, path)
    return features


def make_batch(batch: int, gt: int, dtype, seed: int = 0) -> dict:
    """{"lq": (B, 3, gt/4, gt/4), "gt", "gt_usm": (B, 3, gt, gt)}: lq and gt uniform in [0, 1]
    (values do not change the work), gt_usm the USM of gt (RealESRGANModel's target, which the gan
    recipe computes in its step; the torch side reads it from here)."""
    from framework.data.degradations import usm_sharp
    rng = np.random.default_rng(seed)
    lq = gt // 4
    hr = rng.uniform(0, 1, (batch, 3, gt, gt)).astype(dtype)
    return {"lq": rng.uniform(0, 1, (batch, 3, lq, lq)).astype(dtype), "gt": hr,
            "gt_usm": usm_sharp(hr)}


# -- srgrad: the GAN trainer --------------------------------------------------------------------

def make_trainer(workdir, vgg_path, batch: int, gt: int, perceptual: bool, dtype: str):
    """A Trainer (gan recipe) of configs/realesrgan_compact_x4.yaml with batch `batch`, GT patches `gt`,
    float `dtype`, no pretrained weights, no validation, the VGG19 file `vgg_path` (or no
    perceptual term), a one-image training folder in `workdir` (built, never read)."""
    from PIL import Image
    from framework.engine import Trainer
    from framework.engine.config.schema import load_config
    root = pathlib.Path(workdir) / "train"
    root.mkdir(exist_ok=True)
    Image.fromarray(np.zeros((gt, gt, 3), np.uint8)).save(root / "blank.png")
    sets = [f"dtype={dtype}", f"run_root={pathlib.Path(workdir) / 'runs'}",
            f"datasets.train.root={root}", f"datasets.train.gt_size={gt}",
            f"datasets.train.crop_pad_size={gt}", "datasets.val=null", f"train.batch_size={batch}",
            "train.pretrained=null", "train.loader.workers=0"]
    sets += ([f"train.losses.perceptual.weights={vgg_path}"] if perceptual else
             ["train.losses.perceptual=null", "train.gt_usm=[pixel]"])
    return Trainer(load_config(CONFIG, sets), progress=False)


@dataclasses.dataclass
class Ours:
    """srgrad's step and its two parts, closures over one Trainer and its gan recipe."""
    trainer: object
    batch: dict

    def step(self):
        """The trainer's own iteration (at iteration 0: net_d_iters 1, net_d_init_iters 0, so the
        generator steps every time)."""
        return self.trainer._train_step(self.batch)

    def generator_part(self):
        """Generator update alone, from the trainer's public pieces; returns sr."""
        import framework as sg
        t, crit = self.trainer.recipe, self.trainer.recipe.criteria
        lq, usm = sg.tensor(self.batch["lq"]), sg.tensor(self.batch["gt_usm"])
        t.optimizer.zero_grad()
        t.net_d.requires_grad_(False)
        sr = t.model(lq)
        total = crit["pixel"](sr, usm)
        if "perceptual" in crit:
            total = total + crit["perceptual"](sr, usm)[0]
        total = total + crit["gan"](t.net_d(sr), True, is_disc=False)
        total.backward()
        t.optimizer.step()
        t.net_d.requires_grad_(True)
        return sr

    def discriminator_part(self, sr):
        """Discriminator update alone on the real GT and the detached `sr`."""
        import framework as sg
        t, gan = self.trainer.recipe, self.trainer.recipe.criteria["gan"]
        t.optimizer_d.zero_grad()
        gan(t.net_d(sg.tensor(self.batch["gt"])), True, is_disc=True).backward()
        gan(t.net_d(sr.detach()), False, is_disc=True).backward()
        t.optimizer_d.step()


# -- torch: Real-ESRGAN's optimize_parameters on the twins ----------------------------------------

class Theirs:
    """RealESRGANModel.optimize_parameters + model_ema on the twins of `trainer`'s networks (same
    weights), BasicSR's PerceptualLoss over `vgg_features` (a torch Sequential, same file)."""

    def __init__(self, trainer, batch: dict, vgg_features):
        import torch
        from framework.nn.perceptual import vgg_layer_names
        from tests.twins import twin_of
        cfg, dtype = trainer.cfg, getattr(torch, str(trainer.dtype))
        self.g = twin_of(trainer.model, trainer.recipe.model_spec, dtype=dtype)
        self.d = twin_of(trainer.recipe.net_d, cfg["model_d"], dtype=dtype)
        tcfg = cfg["train"]
        self.ema_decay = tcfg["ema_decay"]
        self.ema = {k: v.detach().clone() for k, v in self.g.named_parameters()}
        self.opt_g = torch.optim.Adam(self.g.parameters(), lr=tcfg["optimizer"]["lr"],
                                      betas=tuple(tcfg["optimizer"]["betas"]))
        self.opt_d = torch.optim.Adam(self.d.parameters(), lr=tcfg["optimizer_d"]["lr"],
                                      betas=tuple(tcfg["optimizer_d"]["betas"]))
        self.gan_weight = tcfg["losses"]["gan"]["loss_weight"]
        self.pix_weight = tcfg["losses"]["pixel"]["loss_weight"]
        self.lq, self.gt, self.gt_usm = (torch.from_numpy(batch[k]) for k in ("lq", "gt", "gt_usm"))
        percep = tcfg["losses"]["perceptual"]
        self.vgg = None
        if percep is not None:
            self.vgg = vgg_features.to(dtype)
            names = vgg_layer_names("vgg19")
            self.layer_weights = {names.index(k): w for k, w in percep["layer_weights"].items()}
            self.percep_weight = percep["perceptual_weight"]
            # BasicSR's buffers are float32 (torch.Tensor([...])), cast with the network
            self.mean = torch.Tensor([0.485, 0.456, 0.406]).to(dtype).view(1, 3, 1, 1)
            self.std = torch.Tensor([0.229, 0.224, 0.225]).to(dtype).view(1, 3, 1, 1)

    def _features(self, x):
        """BasicSR's VGGFeatureExtractor.forward: normalise, then each module, cloning the outputs
        asked for."""
        out, x = {}, (x - self.mean) / self.std
        for i, layer in enumerate(self.vgg):
            x = layer(x)
            if i in self.layer_weights:
                out[i] = x.clone()
        return out

    def _perceptual(self, x, gt):
        import torch
        xf, gf = self._features(x), self._features(gt.detach())
        loss = 0
        for k, w in self.layer_weights.items():
            loss = loss + torch.nn.functional.l1_loss(xf[k], gf[k]) * w
        return loss * self.percep_weight

    def _gan(self, pred, real, is_disc):
        import torch
        target = torch.ones_like(pred) if real else torch.zeros_like(pred)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(pred, target)
        return loss if is_disc else loss * self.gan_weight

    def generator_part(self):
        import torch
        for p in self.d.parameters():
            p.requires_grad = False
        self.opt_g.zero_grad()
        output = self.g(self.lq)
        l_g_total = 0
        l_g_pix = self.pix_weight * torch.nn.functional.l1_loss(output, self.gt_usm)
        l_g_total = l_g_total + l_g_pix
        log = {"l_g_pix": l_g_pix}
        if self.vgg is not None:
            log["l_g_percep"] = self._perceptual(output, self.gt_usm)
            l_g_total = l_g_total + log["l_g_percep"]
        log["l_g_gan"] = self._gan(self.d(output), True, False)
        l_g_total = l_g_total + log["l_g_gan"]
        l_g_total.backward()
        self.opt_g.step()
        self._log = log
        return output

    def discriminator_part(self, output):
        for p in self.d.parameters():
            p.requires_grad = True
        self.opt_d.zero_grad()
        real_d_pred = self.d(self.gt)  # gan_gt_usm False: the plain GT
        l_d_real = self._gan(real_d_pred, True, True)
        l_d_real.backward()
        fake_d_pred = self.d(output.detach().clone())
        l_d_fake = self._gan(fake_d_pred, False, True)
        l_d_fake.backward()
        self.opt_d.step()
        return {"l_d_real": l_d_real, "l_d_fake": l_d_fake, "out_d_real": real_d_pred.mean(),
                "out_d_fake": fake_d_pred.mean()}

    def step(self):
        import torch
        output = self.generator_part()
        log = {**self._log, **self.discriminator_part(output)}
        with torch.no_grad():  # BasicSR's model_ema(decay)
            for k, p in self.g.named_parameters():
                self.ema[k].mul_(self.ema_decay).add_(p, alpha=1 - self.ema_decay)
        return {k: v.item() for k, v in log.items()}  # reduce_loss_dict's values for the log


def build(workdir, batch: int = 8, gt: int = 64, perceptual: bool = True, dtype: str = "float32"):
    """(Ours, Theirs) with the same weights and batch; files go to `workdir`."""
    from framework.io.config import read_yaml  # the raw file: validating it wants the VGG file
    layers = read_yaml(CONFIG)["train"]["losses"]["perceptual"]["layer_weights"]
    vgg_path = pathlib.Path(workdir) / "vgg19-random.pth"
    features = write_vgg19(vgg_path, layers) if perceptual else None
    trainer = make_trainer(workdir, vgg_path, batch, gt, perceptual, dtype)
    data = make_batch(batch, gt, np.dtype(dtype))
    return Ours(trainer, data), Theirs(trainer, data, features)


def _counts(ours) -> str:
    t = ours.trainer.recipe
    count = {name: sum(p.data.size for p in net.parameters())
             for name, net in (("G", t.model), ("D", t.net_d))}
    if "perceptual" in t.criteria:
        count["VGG19 (frozen)"] = sum(p.data.size for p in t.criteria["perceptual"].parameters())
    return "; ".join(f"{k} {v:,}" for k, v in count.items()) + " params"


def run(args) -> list:
    opts = _options(getattr(args, "rest", []))
    with tempfile.TemporaryDirectory(prefix="srgrad-bench-gan-") as workdir:
        ours, theirs = build(workdir, opts.batch, opts.gt, opts.perceptual)
    lr = opts.gt // 4
    shape = f"({opts.batch},3,{lr},{lr}) -> {opts.gt}"
    losses = "L1 + perceptual + GAN" if opts.perceptual else "L1 + GAN"
    note = _counts(ours)
    rows = [Row(f"GAN step {shape}, {losses}, EMA", *time_pair(ours.step, theirs.step, args.repeat),
                note=note + "; srgrad = Trainer._train_step (gan recipe)")]
    rows.append(Row(f"generator part {shape}, {losses}",
                    *time_pair(ours.generator_part, theirs.generator_part, args.repeat)))
    sr, output = ours.generator_part(), theirs.generator_part()  # one fixed fake for the D rows
    rows.append(Row(f"discriminator part {shape}, real + fixed fake",
                    *time_pair(lambda: ours.discriminator_part(sr),
                               lambda: theirs.discriminator_part(output), args.repeat)))
    return rows
