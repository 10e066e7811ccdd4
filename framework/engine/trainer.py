"""The training loop behind `srgrad-train`: build everything from a validated config, train with a
progress bar, validate against the bicubic baseline, checkpoint atomically, resume exactly.

Exact resume: a run's state after iteration i is (weights, optimizer state, scheduler state, i); the
batch loader is a pure function of (seed, iteration), so a run resumed from the checkpoint of
iteration i computes bit-identical weights to one that never stopped.

Data parallelism (over MPI, framework.engine.distributed) hooks in at one place: `_reduce_gradients()`,
called when every gradient is ready and before the optimizer step; each rank loads its rows of the
global batch; writes, logs, progress bars and validation happen only where `self.is_main`.
"""
from __future__ import annotations

import contextlib
import math
import signal
import sys
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from .. import nn
from . import distributed
from ..autograd import no_grad
from ..io import checkpoint as ckpt
from ..io.config import ConfigError, dump_config
from ..metrics import higher_is_better, measure
from ..registry import DATASETS, LOSSES, MODELS, OPTIMIZERS, SCHEDULERS
from ..tensor import Tensor
from .inference import bicubic, upscale
from .runlog import MetricsLog, RunLock, comparison_strip, plot_curves
from .schema import config_hash

__all__ = ["Trainer", "TrainingError", "TrainingInterrupted", "find_latest_checkpoint"]

CKPT_GLOB = "iter_*.safetensors"


class TrainingError(RuntimeError):
    """Training cannot go on (non-finite loss, run folder already used, ...)."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: a checkpoint was saved (or the message says which one is the latest);
    `resume_hint` says how to continue, `signum` which signal it was (the exit code is 128 + it)."""

    def __init__(self, message, resume_hint="", signum=signal.SIGINT):
        super().__init__(message)
        self.resume_hint, self.signum = resume_hint, int(signum)


class _StopInValidation(Exception):
    """Internal: a stop signal arrived during a validation (the caller saves and interrupts)."""


_SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


@contextlib.contextmanager
def _section(key: str):
    """A constructor's own check (a value the schema cannot judge, a missing folder, an unreadable
    image) becomes a ConfigError naming the config key it came from."""
    try:
        yield
    except (ValueError, TypeError, OSError) as exc:
        raise ConfigError(f"{key}: {exc}") from exc


def find_latest_checkpoint(run_dir):
    """The checkpoint with the highest iteration in run_dir/checkpoints, or None."""
    files = sorted(Path(run_dir, "checkpoints").glob(CKPT_GLOB))
    return files[-1] if files else None


class Trainer:
    """Train `cfg` (a dict from framework.engine.schema.load_config) in `run_dir` (default
    `<run_root>/<name>`). `resume`: None (fresh; refuses a folder that already holds checkpoints),
    "auto" (latest checkpoint of the run folder, fresh when there is none) or a checkpoint path.
    `config_path` is only used in printed hints. `comm`: a framework.engine.distributed communicator
    (default: one process)."""

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
        self._losses: list[float] = []  # losses since the last metrics.csv loss row
        self._pending = None  # the metrics row of an iteration whose validation is unfinished
        self._baselines: dict = {}
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
        self.comm.broadcast_params(self.model)  # same seed, same weights; this makes it certain
        self.model.train()
        with _section("train.optimizer"):
            self.optimizer = OPTIMIZERS.build(tcfg["optimizer"],
                                              params=list(self.model.parameters()))
        self.scheduler = None
        if tcfg["scheduler"] is not None:
            with _section("train.scheduler"):
                self.scheduler = SCHEDULERS.build(tcfg["scheduler"], optimizer=self.optimizer)
        with _section("train.loss"):
            self.loss_fn = LOSSES.build(tcfg["loss"])
        with _section("datasets.train"):
            self.train_set = DATASETS.build(cfg["datasets"]["train"], scale=self.scale)
        val_spec = cfg["datasets"]["val"]
        with _section("datasets.val"):
            self.val_set = DATASETS.build(val_spec, scale=self.scale) if val_spec else None
        from ..data import BatchLoader
        with _section("train.batch_size"):
            self.loader = BatchLoader(self.train_set, tcfg["batch_size"], seed=cfg["seed"],
                                      shuffle=True, rank=self.rank, world_size=self.world_size)

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

    # -- run folder -------------------------------------------------------------------------------
    def _prepare_run(self) -> int:
        ckpt_path = None
        if self.resume == "auto":
            ckpt_path = self._newest_loadable_checkpoint()
            if ckpt_path is None:
                self._say(f"no checkpoint in {self.run_dir}: starting a new run")
        elif self.resume:
            ckpt_path = Path(self.resume)
            self._load_checkpoint(ckpt_path)
        elif find_latest_checkpoint(self.run_dir) is not None:
            raise TrainingError(
                f"run folder {self.run_dir} already holds checkpoints: continue it with "
                f"--resume auto, or start another run with --set name=NEW_NAME")
        if self.is_main:
            (self.run_dir / "checkpoints").mkdir(exist_ok=True)
            ckpt.write_atomic(self.run_dir / "config.yaml", dump_config(self.cfg).encode())
            self.log = MetricsLog(self.run_dir / "metrics.csv", self._columns(),
                                  resume_iteration=self.iteration if ckpt_path else None)
        return self.iteration

    def _columns(self):
        cols = ["iteration", "time_s", "loss", "lr"]
        for m in self.cfg["val"]["metrics"]:
            cols += [self._key(m), "bicubic_" + self._key(m)]
        return cols

    def _key(self, metric):
        return f"{metric}_{'y' if self.cfg['val']['y_channel'] else 'rgb'}"

    def _newest_loadable_checkpoint(self):
        """--resume auto: load the newest checkpoint that loads; one that does not (truncated by a
        copy cut short, or a disk that lied about fsync) is skipped with a line saying why. Returns
        the path loaded, or None when there is none."""
        files = sorted(Path(self.run_dir, "checkpoints").glob(CKPT_GLOB))
        for path in reversed(files):
            try:
                self._load_checkpoint(path)
                return path
            except ckpt.CheckpointError as exc:
                older = "trying the one before" if path != files[0] else "no older one"
                self._say(f"warning: skipping checkpoint {path}: {exc} ({older})")
        if files:
            raise TrainingError(f"no checkpoint in {self.run_dir / 'checkpoints'} loads (each is "
                                f"named above); start another run with --set name=NEW_NAME")
        return None

    def _load_checkpoint(self, path):
        state = ckpt.load_checkpoint(path)
        ckpt.check_state_matches(self.model, state["model"], str(path))
        logs = state.get("log") or {}
        if not isinstance(logs, dict) or not all(isinstance(v, (int, float))
                                                  for v in logs.get("losses", [])):
            raise ckpt.CheckpointError(f"{path}: unreadable log state {logs!r}")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.iteration = int(state["iteration"])
        self.best = state.get("best") or self.best
        self.elapsed = float(state.get("elapsed", 0.0))
        self._losses = [float(v) for v in logs.get("losses", [])]
        self._pending = logs.get("pending")
        if state.get("config_hash") != config_hash(self._hashed_config()):
            self._say("note: the config differs from the one that wrote the checkpoint")
        self._say(f"resumed from {path} at iteration {self.iteration}")

    def _hashed_config(self):
        # total_iters may grow on resume (train longer) without being a different run
        return {**self.cfg, "train": {**self.cfg["train"], "total_iters": None}}

    # -- the loop ---------------------------------------------------------------------------------
    def _loop(self, start: int) -> dict:
        total = self.cfg["train"]["total_iters"]
        tcfg, ccfg = self.cfg["train"], self.cfg["checkpoint"]
        bar = tqdm(total=total, initial=start, desc=self.cfg["name"], unit="it", dynamic_ncols=True,
                   disable=not (self.progress and self.is_main))
        last_val, last_ckpt = None, None
        t0 = time.perf_counter() - self.elapsed
        try:
            if self._pending is not None:  # resumed where a validation was interrupted: redo it
                last_val = self._log_row(self._pending, validate=True, bar=bar)
            while self.iteration < total:
                if self.comm.any_(self._stop_signal is not None):
                    self._interrupt(bar)
                with self._data_errors("the training batch"):
                    batch = self.loader.get_batch(self.iteration)
                loss = self._train_step(batch)
                self.iteration += 1
                self.elapsed = time.perf_counter() - t0
                if loss is not None:
                    self._losses.append(loss)
                lr = self.optimizer.param_groups[0]["lr"]
                bar.update(1)
                bar.set_postfix(loss=f"{loss if loss is not None else math.nan:.4g}",
                                lr=f"{lr:.3g}", refresh=False)
                row = {}
                if (self.iteration % tcfg["log_every"] == 0 or self.iteration == total) \
                        and self._losses:
                    row.update(loss=float(np.mean(self._losses)), lr=lr)
                    self._losses = []
                last_val = self._log_row(row, validate=self._validation_due(total), bar=bar) \
                    or last_val
                if self.iteration % ccfg["every"] == 0 or self.iteration == total:
                    self.save()
                    last_ckpt = self.iteration
            if last_ckpt != self.iteration:  # resumed at the end: still leave net_latest
                self.save()
        finally:
            bar.close()
        if self.is_main:
            self._plot()
        return {"iteration": self.iteration, "best": self.best, "run_dir": str(self.run_dir),
                "val": last_val}

    def _validation_due(self, total) -> bool:
        every = self.cfg["val"]["every"]
        return self.val_set is not None and (self.iteration % every == 0 or self.iteration == total)

    def _log_row(self, row: dict, validate: bool, bar):
        """Validate when due, then write this iteration's metrics.csv row (loss and validation in
        one row). A stop signal during the validation saves a checkpoint holding the row, so a
        resume redoes the validation and writes the same row. Returns the validation means."""
        means = None
        if validate and self.is_main:
            self._pending = dict(row)
            try:
                means = self.validate()
            except _StopInValidation:
                self._interrupt(bar, during="validation")
            self._pending = None
            row = {**row, **means}
        if row and self.is_main:
            self.log.write(iteration=self.iteration, time_s=round(self.elapsed, 3), **row)
        return means

    def _train_step(self, batch):
        """One optimisation step; returns the loss, or None for a skipped non-finite batch."""
        lq = Tensor(np.asarray(batch["lq"], dtype=self.dtype))
        gt = Tensor(np.asarray(batch["gt"], dtype=self.dtype))
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(lq), gt)
        loss.backward()
        # averaged over the ranks with the gradients, so that every rank takes the same decision
        value = self._reduce_gradients(float(loss.item()))
        # a NaN gradient with a finite loss would turn the weights NaN just the same
        bad = f"loss is {value}" if not math.isfinite(value) else self._nonfinite("grad")
        if bad:
            if self.cfg["train"]["nonfinite_loss"] == "skip":
                self._say(f"warning: {bad} at iteration {self.iteration + 1}: batch skipped")
                return None
            raise TrainingError(
                f"{bad} at iteration {self.iteration + 1}: training stopped. The last good "
                f"checkpoint ({self._last_checkpoint()}) is untouched. Lower "
                f"train.optimizer.lr, set train.grad_clip, or set train.nonfinite_loss: skip")
        if self.cfg["train"]["grad_clip"] is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg["train"]["grad_clip"])
        self.optimizer.step()
        # a finite gradient can still overflow the update (huge lr): never checkpoint such weights
        bad = self._nonfinite("data")
        if bad:
            raise TrainingError(
                f"the optimizer step made the weights non-finite ({bad}, loss {value:.4g}) at "
                f"iteration {self.iteration + 1}: training stopped. The last good checkpoint "
                f"({self._last_checkpoint()}) is untouched. Lower train.optimizer.lr or set "
                f"train.grad_clip")
        if self.scheduler is not None:
            self.scheduler.step()
        return value

    def _nonfinite(self, attr: str):
        """A phrase naming the first parameter whose `.grad` (attr "grad") or `.data` holds a NaN
        or Inf, else None."""
        for name, p in self.model.named_parameters():
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

    def _last_checkpoint(self):
        return find_latest_checkpoint(self.run_dir) or "none yet"

    def _reduce_gradients(self, loss: float) -> float:
        """Every parameter's .grad is ready here, before clipping and the optimizer step. A
        data-parallel run averages the gradients and the loss over the ranks (one Allreduce);
        one process: nothing to do. Returns the (averaged) loss."""
        return self.comm.average_gradients_(self.model.parameters(), loss)

    # -- Ctrl-C and SIGTERM ----------------------------------------------------------------------
    def _install_signals(self) -> dict:
        """First SIGINT or SIGTERM (what kill, Docker, Slurm and Kubernetes send): finish the current
        iteration (or stop the validation), save, stop. A second one: stop at once. Returns the
        previous handlers."""
        def handler(signum, frame):
            if self._stop_signal is not None:
                raise KeyboardInterrupt
            self._stop_signal = signum
            self._say(f"{_SIGNALS.get(signum, signum)}: saving a checkpoint after this iteration "
                      f"(send it again to stop at once)")
        previous = {}
        for signum in _SIGNALS:
            try:
                previous[signum] = signal.signal(signum, handler)
            except ValueError:  # not the main thread: leave the signals alone
                break
        return previous

    def _resume_hint(self) -> str:
        cfg = self.config_path or self.run_dir / "config.yaml"
        return f"srgrad-train {cfg} --resume auto"

    def _interrupt(self, bar, during=None):
        self.save()
        bar.close()
        hint, signum = self._resume_hint(), self._stop_signal or signal.SIGINT
        where = f" during the validation of iteration {self.iteration} (it runs again on resume)" \
            if during else ""
        self._say(f"interrupted at iteration {self.iteration}{where}; checkpoint saved in "
                  f"{self.run_dir / 'checkpoints'}. Resume with:\n  {hint}")
        raise TrainingInterrupted(f"interrupted at iteration {self.iteration}", hint, signum)

    def _interrupted_again(self) -> TrainingInterrupted:
        """A second signal stopped the process at once, maybe inside a write: say what is on disk
        (writes are atomic: a checkpoint file there is whole)."""
        hint, signum = self._resume_hint(), self._stop_signal or signal.SIGINT
        latest = find_latest_checkpoint(self.run_dir)
        latest_iter = int(latest.stem.split("_")[1]) if latest is not None else None
        if latest_iter == self.iteration:
            state = f"the checkpoint of iteration {self.iteration} was written: {latest}"
        elif latest is not None:
            state = (f"no checkpoint of iteration {self.iteration}; the latest is {latest} "
                     f"(iteration {latest_iter})")
        else:
            state = "no checkpoint has been written yet"
        weights = self.run_dir / "net_latest.safetensors"
        try:
            lagging = ckpt.load_weights(weights)[1].get("iteration") != latest_iter
        except (ckpt.CheckpointError, OSError):
            lagging = latest is not None
        if lagging and latest is not None:
            state += f" ({weights.name} may be older)"
        if self.is_main:
            self._say(f"interrupted again at iteration {self.iteration}: {state}. Resume with:\n"
                      f"  {hint}")
        return TrainingInterrupted(f"interrupted again at iteration {self.iteration}", hint, signum)

    # -- saving -----------------------------------------------------------------------------------
    def _weights_info(self):
        return {"model": self.model_spec, "scale": self.scale, "dtype": str(self.dtype),
                "iteration": self.iteration, "name": self.cfg["name"],
                "imports": self.cfg["imports"]}

    def save(self) -> None:
        """Checkpoint of this iteration (atomic), net_latest, and pruning to `checkpoint.keep`."""
        if not self.is_main:
            return
        folder = self.run_dir / "checkpoints"
        path = folder / f"iter_{self.iteration:08d}.safetensors"
        ckpt.save_checkpoint(
            path, self.model.state_dict(), self.optimizer.state_dict(),
            self.scheduler.state_dict() if self.scheduler is not None else None,
            iteration=self.iteration, best=self.best, elapsed=self.elapsed,
            config_hash=config_hash(self._hashed_config()), rng=None,
            log={"losses": list(self._losses), "pending": self._pending}, **{
                k: v for k, v in self._weights_info().items() if k != "iteration"})
        ckpt.save_weights(self.run_dir / "net_latest.safetensors", self.model.state_dict(),
                          **self._weights_info())
        for old in sorted(folder.glob(CKPT_GLOB))[:-self.cfg["checkpoint"]["keep"]]:
            old.unlink()

    # -- validation -------------------------------------------------------------------------------
    def validate(self) -> dict:
        """PSNR/SSIM of the model and of the bicubic baseline over the full validation images;
        updates net_best, writes comparison PNGs. Returns the means (metric name -> value)."""
        from ..io.image import write_image
        vcfg = self.cfg["val"]
        crop = self.scale if vcfg["crop_border"] is None else vcfg["crop_border"]
        y = vcfg["y_channel"]
        scores = {k: [] for m in vcfg["metrics"] for k in (self._key(m), "bicubic_" + self._key(m))}
        self.model.eval()
        bar = tqdm(range(len(self.val_set)), desc="validate", leave=False, unit="img",
                   disable=not (self.progress and self.is_main))
        for i in bar:
            if self._stop_signal is not None:
                self.model.train()
                raise _StopInValidation
            with self._data_errors("a validation image"):
                item = self.val_set.get(i)
            sr = np.clip(upscale(self.model, item["lq"], vcfg["tile"], vcfg["tile_overlap"]), 0, 1)
            if i not in self._baselines:
                self._baselines[i] = bicubic(item["lq"], self.scale, vcfg["baseline"])
            bic, gt = self._baselines[i], item["gt"]
            for prefix, image in (("", sr), ("bicubic_", bic)):
                for m, value in measure(image, gt, vcfg["metrics"], crop, y).items():
                    scores[prefix + self._key(m)].append(value)
            if vcfg["save_images"] and self.is_main:
                out = self.run_dir / "images" / f"{Path(str(item['name'])).stem}.png"
                out.parent.mkdir(exist_ok=True)
                write_image(out, comparison_strip(bic, sr, gt))
        self.model.train()
        means = {k: float(np.mean(v)) for k, v in scores.items() if v}
        if not self.is_main or not means:
            return means
        metric = "psnr" if "psnr" in vcfg["metrics"] else vcfg["metrics"][0]
        key = self._key(metric)
        better = (lambda a, b: a > b) if higher_is_better(metric) else (lambda a, b: a < b)
        if key in means and (self.best["value"] is None or better(means[key], self.best["value"])):
            self.best = {"value": means[key], "iteration": self.iteration, "metric": key}
            ckpt.save_weights(self.run_dir / "net_best.safetensors", self.model.state_dict(),
                              **self._weights_info(), best=self.best)
        text = ", ".join(f"{k} {v:.4f}" for k, v in means.items())
        self._say(f"[iter {self.iteration}] val ({'Y' if y else 'RGB'}, crop {crop}; bicubic = "
                  f"{vcfg['baseline']}): {text}")
        return means

    def _plot(self):
        key = self._key("psnr") if "psnr" in self.cfg["val"]["metrics"] and self.val_set else None
        plot_curves(self.log, self.run_dir / "curves.png", key, "bicubic_" + key if key else None)

    def _say(self, msg: str) -> None:
        if self.is_main:
            tqdm.write(msg, file=sys.stderr)
