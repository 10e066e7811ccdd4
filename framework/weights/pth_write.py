"""Write PyTorch checkpoints (`torch.save`'s zip layout) without torch and without the pickle module:
the object pickle is a few hand-written protocol-2 opcodes that build only what `torch.load(...,
weights_only=True)` accepts (dicts, OrderedDicts of tensors rebuilt by _rebuild_tensor_v2 from typed
storages, lists, tuples, str, numbers, bools, None). So srgrad's weights go back to BasicSR and
PyTorch users as the file they already load: `torch.load(path)["params"]` (`srgrad-convert weights
net.safetensors net_g.pth`), and `framework.save(state, "x.pth")` writes what torch.load reads."""
from __future__ import annotations

import io
import os
import struct
import zipfile

import numpy as np

from ..io.atomic import atomic_open
from ..tensor import Tensor

__all__ = ["write_pth"]

# numpy dtype -> torch's typed storage class (what _rebuild_tensor_v2's storage names)
_STORAGE = {"float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
            "int64": "LongStorage", "int32": "IntStorage", "int16": "ShortStorage",
            "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage"}

_PROTO, _STOP, _MARK = b"\x80\x02", b".", b"("
_EMPTY_DICT, _EMPTY_TUPLE, _TUPLE, _SETITEMS = b"}", b")", b"t", b"u"
_REDUCE, _BINPERSID, _NEWFALSE, _NEWTRUE = b"R", b"Q", b"\x89", b"\x88"
_NONE, _BINFLOAT, _EMPTY_LIST, _APPENDS = b"N", b"G", b"]", b"e"


def _str(s: str) -> bytes:
    data = s.encode("utf-8")
    return b"X" + struct.pack("<I", len(data)) + data


def _int(n: int) -> bytes:
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if -2**31 <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    data = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(data)]) + data


def _global(module: str, name: str) -> bytes:
    return b"c" + f"{module}\n{name}\n".encode()


def _tuple(items) -> bytes:
    return _MARK + b"".join(items) + _TUPLE


def _ordered_dict(items) -> bytes:
    out = _global("collections", "OrderedDict") + _EMPTY_TUPLE + _REDUCE
    if items:
        out += _MARK + b"".join(k + v for k, v in items) + _SETITEMS
    return out


def _tensor(key: str, arr: np.ndarray) -> bytes:
    storage = _tuple([_str("storage"), _global("torch", _STORAGE[arr.dtype.name]), _str(key),
                      _str("cpu"), _int(arr.size)]) + _BINPERSID
    stride = [s // arr.itemsize for s in arr.strides]
    return (_global("torch._utils", "_rebuild_tensor_v2")
            + _tuple([storage, _int(0), _tuple([_int(n) for n in arr.shape]),
                      _tuple([_int(s) for s in stride]), _NEWFALSE, _ordered_dict([])])
            + _REDUCE)


def write_pth(path, obj) -> None:
    """Write `obj` as a torch.save file, atomically: a state_dict (name -> array, written as an
    OrderedDict of tensors, as torch's), a dict of them (BasicSR's `{"params": sd, "params_ema":
    sd_ema}`), or any tree of dicts (str or int keys), lists, tuples, arrays, str, ints, floats,
    bools and None (an optimizer's state_dict). A numpy scalar is written as the Python number
    (torch's states hold Python numbers). Arrays are written little-endian and contiguous; dtypes
    float32/64/16, int8-64, uint8, bool. TypeError for anything else, naming where it is."""
    arrays = {}

    def tensor(arr: np.ndarray, where: str) -> bytes:
        arr = np.require(arr, requirements="C")  # 0-d stays 0-d
        if arr.dtype.name not in _STORAGE:
            raise ValueError(f"write_pth: {where} has dtype {arr.dtype}, which has no torch "
                             f"storage here (supported: {', '.join(_STORAGE)})")
        key = str(len(arrays))
        arrays[key] = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        return _tensor(key, arr)

    def value(v, where: str) -> bytes:
        if isinstance(v, Tensor):
            v = v.data  # a Tensor or Parameter: its array
        if isinstance(v, np.ndarray):
            return tensor(v, where)
        if isinstance(v, np.generic):
            v = v.item()
        if v is None:
            return _NONE
        if isinstance(v, bool):
            return _NEWTRUE if v else _NEWFALSE
        if isinstance(v, int):
            return _int(v)
        if isinstance(v, float):
            return _BINFLOAT + struct.pack(">d", v)
        if isinstance(v, str):
            return _str(v)
        if isinstance(v, dict):
            items = [(dict_key(k, where), value(x, f"{where}.{k}" if where else str(k)))
                     for k, x in v.items()]
            if v and all(isinstance(x, (np.ndarray, Tensor)) for x in v.values()):
                return _ordered_dict(items)  # a state_dict, as torch's
            return _EMPTY_DICT + (_MARK + b"".join(k + x for k, x in items) + _SETITEMS
                                  if items else b"")
        if isinstance(v, (list, tuple)):
            items = [value(x, f"{where}[{i}]") for i, x in enumerate(v)]
            if isinstance(v, tuple):
                return _tuple(items) if items else _EMPTY_TUPLE
            return _EMPTY_LIST + (_MARK + b"".join(items) + _APPENDS if items else b"")
        raise TypeError(f"write_pth: {where or 'the object'} has type {type(v).__name__}, which "
                        f"torch.load(weights_only=True) does not read (dicts, lists, tuples, "
                        f"arrays, str, numbers, bools and None are written)")

    def dict_key(k, where: str) -> bytes:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (str, int, np.integer)):
            raise TypeError(f"write_pth: a key of {where or 'the top level'} is {k!r}: keys are "
                            f"str or int")
        return _str(k) if isinstance(k, str) else _int(int(k))

    body = value(obj, "")
    top = os.path.splitext(os.path.basename(os.fspath(path)))[0] or "archive"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:  # torch stores, never compresses
        z.writestr(f"{top}/data.pkl", _PROTO + body + _STOP)
        z.writestr(f"{top}/byteorder", "little")
        for key, arr in arrays.items():
            z.writestr(f"{top}/data/{key}", arr.tobytes())
        z.writestr(f"{top}/version", "3\n")
    with atomic_open(path) as fh:
        fh.write(buf.getvalue())
