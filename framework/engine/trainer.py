"""The training loop behind `srgrad-train`: build everything from a validated config, train with a
progress bar (or plain log lines), validate against the bicubic baseline, checkpoint atomically,
resume exactly. `make_trainer(cfg)` picks the trainer: this one (a generator and its losses: pixel,
and optionally perceptual), or framework.engine.gan.GANTrainer when the config has `model_d`.

Exact resume: a run's state after iteration i is (every network's weights, the weights' EMA, every
optimizer's and scheduler's state, i); the batch loader is a pure function of (seed, iteration) and
the framework's random stream (dropout) is reseeded from (seed, iteration) before each step, so a
run resumed from the checkpoint of iteration i computes bit-identical weights to one that never
stopped.

Data parallelism (over MPI, framework.engine.distributed) hooks in at one place: `_reduce_gradients()`,
called when every gradient is ready and before the optimizer step; each rank loads its rows of the
global batch; writes, logs, progress bars and validation happen only where `self.is_main`.
"""
from __future__ import annotations

import contextlib
import math
import signal
import time
from pathlib import Path

import numpy as np

from .. import nn, random
from . import distributed
from ..io.config import ConfigError
from ..metrics import higher_is_better
from ..optim import EMA
from ..registry import DATASETS, LOSSES, MODELS, OPTIMIZERS, SCHEDULERS
from ..tensor import Tensor
from ..weights import load_into
from .runlog import Progress, RunLock, duration, plot_curves
from .runstate import (RunState, TrainingError, TrainingInterrupted,  # noqa: F401  re-exported
                       find_latest_checkpoint)
from .validation import ValidationStopped, Validator, column, main_metric

__all__ = ["Trainer", "TrainingError", "TrainingInterrupted", "find_latest_checkpoint",
           "make_trainer"]

# the framework's random stream for step i is seeded (seed, i, _STEP_STREAM, 1): four words, so it
# never coincides with the data's three-word (seed, epoch, k) streams
_STEP_STREAM = 0x5EED


@contextlib.contextmanager
def _section(key: str):
    """A constructor's own check (a value the schema cannot judge, a missing folder, an unreadable
    image) becomes a ConfigError naming the config key it came from."""
    try:
        yield
    except (ValueError, TypeError, OSError) as exc:
        raise ConfigError(f"{key}: {exc}") from exc


def make_trainer(cfg: dict, **kwargs) -> "Trainer":
    """The trainer the config asks for: GANTrainer with `model_d`, else Trainer."""
    if cfg.get("model_d") is not None:
        from .gan import GANTrainer
        return GANTrainer(cfg, **kwargs)
    return Trainer(cfg, **kwargs)


class Trainer(RunState):
    """Train `cfg` (a dict from framework.engine.schema.load_config) in `run_dir` (default
    `<run_root>/<name>`). `resume`: None (fresh; refuses a folder that already holds checkpoints),
    "auto" (latest checkpoint of the run folder, fresh when there is none) or a checkpoint path.
    `config_path` is only used in printed hints. `comm`: a framework.engine.distributed communicator
    (default: one process). `progress`: a bar on a terminal (False: plain log lines)."""

    # metrics.csv's loss-term columns (BasicSR's names); a trainer with one loss logs only "loss"
    TERMS = ("l_g_pix", "l_g_percep", "l_g_style")

    def __init__(self, cfg: dict, run_dir=None, resume=None, progress: bool = True,
                 config_path=None, comm=None):
        self.cfg = cfg
        self.scale = cfg["scale"]
        self.dtype = np.dtype(cfg["dtype"])
        self.run_dir = Path(run_dir) if run_dir else Path(cfg["run_root"]) / cfg["name"]
        self.resume, self.progress, self.config_path = resume, progress, config_path
        self.comm = comm if comm is not None else distributed.SingleProcess()
        self.rank, self.world_size = self.comm.rank, self.comm.world_size
        self.iteration = 0
        self.best = {"value": None, "iteration": None}
        self.elapsed = 0.0
        self._stop_signal = None  # the first SIGINT/SIGTERM received: stop after this iteration
        self._terms: dict[str, list[float]] = {}  # loss terms since the last metrics.csv row
        self._pending = None  # the metrics row of an iteration whose validation is unfinished
        self._pretrained = False  # a new run that starts from train.pretrained weights
        self._out = Progress(1, 0, cfg["name"], 1, bar=False, enabled=self.is_main)
        self._build()

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # -- building ---------------------------------------------------------------------------------
    def _build(self):
        cfg, tcfg = self.cfg, self.cfg["train"]
        # weights are a pure function of the seed: initialise under it, then cast
        nn.init.manual_seed(cfg["seed"])
        self.model_spec = {**cfg["model"], "scale": self.scale}
        with _section("model"):
            self.model = MODELS.build(self.model_spec).to(self.dtype)
        self._build_discriminator()
        for net in self._trained().values():
            self.comm.broadcast_params(net)  # same seed, same weights; this makes it certain
            net.train()
        self.ema = EMA(self.model, tcfg["ema_decay"]) if tcfg["ema_decay"] > 0 else None
        self.optimizer, self.scheduler = self._optimizer(self.model, "optimizer", "scheduler")
        self._build_discriminator_optimizer()
        self.criteria = self._build_losses()
        self.loss_fn = self.criteria.get("pixel")  # the pixel loss, (sr, target) -> loss
        with _section("datasets.train"):
            self.train_set = DATASETS.build(cfg["datasets"]["train"], scale=self.scale)
        val_spec = cfg["datasets"]["val"]
        with _section("datasets.val"):
            self.val_set = DATASETS.build(val_spec, scale=self.scale) if val_spec else None
        from ..data import BatchLoader
        with _section("train.batch_size"):
            self.loader = BatchLoader(self.train_set, tcfg["batch_size"], seed=cfg["seed"],
                                      shuffle=True, rank=self.rank, world_size=self.world_size)
        self.validator = Validator(self.val_set, cfg["val"], self.scale, self.run_dir,
                                   self.progress and self.is_main, self.is_main) \
            if self.val_set is not None else None

    def _build_discriminator(self):
        """GANTrainer builds model_d here, right after the generator (under the same seed)."""

    def _build_discriminator_optimizer(self):
        """GANTrainer builds optimizer_d / scheduler_d here."""

    def _optimizer(self, net, opt_key: str, sched_key: str):
        tcfg = self.cfg["train"]
        with _section(f"train.{opt_key}"):
            optimizer = OPTIMIZERS.build(tcfg[opt_key], params=list(net.parameters()))
        scheduler = None
        if tcfg[sched_key] is not None:
            with _section(f"train.{sched_key}"):
                scheduler = SCHEDULERS.build(tcfg[sched_key], optimizer=optimizer)
            why = scheduler.horizon_mismatch(tcfg["total_iters"])
            if why:
                self._say(f"warning: train.{sched_key}: {why} (set it to fit train.total_iters)")
        return optimizer, scheduler

    def _build_losses(self) -> dict:
        """The loss terms by name (pixel, perceptual, gan), each cast to the run's dtype."""
        tcfg = self.cfg["train"]
        specs = {"pixel": tcfg["loss"], **{k: v for k, v in tcfg["losses"].items()
                                           if v is not None and not (k == "pixel" and tcfg["loss"])}}
        criteria = {}
        for term, spec in specs.items():
            if spec is None:
                continue
            key = "train.loss" if term == "pixel" and tcfg["loss"] else f"train.losses.{term}"
            with _section(key):
                fn = LOSSES.build(spec)
            criteria[term] = fn.to(self.dtype) if isinstance(fn, nn.Module) else fn
        return criteria

    def _trained(self) -> dict:
        """The networks an optimizer trains, by checkpoint name."""
        return {"model": self.model}

    # -- public entry -----------------------------------------------------------------------------
    def fit(self) -> dict:
        """Train to `train.total_iters`. Returns {"iteration", "best", "run_dir", "val"}.
        Raises TrainingInterrupted on Ctrl-C or SIGTERM (after saving), TrainingError on a
        non-finite loss."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        lock = RunLock(self.run_dir)
        if self.is_main:
            lock.acquire()
        previous = self._install_signals()
        try:
            start = self._prepare_run()
            self.comm.check_same(start, "the iteration to resume at")
            return self._loop(start)
        except TrainingInterrupted:
            raise
        except KeyboardInterrupt:  # a second signal: stopped at once, maybe inside a write
            raise self._interrupted_again() from None
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            lock.release()

    def _load_pretrained(self):
        """train.pretrained (and pretrained_d): a new run starts from these weights (and validates
        them first, as iteration 0); a resumed run has its own. The EMA starts from the loaded
        weights."""
        for key, net in (("pretrained", self.model), ("pretrained_d", self._trained().get("net_d"))):
            spec = self.cfg["train"][key]
            if net is None or spec["path"] is None:
                continue
            info = load_into(net, spec["path"], spec["key"], strict=spec["strict"],
                             where=f"train.{key}", say=self._say,
                             spec=self.model_spec if key == "pretrained" else None)
            self._pretrained = True
            self._say(f"train.{key}: starting from {spec['path']} ({info.get('key') or 'weights'})")
            self.comm.broadcast_params(net)
        if self.ema is not None:
            self.ema.load_state_dict(self.model.state_dict())

    def _columns(self):
        terms = list(self.TERMS) if self._logs_terms() else []
        return ["iteration", "time_s", "loss", "lr", *terms,
                *(self.validator.columns() if self.validator else [])]

    def _logs_terms(self) -> bool:
        return len(self.criteria) > 1

    def _key(self, metric):
        return column(metric, self.cfg["val"]["y_channel"])

    def _summary(self):
        """What is about to run, in a few lines (rank 0)."""
        import numba
        tcfg = self.cfg["train"]
        for name, net in self._trained().items():
            count = sum(p.data.size for p in net.parameters())
            spec = self.model_spec if name == "model" else self.cfg["model_d"]
            extra = " + EMA" if name == "model" and self.ema is not None else ""
            self._say(f"{name}: {spec['type']}, {count:,} parameters ({self.dtype}){extra}")
        gt = getattr(self.train_set, "gt_size", None)  # read no image here: errors belong to the loop
        crops = f"patches gt {gt}x{gt} -> lq {gt // self.scale}x{gt // self.scale}" if gt else \
            "whole images"
        val = f", {len(self.val_set)} validation images" if self.val_set is not None else ""
        self._say(f"data: {len(self.train_set)} training images ({type(self.train_set).__name__}, "
                  f"{crops}, batch {tcfg['batch_size']}){val}")
        self._say(f"threads: {numba.get_num_threads()}, ranks: {self.world_size}; iterations "
                  f"{self.iteration} -> {tcfg['total_iters']}; run folder {self.run_dir}")

    def _open_tensorboard(self):
        if not self.cfg["train"].get("tensorboard"):
            return None
        from .tensorboard import SummaryWriter
        return SummaryWriter(self.run_dir / "tensorboard")

    # -- the loop ---------------------------------------------------------------------------------
    def _loop(self, start: int) -> dict:
        total = self.cfg["train"]["total_iters"]
        tcfg, ccfg = self.cfg["train"], self.cfg["checkpoint"]
        self._out = Progress(total, start, self.cfg["name"], tcfg["log_every"], bar=self.progress,
                             enabled=self.is_main)
        if self.validator is not None:  # no validation bar where the run prints plain lines
            self.validator.progress = self._out.bar
        last_val, last_ckpt = None, None
        t0 = time.perf_counter() - self.elapsed
        timing = None  # (iteration, clock) after this process's first step (JIT compiles)
        from ..data import Prefetcher
        batches = Prefetcher(self.loader, start, max(start, total), tcfg["loader"]["workers"],
                             tcfg["loader"]["prefetch"])
        try:
            if self._pending is not None:  # resumed where a validation was interrupted: redo it
                last_val = self._log_row(self._pending, validate=True)
            elif start == 0 and self._pretrained and self.val_set is not None:
                last_val = self._log_row({}, validate=True)  # where the fine-tuning starts from
            while self.iteration < total:
                if self.comm.any_(self._stop_signal is not None):
                    self._interrupt()
                with self._data_errors("the training batch"):
                    batch = next(batches)
                random.manual_seed([self.cfg["seed"], self.iteration, _STEP_STREAM, 1])
                values = self._train_step(batch)
                if values is not None and not isinstance(values, dict):
                    values = {"loss": values}
                self.iteration += 1
                self.elapsed = time.perf_counter() - t0
                for k, v in (values or {}).items():
                    self._terms.setdefault(k, []).append(v)
                lr = self.optimizer.param_groups[0]["lr"]
                self._out.update(self.iteration, (values or {}).get("loss"), lr)
                timing = self._estimate(timing, start, total)
                row = {}
                if (self.iteration % tcfg["log_every"] == 0 or self.iteration == total) \
                        and any(self._terms.values()):
                    row.update({k: float(np.mean(v)) for k, v in self._terms.items() if v}, lr=lr)
                    self._terms = {}
                last_val = self._log_row(row, validate=self._validation_due(total)) or last_val
                if self.iteration % ccfg["every"] == 0 or self.iteration == total:
                    self.save()
                    last_ckpt = self.iteration
            if last_ckpt != self.iteration:  # resumed at the end: still leave net_latest
                self.save()
        finally:
            batches.close(wait=False)
            self._out.close()
            if getattr(self, "_tensorboard", None) is not None:
                self._tensorboard.close()
        if self.is_main:
            self._plot()
        return {"iteration": self.iteration, "best": self.best, "run_dir": str(self.run_dir),
                "val": last_val}

    def _estimate(self, timing, start, total):
        """After this process's third step, one line: seconds per iteration (the first step,
        which compiles kernels, left out) and the time to the end."""
        now = time.perf_counter()
        done = self.iteration - start
        if done == 1:
            return (self.iteration, now)
        if done == 3 and timing is not None and self.iteration < total:
            per = (now - timing[1]) / (self.iteration - timing[0])
            self._say(f"timing: {per:.3g} s/iteration; about {duration(per * (total - self.iteration))} "
                      f"to iteration {total} (validation and checkpoints not included)")
        return timing

    def _validation_due(self, total) -> bool:
        every = self.cfg["val"]["every"]
        return self.val_set is not None and (self.iteration % every == 0 or self.iteration == total)

    def _log_row(self, row: dict, validate: bool):
        """Validate when due, then write this iteration's metrics.csv row (loss and validation in
        one row). A stop signal during the validation saves a checkpoint holding the row, so a
        resume redoes the validation and writes the same row. Returns the validation means."""
        means = None
        if validate and self.is_main:
            self._pending = dict(row)
            try:
                means = self.validate()
            except ValidationStopped:
                self._interrupt(during="validation")
            self._pending = None
            row = {**row, **means}
        if row and self.is_main:
            self.log.write(iteration=self.iteration, time_s=round(self.elapsed, 3), **row)
            tb = getattr(self, "_tensorboard", None)
            if tb is not None:
                for k, v in row.items():
                    tb.add_scalar(k, v, self.iteration)
        return means

    def _tensors(self, batch):
        """(lq, {term: target}) as Tensors of the run's dtype; a term listed in train.gt_usm gets
        the sharpened GT."""
        lq = Tensor(np.asarray(batch["lq"], dtype=self.dtype))
        gt = Tensor(np.asarray(batch["gt"], dtype=self.dtype))
        usm = self.cfg["train"]["gt_usm"]
        sharp = Tensor(np.asarray(batch["gt_usm"], dtype=self.dtype)) if usm else None
        return lq, {term: sharp if term in usm else gt for term in ("pixel", "perceptual", "gan")}

    def _generator_terms(self, sr, targets) -> dict:
        """The generator's loss terms (Tensors) by metrics.csv name: pixel, perceptual and style."""
        terms = {}
        if "pixel" in self.criteria:
            terms["l_g_pix"] = self.loss_fn(sr, targets["pixel"])
        if "perceptual" in self.criteria:
            out = self.criteria["perceptual"](sr, targets["perceptual"])
            percep, style = out if isinstance(out, tuple) else (out, None)
            if percep is not None:
                terms["l_g_percep"] = percep
            if style is not None:
                terms["l_g_style"] = style
        return terms

    def _train_step(self, batch):
        """One optimisation step; returns {"loss": total, and each term when there are several},
        or None for a skipped non-finite batch."""
        lq, targets = self._tensors(batch)
        self.optimizer.zero_grad()
        terms = self._generator_terms(self.model(lq), targets)
        loss = _total(terms)
        loss.backward()
        if len(terms) == 1:
            # averaged over the ranks with the gradients, so that every rank takes the same decision
            values = {"loss": self._reduce_gradients(float(loss.item()))}
        else:
            reduced = self._reduce_gradients([float(loss.item())] + [float(t.item())
                                                                     for t in terms.values()])
            values = {"loss": reduced[0], **dict(zip(terms, reduced[1:]))}
        if not self._finite(values, self.model, "batch skipped"):
            return None
        self._step(self.model, self.optimizer, self.scheduler, values["loss"])
        if self.ema is not None:
            self.ema.update()
        return values

    def _finite(self, values: dict, net, skipped: str) -> bool:
        """False (after a warning) when a loss value or a gradient of `net` is NaN/Inf and
        train.nonfinite_loss is skip; raises TrainingError when it is stop."""
        # a NaN gradient with a finite loss would turn the weights NaN just the same
        bad = next((f"{'loss' if k == 'loss' else f'the loss term {k}'} is {v}"
                    for k, v in values.items() if not math.isfinite(v)), None) \
            or self._nonfinite(net, "grad")
        if not bad:
            return True
        if self.cfg["train"]["nonfinite_loss"] == "skip":
            self._say(f"warning: {bad} at iteration {self.iteration + 1}: {skipped}")
            return False
        raise TrainingError(
            f"{bad} at iteration {self.iteration + 1}: training stopped. The last good "
            f"checkpoint ({self._last_checkpoint()}) is untouched. Lower "
            f"train.optimizer.lr, set train.grad_clip, or set train.nonfinite_loss: skip")

    def _step(self, net, optimizer, scheduler, loss: float, key: str = "optimizer"):
        """Clip, step, check the weights stayed finite, advance the schedule. `key`: the
        optimizer's config key, for the message."""
        if self.cfg["train"]["grad_clip"] is not None:
            nn.utils.clip_grad_norm_(net.parameters(), self.cfg["train"]["grad_clip"])
        optimizer.step()
        # a finite gradient can still overflow the update (huge lr): never checkpoint such weights
        bad = self._nonfinite(net, "data")
        if bad:
            raise TrainingError(
                f"the optimizer step made the weights non-finite ({bad}, loss {loss:.4g}) at "
                f"iteration {self.iteration + 1}: training stopped. The last good checkpoint "
                f"({self._last_checkpoint()}) is untouched. Lower train.{key}.lr or set "
                f"train.grad_clip")
        if scheduler is not None:
            scheduler.step()

    @staticmethod
    def _nonfinite(net, attr: str):
        """A phrase naming the first parameter of `net` whose `.grad` (attr "grad") or `.data`
        holds a NaN or Inf, else None."""
        for name, p in net.named_parameters():
            values = p.data if attr == "data" else None if p.grad is None else p.grad.data
            if values is not None and not np.isfinite(values).all():
                return f"the {'gradient' if attr == 'grad' else 'value'} of {name} is not finite"
        return None

    @contextlib.contextmanager
    def _data_errors(self, what: str):
        """An image that fails only when its pixels are first decoded (the dataset scan reads
        headers) stops training with the file's name and how to continue."""
        try:
            yield
        except (ValueError, OSError) as exc:
            raise TrainingError(
                f"cannot load {what} of iteration {self.iteration + 1}: {exc}. The last "
                f"checkpoint ({self._last_checkpoint()}) is intact: fix or remove the file (or set "
                f"bad_files: skip in the dataset) and continue with --resume auto") from exc

    def _reduce_gradients(self, loss, params=None):
        """Every parameter's .grad is ready here, before clipping and the optimizer step. A
        data-parallel run averages the gradients of `params` (default: the model's) and the loss
        value(s) over the ranks (one Allreduce); one process: nothing to do. Returns the
        (averaged) loss value(s)."""
        return self.comm.average_gradients_(
            self.model.parameters() if params is None else params, loss)

    # -- validation -------------------------------------------------------------------------------
    def validate(self) -> dict:
        """PSNR/SSIM of the model (its EMA when train.ema_decay is set) and of the bicubic
        baseline over the full validation images; updates net_best, writes the comparison PNGs.
        Returns the means (metric name -> value)."""
        model = self.ema.module if self.ema is not None else self.model
        means = self.validator(model, self.iteration, stop=lambda: self._stop_signal is not None)
        if not self.is_main or not means:
            return means
        vcfg = self.cfg["val"]
        metric = main_metric(vcfg["metrics"])
        key = self._key(metric)
        better = (lambda a, b: a > b) if higher_is_better(metric) else (lambda a, b: a < b)
        if key in means and (self.best["value"] is None or better(means[key], self.best["value"])):
            self.best = {"value": means[key], "iteration": self.iteration, "metric": key}
            self._save_weights(self.run_dir / "net_best.safetensors", best=self.best)
        tb = getattr(self, "_tensorboard", None)
        if tb is not None:
            for stem, strip in self.validator.last_images.items():
                tb.add_image(f"val/{stem}", strip, self.iteration)
        crop = self.validator.crop
        text = ", ".join(f"{k} {v:.4f}" for k, v in means.items())
        which = " (EMA weights)" if self.ema is not None else ""
        self._say(f"[iter {self.iteration}] val{which} ({'Y' if vcfg['y_channel'] else 'RGB'}, crop "
                  f"{crop}; bicubic = {vcfg['baseline']}): {text}")
        return means

    def _plot(self):
        key = self._key("psnr") if "psnr" in self.cfg["val"]["metrics"] and self.val_set else None
        plot_curves(self.log, self.run_dir / "curves.png", key, "bicubic_" + key if key else None)

    def _say(self, msg: str) -> None:
        if self.is_main:
            self._out.write(msg)


def _total(terms: dict):
    """The sum of the loss terms (Tensors), in order."""
    values = list(terms.values())
    total = values[0]
    for t in values[1:]:
        total = total + t
    return total
