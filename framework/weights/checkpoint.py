"""Checkpoints and weights as single safetensors files: arrays in the tensor section, everything else as
JSON in the header metadata. Never pickle, in either direction.

A training checkpoint holds `model.<key>` weights, `optimizer.<path>` / `scheduler.<path>` arrays and
one JSON document (key "srgrad" of the metadata) with the optimizer and scheduler state_dicts (their
arrays replaced by references into the tensor section), the iteration, RNG state and config hash.
A weights file (`net_latest.safetensors`) holds `model.<key>` weights and JSON metadata with the model
spec, so inference needs no config. Writes are atomic (framework.io.atomic): a crash or a full
disk leaves the previous file intact.
"""
from __future__ import annotations

import json
import os

import numpy as np
import safetensors.numpy

from ..io.atomic import write_atomic
from .errors import CheckpointError
from .pth import load_pth_state_dict

__all__ = ["save_checkpoint", "load_checkpoint", "save_weights", "load_weights",
           "read_safetensors", "check_state_matches", "is_pytorch_file", "file_format",
           "WEIGHT_GROUPS", "CHECKPOINT_FORMAT", "WEIGHTS_FORMAT"]

CHECKPOINT_FORMAT = "srgrad.checkpoint/1"
WEIGHTS_FORMAT = "srgrad.weights/1"
_ARRAY = "__array__"


# -- pickle-free state_dict <-> (JSON, arrays) ----------------------------------------------------
def _flatten(obj, prefix: str, arrays: dict):
    """Replace every numpy array (and numpy scalar, kept with its dtype) by a reference
    `{"__array__": key}` and collect the arrays; the rest must be JSON types."""
    if isinstance(obj, (np.ndarray, np.generic)):
        arrays[prefix] = np.require(np.array(obj) if isinstance(obj, np.generic) else obj,
                                    requirements="C")
        return {_ARRAY: prefix, "scalar": isinstance(obj, np.generic)}
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"state key {k!r} at {prefix!r} is not a str or int")
            out[str(k)] = _flatten(v, f"{prefix}.{k}", arrays)
        return out
    if isinstance(obj, (list, tuple)):
        return [_flatten(v, f"{prefix}.{i}", arrays) for i, v in enumerate(obj)]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"state value at {prefix!r} has type {type(obj).__name__}; a state_dict may "
                    f"hold only dicts, lists, Python scalars, str, None and numpy arrays")


def _unflatten(obj, arrays: dict, source: str):
    if isinstance(obj, dict):
        if _ARRAY in obj:
            key = obj[_ARRAY]
            if key not in arrays:
                raise CheckpointError(f"{source}: metadata refers to array {key!r} that the file "
                                      f"does not hold")
            arr = arrays[key]
            return arr[()] if obj.get("scalar") else arr
        return {k: _unflatten(v, arrays, source) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unflatten(v, arrays, source) for v in obj]
    return obj


# -- file level -----------------------------------------------------------------------------------
def _serialize(tensors: dict, info: dict, fmt: str) -> bytes:
    meta = {"format": fmt, "srgrad": json.dumps(info, allow_nan=True)}
    # np.require keeps 0-d arrays 0-d (np.ascontiguousarray would make them 1-d)
    return safetensors.numpy.save({k: np.require(v, requirements="C") for k, v in tensors.items()},
                                  metadata=meta)


def read_safetensors(path):
    """(arrays, metadata dict of str) from a safetensors file, checked before parsing: a pickle or
    zip (PyTorch .pt) file is refused without being loaded, a truncated file is named as such."""
    source = os.fspath(path)
    try:
        with open(source, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise CheckpointError(f"cannot read {source}: {exc.strerror}") from None
    if len(data) < 9:
        raise CheckpointError(f"{source} is empty or truncated ({len(data)} bytes): not a "
                              f"safetensors file")
    n = int.from_bytes(data[:8], "little")
    looks_safetensors = data[8:9] == b"{"
    # a safetensors header length can start with byte 0x80 too: look for pickle only otherwise
    if not looks_safetensors and (data[:1] == b"\x80" or data[:2] == b"PK" or
                                  data[:6] == b"\x93NUMPY"):
        raise CheckpointError(f"{source} is not a safetensors file (it looks like a pickle, PyTorch "
                              f".pt/.pth or .npy file); weights are read with load_weights, which "
                              f"takes PyTorch files safely; a checkpoint to resume must be srgrad's")
    if not looks_safetensors:
        raise CheckpointError(f"{source} is not a safetensors file (bad header)")
    if n > len(data) - 8:
        raise CheckpointError(f"{source} is truncated: its header needs {n} bytes, the file has "
                              f"{len(data) - 8}")
    try:
        header = json.loads(data[8:8 + n])
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"),
                  default=0)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError):
        # RecursionError: JSON nested past Python's limit, a hostile header
        raise CheckpointError(f"{source} is not a safetensors file (unreadable header)") from None
    if 8 + n + end > len(data):
        raise CheckpointError(f"{source} is truncated: its tensors need {8 + n + end} bytes, the "
                              f"file has {len(data)} (an interrupted copy or download?)")
    try:
        arrays = safetensors.numpy.load(data)
    except Exception as exc:  # safetensors raises its own error type
        raise CheckpointError(f"{source}: corrupt safetensors file: {exc}") from None
    return arrays, header.get("__metadata__") or {}


def file_format(path, limit: int = 100_000_000):
    """The `format` srgrad's metadata gives a safetensors file (CHECKPOINT_FORMAT, WEIGHTS_FORMAT),
    read from its header alone (at most `limit` bytes, safetensors' own bound), or None: not
    srgrad's (another program's safetensors file, a plain state_dict), unreadable, not a regular
    file (a FIFO would block), or no safetensors file at all."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if not 2 <= n <= limit:
                return None
            meta = json.loads(fh.read(n)).get("__metadata__") or {}
    except (OSError, ValueError, RecursionError, AttributeError):
        return None
    fmt = meta.get("format") if isinstance(meta, dict) else None
    return fmt if fmt in (CHECKPOINT_FORMAT, WEIGHTS_FORMAT) else None


def _info(meta: dict, source: str) -> dict:
    try:
        return json.loads(meta.get("srgrad", "{}"))
    except (ValueError, RecursionError):
        raise CheckpointError(f"{source}: unreadable srgrad metadata") from None


# -- checkpoints ----------------------------------------------------------------------------------
def save_checkpoint(path, model_state: dict, optimizer_state=None, scheduler_state=None, *,
                    nets: dict | None = None, states: dict | None = None, **info) -> None:
    """Atomically write a training checkpoint. `nets`: further networks' state_dicts by name
    (the weights' EMA "model_ema", a GAN's "net_d"), stored as `<name>.<key>` tensors; `states`:
    further optimizer / scheduler states by name ("optimizer_d", "scheduler_d"). `info`
    (iteration, config_hash, model spec, best metric, ...) must be JSON-serialisable."""
    nets, states = dict(nets or {}), dict(states or {})
    taken = {"model", "optimizer", "scheduler", "nets", "states", *info}
    for name in (*nets, *states):
        if name in taken or not name.isidentifier():
            raise ValueError(f"save_checkpoint: state name {name!r} is taken or not an identifier")
        taken.add(name)
    tensors = {f"model.{k}": np.asarray(v) for k, v in model_state.items()}
    for name, state in nets.items():
        tensors.update({f"{name}.{k}": np.asarray(v) for k, v in state.items()})
    arrays: dict = {}
    doc = dict(info, nets=sorted(nets), states=sorted(states))
    doc["optimizer"] = _flatten(optimizer_state, "optimizer", arrays) if optimizer_state else None
    doc["scheduler"] = _flatten(scheduler_state, "scheduler", arrays) if scheduler_state else None
    for name, state in states.items():
        doc[name] = _flatten(state, name, arrays) if state else None
    tensors.update(arrays)
    write_atomic(path, _serialize(tensors, doc, CHECKPOINT_FORMAT))


def load_checkpoint(path) -> dict:
    """{"model": state_dict, "optimizer": ..., "scheduler": ..., <each of nets and states>: ...,
    **info} from `save_checkpoint`."""
    source = os.fspath(path)
    arrays, meta = read_safetensors(source)
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{source} is not an srgrad training checkpoint (format "
                              f"{meta.get('format')!r}); a weights file cannot resume training")
    doc = _info(meta, source)
    nets, states = doc.get("nets", []), doc.get("states", [])
    if not (isinstance(nets, list) and isinstance(states, list)
            and all(isinstance(n, str) for n in nets + states)):
        raise CheckpointError(f"{source}: unreadable lists of networks / states")
    for name in ("optimizer", "scheduler", *states):
        doc[name] = _unflatten(doc.get(name), arrays, source)
    for name in ("model", *nets):
        doc[name] = {k[len(name) + 1:]: v for k, v in arrays.items() if k.startswith(name + ".")}
    return doc


# -- weights --------------------------------------------------------------------------------------
def save_weights(path, model_state: dict, ema_state: dict | None = None, **info) -> None:
    """Atomically write weights only (`model.<key>`, and `model_ema.<key>` for an EMA of them),
    with JSON `info` such as the model spec `{"model": {"type": "ESPCN", "scale": 2, ...}}` so
    inference needs no config."""
    tensors = {f"model.{k}": np.asarray(v) for k, v in model_state.items()}
    tensors.update({f"model_ema.{k}": np.asarray(v) for k, v in (ema_state or {}).items()})
    write_atomic(path, _serialize(tensors, info, WEIGHTS_FORMAT))


# srgrad's weights files: `model.<key>` are the weights ("params" in BasicSR's words), and
# `model_ema.<key>` the EMA of the weights when training kept one ("params_ema")
WEIGHT_GROUPS = {"params": "model.", "params_ema": "model_ema."}


def is_pytorch_file(path) -> bool:
    """Whether `path` starts like a torch.save file (a zip archive or a pickle)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(9)
    except OSError:
        return False
    if head[8:9] == b"{":  # safetensors: a little-endian header length (may start 0x80), then JSON
        return False
    return head[:4] in (b"PK\x03\x04", b"PK\x05\x06") or head[:1] == b"\x80"


def load_weights(path, key: str | None = None):
    """(state_dict, info) from any weights file srgrad takes:
    - srgrad's weights files and training checkpoints (safetensors): the weights, or with key=
      "params_ema" (the default when the file has one, as Real-ESRGAN's inference) their EMA;
    - a plain safetensors file (e.g. `safetensors.torch.save_file` of a torch state_dict): any
      file without srgrad's metadata `format`, whatever its keys;
    - a PyTorch `.pth`/`.pt` (zip or legacy torch.save), read without torch and without running
      code (framework.weights.pth): BasicSR's params/params_ema, state_dict, model wrappers and DDP's
      `module.` prefix are unwrapped; key= picks the entry.
    info holds the srgrad metadata (model spec, scale, ...) when the file has it, and "key": the
    entry used."""
    source = os.fspath(path)
    if is_pytorch_file(source):
        state, pinfo = load_pth_state_dict(source, key)
        return state, {"key": pinfo["key"], "pth": pinfo}
    arrays, meta = read_safetensors(source)
    info = _info(meta, source)
    # srgrad's files say so in their metadata; any other file is a plain state_dict, whatever its
    # keys (the original ESRGAN layout's are `model.0.weight`, ...: not srgrad's `model.` group)
    if meta.get("format") in (CHECKPOINT_FORMAT, WEIGHTS_FORMAT):
        groups = {name: prefix for name, prefix in WEIGHT_GROUPS.items()
                  if any(k.startswith(prefix) for k in arrays)}
        if key is None:
            key = "params_ema" if "params_ema" in groups else "params"
        if key not in groups:
            raise CheckpointError(f"{source} has no {key!r} weights (it has: "
                                  f"{', '.join(groups) or 'none'})")
        prefix = groups[key]
        state = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
    else:
        if key is not None:
            raise CheckpointError(f"{source} is a plain safetensors file: it has no {key!r} entry")
        state = dict(arrays)
    return state, {**info, "key": key}


def check_state_matches(model, state: dict, source: str) -> None:
    """Raise CheckpointError naming every missing / unexpected key and shape mismatch."""
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [f"{k}: file {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
              for k in own if k in state and tuple(state[k].shape) != tuple(own[k].shape)]
    if not (missing or unexpected or shapes):
        return

    def few(items):
        return ", ".join(items[:8]) + (f", ... ({len(items)} in all)" if len(items) > 8 else "")

    parts = []
    if missing:
        parts.append(f"missing keys: {few(missing)}")
    if unexpected:
        parts.append(f"unexpected keys: {few(unexpected)}")
    if shapes:
        parts.append(f"shape mismatches: {few(shapes)}")
    raise CheckpointError(f"{source} does not fit the model {type(model).__name__} (weights for a "
                          f"different architecture or settings?): " + "; ".join(parts))
