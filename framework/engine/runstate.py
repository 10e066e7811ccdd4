"""What makes a training run resumable: its run folder (checkpoints, config.yaml, metrics.csv),
checkpoints written and read back, and Ctrl-C / SIGTERM handled as "finish the iteration, save,
stop". `RunState` is the Trainer's half that deals with them; it reads the Trainer's networks
through `_trained()`, `_parts()` and `_optimizer_states()`, which a GAN trainer extends.
"""
from __future__ import annotations

import signal
from pathlib import Path

from .. import weights as ckpt
from ..io.atomic import write_atomic
from ..io.config import dump_config
from ..weights import load_into
from .runlog import MetricsLog
from .schema import config_hash

__all__ = ["RunState", "TrainingError", "TrainingInterrupted", "find_latest_checkpoint", "CKPT_GLOB"]

CKPT_GLOB = "iter_*.safetensors"
_SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


class TrainingError(RuntimeError):
    """Training cannot go on (non-finite loss, run folder already used, ...)."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: a checkpoint was saved (or the message says which one is the latest);
    `resume_hint` says how to continue, `signum` which signal it was (the exit code is 128 + it)."""

    def __init__(self, message, resume_hint="", signum=signal.SIGINT):
        super().__init__(message)
        self.resume_hint, self.signum = resume_hint, int(signum)


def find_latest_checkpoint(run_dir):
    """The checkpoint with the highest iteration in run_dir/checkpoints, or None."""
    files = sorted(Path(run_dir, "checkpoints").glob(CKPT_GLOB))
    return files[-1] if files else None


class RunState:
    """Mixin of Trainer: the run folder, checkpoints and stop signals (see the module docstring)."""

    # -- run folder and checkpoints ---------------------------------------------------------
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
        if ckpt_path is None:
            self._load_pretrained()
        if self.is_main:
            (self.run_dir / "checkpoints").mkdir(exist_ok=True)
            write_atomic(self.run_dir / "config.yaml", dump_config(self.cfg).encode())
            self.log = MetricsLog(self.run_dir / "metrics.csv", self._columns(),
                                  resume_iteration=self.iteration if ckpt_path else None)
            self._tensorboard = self._open_tensorboard()
            self._summary()
        return self.iteration

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
        nets = self._load_parts(state, path)
        logs = state.get("log") or {}
        terms = logs.get("terms", {"loss": logs.get("losses", [])}) if isinstance(logs, dict) else None
        if not isinstance(terms, dict) or not all(
                isinstance(v, list) and all(isinstance(x, (int, float)) for x in v)
                for v in terms.values()):
            raise ckpt.CheckpointError(f"{path}: unreadable log state {logs!r}")
        load_into(self.model, path, state=state["model"])  # everything checked above: now load
        for name, net in nets.items():
            load_into(net, f"{path} ({name})", state=state[name])
        self._load_optimizers(state)
        self.iteration = int(state["iteration"])
        self.best = state.get("best") or self.best
        self.elapsed = float(state.get("elapsed", 0.0))
        self._terms = {k: [float(x) for x in v] for k, v in terms.items() if v}
        self._pending = logs.get("pending")
        if state.get("config_hash") != config_hash(self._hashed_config()):
            self._say("note: the config differs from the one that wrote the checkpoint")
        self._say(f"resumed from {path} at iteration {self.iteration}")

    def _parts(self) -> tuple[dict, dict]:
        """(networks, optimizer/scheduler states) a checkpoint holds beyond model, optimizer and
        scheduler, by name."""
        nets = {name: net.state_dict() for name, net in self._trained().items() if name != "model"}
        if self.ema is not None:
            nets["model_ema"] = self.ema.state_dict()
        return nets, {}

    def _load_parts(self, state: dict, path) -> dict:
        """Check everything `_parts` saved against the networks (before anything is loaded);
        returns {name: network} to load. A checkpoint from before train.ema_decay was set has no
        EMA: it starts from the loaded weights."""
        nets = {name: net for name, net in self._trained().items() if name != "model"}
        if self.ema is not None:
            if state.get("model_ema"):
                nets["model_ema"] = self.ema.module
            else:
                state["model_ema"] = state["model"]
                self._say(f"note: {path} holds no EMA weights: the EMA starts from its weights")
                nets["model_ema"] = self.ema.module
        for name, net in nets.items():
            if not state.get(name):
                raise ckpt.CheckpointError(f"{path} holds no {name} weights (a checkpoint of a "
                                           f"run without {name}?)")
            ckpt.check_state_matches(net, state[name], f"{path} ({name})")
        return nets

    def _load_optimizers(self, state):
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])

    def _hashed_config(self):
        # total_iters may grow on resume (train longer) without being a different run
        return {**self.cfg, "train": {**self.cfg["train"], "total_iters": None}}

    def _last_checkpoint(self):
        return find_latest_checkpoint(self.run_dir) or "none yet"

    # -- Ctrl-C and SIGTERM -----------------------------------------------------------------
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

    def _interrupt(self, during=None):
        self.save()
        self._out.close()
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

    # -- saving -----------------------------------------------------------------------------
    def _weights_info(self):
        return {"model": self.model_spec, "scale": self.scale, "dtype": str(self.dtype),
                "iteration": self.iteration, "name": self.cfg["name"],
                "imports": self.cfg["imports"]}

    def _optimizer_states(self) -> dict:
        """Optimizer and scheduler states beyond the generator's, by name (GANTrainer: _d)."""
        return {}

    def save(self) -> None:
        """Checkpoint of this iteration (atomic), net_latest (the weights, and their EMA as
        params_ema), and pruning to `checkpoint.keep`."""
        if not self.is_main:
            return
        folder = self.run_dir / "checkpoints"
        path = folder / f"iter_{self.iteration:08d}.safetensors"
        nets, _ = self._parts()
        ckpt.save_checkpoint(
            path, self.model.state_dict(), self.optimizer.state_dict(),
            self.scheduler.state_dict() if self.scheduler is not None else None,
            nets=nets, states=self._optimizer_states(),
            iteration=self.iteration, best=self.best, elapsed=self.elapsed,
            config_hash=config_hash(self._hashed_config()), rng=None,
            log={"terms": {k: list(v) for k, v in self._terms.items()}, "pending": self._pending},
            **{k: v for k, v in self._weights_info().items() if k != "iteration"})
        self._save_weights(self.run_dir / "net_latest.safetensors")
        for old in sorted(folder.glob(CKPT_GLOB))[:-self.cfg["checkpoint"]["keep"]]:
            old.unlink()

    def _save_weights(self, path, **info):
        ckpt.save_weights(path, self.model.state_dict(),
                          ema_state=self.ema.state_dict() if self.ema is not None else None,
                          **self._weights_info(), **info)
