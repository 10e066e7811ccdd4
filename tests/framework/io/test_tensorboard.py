"""framework.io.tensorboard: CRC-32C against the standard vectors, and event files parsed back by
an independent decoder written here (TFRecord framing, both CRCs, every protobuf field)."""
import io
import re
import socket
import struct

import numpy as np
import pytest
from PIL import Image

import framework as sg
from framework.io import tensorboard as tb
from framework.io.tensorboard import SummaryWriter


# -- an independent decoder -----------------------------------------------------------------------
def crc32c_bitwise(data: bytes) -> int:
    """CRC-32C one bit at a time (no table)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """The data of every TFRecord in a file, each CRC checked, the file consumed exactly."""
    data = path.read_bytes()
    pos, out = 0, []
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        assert header_crc == masked(crc32c_bitwise(header))
        body = data[pos + 12:pos + 12 + length]
        assert len(body) == length
        assert struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])[0] == \
            masked(crc32c_bitwise(body))
        out.append(body)
        pos += 16 + length
    assert pos == len(data)
    return out


def varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def fields(data: bytes) -> dict:
    """Protobuf wire format -> {field number: [(wire type, raw value), ...]}."""
    out, pos = {}, 0
    while pos < len(data):
        key, pos = varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.setdefault(field, []).append((wire, value))
    assert pos == len(data)
    return out


def one(msg: dict, field: int, wire: int):
    assert len(msg[field]) == 1 and msg[field][0][0] == wire
    return msg[field][0][1]


def event(data: bytes) -> dict:
    """Event -> {"wall_time", "step", "file_version" or "tag" + "simple_value" / "image"}."""
    msg = fields(data)
    assert set(msg) <= {1, 2, 3, 5}
    out = {"wall_time": struct.unpack("<d", one(msg, 1, 1))[0],
           "step": one(msg, 2, 0) if 2 in msg else 0}
    if 3 in msg:
        out["file_version"] = one(msg, 3, 2).decode()
        assert 5 not in msg
        return out
    summary = fields(one(msg, 5, 2))
    assert set(summary) == {1}
    value = fields(one(summary, 1, 2))
    out["tag"] = one(value, 1, 2).decode()
    assert len(value) == 2
    if 2 in value:
        out["simple_value"] = struct.unpack("<f", one(value, 2, 5))[0]
    else:
        image = fields(one(value, 4, 2))
        assert set(image) == {1, 2, 3, 4}
        out["image"] = {"height": one(image, 1, 0), "width": one(image, 2, 0),
                        "colorspace": one(image, 3, 0), "png": one(image, 4, 2)}
    return out


def read_events(logdir):
    files = list(logdir.iterdir())
    assert len(files) == 1
    return files[0], [event(r) for r in records(files[0])]


# -- CRC-32C --------------------------------------------------------------------------------------
# RFC 3720 B.4: an iSCSI Read (10) command PDU.
ISCSI_READ = bytes.fromhex("01c00000 00000000 00000000 00000000 14000000 00000400 00000014"
                           " 00000018 28000000 00000000 02000000 00000000".replace(" ", ""))


@pytest.mark.parametrize("data,expected", [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),  # the CRC catalogue's check value
    (bytes(32), 0x8A9136AA),  # these four and the PDU: RFC 3720 B.4
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (ISCSI_READ, 0xD9963A56),
])
def test_crc32c_vectors(data, expected):
    assert len(ISCSI_READ) == 48
    assert tb.crc32c(data) == expected
    assert crc32c_bitwise(data) == expected  # the test's own decoder is right too


def test_crc32c_incremental_table_and_mask():
    data = np.random.default_rng(0).integers(0, 256, 1000, dtype=np.uint8).tobytes()
    assert tb.crc32c(data) == crc32c_bitwise(data)
    assert tb.crc32c(data[300:], tb.crc32c(data[:300])) == tb.crc32c(data)
    assert tb.crc32c(bytearray(data)) == tb.crc32c(memoryview(data)) == tb.crc32c(data)
    assert tb._TABLE[1] == 0xF26B8303 and tb._TABLE[128] == 0x82F63B78
    assert tb.masked_crc32c(b"123456789") == 0xC78AB0E5  # rotr(0xE3069283, 15) + 0xa282ead8


def test_tfrecord_framing():
    record = tb.tfrecord(b"abc")
    assert record[:8] == (3).to_bytes(8, "little") and record[12:15] == b"abc"
    assert record[8:12] == masked(crc32c_bitwise(record[:8])).to_bytes(4, "little")
    assert record[15:] == masked(crc32c_bitwise(b"abc")).to_bytes(4, "little")


# -- event files ----------------------------------------------------------------------------------
def test_scalars_and_images_round_trip(tmp_path):
    logdir = tmp_path / "runs" / "exp"
    chw = np.array([[[0.0, 0.5, 1.0]], [[0.2, 2.0, -1.0]], [[1 / 255, 0.998, 0.25]]], np.float32)
    rgba = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4) * 10
    with SummaryWriter(logdir) as writer:
        writer.add_scalar("loss", 0.25, 1)
        writer.add_scalar("val/psnr", np.float32(30.5), step=10, walltime=123.5)
        writer.add_scalar("lr", sg.tensor(np.array([1e-4])), 2**40)
        writer.add_image("sr", chw, 3)
        writer.add_image("gt", rgba, 4)
        writer.add_image("gray", np.array([[0, 255]], np.uint8), 5)
    path, events = read_events(logdir)
    host = re.escape(socket.gethostname())
    assert re.fullmatch(rf"events\.out\.tfevents\.\d{{10}}\.{host}\.\d+\.\d+", path.name)
    assert path == writer.path
    assert events[0]["file_version"] == "brain.Event:2" and events[0]["step"] == 0
    assert abs(events[0]["wall_time"] - int(path.name.split(".")[3])) < 2
    assert [e.get("tag") for e in events[1:]] == ["loss", "val/psnr", "lr", "sr", "gt", "gray"]
    assert [e["step"] for e in events[1:]] == [1, 10, 2**40, 3, 4, 5]
    assert events[1]["simple_value"] == 0.25 and events[2]["simple_value"] == 30.5
    assert events[3]["simple_value"] == np.float32(1e-4)
    assert events[2]["wall_time"] == 123.5 and events[1]["wall_time"] >= events[0]["wall_time"]
    sr = events[4]["image"]
    assert (sr["height"], sr["width"], sr["colorspace"]) == (1, 3, 3)
    pixels = np.asarray(Image.open(io.BytesIO(sr["png"])))
    # clipped to [0, 1], times 255, rounded half to even: 127.5 -> 128, 254.49 -> 254
    np.testing.assert_array_equal(pixels, [[[0, 51, 1], [128, 255, 254], [255, 0, 64]]])
    gt = events[5]["image"]
    assert (gt["height"], gt["width"], gt["colorspace"]) == (2, 3, 4)
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(gt["png"]))), rgba)
    gray = events[6]["image"]
    assert gray["colorspace"] == 1
    assert Image.open(io.BytesIO(gray["png"])).mode == "L"


def test_special_values_and_gray_alpha(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalar("nan", float("nan"), 0)
        writer.add_scalar("huge", 1e40, 0)
        writer.add_scalar("int", np.int64(-3), 0)
        writer.add_image("la", np.ones((2, 2, 2), np.float32) * [[[0.0]], [[1.0]]], 0)
    _, events = read_events(tmp_path)
    assert np.isnan(events[1]["simple_value"]) and events[2]["simple_value"] == np.inf
    assert events[3]["simple_value"] == -3.0
    la = events[4]["image"]
    assert la["colorspace"] == 2
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(la["png"])).convert("LA")),
                                  [[[0, 255]] * 2] * 2)


def test_flush_and_close(tmp_path):
    writer = SummaryWriter(tmp_path, flush_secs=3600)
    assert len(records(writer.path)) == 1  # the version record is on disk at once
    writer.add_scalar("a", 1.0, 1)
    writer.flush()
    assert len(records(writer.path)) == 2
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(ValueError, match="is closed"):
        writer.add_scalar("a", 1.0, 2)
    with pytest.raises(ValueError, match="is closed"):
        writer.flush()
    eager = SummaryWriter(tmp_path / "eager", flush_secs=0)
    eager.add_scalar("a", 1.0, 1)
    assert len(records(eager.path)) == 2  # flush_secs=0: every record reaches the file
    eager.close()


def test_two_writers_two_files(tmp_path):
    with SummaryWriter(tmp_path) as a, SummaryWriter(tmp_path) as b:
        a.add_scalar("x", 1.0, 1)
        b.add_scalar("x", 2.0, 1)
    assert a.path != b.path and len(list(tmp_path.iterdir())) == 2
    assert [event(r).get("simple_value") for r in records(b.path)] == [None, 2.0]


@pytest.mark.parametrize("call,error,match", [
    (lambda w: w.add_scalar("", 1.0, 0), TypeError, "add_scalar: tag must be a non-empty str"),
    (lambda w: w.add_scalar(3, 1.0, 0), TypeError, "tag must be a non-empty str, got 3"),
    (lambda w: w.add_scalar("a", "1.0", 0), TypeError, "add_scalar: value must be a real number"),
    (lambda w: w.add_scalar("a", [1.0, 2.0], 0), TypeError, "value must be a real number"),
    (lambda w: w.add_scalar("a", True, 0), TypeError, "value must be a real number"),
    (lambda w: w.add_scalar("a", 1.0, -1), ValueError, "add_scalar: step must be an int >= 0"),
    (lambda w: w.add_scalar("a", 1.0, 1.5), TypeError, "step must be an int >= 0, got 1.5"),
    (lambda w: w.add_scalar("a", 1.0, 1, walltime="now"), TypeError, "walltime must be a number"),
    (lambda w: w.add_image("i", np.zeros((5, 4, 4)), 0), ValueError, r"\(C, H, W\) with C = 1..4"),
    (lambda w: w.add_image("i", np.zeros((4, 4, 5), np.uint8), 0), ValueError, r"\(H, W, C\)"),
    (lambda w: w.add_image("i", np.zeros((3, 0, 4)), 0), ValueError, "got shape"),
    (lambda w: w.add_image("i", np.full((1, 2, 2), np.nan), 0), ValueError, "NaN or Inf"),
    (lambda w: w.add_image("i", np.zeros((2, 2), np.uint16), 0), TypeError, "got dtype uint16"),
])
def test_bad_arguments(tmp_path, call, error, match):
    with SummaryWriter(tmp_path) as writer:
        with pytest.raises(error, match=match):
            call(writer)
    assert len(records(writer.path)) == 1  # nothing half-written


def test_bad_flush_secs(tmp_path):
    with pytest.raises(ValueError, match="SummaryWriter: flush_secs must be >= 0"):
        SummaryWriter(tmp_path, flush_secs=-1)
    assert list(tmp_path.iterdir()) == []


def test_tensorboard_reads_it(tmp_path):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalar("loss", 0.5, 7)
        writer.add_image("img", np.zeros((3, 2, 2), np.float32), 7)
    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(s.step, s.value) for s in acc.Scalars("loss")] == [(7, 0.5)]
    assert acc.Images("img")[0].width == 2


def protobuf_event_class():
    """TensorFlow's Event / Summary messages (the fields we write), built from descriptors with the
    protobuf package (onnx's dependency) as a second, independent decoder."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="srgrad_test_event.proto", package="t",
                                               syntax="proto3")

    def add(message, name, number, kind, type_name=None, oneof=None, repeated=False):
        field = message.field.add(name=name, number=number, type=kind,
                                  label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
        if type_name:
            field.type_name = type_name
        if oneof is not None:
            field.oneof_index = oneof

    summary = proto.message_type.add(name="Summary")
    image = summary.nested_type.add(name="Image")
    for number, name in enumerate(["height", "width", "colorspace"], 1):
        add(image, name, number, F.TYPE_INT32)
    add(image, "encoded_image_string", 4, F.TYPE_BYTES)
    value = summary.nested_type.add(name="Value")
    value.oneof_decl.add(name="value")
    add(value, "tag", 1, F.TYPE_STRING)
    add(value, "simple_value", 2, F.TYPE_FLOAT, oneof=0)
    add(value, "image", 4, F.TYPE_MESSAGE, ".t.Summary.Image", oneof=0)
    add(summary, "value", 1, F.TYPE_MESSAGE, ".t.Summary.Value", repeated=True)
    event = proto.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    add(event, "wall_time", 1, F.TYPE_DOUBLE)
    add(event, "step", 2, F.TYPE_INT64)
    add(event, "file_version", 3, F.TYPE_STRING, oneof=0)
    add(event, "summary", 5, F.TYPE_MESSAGE, ".t.Summary", oneof=0)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("t.Event"))


def test_protobuf_parses_it_canonically(tmp_path):
    pytest.importorskip("google.protobuf")
    Event = protobuf_event_class()
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalar("loss", 0.0, 0)
        writer.add_scalar("loss", -2.5, 300)
        writer.add_image("img", np.zeros((2, 3), np.uint8), 12)
    parsed = [Event.FromString(r) for r in records(writer.path)]
    assert parsed[0].file_version == "brain.Event:2" and parsed[0].WhichOneof("what") == "file_version"
    assert parsed[1].summary.value[0].WhichOneof("value") == "simple_value"  # 0.0 is still written
    assert [(e.step, e.summary.value[0].tag, e.summary.value[0].simple_value) for e in parsed[1:3]] \
        == [(0, "loss", 0.0), (300, "loss", -2.5)]
    image = parsed[3].summary.value[0].image
    assert (parsed[3].step, image.height, image.width, image.colorspace) == (12, 2, 3, 1)
    assert image.encoded_image_string.startswith(b"\x89PNG")
    # byte for byte what protobuf itself would write: field order, varints, packing
    assert [e.SerializeToString() for e in parsed] == records(writer.path)
