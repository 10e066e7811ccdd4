"""torch.save / torch.load for state_dicts, without pickle: `framework.save(obj, path)` and
`framework.load(path)`.

`obj` is a state_dict or anything like one: nested dicts (str or int keys), lists and tuples of
numpy arrays, Tensors, numpy scalars, Python numbers, str, bool and None (a model's state_dict, an
optimizer's, or a dict holding both). The file is written atomically, in the format its name asks
for:
- `.pth` / `.pt`: torch.save's zip format (framework/weights/pth_write.py, written without pickle),
  so `torch.load(path, weights_only=True)` reads it as torch would have saved it (numpy scalars
  become Python numbers);
- any other name: one safetensors file, the arrays in its tensor section and the rest in its JSON
  metadata (framework/weights/checkpoint's flatten/unflatten). The top level's keys name the arrays
  as they are, so a model's state_dict saved here is also a plain safetensors file any tool reads
  (`conv.weight`, `body.0.bias`, ...).

`load` reads by content, not by name, and gives back numpy arrays (load_state_dict takes them):
a torch.save file (`.pth`/`.pt`, from torch or from `save`) as torch.load returns it (through the
safe reader framework.weights.read_pth: no code from the file runs; OrderedDicts come back as
dicts, tuples as tuples), what `save` wrote to safetensors with int keys as ints and tuples as
lists (as JSON has them), a plain safetensors file as its dict of arrays, srgrad's weights files as
their state_dict and training checkpoints as load_checkpoint's dict.
"""
from __future__ import annotations

import json
import os

import numpy as np

from ..io.atomic import write_atomic
from ..tensor import Tensor, check_device
from .checkpoint import (CHECKPOINT_FORMAT, WEIGHTS_FORMAT, _flatten, _serialize, _unflatten,
                         is_pytorch_file, load_checkpoint, load_weights, read_safetensors)
from .errors import CheckpointError
from .pth import read_pth
from .pth_write import write_pth

__all__ = ["save", "load"]

SAVE_FORMAT = "srgrad.save/1"


def _plain(obj, path: tuple, int_keys: list):
    """obj with Tensors as their arrays, and the path of every dict with int keys noted (JSON keys
    are strings: load turns these back). Returns (plain object, number of arrays in it)."""
    if isinstance(obj, Tensor):
        return obj.data, 1
    if isinstance(obj, (np.ndarray, np.generic)):
        return obj, 1
    if isinstance(obj, dict):
        out, count = {}, 0
        if len({str(k) for k in obj}) != len(obj):
            raise ValueError(f"save: the dict at {'.'.join(map(str, path)) or 'the top'} has keys "
                             f"that differ only in type (1 and '1'); rename one")
        ints = [k for k in obj if isinstance(k, (int, np.integer)) and not isinstance(k, bool)]
        if ints:
            int_keys.append([list(path), [str(k) for k in ints]])
        for k, v in obj.items():
            out[k], n = _plain(v, path + (str(k),), int_keys)
            count += n
        return out, count
    if isinstance(obj, (list, tuple)):
        items = [_plain(v, path + (i,), int_keys) for i, v in enumerate(obj)]
        return [v for v, _ in items], sum(n for _, n in items)
    return obj, 0


def save(obj, path) -> None:
    """Write `obj` (a state_dict: see the module docstring) to `path`, atomically (the previous
    file stays intact on any error): torch.save's format for a `.pth`/`.pt` name, safetensors for
    any other. TypeError for a value that is not state (a Module, a function, ...)."""
    if os.path.splitext(os.fspath(path))[1].lower() in (".pth", ".pt"):
        write_pth(path, obj)
        return
    int_keys: list = []
    plain, count = _plain(obj, (), int_keys)
    arrays: dict = {}
    if isinstance(plain, dict):  # top-level keys name their arrays as they are: "conv.weight"
        doc = {}
        for k, v in plain.items():
            if not isinstance(k, (str, int, np.integer)) or isinstance(k, bool):
                raise TypeError(f"save: key {k!r} is not a str or int")
            doc[str(k)] = _flatten(v, str(k), arrays)
    else:
        doc = _flatten(plain, "object", arrays)
    if len(arrays) != count:
        raise ValueError(f"save: {count} arrays but only {len(arrays)} distinct names: two entries "
                         f"flatten to the same dotted name (e.g. key 'a.b' beside key 'a' holding "
                         f"'b'); rename one")
    info = {"object": doc, "int_keys": int_keys}
    write_atomic(path, _serialize(arrays, info, SAVE_FORMAT))


def _restore_int_keys(obj, int_keys):
    # innermost first: a path steps through its parents while their keys are still strings
    for path, keys in reversed(int_keys):
        parent, node = None, obj
        for step in path:
            parent, node = node, node[step]
        fixed = {int(k) if k in keys else k: v for k, v in node.items()}
        if parent is None:
            obj = fixed
        else:
            parent[path[-1]] = fixed
    return obj


def load(path, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """What `save` wrote (arrays as numpy arrays). A file from elsewhere: a torch.save file gives
    the object torch.load would (read_pth, pickle-free: BasicSR's `{"params": ...,
    "params_ema": ...}` as it is), a plain safetensors file its dict of arrays, an srgrad weights
    file its state_dict, an srgrad training checkpoint load_checkpoint's dict. CheckpointError
    names the file when it cannot be read.

    torch.load's keywords are accepted: map_location ("cpu", a CPU device, a dict or a function:
    everything lands on the CPU anyway; "cuda" is refused as everywhere in srgrad), weights_only
    (True or False read the same way: srgrad never unpickles code, so False does not enable it),
    mmap, and pickle_module / pickle_load_args (ignored: no pickle runs)."""
    if isinstance(map_location, str) or hasattr(map_location, "type"):
        check_device("load", map_location)
    elif map_location is not None and not (callable(map_location) or
                                          isinstance(map_location, dict)):
        raise TypeError(f"load: map_location must be a device, a str, a dict or a function, got "
                        f"{map_location!r}")
    for key, value in (("weights_only", weights_only), ("mmap", mmap)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"load: {key} must be a bool or None, got {value!r}")
    source = os.fspath(path)
    if is_pytorch_file(source):
        return read_pth(source)
    arrays, meta = read_safetensors(source)
    fmt = meta.get("format")
    if fmt == CHECKPOINT_FORMAT:
        return load_checkpoint(source)
    if fmt == WEIGHTS_FORMAT:
        return load_weights(source)[0]
    if fmt != SAVE_FORMAT:
        return dict(arrays)
    try:
        info = json.loads(meta.get("srgrad", "{}"))
        obj = _unflatten(info["object"], arrays, source)
        return _restore_int_keys(obj, info.get("int_keys", []))
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError):
        raise CheckpointError(f"{source}: unreadable srgrad.save metadata") from None
