"""framework.weights.pth against files torch.save writes in the test, both layouts: values equal to
torch's bit for bit (bfloat16: equal to torch's `.float()`), views of shared storages, Parameters,
a module's state_dict, the wrappers BasicSR / Real-ESRGAN / Lightning use, big-endian archives."""
import pickle
import zipfile

import numpy as np
import pytest

from framework.weights import CheckpointError
from framework.weights.pth import load_pth_state_dict, read_pth

from .test_pth_hostile import asm

torch = pytest.importorskip("torch")

LAYOUTS = ["zip", "legacy"]


def save(obj, path, layout):
    torch.save(obj, path, _use_new_zipfile_serialization=layout == "zip")
    return path


def expected(t):
    """What the reader must return for tensor `t`: its values, bfloat16 widened to float32."""
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).contiguous().numpy()


def assert_same(out, t):
    ref = expected(t)
    assert isinstance(out, np.ndarray) and out.dtype == ref.dtype and out.shape == ref.shape
    assert out.flags.c_contiguous and out.flags.writeable and out.dtype.isnative
    assert out.tobytes() == ref.tobytes()  # bit for bit: NaN payloads, -0.0, subnormals


def special_values(dtype):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.tensor([[True, False, True], [False, False, True]])
    if dtype.is_floating_point:
        x = torch.randn(2, 3, 5, generator=g, dtype=torch.float64) * 100
        x.view(-1)[:6] = torch.tensor([float("nan"), -0.0, float("inf"), -float("inf"), 1e-310,
                                       6.1e-5], dtype=torch.float64)
        return x.to(dtype)
    if dtype == torch.uint8:
        return torch.randint(0, 256, (2, 3, 5), generator=g, dtype=torch.uint8)
    info = torch.iinfo(dtype)
    x = torch.randint(-1000, 1000, (2, 3, 5), generator=g).to(dtype)
    x.view(-1)[:2] = torch.tensor([info.min, info.max], dtype=dtype)
    return x


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dtypes_bit_for_bit(tmp_path, layout):
    tensors = {str(d): special_values(d) for d in DTYPES}
    tensors["uint16"] = torch.tensor([0, 1, 65535], dtype=torch.int32).to(torch.uint16)
    tensors["complex64"] = torch.tensor([1 + 2j, -3.5j], dtype=torch.complex64)
    tensors["scalar"] = torch.tensor(7)                       # 0-d, like num_batches_tracked
    tensors["empty"] = torch.zeros(0, 4)
    out = read_pth(save(tensors, tmp_path / "t.pth", layout))
    assert list(out) == list(tensors)
    for name, t in tensors.items():
        assert_same(out[name], t)
    assert out["torch.float16"].dtype == np.float16 and out["scalar"].shape == ()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_views_of_one_storage(tmp_path, layout):
    base = torch.arange(5 * 12, dtype=torch.float64).reshape(5, 12)
    views = {"base": base, "rows": base[1:4], "cols": base[:, 3:9:2], "t": base.t(),
             "perm": base.reshape(5, 3, 4).permute(2, 0, 1), "diag": base.diagonal(offset=2),
             "flat_tail": base.view(-1)[37:], "expand": base[2, :1].expand(3, 4),
             "negative_step_copy": base.flip(0)}
    assert all(v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
               for k, v in views.items() if k != "negative_step_copy")
    out = read_pth(save(views, tmp_path / "v.pth", layout))
    for name, t in views.items():
        assert_same(out[name], t)
    out["rows"][0, 0] = -1  # each array owns its data
    assert out["base"][1, 0] == 12


@pytest.mark.parametrize("layout", LAYOUTS)
def test_module_state_dict_parameter_and_nesting(tmp_path, layout):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                              torch.nn.PReLU(8), torch.nn.Conv2d(8, 12, 3),
                              torch.nn.PixelShuffle(2))
    net(torch.randn(2, 3, 6, 6))  # running statistics and num_batches_tracked move
    sd = net.state_dict()
    obj = {"sd": sd, "p": torch.nn.Parameter(torch.randn(3, 2)), "nested": [(1, 2.5, "x"), None],
           "size": torch.Size([2, 3]), "dtype": torch.float16}
    out = read_pth(save(obj, tmp_path / "m.pth", layout))
    assert list(out["sd"]) == list(sd)
    for k, t in sd.items():
        assert_same(out["sd"][k], t)
    assert out["sd"]["1.num_batches_tracked"].dtype == np.int64
    assert_same(out["p"], obj["p"])
    assert out["nested"] == [(1, 2.5, "x"), None]
    assert out["size"] == (2, 3) and out["dtype"] == "torch.float16"
    state, info = load_pth_state_dict(tmp_path / "m.pth", key="sd")
    assert list(state) == list(sd) and info["key"] == "sd" and info["format"] == layout


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("protocol", [4, 5])
def test_newer_pickle_protocols(tmp_path, layout, protocol):
    """pickle_protocol=4/5: FRAME, MEMOIZE, SHORT_BINUNICODE and STACK_GLOBAL instead of GLOBAL."""
    torch.manual_seed(0)
    sd = torch.nn.Conv2d(3, 4, 3).state_dict()
    path = tmp_path / "p.pth"
    torch.save({"sd": sd, "u16": torch.tensor([7, 9]).to(torch.uint16)}, path,
               pickle_protocol=protocol, _use_new_zipfile_serialization=layout == "zip")
    out = read_pth(path)
    for k, t in sd.items():
        assert_same(out["sd"][k], t)
    assert out["u16"].dtype == np.uint16 and out["u16"].tolist() == [7, 9]


@pytest.fixture
def sds():
    torch.manual_seed(1)
    a = torch.nn.Conv2d(3, 4, 3).state_dict()
    b = {k: v + 1 for k, v in a.items()}
    return a, b


@pytest.mark.parametrize("layout", LAYOUTS)
def test_wrappers(tmp_path, layout, sds):
    a, b = sds
    path = tmp_path / "w.pth"

    def load(obj, **kw):
        return load_pth_state_dict(save(obj, path, layout), **kw)

    for wrapper in ({"params": a, "params_ema": b}, {"params_ema": b}, {"state_dict": b},
                    {"model": b, "optimizer": {"state": {}, "param_groups": []}, "epoch": 3},
                    b, {"net_g": b, "iter": 10}):
        state, info = load(wrapper)
        assert list(state) == list(b) and all(np.array_equal(state[k], b[k].numpy()) for k in b)
        assert info["key"] == (None if wrapper is b else next(
            k for k in ("params_ema", "state_dict", "model", "net_g") if k in wrapper))
    state, info = load({"params": a, "params_ema": b}, key="params")
    assert np.array_equal(state["weight"], a["weight"].numpy()) and info["key"] == "params"
    assert info["contents"] == {"params": "dict of 2 entries (2 arrays)",
                                "params_ema": "dict of 2 entries (2 arrays)"}
    # DistributedDataParallel's prefix, removed only when every key has it
    state, info = load({"state_dict": {f"module.{k}": v for k, v in a.items()}})
    assert list(state) == ["weight", "bias"] and info["prefix_removed"] == "module."
    state, info = load({"module.weight": a["weight"], "head.bias": a["bias"]})
    assert list(state) == ["module.weight", "head.bias"] and info["prefix_removed"] is None
    # thop's profiling counters (total_ops / total_params on every module), dropped and counted
    counters = {"total_ops": torch.zeros(1, dtype=torch.float64), "head.total_params": torch.zeros(1)}
    state, info = load({**a, **counters})
    assert list(state) == ["weight", "bias"] and info["counters_removed"] == 2
    state, info = load(dict(a))
    assert info["counters_removed"] == 0
    # nested dicts of tensors only when asked
    nested = {"body": {"conv": dict(a)}, "tail": {"bias": a["bias"]}}
    with pytest.raises(CheckpointError, match="pass flatten=True"):
        load({"model": nested})
    state, _ = load({"model": nested}, flatten=True)
    assert list(state) == ["body.conv.weight", "body.conv.bias", "tail.bias"]


@pytest.mark.parametrize("obj, words", [
    ({"g": {"w": "A"}, "d": {"w": "B"}}, "pass key=g or key=d"),
    ({"epoch": 3}, "holds no dict of tensors (its keys: epoch)"),
    ([1, 2], "holds a list, not a dict of tensors"),
    ({"params": {"w": "A", "n": 1}}, "holds values that are not tensors (n)"),
    ({"params": {1: "A"}}, "keys must be strings"),
])
def test_wrapper_errors(tmp_path, sds, obj, words):
    a, b = sds
    swap = {"A": a["weight"], "B": b["weight"]}

    def fill(x):
        return {k: fill(v) for k, v in x.items()} if isinstance(x, dict) else swap.get(x, x) \
            if isinstance(x, str) else x

    path = save(fill(obj) if isinstance(obj, dict) else obj, tmp_path / "w.pth", "zip")
    with pytest.raises(CheckpointError) as info:
        load_pth_state_dict(path)
    assert str(path) in str(info.value) and words in str(info.value)
    if isinstance(obj, dict):
        with pytest.raises(CheckpointError, match=f"has no key x; its keys: {', '.join(obj)}"):
            load_pth_state_dict(path, key="x")


def test_big_endian_archive(tmp_path):
    """torch.save on a big-endian machine: the same archive with byteorder "big" and every
    storage's elements byte-swapped. Read back equal to the little-endian original."""
    tensors = {str(d): special_values(d) for d in DTYPES}
    little = save(tensors, tmp_path / "le.pth", "zip")
    big = tmp_path / "be.pth"
    with zipfile.ZipFile(little) as src, zipfile.ZipFile(big, "w") as dst:
        top = src.namelist()[0].split("/")[0]
        for i, t in enumerate(tensors.values()):  # storage keys follow pickling order
            raw = src.read(f"{top}/data/{i}")
            native = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
            assert raw == native.numpy().tobytes()  # the key -> tensor map is right
        for info in src.infolist():
            data = src.read(info)
            name = info.filename[len(top) + 1:]
            if name == "byteorder":
                data = b"big"
            elif name.startswith("data/"):
                t = list(tensors.values())[int(name[5:])]
                native = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()
                data = native.astype(native.dtype.newbyteorder(">")).tobytes()
            dst.writestr(info.filename, data)
    out = read_pth(big)
    for name, t in tensors.items():
        assert_same(out[name], t)


def test_no_byteorder_record_is_little_endian(tmp_path):
    """Files from torch < 1.12 have no byteorder record: little-endian, as torch.load reads them."""
    t = special_values(torch.float32)
    with zipfile.ZipFile(save({"w": t}, tmp_path / "n.pth", "zip")) as src, \
            zipfile.ZipFile(tmp_path / "old.pth", "w") as dst:
        for info in src.infolist():
            if not info.filename.endswith("/byteorder"):
                dst.writestr(info.filename, src.read(info))
    ref = torch.load(tmp_path / "old.pth", weights_only=True)["w"]
    assert ref.numpy().tobytes() == t.numpy().tobytes()
    assert_same(read_pth(tmp_path / "old.pth")["w"], t)


def test_assembled_files_agree_with_torch_load(tmp_path):
    """The hostile tests' hand-assembled files are what torch.load reads (weights_only)."""
    from .test_pth_hostile import small_legacy, small_zip
    for make in (small_zip, small_legacy):
        path = make(tmp_path / f"{make.__name__}.pth")
        ref = torch.load(path, weights_only=True)
        out = read_pth(path)
        assert list(out) == list(ref)
        for k in ref:
            assert_same(out[k], ref[k])


def test_pre_0_4_rebuild_tensor_and_storage_views(tmp_path):
    """torch <= 0.3 files: `_rebuild_tensor(storage, offset, size, stride)` and legacy storage
    views; our reading equals torch.load's of the same (assembled) file."""
    data = np.arange(10, dtype="<f8").tobytes()
    old = asm.glob("torch._utils", "_rebuild_tensor")
    items = {
        "w": old + asm.tuple(asm.storage("5", 10, "DoubleStorage", legacy=True), asm.int(2),
                             asm.tuple(asm.int(2), asm.int(3)),
                             asm.tuple(asm.int(1), asm.int(2))) + b"R",
        "v": old + asm.tuple(asm.storage("5", 10, "DoubleStorage", view=("6", 4, 5), legacy=True),
                             asm.int(1), asm.tuple(asm.int(3)), asm.tuple(asm.int(1))) + b"R",
    }
    path = asm.legacy(tmp_path / "old.pth", asm.pickle(asm.ordered_dict(items)), {"5": (data, 8)})
    ref = torch.load(path, weights_only=False)  # our own file; the reference reader
    out = read_pth(path)
    for k in ref:
        assert_same(out[k], ref[k])
    np.testing.assert_array_equal(out["v"], [5.0, 6.0, 7.0])


def test_the_reader_never_unpickles(tmp_path, monkeypatch):
    path = save({"w": torch.ones(2)}, tmp_path / "w.pth", "zip")
    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, None)
    monkeypatch.setattr(torch, "load", None)
    assert read_pth(path)["w"].tolist() == [1.0, 1.0]
