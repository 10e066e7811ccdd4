"""Read PyTorch checkpoints (`.pth` / `.pt` from torch.save) without torch and without running any
code from the file: a restricted pickle interpreter (_pickle_machine) that knows only the opcodes
and the names below, and numpy arrays built here from the raw storages.

The two layouts torch.save writes (torch/serialization.py):
- zip (torch >= 1.6 default): `<top>/data.pkl` (the object pickle), `<top>/data/<key>` (each
  storage's raw bytes in the byte order named by `<top>/byteorder`, little when absent),
  `<top>/version`, ... The top folder's name varies (torch uses the file's stem).
- legacy (`_use_new_zipfile_serialization=False`, and every file before torch 1.6): five pickles
  back to back (magic number, protocol version 1001, sys_info, the object, the sorted list of
  storage keys), then each storage in that order: an int64 element count and the raw bytes, both
  little-endian whatever the machine.
In the object pickle a tensor is `_rebuild_tensor_v2(storage, offset, size, stride, ...)` and a
storage the persistent id `("storage", torch.<Type>Storage, key, location, numel[, view])`.

Safety: every pickle is scanned to its STOP before anything is built; an opcode the machine does
not know or a name outside ALLOWED_GLOBALS refuses the file with one line naming both. Allowed
names resolve to this module's own code (never to torch or Python objects). Sizes (storages against
their bytes in the file, tensors against their storages, compressed entries, nesting, stack, memo)
are checked before anything is allocated.
"""
from __future__ import annotations

import math
import os
import struct
import zipfile
import zlib

import numpy as np

from ._pickle_machine import Func, ODict, PickleMachine, refuse, short
from .errors import CheckpointError

__all__ = ["ALLOWED_GLOBALS", "read_pth", "load_pth_state_dict"]

# torch dtype -> numpy type code; None: a torch type numpy lacks (refused if a tensor uses it).
# bfloat16 is read as its 16-bit pattern and widened to float32 (numpy has no bfloat16).
_DTYPES = {
    "float32": "f4", "float64": "f8", "float16": "f2", "bfloat16": "u2", "complex64": "c8",
    "complex128": "c16", "int64": "i8", "int32": "i4", "int16": "i2", "int8": "i1", "uint8": "u1",
    "bool": "u1", "uint16": "u2", "uint32": "u4", "uint64": "u8", "complex32": None,
    "float8_e5m2": None, "float8_e4m3fn": None, "float8_e5m2fnuz": None, "float8_e4m3fnuz": None,
    "float8_e8m0fnu": None,
}
_STORAGES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
}

# THE allow-list: every name a pickle may reference, and what it becomes here. Nothing else is
# looked up, imported or called. ("call", f): REDUCE runs this module's _CALLS[f]; ("storage",
# dtype): only the type field of a storage's persistent id; ("dtype", name): _rebuild_tensor_v3's
# dtype argument. Left out on purpose: argparse.Namespace and numpy scalars (training states, not
# weights; they need NEWOBJ/BUILD on foreign classes), _rebuild_from_type_v2 (tensor subclasses),
# quantized and sparse tensors, whole pickled nn.Modules.
ALLOWED_GLOBALS: dict[str, tuple[str, str]] = {
    "collections.OrderedDict": ("call", "ordered_dict"),               # -> dict
    "torch._utils._rebuild_tensor": ("call", "tensor_v1"),             # torch <= 0.3 files
    "torch._utils._rebuild_tensor_v2": ("call", "tensor_v2"),          # every tensor since 0.4
    "torch._utils._rebuild_tensor_v3": ("call", "tensor_v3"),          # uint16/32/64 since 2.3
    "torch._utils._rebuild_parameter": ("call", "parameter"),          # nn.Parameter -> its data
    "torch._utils._rebuild_parameter_with_state": ("call", "parameter"),
    "torch.Size": ("call", "size"),                                    # -> tuple
    "torch.UntypedStorage": ("storage", "uint8"),
    "torch.storage.UntypedStorage": ("storage", "uint8"),
    **{f"{m}.{s}": ("storage", d) for s, d in _STORAGES.items() for m in ("torch", "torch.cuda")},
    **{f"torch.{d}": ("dtype", d) for d in _DTYPES},
}

MAX_NDIM = 64
MAX_PICKLE_BYTES = 64 << 20  # the object pickle holds no tensor data: ~1 MB for a huge model
MAX_INFLATE_RATIO = 100      # a compressed zip entry may inflate this much (torch never compresses)
MAX_ZIP_ENTRIES = 200_000
MAX_EXPAND_BYTES = 64 << 20  # a tensor bigger than its storage (stride 0) is rebuilt up to this

_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


# -- objects the interpreter builds ----------------------------------------------------------------
class _Marker:
    """An allowed name that is data, not a function: a storage type or a dtype."""
    __slots__ = ("name", "kind", "value")

    def __init__(self, name, kind, value):
        self.name, self.kind, self.value = name, kind, value

    def __repr__(self):
        return self.name


class _Storage:
    """A storage from a persistent id: `numel` elements of `dtype`; its bytes (`data`, bytes or a
    memoryview) are attached once located in the file. A legacy view is a slice of its root."""

    def __init__(self, key, dtype, numel, root=None, byte_offset=0):
        self.key, self.dtype, self.numel = key, dtype, numel
        self.root, self.byte_offset = root or self, byte_offset
        self.nbytes = numel * np.dtype(_DTYPES[dtype]).itemsize
        self.data = None
        self.tensors: list[_TensorRef] = []  # on a root: every tensor viewing it

    def buffer(self):
        return memoryview(self.root.data)[self.byte_offset:self.byte_offset + self.nbytes]


class _TensorRef:
    """A tensor to build once the storages are read: elements `offset + sum(i_k * stride_k)`."""

    def __init__(self, storage, offset, size, stride, dtype):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride
        self.dtype = dtype
        self.numel = math.prod(size)
        self.out_bytes = self.numel * (4 if dtype == "bfloat16" else
                                       np.dtype(_DTYPES[dtype]).itemsize)


# -- the allowed callables (REDUCE) ----------------------------------------------------------------
def _args(machine, name, args, low, high=None):
    if not low <= len(args) <= (low if high is None else high):
        machine.fail(f"{name} called with {len(args)} arguments")
    return args


def _ordered_dict(machine, args):
    out = machine.new(ODict())
    pairs = _args(machine, "OrderedDict", args, 0, 1)[0] if args else None  # Python 2: pairs
    if pairs is not None and not (isinstance(pairs, (list, tuple)) and all(
            isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs)):
        machine.fail("OrderedDict built from something other than (key, value) pairs")
    for key, value in pairs or ():
        machine.setitem(out, key, value)
    return out


def _is_int(value):
    """A Python int >= 0 (sizes, strides, offsets, element counts)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _tensor(machine, storage, offset, size, stride, dtype):
    if not isinstance(storage, _Storage):
        machine.fail("a tensor whose storage is not a storage")
    if not (_is_int(offset) and isinstance(size, tuple) and isinstance(stride, tuple)
            and len(size) == len(stride) <= MAX_NDIM and all(_is_int(s) for s in size + stride)):
        machine.fail(f"a tensor with a bad offset/size/stride: {short((offset, size, stride))}")
    if _DTYPES.get(dtype) is None:
        machine.fail(f"a tensor of dtype {dtype}, which numpy cannot hold")
    itemsize = np.dtype(_DTYPES[dtype]).itemsize
    ref = _TensorRef(storage, offset, size, stride, dtype)
    available = storage.nbytes // itemsize
    if ref.numel and offset + sum((n - 1) * s for n, s in zip(size, stride)) >= available:
        machine.fail(f"a tensor of size {size} (stride {stride}, offset {offset}) reaches past its "
                     f"storage of {available} elements")
    if ref.out_bytes > max(MAX_EXPAND_BYTES, 4 * storage.nbytes):
        machine.fail(f"a tensor of size {size} would expand its {storage.nbytes}-byte storage to "
                     f"{ref.out_bytes} bytes")
    storage.root.tensors.append(ref)
    return ref


def _check_metadata(machine, metadata):
    if metadata:  # conj/neg bits and the like: data that is not the plain values
        machine.fail(f"a tensor with metadata {short(metadata)}")


def _tensor_v1(machine, args):  # the tensor's dtype is its storage's
    storage, offset, size, stride = _args(machine, "_rebuild_tensor", args, 4)
    return _tensor(machine, storage, offset, size, stride, getattr(storage, "dtype", None))


def _tensor_v2(machine, args):
    storage, offset, size, stride = _args(machine, "_rebuild_tensor_v2", args, 6, 7)[:4]
    _check_metadata(machine, args[6] if len(args) == 7 else None)
    return _tensor(machine, storage, offset, size, stride, getattr(storage, "dtype", None))


def _tensor_v3(machine, args):
    storage, offset, size, stride, _, _, dtype = _args(machine, "_rebuild_tensor_v3", args, 7,
                                                       8)[:7]
    _check_metadata(machine, args[7] if len(args) == 8 else None)
    if not (isinstance(dtype, _Marker) and dtype.kind == "dtype"):
        machine.fail("_rebuild_tensor_v3 without a torch dtype")
    return _tensor(machine, storage, offset, size, stride, dtype.value)


def _parameter(machine, args):
    data = _args(machine, "_rebuild_parameter", args, 3, 4)[0]
    if not isinstance(data, _TensorRef):
        machine.fail("a Parameter that does not hold a tensor")
    return data  # requires_grad, hooks and Python attributes are training-time state


def _size(machine, args):
    dims = _args(machine, "torch.Size", args, 1)[0]
    if not isinstance(dims, (tuple, list)) or not all(_is_int(d) for d in dims):
        machine.fail("torch.Size of something other than ints")
    return machine.tuple(list(dims))


_CALLS = {"ordered_dict": _ordered_dict, "tensor_v1": _tensor_v1, "tensor_v2": _tensor_v2,
          "tensor_v3": _tensor_v3, "parameter": _parameter, "size": _size}
# what each allowed name becomes when a pickle references it
_RESOLVED = {name: Func(name, _CALLS[value]) if kind == "call" else _Marker(name, kind, value)
             for name, (kind, value) in ALLOWED_GLOBALS.items()}


# -- storages: persistent ids, located in a zip archive or after a legacy pickle -------------------
def _text(value):
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value


class _Storages:
    """Resolves persistent ids (BINPERSID) to shared _Storage objects, each checked against the
    bytes the file has for it: its zip entry's size (`entry_size(key)`, None when missing) or, in
    a legacy file, where the data comes later, the file's size (checked exactly once read)."""

    def __init__(self, source, legacy, file_size, entry_size=None):
        self.source, self.legacy, self.file_size = source, legacy, file_size
        self.entry_size = entry_size
        self.roots: dict = {}
        self.views: dict = {}

    def __call__(self, machine, pid):
        if not (isinstance(pid, tuple) and pid and _text(pid[0]) == "storage"):
            if isinstance(pid, tuple) and pid and _text(pid[0]) == "module":
                machine.fail("it holds a whole pickled nn.Module (torch.save(model)); save "
                             "model.state_dict() instead")
            machine.fail(f"a persistent id {short(pid)} that is not a storage")
        if len(pid) != (6 if self.legacy else 5):
            machine.fail(f"a storage id with {len(pid)} fields")
        stype, key, numel = pid[1], _text(pid[2]), pid[4]
        if not (isinstance(stype, _Marker) and stype.kind == "storage"):
            machine.fail(f"a storage of type {short(getattr(stype, 'name', stype))}")
        if not isinstance(key, str) or not _is_int(numel):
            machine.fail(f"a storage id with key {short(key)} and size {short(numel)}")
        root = self.roots.get(key)
        if root is None:
            root = self.roots[key] = _Storage(key, stype.value, numel)
            claim = f"storage {short(key)} claims {numel} elements ({root.nbytes} bytes)"
            if self.legacy and root.nbytes > self.file_size:
                machine.fail(f"{claim}, more than the whole file ({self.file_size} bytes)")
            have = None if self.legacy else self.entry_size(key)
            if not self.legacy and have is None:
                machine.fail(f"storage {short(key)} has no data/{short(key)} entry in the archive")
            if not self.legacy and have != root.nbytes:
                machine.fail(f"{claim} but its zip entry holds {have} bytes")
        elif (root.dtype, root.numel) != (stype.value, numel):
            machine.fail(f"storage {short(key)} is used with two different types or sizes")
        view = pid[5] if self.legacy else None
        if view is None:
            return root
        if not (isinstance(view, tuple) and len(view) == 3 and _is_int(view[1]) and
                _is_int(view[2]) and view[1] + view[2] <= root.numel):
            machine.fail(f"a storage view {short(view)} outside storage {short(key)}")
        view_key = _text(view[0])
        if not isinstance(view_key, str):
            machine.fail(f"a storage view with key {short(view_key)}")
        if view_key not in self.views:
            itemsize = np.dtype(_DTYPES[root.dtype]).itemsize
            self.views[view_key] = _Storage(view_key, root.dtype, view[2], root, view[1] * itemsize)
        return self.views[view_key]


def _check_budget(source, roots):
    """The arrays a file asks for, against the bytes it holds: a few views of one storage are
    fine, a million views of it are not."""
    total = sum(t.out_bytes for s in roots for t in s.tensors)
    stored = sum(s.nbytes for s in roots)
    if total > 4 * stored + MAX_EXPAND_BYTES:
        refuse(source, f"its tensors add up to {total} bytes, from {stored} bytes of storage")


# -- the two layouts -------------------------------------------------------------------------------
def _zip_entry_count(fh, size):
    """Entries claimed by the end record (zip64 too), read before zipfile parses the directory
    (whose memory grows with that count); None when there is no end record (truncated)."""
    tail_len = min(size, 22 + 65535 + 20)
    fh.seek(size - tail_len)
    tail = fh.read(tail_len)
    i = tail.rfind(b"PK\x05\x06")
    if i < 0 or i + 22 > len(tail):
        return None
    count = struct.unpack_from("<H", tail, i + 10)[0]
    if count == 0xFFFF and i >= 20 and tail[i - 20:i - 16] == b"PK\x06\x07":
        fh.seek(struct.unpack_from("<Q", tail, i - 12)[0])
        record = fh.read(56)
        if len(record) == 56 and record[:4] == b"PK\x06\x06":
            count = struct.unpack_from("<Q", record, 32)[0]
    return count


class _ZipArchive:
    def __init__(self, source, fh, size):
        self.source, self.size = source, size
        count = _zip_entry_count(fh, size)
        if count is None:
            raise CheckpointError(f"{source} is truncated: its zip archive has no end record (an "
                                  f"interrupted download or copy?)")
        if count > MAX_ZIP_ENTRIES:
            refuse(source, f"its zip archive claims {count} entries")
        fh.seek(0)
        try:
            self.zf = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError,
                struct.error, NotImplementedError) as exc:
            raise CheckpointError(f"{source}: corrupt zip archive ({short(exc)})") from None
        infos = self.zf.infolist()
        names = [i.filename for i in infos]
        if len(set(names)) != len(names):
            refuse(source, "its zip archive holds two entries with the same name")
        if any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
            refuse(source, "it is a TorchScript archive (torch.jit.save), which holds code; save "
                   "the model's state_dict() with torch.save instead")
        tops = [n[:-9] for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(tops) != 1:
            raise CheckpointError(f"{source} is a zip archive but not a torch.save checkpoint "
                                  f"({len(tops)} <folder>/data.pkl entries, expected 1)")
        self.top = tops[0]
        cut = len(self.top) + 1
        self.entries = {n[cut:]: i for n, i in zip(names, infos) if n.startswith(self.top + "/")}

    def entry_size(self, key):
        info = self.entries.get(f"data/{key}")
        return None if info is None else info.file_size

    def read(self, name, expect=None, limit=None) -> bytes:
        """An entry's bytes, its sizes checked before it is read or inflated."""
        info, where = self.entries.get(name), f"{self.top}/{name}"
        if info is None:
            raise CheckpointError(f"{self.source}: the archive has no {where} entry")
        if info.flag_bits & 1:
            refuse(self.source, f"{where} is encrypted")
        if expect is not None and info.file_size != expect:
            refuse(self.source, f"{where} holds {info.file_size} bytes where {expect} are needed")
        if limit is not None and info.file_size > limit:
            refuse(self.source, f"{where} is {info.file_size} bytes, more than {limit}")
        if info.compress_type == zipfile.ZIP_DEFLATED:
            if info.file_size > max(1 << 20, MAX_INFLATE_RATIO * info.compress_size):
                refuse(self.source, f"{where} would inflate from {info.compress_size} to "
                        f"{info.file_size} bytes (a zip bomb?)")
        elif info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            refuse(self.source, f"{where} uses zip compression method {info.compress_type}")
        if info.header_offset + info.compress_size > self.size:
            raise CheckpointError(f"{self.source} is truncated: {where} reaches past the end of "
                                  f"the file")
        try:
            with self.zf.open(info) as fh:
                data = fh.read(info.file_size)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error, zlib.error,
                NotImplementedError, RuntimeError) as exc:  # zipfile's "version 8.7", "flag bit 5"
            raise CheckpointError(f"{self.source}: corrupt zip entry {where} ({short(exc)})") \
                from None
        if len(data) != info.file_size:
            raise CheckpointError(f"{self.source} is truncated: {where} is cut short")
        return data


def _read_zip(source, fh, size):
    archive = _ZipArchive(source, fh, size)
    byteorder = "little"  # torch's default for files without the record
    if "byteorder" in archive.entries:
        byteorder = archive.read("byteorder", limit=16).decode("ascii", "replace")
        if byteorder not in ("little", "big"):
            refuse(source, f"unknown byte order {short(byteorder)}")
    pickle_bytes = archive.read("data.pkl", limit=MAX_PICKLE_BYTES)
    storages = _Storages(source, False, size, archive.entry_size)
    machine = PickleMachine(source, pickle_bytes, _RESOLVED, 0, storages)
    machine.scan()
    obj = machine.run()
    _check_budget(source, storages.roots.values())
    for storage in storages.roots.values():
        storage.data = archive.read(f"data/{storage.key}", expect=storage.nbytes)
    return obj, {"format": "zip", "byteorder": byteorder, "archive": archive.top}


def _read_legacy(source, data: bytes):
    view = memoryview(data)

    def pickle_at(pos, storages=None):
        machine = PickleMachine(source, view, _RESOLVED, pos, storages)
        machine.scan()
        return machine.run(), machine.end

    magic, pos = pickle_at(0)
    if magic != _MAGIC_NUMBER:
        raise CheckpointError(f"{source} is a pickle but not a torch.save checkpoint (no PyTorch "
                              f"magic number); only PyTorch checkpoints are read")
    version, pos = pickle_at(pos)
    if version != _LEGACY_PROTOCOL:
        raise CheckpointError(f"{source}: unknown legacy PyTorch format version {short(version)}")
    sys_info, pos = pickle_at(pos)
    storages = _Storages(source, True, len(data))
    obj, pos = pickle_at(pos, storages)
    keys, pos = pickle_at(pos)
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        refuse(source, "its storage key list is not a list of strings")
    if set(keys) != set(storages.roots) or len(keys) != len(storages.roots):
        refuse(source, "its storage key list does not match the storages its tensors use")
    for key in keys:  # each: int64 little-endian element count, then the raw little-endian bytes
        storage = storages.roots[key]
        if pos + 8 > len(data):
            raise CheckpointError(f"{source} is truncated: storage {short(key)} starts past "
                                  f"the end of the file")
        numel = int.from_bytes(data[pos:pos + 8], "little", signed=True)
        if numel != storage.numel:
            refuse(source, f"storage {short(key)} holds {numel} elements where its tensors "
                    f"expect {storage.numel}")
        pos += 8
        if pos + storage.nbytes > len(data):
            raise CheckpointError(f"{source} is truncated: storage {short(key)} needs "
                                  f"{storage.nbytes} bytes, the file has {len(data) - pos} left")
        storage.data = view[pos:pos + storage.nbytes]
        pos += storage.nbytes
    _check_budget(source, storages.roots.values())
    little = sys_info.get("little_endian") if isinstance(sys_info, dict) else None
    return obj, {"format": "legacy", "byteorder": "little", "saved_on_little_endian": little}


# -- arrays ----------------------------------------------------------------------------------------
def _array(ref: _TensorRef, byteorder: str) -> np.ndarray:
    """A contiguous native-order copy of the tensor's elements (bounds checked when it was made)."""
    native = np.dtype(_DTYPES[ref.dtype])
    raw = native.newbyteorder("<" if byteorder == "little" else ">")
    if ref.numel == 0:
        out = np.zeros(ref.size, native)
    else:
        flat = np.frombuffer(ref.storage.buffer(), raw, ref.storage.nbytes // raw.itemsize)
        view = np.lib.stride_tricks.as_strided(
            flat[ref.offset:], ref.size, tuple(s * raw.itemsize for s in ref.stride),
            writeable=False)
        out = np.array(view, dtype=native, order="C")
    if ref.dtype == "bfloat16":  # the top half of a float32
        wide = out.astype(np.uint32)
        wide <<= 16
        return wide.view(np.float32)
    return out.astype(bool) if ref.dtype == "bool" else out


def _materialize(obj, byteorder, done):
    """The built object with tensors as arrays, OrderedDicts as dicts; shared parts stay shared
    (`done`: id -> result), so a structure that reuses parts is walked once per part."""
    if isinstance(obj, (str, bytes, int, float, type(None))):
        return obj
    key = id(obj)
    if key in done:
        return done[key]
    if isinstance(obj, _TensorRef):
        out = _array(obj, byteorder)
    elif isinstance(obj, _Storage):  # a bare storage: its elements, 1-d
        out = _array(_TensorRef(obj, 0, (obj.numel,), (1,), obj.dtype), byteorder)
    elif isinstance(obj, dict):
        out = {k: _materialize(v, byteorder, done) for k, v in obj.items()}
    elif isinstance(obj, list):
        out = [_materialize(v, byteorder, done) for v in obj]
    elif isinstance(obj, tuple):
        out = tuple(_materialize(v, byteorder, done) for v in obj)
    else:  # an allowed name used as a value (a dtype, say): its name
        out = f"{obj.name}"
    done[key] = out
    return out


def _read(path):
    source = os.fspath(path)
    try:
        fh = open(source, "rb")
    except OSError as exc:
        raise CheckpointError(f"cannot read {source}: {exc.strerror}") from None
    try:
        with fh:
            obj, meta = _read_open(source, fh)
    except CheckpointError:
        raise
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError,
            struct.error) as exc:  # a check missed: still one line, never a traceback
        raise CheckpointError(f"{source}: corrupt checkpoint ({type(exc).__name__}: "
                              f"{short(exc)})") from None
    return _materialize(obj, meta["byteorder"], {}), meta


def _read_open(source, fh):
    """(object with _TensorRefs, meta) by the file's first bytes."""
    size = os.fstat(fh.fileno()).st_size
    head = fh.read(512)
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return _read_zip(source, fh, size)
    if head[:1] == b"\x80":
        fh.seek(0)
        return _read_legacy(source, fh.read())
    if head[257:262] == b"ustar":
        raise CheckpointError(f"{source} is a tar-format PyTorch checkpoint (before torch 0.4), "
                              f"which is not supported; load and re-save it with torch")
    if not head:
        raise CheckpointError(f"{source} is empty")
    raise CheckpointError(f"{source} is not a PyTorch checkpoint (neither a zip archive nor a "
                          f"pickle)")


# -- public API ------------------------------------------------------------------------------------
def read_pth(path):
    """The object a `.pth`/`.pt` file holds (torch.save, zip or legacy layout), read without torch
    and without running code from it: dicts (OrderedDicts become dicts), lists, tuples, numbers,
    str, None and numpy arrays (contiguous, native byte order; float16 stays float16, bfloat16
    becomes float32, a Parameter its data). Raises CheckpointError naming the file."""
    return _read(path)[0]


# BasicSR / Real-ESRGAN / Lightning / torchvision-reference wrappers, in order of preference
# (params_ema first, as Real-ESRGAN's inference does)
_WRAPPERS = ("params_ema", "params", "state_dict", "model")


def _names(keys) -> str:
    keys = [short(k, 40) for k in keys]
    return ", ".join(keys[:8]) + (f", ... ({len(keys)} in all)" if len(keys) > 8 else "") \
        if keys else "none"


def _is_tree(value) -> bool:
    """A non-empty dict of arrays and such dicts (a state_dict, perhaps nested)."""
    return isinstance(value, dict) and bool(value) and \
        all(isinstance(v, np.ndarray) or _is_tree(v) for v in value.values())


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array {tuple(value.shape)}"
    if isinstance(value, dict):
        n = sum(isinstance(v, np.ndarray) for v in value.values())
        return f"dict of {len(value)} entries ({n} arrays)"
    return type(value).__name__


def _flatten(tree: dict, prefix: str, out: dict, source: str):
    for k, v in tree.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            _flatten(v, name + ".", out, source)
        elif isinstance(v, np.ndarray):
            out[name] = v
        else:
            raise CheckpointError(f"{source}: {name} is a {type(v).__name__}, not a tensor")


def load_pth_state_dict(path, key: str | None = None, flatten: bool = False):
    """(state_dict, info) from a PyTorch checkpoint, as read_pth reads it.

    The weights may be the whole file (a bare state_dict) or one entry of a wrapper dict:
    BasicSR's `{"params": ..., "params_ema": ...}` (default params_ema, as Real-ESRGAN's inference),
    `{"state_dict": ...}`, `{"model": ...}`, or the one dict of tensors the file holds. `key`
    picks the entry. The `module.` prefix DistributedDataParallel adds is removed when every key
    has it. `flatten=True` turns nested dicts of tensors into dotted keys (a state_dict is flat).

    info: {"format": "zip"|"legacy", "byteorder", "key": the entry used (None: the whole file),
    "contents": {top-level key: short description} of everything the file held, "prefix_removed",
    "counters_removed": how many `total_ops` / `total_params` keys (thop's profiling counters, which
    a state_dict saved after profiling carries: published OmniSR files do) were dropped}.
    Raises CheckpointError naming the file: no dict of tensors, several and no default (naming
    them), non-tensor values, non-str keys.
    """
    source = os.fspath(path)
    obj, meta = _read(source)
    if not isinstance(obj, dict):
        raise CheckpointError(f"{source} holds a {type(obj).__name__}, not a dict of tensors")
    contents = {str(k): _describe(v) for k, v in obj.items()}
    bare = bool(obj) and all(isinstance(v, np.ndarray) for v in obj.values())
    if key is not None:
        if key not in obj:
            raise CheckpointError(f"{source} has no key {short(key)}; its keys: {_names(obj)}")
        chosen = key
    elif bare:
        chosen = None
    else:
        known = [k for k in _WRAPPERS if isinstance(obj.get(k), dict)]
        tensors = [k for k, v in obj.items() if _is_tree(v)]
        if known:
            chosen = known[0]
        elif len(tensors) == 1:
            chosen = tensors[0]
        elif not tensors:
            raise CheckpointError(f"{source} holds no dict of tensors (its keys: {_names(obj)})")
        else:
            raise CheckpointError(f"{source} holds several dicts of tensors and none is a known "
                                  f"default: pass " + " or ".join(f"key={short(k, 40)}"
                                                                  for k in tensors[:8]))
    tree = obj if chosen is None else obj[chosen]
    if not isinstance(tree, dict):
        raise CheckpointError(f"{source}: {chosen!r} is a {type(tree).__name__}, not a dict of "
                              f"tensors")
    bad_keys = [k for k in tree if not isinstance(k, str)]
    if bad_keys:
        raise CheckpointError(f"{source}: state_dict keys must be strings, got "
                              f"{short(bad_keys[0])}")
    state: dict = {}
    if flatten:
        _flatten(tree, "", state, source)
    else:
        others = [k for k, v in tree.items() if not isinstance(v, np.ndarray)]
        if others:
            raise CheckpointError(
                f"{source}: {'the file' if chosen is None else short(chosen)} holds values that "
                f"are not tensors ({_names(others)}); pass flatten=True for nested dicts of "
                f"tensors, or key= for another entry")
        state = dict(tree)
    prefix = "module."
    removed = None
    if state and all(k.startswith(prefix) for k in state):
        state, removed = {k[len(prefix):]: v for k, v in state.items()}, prefix
    counters = [k for k in state if k.rsplit(".", 1)[-1] in _THOP_COUNTERS]
    if counters and len(counters) < len(state):
        state = {k: v for k, v in state.items() if k not in set(counters)}
    else:
        counters = []
    info = {"format": meta["format"], "byteorder": meta["byteorder"], "key": chosen,
            "contents": contents, "prefix_removed": removed, "counters_removed": len(counters)}
    return state, info


# thop's profiler registers these buffers on every module it counts; a state_dict saved after a
# profile carries them (published OmniSR files do), and no model has weights by these names.
_THOP_COUNTERS = ("total_ops", "total_params")
