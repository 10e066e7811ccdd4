"""Hostile and broken `.pth` files against framework.weights.pth, without torch: files are assembled
here opcode by opcode (the `asm` helpers, checked against torch.load in test_pth.py). Each is
refused with a one-line CheckpointError naming the file; no payload runs (its marker file never
appears; a control test shows the payloads do run under pickle.loads); the bombs stay small in
memory."""
import io
import os
import pickle
import struct
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile

import numpy as np
import pytest

from framework.weights import _pickle_machine as machine
from framework.weights import CheckpointError
from framework.weights.pth import load_pth_state_dict, read_pth


# -- a tiny pickle assembler: protocol-2 bytes exactly as torch.save writes them -------------------
class asm:
    MAGIC = 0x1950A86A20F9469CFC6C

    @staticmethod
    def glob(module, name):
        return b"c" + module.encode() + b"\n" + name.encode() + b"\n"

    @staticmethod
    def str(text):
        raw = text.encode()
        return b"X" + struct.pack("<I", len(raw)) + raw

    @staticmethod
    def int(n):
        return b"J" + struct.pack("<i", n) if -2**31 <= n < 2**31 else \
            b"\x8a" + bytes([(n.bit_length() + 8) // 8]) + n.to_bytes((n.bit_length() + 8) // 8,
                                                                    "little", signed=True)

    @staticmethod
    def tuple(*parts):
        return b"(" + b"".join(parts) + b"t"

    @staticmethod
    def dict(items):
        return b"}(" + b"".join(asm.str(k) + v for k, v in items.items()) + b"u"

    @staticmethod
    def ordered_dict(items):
        return asm.glob("collections", "OrderedDict") + b")R(" + \
            b"".join(asm.str(k) + v for k, v in items.items()) + b"u"

    @staticmethod
    def pickle(body):
        return b"\x80\x02" + body + b"."

    @staticmethod
    def storage(key, numel, stype="FloatStorage", view=None, legacy=False, location="cpu"):
        fields = [asm.str("storage"), asm.glob("torch", stype), asm.str(key), asm.str(location),
                  asm.int(numel)]
        if legacy:
            fields.append(b"N" if view is None else asm.tuple(asm.str(view[0]), asm.int(view[1]),
                                                             asm.int(view[2])))
        return asm.tuple(*fields) + b"Q"

    @staticmethod
    def tensor(storage, offset, size, stride):
        args = asm.tuple(storage, asm.int(offset), asm.tuple(*map(asm.int, size)),
                         asm.tuple(*map(asm.int, stride)), b"\x89",
                         asm.glob("collections", "OrderedDict") + b")R")
        return asm.glob("torch._utils", "_rebuild_tensor_v2") + args + b"R"

    @staticmethod
    def zip(path, pkl, storages=(), byteorder="little", top="archive", compress=()):
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr(f"{top}/data.pkl", pkl)
            if byteorder is not None:
                zf.writestr(f"{top}/byteorder", byteorder)
            for key, data in dict(storages).items():
                method = zipfile.ZIP_DEFLATED if key in compress else zipfile.ZIP_STORED
                zf.writestr(f"{top}/data/{key}", data, compress_type=method)
            zf.writestr(f"{top}/version", "3\n")
        return path

    @staticmethod
    def legacy(path, pkl, storages=(), magic=None, keys=None):
        storages = dict(storages)
        head = (magic if magic is not None else
                asm.pickle(asm.int(asm.MAGIC)) + asm.pickle(b"M\xe9\x03") +
                asm.pickle(asm.dict({"protocol_version": b"M\xe9\x03", "little_endian": b"\x88"})))
        keys = keys if keys is not None else asm.pickle(
            b"](" + b"".join(asm.str(k) for k in storages) + b"e")
        body = b"".join(struct.pack("<q", len(d) // itemsize) + d
                        for d, itemsize in storages.values())
        with open(path, "wb") as fh:
            fh.write(head + pkl + keys + body)
        return path


def small_state():
    """{"w": 2x3 float32 (0..5), "b": a view: elements 4, 5 of the same storage}."""
    data = np.arange(6, dtype="<f4").tobytes()
    return data, {"w": ((0, (2, 3), (3, 1))), "b": (4, (2,), (1,))}


def small_zip(path, **kw):
    data, views = small_state()
    items = {k: asm.tensor(asm.storage("0", 6), *v) for k, v in views.items()}
    return asm.zip(path, asm.pickle(asm.ordered_dict(items)), {"0": data}, **kw)


def small_legacy(path):
    data, views = small_state()
    items = {k: asm.tensor(asm.storage("94000", 6, legacy=True), *v) for k, v in views.items()}
    return asm.legacy(path, asm.pickle(asm.ordered_dict(items)), {"94000": (data, 4)})


def refused(path, *needles):
    """The reader's error: one line, naming the file and each needle."""
    with pytest.raises(CheckpointError) as info:
        read_pth(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message, message
    for needle in needles:
        assert needle in message, message
    return message


# -- the assembled files are right -----------------------------------------------------------------
@pytest.mark.parametrize("make", [small_zip, small_legacy])
def test_assembled_files_read(tmp_path, make):
    out = read_pth(make(tmp_path / "ok.pth"))
    assert list(out) == ["w", "b"]
    np.testing.assert_array_equal(out["w"], np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(out["b"], [4.0, 5.0])
    assert out["w"].dtype == np.float32 and out["b"].flags.owndata


def test_opcode_names_match_pickletools():
    import pickletools
    assert machine._NAMES == {ord(op.code.encode("latin-1")): op.name for op in pickletools.opcodes}


# -- payloads --------------------------------------------------------------------------------------
def _payloads(marker, legacy=False):
    """name -> (pickle bytes, words the refusal must contain). The LIVE ones run code under
    pickle.loads (the control test checks that). `legacy`: storage ids of the legacy layout."""
    cmd = f"touch {marker}"
    system = asm.glob("os", "system")

    class Reduce:
        def __init__(self, func, args):
            self.func, self.args = func, args

        def __reduce__(self):
            return self.func, self.args

    return {
        "reduce os.system": (pickle.dumps(Reduce(os.system, (cmd,)), protocol=2), [".system"]),
        "stack_global os.system": (pickle.dumps(Reduce(os.system, (cmd,)), protocol=4),
                                   [".system"]),
        "builtins.eval": (pickle.dumps(Reduce(eval, (f"open({str(marker)!r}, 'w').close()",)),
                                       protocol=2), ["__builtin__.eval"]),
        "subprocess.Popen": (pickle.dumps(Reduce(subprocess.Popen, (["touch", str(marker)],)),
                                          protocol=2), [".Popen"]),
        "INST": (b"(" + asm.str(cmd) + b"ios\nsystem\n.", ["opcode INST"]),
        "OBJ os.system": (b"(" + system + asm.str(cmd) + b"o.", ["os.system"]),
        # BUILD gadget: a SimpleNamespace whose __setstate__ becomes os.system, then BUILD again
        "BUILD gadget": (b"\x80\x02" + asm.glob("types", "SimpleNamespace") + b")R" +
                         b"N}" + asm.str("__setstate__") + system + b"s\x86b" + asm.str(cmd) +
                         b"b.", ["types.SimpleNamespace"]),
        "OBJ on an allowed name": (b"(" + asm.glob("collections", "OrderedDict") + b"o.",
                                   ["opcode OBJ"]),
        "NEWOBJ": (b"\x80\x02" + asm.glob("collections", "OrderedDict") + b")\x81.",
                   ["opcode NEWOBJ"]),
        "NEWOBJ_EX": (b"\x80\x04" + asm.glob("collections", "OrderedDict") + b")}\x92.",
                      ["opcode NEWOBJ_EX"]),
        "EXT1": (b"\x80\x02\x82\x01.", ["opcode EXT1"]),
        "text PERSID": (b"\x80\x02Pstorage\n.", ["opcode PERSID"]),
        "BUILD on a dict": (b"\x80\x02}}b.", ["BUILD", "dict"]),
        "BUILD on a tensor": (asm.pickle(asm.tensor(asm.storage("0", 6, legacy=legacy), 0, (6,),
                                                    (1,)) + b"}b"), ["BUILD", "_TensorRef"]),
        "REDUCE on a storage type": (asm.pickle(asm.glob("torch", "FloatStorage") + b")R"),
                                     ["calls torch.FloatStorage"]),
        "REDUCE on a string": (asm.pickle(asm.str("os.system") + b")R"), ["calls str"]),
        "STACK_GLOBAL on computed names": (b"\x80\x04" + asm.str("os") + b"K\x01\x93.",
                                           ["STACK_GLOBAL"]),
        "persistent id of a module": (asm.pickle(asm.tuple(asm.str("module"), b"N", b"N", b"N") +
                                                 b"Q"), ["nn.Module"]),
        "payload after a legit prefix": (
            asm.pickle(asm.dict({"w": asm.tensor(asm.storage("0", 6, legacy=legacy), 0, (6,), (1,)),
                                 "x": system + b"(" + asm.str(cmd) + b"tR"})), ["os.system"]),
    }


LIVE = ["reduce os.system", "stack_global os.system", "builtins.eval", "subprocess.Popen",
        "INST", "OBJ os.system", "BUILD gadget"]
NAMES = list(_payloads("m"))


def test_control_the_payloads_run_under_pickle(tmp_path):
    """Under pickle.loads, in a child process, each live payload creates its marker file."""
    markers = {name: tmp_path / f"marker_{i}" for i, name in enumerate(LIVE)}
    for name, marker in markers.items():
        (tmp_path / f"p_{marker.name}").write_bytes(_payloads(marker)[name][0])
    code = textwrap.dedent(f"""
        import pathlib, pickle, time
        for p in sorted(pathlib.Path({str(tmp_path)!r}).glob("p_*")):
            try:
                pickle.loads(p.read_bytes())
            except Exception:
                pass
        time.sleep(0.3)  # Popen's touch runs on its own
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert all(m.exists() for m in markers.values()), [n for n, m in markers.items()
                                                       if not m.exists()]


@pytest.mark.parametrize("where", ["zip data.pkl", "legacy object", "legacy magic",
                                   "legacy key list"])
@pytest.mark.parametrize("name", NAMES)
def test_payloads_are_refused(tmp_path, name, where):
    marker = tmp_path / "marker"
    payload, words = _payloads(marker, legacy=where != "zip data.pkl")[name]
    path = tmp_path / "model.pth"
    if where == "zip data.pkl":
        asm.zip(path, payload, {"0": bytes(24)})
    elif where == "legacy object":
        asm.legacy(path, payload, {"0": (bytes(24), 4)})
    elif where == "legacy magic":
        asm.legacy(path, asm.pickle(b"N"),
                   magic=payload if payload[:1] == b"\x80" else b"\x80\x02" + payload)
    else:
        asm.legacy(path, asm.pickle(b"N"), keys=payload)
    if where in ("legacy magic", "legacy key list") and name in ("BUILD on a tensor",
                                                                 "persistent id of a module"):
        words = ["a storage reference outside the object pickle"]
    message = refused(path, *words)
    assert message.startswith(f"refusing to load {path}: "), message
    assert not marker.exists()


def test_load_pth_state_dict_refuses_too(tmp_path):
    marker = tmp_path / "marker"
    path = asm.zip(tmp_path / "m.pth", _payloads(marker)["reduce os.system"][0])
    with pytest.raises(CheckpointError, match="system, which a weights file never needs"):
        load_pth_state_dict(path)
    assert not marker.exists()


# -- sizes -----------------------------------------------------------------------------------------
def _one_tensor_zip(path, numel, size, stride, offset=0, data=None):
    pkl = asm.pickle(asm.dict({"w": asm.tensor(asm.storage("0", numel), offset, size, stride)}))
    return asm.zip(path, pkl, {"0": np.arange(6, dtype="<f4").tobytes() if data is None else data})


@pytest.mark.parametrize("numel, size, stride, offset, words", [
    (10, (6,), (1,), 0, "claims 10 elements (40 bytes) but its zip entry holds 24 bytes"),
    (6, (3,), (1,), 4, "reaches past its storage of 6 elements"),
    (6, (2, 3), (3, 2), 0, "reaches past its storage"),
    (6, (10**6, 10**6), (0, 0), 0, "would expand its 24-byte storage"),
    (10**12, (6,), (1,), 0, "claims 1000000000000 elements"),
    (6, (2, -3), (3, 1), 0, "bad offset/size/stride"),
])
def test_sizes_are_checked_before_allocation(tmp_path, numel, size, stride, offset, words):
    path = _one_tensor_zip(tmp_path / "m.pth", numel, size, stride, offset)
    tracemalloc.start()
    try:
        refused(path, words)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, peak


def test_legacy_storage_headers_are_checked(tmp_path):
    pkl = asm.pickle(asm.dict({"w": asm.tensor(asm.storage("0", 6, legacy=True), 0, (6,), (1,))}))
    data = np.arange(6, dtype="<f4").tobytes()
    path = asm.legacy(tmp_path / "m.pth", pkl, {"0": (data, 4)})
    raw = path.read_bytes()
    cut = raw.index(struct.pack("<q", 6) + data)
    path.write_bytes(raw[:cut] + struct.pack("<q", 10**12) + raw[cut + 8:])
    refused(path, "holds 1000000000000 elements where its tensors expect 6")
    pkl = asm.pickle(asm.dict({"w": asm.tensor(asm.storage("0", 10**12, legacy=True), 0, (6,),
                                                                 (1,))}))
    path = asm.legacy(tmp_path / "m.pth", pkl, {"0": (data, 4)})
    tracemalloc.start()
    try:
        refused(path, "claims 1000000000000 elements", "more than the whole file")
        assert tracemalloc.get_traced_memory()[1] < 2 << 20
    finally:
        tracemalloc.stop()


def test_many_views_of_one_storage_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr("framework.weights.pth.MAX_EXPAND_BYTES", 64)
    items = {f"v{i}": asm.tensor(asm.storage("0", 6), 0, (6,), (1,)) for i in range(8)}
    path = asm.zip(tmp_path / "m.pth", asm.pickle(asm.dict(items)),
                   {"0": np.arange(6, dtype="<f4").tobytes()})
    refused(path, "tensors add up to 192 bytes, from 24 bytes of storage")


@pytest.mark.parametrize("entry", ["data/0", "data.pkl"])
def test_zip_bomb(tmp_path, entry):
    """A deflated entry that would inflate ~1000x is refused from its sizes, never inflated."""
    big = 32 << 20
    small = {"data.pkl": asm.pickle(asm.dict({"w": asm.tensor(asm.storage("0", big // 4), 0,
                                                                (big // 4,), (1,))})),
             "data/0": bytes(4)}
    path = tmp_path / "bomb.pth"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in ("data.pkl", "data/0"):
            with zf.open(f"archive/{name}", "w", force_zip64=True) as fh:
                if name != entry:
                    fh.write(small[name])
                    continue
                fh.write(b"\x80\x02N" if name == "data.pkl" else b"")
                for _ in range(big >> 20):  # "N0": push None, pop it: a valid pickle of any length
                    fh.write(b"N0" * (1 << 19) if name == "data.pkl" else bytes(1 << 20))
                fh.write(b"." if name == "data.pkl" else b"")
    info = zipfile.ZipFile(path).getinfo(f"archive/{entry}")
    assert info.file_size >= big and info.compress_size < big // 500
    tracemalloc.start()
    try:
        refused(path, f"archive/{entry} would inflate from {info.compress_size} to "
                      f"{info.file_size} bytes (a zip bomb?)")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, peak


# -- nesting, cycles, memo -------------------------------------------------------------------------
DEEP = 100_000


@pytest.mark.parametrize("body, words", [
    (b"(" * DEEP + b"t" * DEEP, "nested MARKs"),
    (b"]" * DEEP + b"a" * (DEEP - 1), "objects on the pickle stack"),
    (b"N" + b"\x85" * DEEP, "nested more than 64 levels"),
    # through the memo, the stack 2 deep while each list (dict) holds the previous one: the same
    # guard, so 10000 levels (each costs 4-5 opcodes to scan) make the point
    (b"]r\0\0\0\0" + b"".join(b"]j" + struct.pack("<I", i) + b"ar" + struct.pack("<I", i + 1)
                                for i in range(DEEP // 10)), "nested more than 64 levels"),
    (b"}r\0\0\0\0" + b"".join(b"}X\1\0\0\0kj" + struct.pack("<I", i) + b"sr" +
                                struct.pack("<I", i + 1) for i in range(DEEP // 10)),
     "nested more than 64 levels"),
])
def test_deep_nesting_is_refused(tmp_path, body, words):
    refused(asm.zip(tmp_path / "deep.pth", b"\x80\x02" + body + b"."), words)


@pytest.mark.parametrize("body, words", [
    (b"]q\0h\0a", "contains itself"),                   # a = [a]
    (b"]q\0]q\1h\0aa", "already in use"),               # b = [a]; a.append(b)
    (b"}q\0X\1\0\0\0kh\0s", "contains itself"),      # d = {"k": d}
])
def test_reference_cycles_are_refused(tmp_path, body, words):
    refused(asm.zip(tmp_path / "cycle.pth", b"\x80\x02" + body + b"."), words)


def test_shared_parts_stay_shared(tmp_path):
    """t = (None,); ([t], [t]): a part used twice is no cycle, and comes back as one object."""
    body = b"]N\x85q\0a]h\0a\x86"
    out = read_pth(asm.zip(tmp_path / "shared.pth", b"\x80\x02" + body + b"."))
    assert out == ([(None,)], [(None,)]) and out[0][0] is out[1][0]


def test_memo_size_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "MAX_MEMO", 100)
    body = b"N" + b"".join(b"r" + struct.pack("<I", i) for i in range(101))
    refused(asm.zip(tmp_path / "memo.pth", b"\x80\x02" + body + b"."), "more than 100 memo")


# -- truncated, corrupt and foreign files ----------------------------------------------------------
@pytest.mark.parametrize("make", [small_zip, small_legacy])
def test_truncated_files_are_named(tmp_path, make):
    whole = make(tmp_path / "whole.pth").read_bytes()
    cuts = sorted({4, 20, 60, len(whole) // 3, len(whole) // 2, len(whole) - 30,
                   len(whole) - 9, len(whole) - 1})
    for cut in cuts:
        path = tmp_path / f"cut_{cut}.pth"
        path.write_bytes(whole[:cut])
        with pytest.raises(CheckpointError) as info:
            read_pth(path)
        message = str(info.value)
        assert f"{path} is truncated" in message and "\n" not in message, (cut, message)


@pytest.mark.parametrize("content, words", [
    (b"", "is empty"),
    (b"hello world", "not a PyTorch checkpoint"),
    (struct.pack("<Q", 2) + b"{}", "not a PyTorch checkpoint"),  # safetensors
    (b"\x80\x02N.", "no PyTorch magic number"),                  # a plain pickle
    (b"\0" * 257 + b"ustar" + b"\0" * 250, "tar-format"),
])
def test_foreign_files(tmp_path, content, words):
    path = tmp_path / "x.pth"
    path.write_bytes(content)
    refused_or_error = pytest.raises(CheckpointError, match=words)
    with refused_or_error as info:
        read_pth(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_zip_structure_is_checked(tmp_path):
    def archive(entries, name="a.pth"):
        path = tmp_path / name
        with zipfile.ZipFile(path, "w") as zf:
            for entry, data in entries:
                zf.writestr(entry, data)
        return path

    ok = asm.pickle(b"N")
    with pytest.warns(UserWarning):  # zipfile warns about the duplicate name
        refused(archive([("a/data.pkl", ok), ("a/data.pkl", ok)]), "same name")
    refused(archive([("a/data.pkl", ok), ("a/code/m.py", b"import os"),
                     ("a/constants.pkl", ok)]), "TorchScript")
    for entries in ([("a/other.pkl", ok)], [("a/data.pkl", ok), ("b/data.pkl", ok)]):
        with pytest.raises(CheckpointError, match="not a torch.save checkpoint"):
            read_pth(archive(entries))
    refused(archive([("a/data.pkl", ok), ("a/byteorder", b"middle")]), "unknown byte order")
    missing = asm.pickle(asm.tensor(asm.storage("7", 2), 0, (2,), (1,)))
    refused(archive([("a/data.pkl", missing)]), "storage 7 has no data/7 entry")
    two_types = asm.pickle(asm.tuple(asm.tensor(asm.storage("0", 2), 0, (2,), (1,)),
                                     asm.tensor(asm.storage("0", 2, "IntStorage"), 0, (2,), (1,))))
    refused(archive([("a/data.pkl", two_types), ("a/data/0", bytes(8))]), "two different types")
    raw = bytearray(small_zip(tmp_path / "v.pth").read_bytes())
    raw[raw.index(b"PK\x01\x02") + 6] = 87  # data.pkl needs zip version 8.7 (zipfile: 6.3)
    (tmp_path / "v.pth").write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"corrupt zip archive \(zip file version 8.7\)"):
        read_pth(tmp_path / "v.pth")


def test_big_endian_zip(tmp_path):
    values = np.array([1.5, -2.25, 3e-8, np.inf], dtype=np.float32)
    pkl = asm.pickle(asm.dict({"w": asm.tensor(asm.storage("0", 4), 0, (2, 2), (1, 2))}))
    out = read_pth(asm.zip(tmp_path / "be.pth", pkl, {"0": values.astype(">f4").tobytes()},
                           byteorder="big"))["w"]
    assert out.dtype == np.float32 and out.dtype.isnative and out.flags.c_contiguous
    np.testing.assert_array_equal(out, values.reshape(2, 2).T)
    # without a byteorder record the data is little-endian, as torch reads it
    out = read_pth(asm.zip(tmp_path / "le.pth", pkl, {"0": values.astype("<f4").tobytes()},
                           byteorder=None))["w"]
    np.testing.assert_array_equal(out, values.reshape(2, 2).T)


def test_legacy_views_and_cuda_storages(tmp_path):
    """Old files: storages saved from the GPU (torch.cuda.FloatStorage, location cuda:0) and
    legacy storage views (root key, element offset, size)."""
    data = np.arange(8, dtype="<f4").tobytes()
    root = dict(legacy=True, stype="FloatStorage", location="cuda:0")
    items = {"all": asm.tensor(asm.storage("1", 8, **root), 0, (8,), (1,)),
             "view": asm.tensor(asm.storage("1", 8, view=("2", 3, 4), **root), 1, (2,), (2,))}
    pkl = asm.pickle(asm.ordered_dict(items)).replace(b"ctorch\nFloat", b"ctorch.cuda\nFloat")
    out = read_pth(asm.legacy(tmp_path / "old.pth", pkl, {"1": (data, 4)}))
    np.testing.assert_array_equal(out["all"], np.arange(8))
    np.testing.assert_array_equal(out["view"], [4.0, 6.0])  # view starts at element 3
    bad = asm.pickle(asm.tensor(asm.storage("1", 8, view=("2", 6, 4), legacy=True), 0, (1,), (1,)))
    refused(asm.legacy(tmp_path / "bad.pth", bad, {"1": (data, 4)}), "outside storage 1")
    refused(asm.legacy(tmp_path / "keys.pth", asm.pickle(items["all"]), {"1": (data, 4)},
                       keys=asm.pickle(b"](" + asm.str("1") + asm.str("9") + b"e")), "key list")


def test_unsupported_dtypes_and_metadata(tmp_path):
    pkl = asm.pickle(asm.glob("torch._utils", "_rebuild_tensor_v3") + asm.tuple(
        asm.storage("0", 4, "UntypedStorage"), asm.int(0), asm.tuple(asm.int(4)),
        asm.tuple(asm.int(1)), b"\x89", b"}", asm.glob("torch", "float8_e4m3fn")) + b"R")
    refused(asm.zip(tmp_path / "f8.pth", pkl, {"0": bytes(4)}), "float8_e4m3fn")
    pkl = asm.pickle(asm.glob("torch._utils", "_rebuild_tensor_v2") + asm.tuple(
        asm.storage("0", 1), asm.int(0), b")", b")", b"\x89", b"}",
        asm.dict({"conj": b"\x88"})) + b"R")
    refused(asm.zip(tmp_path / "conj.pth", pkl, {"0": bytes(4)}), "metadata")


@pytest.mark.parametrize("part", ["pickle", "whole file"])
@pytest.mark.parametrize("layout", ["zip", "legacy"])
def test_mutated_files_load_or_raise_checkpoint_error(tmp_path, layout, part):
    """Random byte changes, in the pickle (re-zipped, so the zip's CRC holds) or anywhere in the
    file (zip headers too): every read returns or raises CheckpointError in one line, never
    another exception."""
    data, views = small_state()
    items = {k: asm.tensor(asm.storage("0", 6, legacy=layout == "legacy"), *v)
             for k, v in views.items()}
    pkl = asm.pickle(asm.ordered_dict(items))
    whole = (asm.zip(tmp_path / "w.pth", pkl, {"0": data}) if layout == "zip" else
             asm.legacy(tmp_path / "w.pth", pkl, {"0": (data, 4)})).read_bytes()
    rng = np.random.default_rng(0)
    errors = 0
    for i in range(300):
        mutated = bytearray(pkl if part == "pickle" else whole)
        for _ in range(int(rng.integers(1, 4))):
            mutated[int(rng.integers(len(mutated)))] = int(rng.integers(256))
        path = tmp_path / f"m{i}.pth"
        if part == "whole file":
            path.write_bytes(bytes(mutated))
        elif layout == "zip":
            asm.zip(path, bytes(mutated), {"0": data})
        else:
            asm.legacy(path, bytes(mutated), {"0": (data, 4)})
        try:
            read_pth(path)
        except CheckpointError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
            errors += 1
    assert errors > 100, errors
