"""The training loop behind `srgrad-train`: build everything from a validated config, train with a
progress bar (or plain log lines), validate against the bicubic baseline, checkpoint atomically,
resume exactly. The Trainer owns the loop (stop signals, checkpoint cadence, validation, logging,
progress) and the run folder (engine/run/runfolder.py); what one step is belongs to the config's
recipe (engine/recipes: sr, gan, ...), which owns the networks, their optimizers and losses.

Exact resume: a run's state after iteration i is (every network's weights, the weights' EMA, every
optimizer's and scheduler's state, i); the batch loader is a pure function of (seed, iteration) and
the framework's random stream (dropout) is reseeded from (seed, iteration) before each step, so a
run resumed from the checkpoint of iteration i computes bit-identical weights to one that never
stopped.

Data parallelism (over MPI, framework.engine.run.distributed) hooks in at one place, the recipe's
`reduce` (every gradient ready, before the optimizer step); each rank loads its rows of the global
batch; writes, logs, progress bars and validation happen only where `self.is_main`; a stop signal
that reached any rank is acted on by every rank at the same iteration (`comm.max_`): rank 0 saves,
the others wait for its checkpoint, all exit 128 + the signal.
"""
from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path

import numpy as np

from ... import random
from ...metrics import higher_is_better
from ...precision import autocast, route
from ...registry import DATASETS, RECIPES
from . import distributed
from .recipes import NonFinite, config_key, recipe_name
from .runfolder import (RunFolder, TrainingError, TrainingInterrupted,  # noqa: F401  re-exported
                        find_latest_checkpoint)
from .runlog import Progress, duration, plot_curves
from ..config.schema import config_hash
from .tensorboard import scalar_tag
from .validation import ValidationStopped, Validator, column, main_metric

__all__ = ["Trainer", "TrainingError", "TrainingInterrupted", "find_latest_checkpoint"]

# the framework's random stream for step i is seeded (seed, i, _STEP_STREAM, 1): four words, so it
# never coincides with the data's three-word (seed, epoch, k) streams
_STEP_STREAM = 0x5EED
_SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


def images(n: int, kind: str) -> str:
    """'1 training image', '3 validation images'."""
    return f"{n} {kind} image{'' if n == 1 else 's'}"


class Trainer:
    """Train `cfg` (a dict from framework.engine.config.schema.load_config) in `run_dir` (default
    `<run_root>/<name>`). `resume`: None (fresh; refuses a folder that already holds checkpoints),
    "auto" (the newest checkpoint of the run folder that loads, fresh when there is none) or a
    checkpoint path. `config_path` is only used in printed hints. `comm`: a
    framework.engine.run.distributed communicator (default: one process). `progress`: a bar on a
    terminal (False: plain log lines). `recipe` is the config's (recipe_name), `model` its
    generator."""

    def __init__(self, cfg: dict, run_dir=None, resume=None, progress: bool = True,
                 config_path=None, comm=None):
        self.cfg = cfg
        self.scale = cfg["scale"]
        self.dtype = np.dtype(cfg["dtype"])
        self.resume, self.progress, self.config_path = resume, progress, config_path
        self.comm = comm if comm is not None else distributed.SingleProcess()
        self.rank, self.world_size = self.comm.rank, self.comm.world_size
        self.folder = RunFolder(run_dir or Path(cfg["run_root"]) / cfg["name"], self.is_main)
        self.run_dir = self.folder.path
        self.iteration = 0
        self.best = {"value": None, "iteration": None}
        self.elapsed = 0.0
        self._stop_signal = None  # the first SIGINT/SIGTERM received: stop after this iteration
        self._finishing = False  # fit() is cleaning up: signals are ignored until it returns
        self._complete = False  # the last iteration is saved: a signal now stops at once
        self._terms: dict[str, list[float]] = {}  # loss terms since the last metrics.csv row
        self._pending = None  # the metrics row of an iteration whose validation is unfinished
        self._pretrained = False  # a new run that starts from train.pretrained weights
        self._tensorboard = None
        self._out = Progress(1, 0, cfg["name"], 1, bar=False, enabled=self.is_main)
        self.recipe = RECIPES.get(recipe_name(cfg))(cfg, self.comm, self._say)
        self._build_data()

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def model(self):
        """The generator: what validation scores and the weights files hold."""
        return self.recipe.model

    def _build_data(self):
        cfg, tcfg = self.cfg, self.cfg["train"]
        with config_key("datasets.train"):
            self.train_set = DATASETS.build(cfg["datasets"]["train"], scale=self.scale)
        val_spec = cfg["datasets"]["val"]
        with config_key("datasets.val"):
            self.val_set = DATASETS.build(val_spec, scale=self.scale) if val_spec else None
        from ...data import BatchLoader
        with config_key("train.batch_size"):
            self.loader = BatchLoader(self.train_set, tcfg["batch_size"], seed=cfg["seed"],
                                      shuffle=True, rank=self.rank, world_size=self.world_size)
        self.validator = Validator(self.val_set, cfg["val"], self.scale, self.run_dir,
                                   self.progress and self.is_main, self.is_main) \
            if self.val_set is not None else None

    # -- public entry -----------------------------------------------------------------------------
    def fit(self) -> dict:
        """Train to `train.total_iters`. Returns {"iteration", "best", "run_dir", "val"}.
        Raises TrainingInterrupted on Ctrl-C or SIGTERM (after saving), TrainingError on a
        non-finite loss."""
        self.folder.open()
        self._finishing = False
        previous = self._install_signals()
        try:
            start = self._prepare_run()
            self.comm.check_same(start, "the iteration to resume at")
            return self._loop(start)
        except TrainingInterrupted:
            raise
        except KeyboardInterrupt:  # a second signal: stopped at once, maybe inside a write
            if self._complete:  # or a first one while curves.png was drawn: nothing is lost
                raise self._interrupted_complete() from None
            raise self._interrupted_again() from None
        finally:
            # stopped or done: a further signal no longer interrupts the cleanup (the lock's
            # release); once the caller's handlers are back, the caller's code handles it
            self._finishing = True
            self.folder.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    # -- starting and resuming --------------------------------------------------------------------
    def _prepare_run(self) -> int:
        ckpt_path = None
        if self.resume == "auto":
            ckpt_path = self.folder.load_newest(self._load_checkpoint, self._say)
            if ckpt_path is None:
                self._say(f"no checkpoint in {self.run_dir}: starting a new run")
        elif self.resume:
            ckpt_path = Path(self.resume)
            self._load_checkpoint(ckpt_path)
        elif self.folder.latest() is not None:
            raise TrainingError(
                f"run folder {self.run_dir} already holds checkpoints: continue it with "
                f"--resume auto, or start another run with --set name=NEW_NAME")
        if ckpt_path is None:
            self._load_pretrained()
        columns = ["iteration", "time_s", "loss", "lr", *self.recipe.columns(),
                   *(self.validator.columns() if self.validator else [])]
        self.folder.start(self.cfg, columns, self.iteration if ckpt_path else None)
        if self.is_main:
            self._tensorboard = self._open_tensorboard()
            self._summary()
        return self.iteration

    def _load_pretrained(self):
        """train.pretrained (and each network's): a new run starts from these weights (and
        validates them first, as iteration 0); a resumed run has its own."""
        self._pretrained = self.recipe.load_pretrained()

    def _load_checkpoint(self, path):
        """Everything a checkpoint holds, checked before anything is loaded."""
        from ... import weights as ckpt
        state = ckpt.load_checkpoint(path)
        self.recipe.check_state(state, path)
        logs = state.get("log") or {}
        terms = logs.get("terms", {"loss": logs.get("losses", [])}) if isinstance(logs, dict) else None
        if not isinstance(terms, dict) or not all(
                isinstance(v, list) and all(isinstance(x, (int, float)) for x in v)
                for v in terms.values()):
            raise ckpt.CheckpointError(f"{path}: unreadable log state {logs!r}")
        self.recipe.load_state(state, path)
        self.iteration = int(state["iteration"])
        self.best = state.get("best") or self.best
        self.elapsed = float(state.get("elapsed", 0.0))
        self._terms = {k: [float(x) for x in v] for k, v in terms.items() if v}
        self._pending = logs.get("pending")
        if state.get("config_hash") != config_hash(self._hashed_config()):
            self._say("note: the config differs from the one that wrote the checkpoint")
        self._say(f"resumed from {path} at iteration {self.iteration}")

    def _hashed_config(self):
        # total_iters may grow on resume (train longer) without being a different run; recipe:
        # null, ema_power: null, precision: fp32 and losses.qf: null (recipe fbcnn's role) are
        # what every config meant before the keys existed
        cfg = {k: v for k, v in self.cfg.items() if not (k == "recipe" and v is None)}
        train = {k: v for k, v in self.cfg["train"].items()
                 if not (k == "ema_power" and v is None) and not (k == "precision" and v == "fp32")}
        losses = train.get("losses")
        if isinstance(losses, dict) and "qf" in losses and losses["qf"] is None:
            train["losses"] = {k: v for k, v in losses.items() if k != "qf"}
        return {**cfg, "train": {**train, "total_iters": None}}

    def _summary(self):
        """What is about to run, in a few lines (rank 0)."""
        import numba
        tcfg = self.cfg["train"]
        ema = self.recipe.ema
        for name, net in self.recipe.nets.items():
            count = sum(p.data.size for p in net.parameters())
            extra = " + EMA" if name == "model" and ema is not None else ""
            self._say(f"{name}: {self.recipe.specs[name]['type']}, {count:,} parameters "
                      f"({self.dtype}){extra}")
        gt = getattr(self.train_set, "gt_size", None)  # read no image here: errors belong to the loop
        crops = f"patches gt {gt}x{gt} -> lq {gt // self.scale}x{gt // self.scale}" if gt else \
            "whole images"
        val = f", {images(len(self.val_set), 'validation')}" if self.val_set is not None else ""
        self._say(f"data: {images(len(self.train_set), 'training')} "
                  f"({type(self.train_set).__name__}, "
                  f"{crops}, batch {tcfg['batch_size']}){val}")
        if tcfg["precision"] == "bf16":
            self._say(f"precision: bf16 operands, float32 sums, weights and optimizer state ({route()})")
        self._say(f"threads: {numba.get_num_threads()}, ranks: {self.world_size}; iterations "
                  f"{self.iteration} -> {tcfg['total_iters']}; run folder {self.run_dir}")
        self._say(self.recipe.capture_summary())

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
        from ...data import Prefetcher
        batches = Prefetcher(self.loader, start, max(start, total), tcfg["loader"]["workers"],
                             tcfg["loader"]["prefetch"])
        try:
            if self._pending is not None:  # resumed where a validation was interrupted: redo it
                last_val = self._log_row(self._pending, validate=True)
            elif start == 0 and self._pretrained and self.val_set is not None:
                last_val = self._log_row({}, validate=True)  # where the fine-tuning starts from
            while self.iteration < total and not self.recipe.done():
                stop = self.comm.max_(self._stop_signal or 0)
                if stop:
                    self._interrupt(stop)
                with self._data_errors("the training batch"):
                    batch = next(batches)
                random.manual_seed([self.cfg["seed"], self.iteration, _STEP_STREAM, 1])
                values = self._train_step(batch)
                self.iteration += 1
                if self.iteration - start == 2 and self.recipe.capture.enabled:
                    self._say(f"step: {self.recipe.capture.status()}")
                self.elapsed = time.perf_counter() - t0
                for k, v in (values or {}).items():
                    self._terms.setdefault(k, []).append(v)
                lr = self.recipe.optimizer.param_groups[0]["lr"]
                self._out.update(self.iteration, (values or {}).get("loss"), lr)
                timing = self._estimate(timing, start, total)
                row = {}
                if (self.iteration % tcfg["log_every"] == 0 or self.iteration == total) \
                        and any(self._terms.values()):
                    row.update({k: float(np.mean(v)) for k, v in self._terms.items() if v}, lr=lr)
                    self._terms = {}
                last_val = self._log_row(row, validate=self._validation_due(total)) or last_val
                if self._pending is None and (self.iteration % ccfg["every"] == 0
                                              or self.iteration == total):
                    self.save()
                    last_ckpt = self.iteration
            # a signal during the last iteration or the final validation (on any rank): the run
            # stops as at any other iteration, saved, and says so (it used to draw its curves and
            # exit 0 after printing that it would stop)
            stop = self.comm.max_(self._stop_signal or 0)
            if stop:
                self._interrupt(stop, save=self._pending is not None or last_ckpt != self.iteration)
            if last_ckpt != self.iteration:  # resumed at the end: still leave net_latest
                self.save()
        finally:
            batches.close(wait=False)
            self._out.close()
            if self._tensorboard is not None:
                self._tensorboard.close()
        self._complete = True  # everything is on disk: a signal now stops at once (the curves left)
        if self._stop_signal is not None:  # one that came after the check above
            raise KeyboardInterrupt
        if self.is_main:
            self._plot()
        return {"iteration": self.iteration, "best": self.best, "run_dir": str(self.run_dir),
                "val": last_val}

    def _train_step(self, batch):
        """The recipe's step at this iteration: {"loss", and each term logged}, or None for a
        skipped non-finite batch; a non-finite value under nonfinite_loss: stop is a
        TrainingError naming the iteration and the last good checkpoint."""
        try:
            with autocast(self.cfg["train"]["precision"]):  # the ops read it; the rest stays float32
                return self.recipe.step(batch, self.iteration)
        except NonFinite as exc:
            raise TrainingError(
                f"{exc.what} at iteration {self.iteration + 1}: training stopped. The last good "
                f"checkpoint ({self.folder.latest() or 'none yet'}) is untouched. "
                f"{exc.advice}") from None

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
        one row). A stop signal during the validation leaves the row unwritten in `_pending`: the
        loop then stops (on every rank) and saves a checkpoint holding it, so a resume redoes the
        validation and writes the same row. Returns the validation means."""
        means = None
        if validate and self.is_main:
            self._pending = dict(row)
            try:
                means = self.validate()
            except ValidationStopped:
                return None
            self._pending = None
            row = {**row, **means}
        if row and self.is_main:
            self.folder.log.write(iteration=self.iteration, time_s=round(self.elapsed, 3), **row)
            if self._tensorboard is not None:  # tags grouped as BasicSR's: losses/, metrics/val/
                metrics = self.validator.columns() if self.validator else ()
                for k, v in row.items():
                    self._tensorboard.add_scalar(scalar_tag(k, metrics), v, self.iteration)
        return means

    @contextlib.contextmanager
    def _data_errors(self, what: str):
        """An image that fails only when its pixels are first decoded (the dataset scan reads
        headers) stops training with the file's name and how to continue."""
        try:
            yield
        except (ValueError, OSError) as exc:
            raise TrainingError(
                f"cannot load {what} of iteration {self.iteration + 1}: {exc}. The last "
                f"checkpoint ({self.folder.latest() or 'none yet'}) is intact: fix or remove the "
                f"file (or set bad_files: skip in the dataset) and continue with --resume auto") \
                from exc

    # -- validation -------------------------------------------------------------------------------
    def validate(self) -> dict:
        """PSNR/SSIM of the model (its EMA when train.ema_decay is set) and of the bicubic
        baseline over the full validation images; updates net_best, writes the comparison PNGs.
        Returns the means (metric name -> value)."""
        ema = self.recipe.ema
        model = ema.module if ema is not None else self.model
        with autocast(self.cfg["train"]["precision"]):  # validated as trained (traiNNer-redux's amp)
            means = self.validator(model, self.iteration, stop=lambda: self._stop_signal is not None)
        if not self.is_main or not means:
            return means
        vcfg = self.cfg["val"]
        metric = main_metric(vcfg["metrics"])
        key = self._key(metric)
        better = (lambda a, b: a > b) if higher_is_better(metric) else (lambda a, b: a < b)
        if key in means and (self.best["value"] is None or better(means[key], self.best["value"])):
            self.best = {"value": means[key], "iteration": self.iteration, "metric": key}
            self._save_weights("net_best.safetensors", best=self.best)
        if self._tensorboard is not None:
            for stem, strip in self.validator.last_images.items():
                self._tensorboard.add_image(f"val/{stem}", strip, self.iteration)
        crop = self.validator.crop
        text = ", ".join(f"{k} {v:.4f}" for k, v in means.items())
        which = " (EMA weights)" if ema is not None else ""
        self._say(f"[iter {self.iteration}] val{which} ({'Y' if vcfg['y_channel'] else 'RGB'}, crop "
                  f"{crop}; bicubic = {vcfg['baseline']}): {text}")
        return means

    def _key(self, metric):
        return column(metric, self.cfg["val"]["y_channel"])

    def _plot(self):
        key = self._key("psnr") if "psnr" in self.cfg["val"]["metrics"] and self.val_set else None
        plot_curves(self.folder.log, self.run_dir / "curves.png", key,
                    "bicubic_" + key if key else None)

    # -- saving -----------------------------------------------------------------------------------
    def _weights_info(self):
        return {"model": self.recipe.model_spec, "scale": self.scale, "dtype": str(self.dtype),
                "iteration": self.iteration, "name": self.cfg["name"],
                "imports": self.cfg["imports"]}

    def save(self) -> None:
        """Checkpoint of this iteration (atomic), net_latest (the weights, and their EMA as
        params_ema), and pruning to `checkpoint.keep` (rank 0)."""
        if not self.is_main:
            return
        nets, states = self.recipe.state()
        self.folder.save_checkpoint(
            self.iteration, nets, states, best=self.best, elapsed=self.elapsed,
            config_hash=config_hash(self._hashed_config()), rng=None,
            log={"terms": {k: list(v) for k, v in self._terms.items()}, "pending": self._pending},
            **{k: v for k, v in self._weights_info().items() if k != "iteration"})
        self._save_weights("net_latest.safetensors")
        self.folder.prune(self.cfg["checkpoint"]["keep"])

    def _save_weights(self, name, **info):
        ema = self.recipe.ema
        self.folder.save_weights(name, self.model.state_dict(),
                                 ema.state_dict() if ema is not None else None,
                                 **self._weights_info(), **info)

    # -- Ctrl-C and SIGTERM -----------------------------------------------------------------------
    def _install_signals(self) -> dict:
        """First SIGINT or SIGTERM (what kill, Docker, Slurm, Kubernetes and mpirun send): finish
        the current iteration (or stop the validation), save, stop. A second one: stop at once.
        Returns the previous handlers."""
        def handler(signum, frame):
            if self._finishing:
                return
            if self._complete:  # everything is on disk: stop drawing the curves at once
                self._stop_signal = signum
                raise KeyboardInterrupt
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

    def _interrupt(self, signum: int, save=True):
        """Every rank stops here at the same iteration, for signal `signum` (whichever rank it
        reached): rank 0 saves (with the row of a stopped validation; not `save`: this iteration's
        checkpoint is already written), the others wait for it, then all raise
        TrainingInterrupted."""
        during = self._pending is not None
        if save:
            self.save()
        # nobody exits (under mpirun an exit can end the job) before the checkpoint is whole
        self.comm.barrier()
        self._out.close()
        hint = self._resume_hint()
        where = f" during the validation of iteration {self.iteration} (it runs again on resume)" \
            if during else ""
        if not during and (self.iteration >= self.cfg["train"]["total_iters"] or self.recipe.done()):
            self._say_complete()
        else:
            self._say(f"interrupted at iteration {self.iteration}{where}; checkpoint saved in "
                      f"{self.folder.checkpoints}. Resume with:\n  {hint}")
        raise TrainingInterrupted(f"interrupted at iteration {self.iteration}", hint, signum)

    def _interrupted_complete(self) -> TrainingInterrupted:
        """A signal while the finished run drew its curves (everything else on disk)."""
        self._say_complete()
        return TrainingInterrupted(f"interrupted after the last iteration ({self.iteration})",
                                   self._resume_hint(), self._stop_signal or signal.SIGINT)

    def _say_complete(self) -> None:
        self._say(f"interrupted after the last iteration ({self.iteration}): the run is complete, "
                  f"its checkpoint saved in {self.folder.checkpoints}; {self.run_dir / 'curves.png'} "
                  f"not drawn")

    def _interrupted_again(self) -> TrainingInterrupted:
        """A second signal stopped the process at once, maybe inside a write: say what is on
        disk."""
        hint, signum = self._resume_hint(), self._stop_signal or signal.SIGINT
        if self.is_main:
            self._say(f"interrupted again at iteration {self.iteration}: "
                      f"{self.folder.on_disk(self.iteration)}. Resume with:\n  {hint}")
        return TrainingInterrupted(f"interrupted again at iteration {self.iteration}", hint, signum,
                                   saved=False)

    def _say(self, msg: str) -> None:
        if self.is_main:
            self._out.write(msg)
