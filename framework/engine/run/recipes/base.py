"""What one training step is, apart from the loop that repeats it.

A `Recipe` (BasicSR's models: SRModel, SRGANModel, RealESRGANModel) owns the networks it trains,
their optimizers, schedulers and losses, one optimisation step, the state a checkpoint holds of
them and the loss-term columns of metrics.csv. The Trainer (framework/engine/run/trainer.py) owns the
loop around it: signals, the run folder, checkpoint cadence, validation, logging. A recipe never
sees the run folder or a signal.

A new kind of training (a teacher for distillation, ZSSR, ...) is a recipe plus its schema block:
a subclass registered in RECIPES (`@RECIPES.register("name")`, the config's `recipe: name`) with
- SCHEMA: the config keys it adds, a nested dict of engine/config/fields.py's Field and Block merged into
  engine/config/schema.py's (a top-level `teacher: Block(MODELS, None)`, a loss role under
  `train.losses`, `train.<its options>`); never a key of another recipe;
- `claims(cfg)`: whether a config without `recipe:` trains with it (gan: a config with model_d);
- `check_config(cfg, where, chosen)` for its cross-checks, and UNUSED, what to say when one of its
  keys is set in a config that trains with another recipe;
- `build()`: the networks beyond the generator (`add_network`) and their optimizers
  (`add_optimizer`), in a fixed order (weights are drawn from the run's seed);
- `step(batch, iteration, dry)`: one optimisation step, each optimizer's through `update()`; the
  generator's forward, losses and backward through `generator_backward`, which replays a captured
  graph when train.capture allows it (framework/capture); UNCAPTURED says why a recipe's step
  never is;
- `done()`, when the recipe decides its own end (ZSSR's learning-rate policy);
- TERMS / `columns()`: its loss-term columns.
Checkpoint state, pretrained weights, the EMA, the data-parallel reduction and the non-finite
checks are written once, here.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

from .... import nn
from .... import weights as ckpt
from ....capture import Capture
from ....io.config import ConfigError
from ....optim import EMA
from ....registry import LOSSES, MODELS, OPTIMIZERS, SCHEDULERS
from ....tensor import Tensor
from ....loading import load_into
from .terms import is_list, loss_terms

__all__ = ["Recipe", "NonFinite", "config_key", "total"]


class NonFinite(Exception):
    """A NaN/Inf loss, gradient or weight under train.nonfinite_loss: stop. `what` names the value,
    `advice` what to change; the Trainer adds the iteration and the last good checkpoint."""

    def __init__(self, what: str, advice: str):
        super().__init__(what)
        self.what, self.advice = what, advice


@contextlib.contextmanager
def config_key(key: str):
    """A constructor's own check (a value the schema cannot judge, a missing folder, an unreadable
    image) becomes a ConfigError naming the config key it came from."""
    try:
        yield
    except (ValueError, TypeError, OSError) as exc:
        raise ConfigError(f"{key}: {exc}") from exc


def total(terms: dict):
    """The sum of the loss terms (Tensors), in order."""
    values = list(terms.values())
    out = values[0]
    for t in values[1:]:
        out = out + t
    return out


@dataclasses.dataclass
class Group:
    """A network and what trains it; `key` is the optimizer's config key (train.<key>)."""
    key: str
    net: object
    optimizer: object
    scheduler: object


class Recipe:
    """Builds everything a recipe trains from a validated config `cfg` (the generator under
    cfg["model"], then `build()`), on communicator `comm`; `say` prints a line (rank 0's).
    Attributes: model (the generator: validated, saved as the weights files), ema (its EMA or
    None), optimizer / scheduler (the generator's), nets and specs (every trained network and its
    spec, by checkpoint name: model, net_d, ...), groups (optimizer key -> Group), terms (the loss
    terms' TermSpecs, in order: recipes/terms.py) and criteria (their losses by role: pixel,
    perceptual, gan, or the list's l1, perceptual, ...)."""

    SCHEMA: dict = {}
    UNUSED: dict = {}
    TERMS: tuple = ()
    PRETRAINED = {"model": "pretrained"}  # network -> its train.<key> weights to start from
    UNCAPTURED: str | None = None  # why this recipe's step is never captured (None: it may be)

    def __init__(self, cfg: dict, comm, say=print):
        self.cfg, self.comm, self.say = cfg, comm, say
        self.scale, self.dtype = cfg["scale"], np.dtype(cfg["dtype"])
        self.nets, self.specs, self.groups = {}, {}, {}
        # weights are a pure function of the seed: initialise under it (networks in a fixed
        # order), then cast
        nn.init.manual_seed(cfg["seed"])
        self.model_spec = {**cfg["model"], "scale": self.scale}
        self.model = self.add_network("model", self.model_spec, "model")
        self.optimizer, self.scheduler = self.add_optimizer("optimizer", self.model)
        self.build()
        for net in self.nets.values():
            comm.broadcast_params(net)  # same seed, same weights; this makes it certain
            net.train()
        decay = cfg["train"]["ema_decay"]
        self.ema = EMA(self.model, decay, cfg["train"]["ema_power"]) if decay > 0 else None
        self.criteria = self.build_losses()
        self.capture = self.build_capture()

    # -- building -----------------------------------------------------------------------------
    def build(self) -> None:
        """The networks and optimizers beyond the generator's (a GAN: the discriminator)."""

    def add_network(self, name: str, spec: dict, key: str):
        """Build `spec` (config key `key`) in the run's dtype, trained as checkpoint name `name`."""
        with config_key(key):
            net = MODELS.build(spec).to(self.dtype)
        self.nets[name], self.specs[name] = net, spec
        return net

    def add_optimizer(self, key: str, net):
        """train.<key> (and its scheduler, train.<key with scheduler for optimizer>) over `net`'s
        parameters. Returns (optimizer, scheduler or None)."""
        tcfg = self.cfg["train"]
        sched_key = key.replace("optimizer", "scheduler")
        with config_key(f"train.{key}"):
            optimizer = OPTIMIZERS.build(tcfg[key], params=list(net.parameters()))
        scheduler = None
        if tcfg[sched_key] is not None:
            with config_key(f"train.{sched_key}"):
                scheduler = SCHEDULERS.build(tcfg[sched_key], optimizer=optimizer)
            why = scheduler.horizon_mismatch(tcfg["total_iters"])
            if why:
                self.say(f"warning: train.{sched_key}: {why} (set it to fit train.total_iters, "
                         f"or pass --fit-schedule to scale it with --set train.total_iters)")
        self.groups[key] = Group(key, net, optimizer, scheduler)
        return optimizer, scheduler

    def build_losses(self) -> dict:
        """The loss terms (terms.loss_terms: either spelling of train.losses), each built and
        cast to the run's dtype; `terms` keeps their TermSpecs in order. Returns {role: loss}."""
        self.terms = loss_terms(self.cfg["train"])
        criteria = {}
        for term in self.terms:
            with config_key(term.key):
                fn = LOSSES.build(term.spec)
            criteria[term.role] = fn.to(self.dtype) if isinstance(fn, nn.Module) else fn
        return criteria

    def build_capture(self) -> Capture:
        """The capture of the generator's forward, losses and backward (`generator_backward`):
        off under train.capture: off or an UNCAPTURED recipe; else its Adam updates every
        parameter in one pass (optim/fused.py: the same bits), unless the config set fused."""
        why = "train.capture: off" if self.cfg["train"].get("capture", "auto") == "off" \
            else self.UNCAPTURED
        capture = Capture(self.capture_modules(), enabled=why is None)
        capture.reason = why
        if why is None and getattr(self.optimizer, "fused", False) is None:
            self.optimizer.fused = True
        return capture

    def capture_modules(self) -> list:
        """The modules the captured step runs (their buffers and training flags are checked):
        the generator and the loss modules."""
        return [self.model] + [c for c in self.criteria.values() if isinstance(c, nn.Module)]

    def capture_summary(self) -> str:
        """The start-up summary's line on the captured step."""
        if not self.capture.enabled:
            return f"step: eager ({self.capture.reason})"
        fused = " and a fused Adam" if getattr(self.optimizer, "fused", False) else ""
        return (f"step: captured (train.capture: auto): recorded on the first two iterations, "
                f"then replayed{fused} if they agree (the same bits as eager)")

    def generator_backward(self, lq, targets: dict):
        """The generator's loss terms on (lq, targets) (`generator_terms`) and their sum, with the
        sum backpropagated into the model's .grad: through the captured graph when it replays,
        else eagerly. Returns (loss, {term name: Tensor})."""
        roles = tuple(targets)

        def run(lq, *ts):
            terms = self.generator_terms(self.model(lq), dict(zip(roles, ts)))
            return {"loss": total(terms), **terms}

        out = self.capture(run, lq, *targets.values(), key=roles)
        loss = out.pop("loss")
        return loss, out

    def columns(self) -> list[str]:
        """metrics.csv's loss-term columns when there is more than one loss term: TERMS for the
        roles' spelling (BasicSR's fixed names), else every term's column and extras."""
        if len(self.criteria) <= 1:
            return []
        if not is_list(self.cfg["train"]):
            return list(self.TERMS)
        return [c for t in self.terms for c in (t.column, *t.extras)]

    # -- one step -----------------------------------------------------------------------------
    def step(self, batch: dict, iteration: int, dry: bool = False):
        """One optimisation step on `batch` (numpy arrays: lq, gt, ...) after `iteration` steps.
        Returns {"loss": ..., and each logged term} (floats, averaged over the ranks), or None when
        a non-finite value skipped it. Raises NonFinite under train.nonfinite_loss: stop. `dry`
        (precompile's dry run, where kernels return garbage): every branch runs, no checks."""
        raise NotImplementedError

    def done(self) -> bool:
        """Whether training is over before train.total_iters (a recipe that decides its own end,
        as ZSSR's learning-rate policy): the loop then saves and stops. Default False."""
        return False

    def dry_step(self, batch: dict) -> None:
        """`step` with every branch taken and no finiteness checks: what precompile records."""
        self.step(batch, 0, dry=True)

    def tensors(self, batch: dict):
        """(lq, {target: Tensor}) in the run's dtype: "gt", and "gt_usm" (`sharpened`) when a term
        compares against the sharpened GT."""
        lq = Tensor(np.asarray(batch["lq"], dtype=self.dtype))
        gt = np.asarray(batch["gt"], dtype=self.dtype)
        targets = {"gt": Tensor(gt)}
        if any(t.target == "gt_usm" for t in self.terms):
            targets["gt_usm"] = Tensor(self.sharpened(batch, gt))
        return lq, targets

    def sharpened(self, batch: dict, gt: np.ndarray) -> np.ndarray:
        """The USM-sharpened target: the dataset's gt_usm, Real-ESRGAN's RealESRNetModel's (the
        crop of the sharpened HR image)."""
        return np.asarray(batch["gt_usm"], dtype=self.dtype)

    def generator_terms(self, sr, targets: dict) -> dict:
        """The generator's loss terms but the adversarial ones and a recipe's own roles (Tensors)
        by metrics.csv name, in order; a loss returning a tuple (PerceptualLoss: percep, style) gives one column per part
        that is not None."""
        terms = {}
        for term in self.terms:
            if term.gan or term.own:
                continue
            out = self.criteria[term.role](sr, targets[term.target])
            parts = out if isinstance(out, tuple) else (out,)
            for name, value in zip((term.column, *term.extras), parts):
                if value is not None:
                    terms[name] = value
        return terms

    def update(self, key: str, values: dict, iteration: int, skipped: str, dry: bool = False):
        """The tail of every optimizer's step, after backward: average the gradients of group
        `key`'s network and `values` (floats, the first one the loss that names the step) over the
        ranks in one Allreduce, check both are finite, then clip, step, check the weights stayed
        finite and advance the schedule. Returns (averaged values, whether it stepped): False when
        a non-finite value was skipped (`skipped` says what, in the warning)."""
        group = self.groups[key]
        values = dict(zip(values, self.reduce(group.net.parameters(), list(values.values()))))
        if not dry and not self._finite(values, group, iteration, skipped):
            return values, False
        tcfg = self.cfg["train"]
        if tcfg["grad_clip"] is not None:
            nn.utils.clip_grad_norm_(group.net.parameters(), tcfg["grad_clip"])
        group.optimizer.step()
        # a finite gradient can still overflow the update (huge lr): never checkpoint such weights
        bad = None if dry else _nonfinite(group.net, "data")
        if bad:
            raise NonFinite(f"the optimizer step made the weights non-finite ({bad}, loss "
                            f"{next(iter(values.values())):.4g})",
                            f"Lower train.{key}.lr or set train.grad_clip")
        if group.scheduler is not None:
            group.scheduler.step()
        return values, True

    def reduce(self, params, values: list) -> list:
        """Every gradient of `params` is ready here, before clipping and the optimizer step: a
        data-parallel run averages them and the loss values over the ranks (one Allreduce, see
        framework.engine.run.distributed); one process: nothing to do. Returns the values."""
        return self.comm.average_gradients_(params, values)

    def _finite(self, values: dict, group: Group, iteration: int, skipped: str) -> bool:
        # a NaN gradient with a finite loss would turn the weights NaN just the same
        bad = next((f"{'loss' if k == 'loss' else f'the loss term {k}'} is {v}"
                    for k, v in values.items() if not math.isfinite(v)), None) \
            or _nonfinite(group.net, "grad")
        if not bad:
            return True
        if self.cfg["train"]["nonfinite_loss"] == "skip":
            self.say(f"warning: {bad} at iteration {iteration + 1}: {skipped}")
            return False
        raise NonFinite(bad, f"Lower train.{group.key}.lr, set train.grad_clip, or set "
                             f"train.nonfinite_loss: skip")

    # -- state ----------------------------------------------------------------------------------
    def state(self) -> tuple[dict, dict]:
        """What a checkpoint holds, by name: (networks' state_dicts: model, net_d, ..., model_ema;
        optimizer and scheduler states: optimizer, scheduler, optimizer_d, ...)."""
        nets = {name: net.state_dict() for name, net in self.nets.items()}
        if self.ema is not None:
            nets["model_ema"] = self.ema.state_dict()
        states = {}
        for key, group in self.groups.items():
            states[key] = group.optimizer.state_dict()
            states[key.replace("optimizer", "scheduler")] = \
                group.scheduler.state_dict() if group.scheduler is not None else None
        return nets, states

    def check_state(self, state: dict, path) -> None:
        """Raise CheckpointError unless checkpoint `state` (load_checkpoint's) holds every network
        (matching) and optimizer state `state()` saves; called before anything is loaded. A
        checkpoint from before train.ema_decay was set has no EMA: it starts from the weights."""
        ckpt.check_state_matches(self.model, state["model"], str(path))
        nets = {name: net for name, net in self.nets.items() if name != "model"}
        if self.ema is not None:
            nets["model_ema"] = self.ema.module
            if not state.get("model_ema"):
                state["model_ema"] = state["model"]
                self.say(f"note: {path} holds no EMA weights: the EMA starts from its weights")
        for name, net in nets.items():
            if not state.get(name):
                raise ckpt.CheckpointError(f"{path} holds no {name} weights (a checkpoint of a "
                                           f"run without {name}?)")
            ckpt.check_state_matches(net, state[name], f"{path} ({name})")
        for key in self.groups:
            if not state.get(key):
                raise ckpt.CheckpointError(f"{path} holds no {key} state (a checkpoint of a run "
                                           f"without it?)")

    def load_state(self, state: dict, path) -> None:
        """Load a checkpoint `state` (read from `path`) that passed `check_state`."""
        for name, net in self.nets.items():
            load_into(net, path if name == "model" else f"{path} ({name})", state=state[name])
        if self.ema is not None:
            self.ema.load_state_dict(state["model_ema"])
        for key, group in self.groups.items():
            group.optimizer.load_state_dict(state[key])
            sched = state.get(key.replace("optimizer", "scheduler"))
            if group.scheduler is not None and sched is not None:
                group.scheduler.load_state_dict(sched)

    def load_pretrained(self) -> bool:
        """A new run starts from each network's train.<PRETRAINED key> weights when given (the
        EMA from the generator's). Returns whether any were loaded."""
        loaded = False
        for name, key in self.PRETRAINED.items():
            spec = self.cfg["train"][key]
            if spec["path"] is None:
                continue
            net = self.nets[name]
            info = load_into(net, spec["path"], spec["key"], strict=spec["strict"], where=f"train.{key}",
                             say=self.say, spec=self.model_spec if name == "model" else None)
            loaded = True
            self.say(f"train.{key}: starting from {spec['path']} ({info.get('key') or 'weights'})")
            self.comm.broadcast_params(net)
        if self.ema is not None:
            self.ema.load_state_dict(self.model.state_dict())
        return loaded

    # -- the config -----------------------------------------------------------------------------
    @classmethod
    def claims(cls, cfg: dict) -> bool:
        """Whether a config without `recipe:` trains with this recipe (it sets the recipe's own
        keys)."""
        return False

    @classmethod
    def check_config(cls, cfg: dict, where, chosen: bool) -> list[str]:
        """Problems with a validated config (defaults filled in), each `where(dotted key) + ": " +
        message`; `chosen`: whether the config trains with this recipe. (Its keys set in a config
        that trains with another recipe are found by engine/config/schema.py, with UNUSED's words.)"""
        return []


def _nonfinite(net, attr: str):
    """A phrase naming the first parameter of `net` whose `.grad` (attr "grad") or `.data`
    holds a NaN or Inf, else None."""
    for name, p in net.named_parameters():
        values = p.data if attr == "data" else None if p.grad is None else p.grad.data
        if values is not None and not np.isfinite(values).all():
            return f"the {'gradient' if attr == 'grad' else 'value'} of {name} is not finite"
    return None
