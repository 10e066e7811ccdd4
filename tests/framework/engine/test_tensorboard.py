"""framework.engine.run.tensorboard (tensorboardX underneath): event files read back record by record
(TFRecord framing and both CRCs checked by a decoder written here, each record parsed by TensorFlow's
Event message as tensorboardX ships it), the images' pixels, the missing-package message, and a
training run's scalars and validation images."""
import csv
import io
import re
import socket
import struct
import sys

import numpy as np
import pytest
from PIL import Image

import framework as sg
from framework.engine.commands.cli import train_main
from framework.engine.config.schema import load_config
from framework.engine.run.tensorboard import MISSING, SummaryWriter

event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")


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
        assert struct.unpack("<I", data[pos + 8:pos + 12])[0] == masked(crc32c_bitwise(header))
        body = data[pos + 12:pos + 12 + length]
        assert len(body) == length
        assert struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])[0] == \
            masked(crc32c_bitwise(body))
        out.append(body)
        pos += 16 + length
    assert pos == len(data)
    return out


def read_events(logdir):
    """(the one event file, [Event]) of a folder."""
    files = list(logdir.iterdir())
    assert len(files) == 1, files
    return files[0], [event_pb2.Event.FromString(r) for r in records(files[0])]


def values(events):
    """[(step, tag, value)] of every summary value: a float for scalars, the Image otherwise."""
    out = []
    for e in events:
        for v in e.summary.value:
            out.append((e.step, v.tag, v.image if v.WhichOneof("value") == "image"
                        else v.simple_value))
    return out


def pixels(image):
    return np.asarray(Image.open(io.BytesIO(image.encoded_image_string)))


def test_test_crc_is_the_standard_one():
    assert crc32c_bitwise(b"123456789") == 0xE3069283  # the CRC catalogue's check value
    assert masked(0xE3069283) == 0xC78AB0E5


def test_scalars_and_images_round_trip(tmp_path):
    logdir = tmp_path / "runs" / "exp"
    chw = np.array([[[0.0, 0.5, 1.0]], [[0.2, 2.0, -1.0]], [[1 / 255, 0.998, 0.25]]], np.float32)
    rgba = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4) * 10
    with SummaryWriter(logdir) as writer:
        writer.add_scalar("loss", 0.25, 1)
        writer.add_scalar("val/psnr", np.float32(30.5), step=10)
        writer.add_scalar("lr", sg.tensor(np.array([1e-4])), 2**40)
        writer.add_image("sr", chw, 3)
        writer.add_image("gt", rgba, 4)
        writer.add_image("la", np.ones((2, 2, 2), np.float32) * [[[0.0]], [[1.0]]], 5)
    path, events = read_events(logdir)
    host = re.escape(socket.gethostname())
    assert re.fullmatch(rf"events\.out\.tfevents\.\d{{10}}\.{host}\.\d+\.\d+", path.name)
    assert events[0].file_version == "brain.Event:2"
    got = values(events)
    assert [(step, tag) for step, tag, _ in got] == [
        (1, "loss"), (10, "val/psnr"), (2**40, "lr"), (3, "sr"), (4, "gt"), (5, "la")]
    assert [v for _, _, v in got[:3]] == [0.25, 30.5, np.float32(1e-4)]
    sr = got[3][2]
    assert (sr.height, sr.width, sr.colorspace) == (1, 3, 3)
    # clipped to [0, 1], times 255, rounded half to even: 127.5 -> 128, 254.49 -> 254
    np.testing.assert_array_equal(pixels(sr), [[[0, 51, 1], [128, 255, 254], [255, 0, 64]]])
    gt = got[4][2]
    assert (gt.height, gt.width, gt.colorspace) == (2, 3, 4)
    np.testing.assert_array_equal(pixels(gt), rgba)
    la = got[5][2]  # gray + alpha: stored as RGBA
    assert la.colorspace == 4
    np.testing.assert_array_equal(pixels(la), [[[0, 0, 0, 255]] * 2] * 2)


def test_special_values(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalar("nan", float("nan"), 0)
        writer.add_scalar("int", np.int64(-3), 0)
        writer.add_image("gray", np.array([[0, 255]], np.uint8), 0)
    got = values(read_events(tmp_path)[1])
    assert np.isnan(got[0][2]) and got[1][2] == -3.0
    np.testing.assert_array_equal(pixels(got[2][2])[..., 0], [[0, 255]])


def test_close_writes_every_record_and_two_writers_get_two_files(tmp_path):
    writer = SummaryWriter(tmp_path / "a", flush_secs=3600)
    for i in range(30):  # more than tensorboardX's queue holds
        writer.add_scalar("a", float(i), i)
    writer.close()
    assert [v for _, _, v in values(read_events(tmp_path / "a")[1])] == list(range(30))
    with SummaryWriter(tmp_path / "b") as one, SummaryWriter(tmp_path / "b") as two:
        one.add_scalar("x", 1.0, 1)
        two.add_scalar("x", 2.0, 1)
    files = sorted((tmp_path / "b").iterdir())
    assert len(files) == 2
    assert sorted(event_pb2.Event.FromString(r).summary.value[0].simple_value
                  for f in files for r in records(f)[1:]) == [1.0, 2.0]


@pytest.mark.parametrize("call,error,match", [
    (lambda w: w.add_scalar("a", "1.0", 0), TypeError, "add_scalar: a: value must be a real number"),
    (lambda w: w.add_scalar("a", [1.0, 2.0], 0), TypeError, "value must be a real number"),
    (lambda w: w.add_scalar("a", True, 0), TypeError, "value must be a real number"),
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
    assert values(read_events(tmp_path)[1]) == []  # nothing half-written


def test_tensorboard_reads_it(tmp_path):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalar("loss", 0.5, 7)
        writer.add_image("img", np.zeros((3, 2, 2), np.float32), 7)
    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(s.step, s.value) for s in acc.Scalars("loss")] == [(7, 0.5)]
    assert acc.Images("img")[0].width == 2


def test_a_training_run_logs_its_columns_and_validation_images(make_config, tmp_path):
    cfg = make_config(iters=2, every=2)
    text = cfg.read_text().replace("  log_every: 1\n", "  log_every: 1\n  tensorboard: true\n")
    cfg.write_text(text)
    assert train_main([str(cfg), "--no-progress"]) == 0
    got = values(read_events(tmp_path / "runs" / "tiny" / "tensorboard")[1])
    tags = {(step, tag) for step, tag, _ in got}
    assert {(1, "losses/loss"), (2, "losses/loss"), (1, "lr"), (2, "metrics/val/psnr_y"),
            (2, "metrics/val/bicubic_psnr_y")} <= tags  # grouped as BasicSR's
    images = {tag: v for _, tag, v in got if not isinstance(v, float)}
    assert set(images) == {"val/v_rgb", "val/v_gray"}
    assert (images["val/v_rgb"].height, images["val/v_rgb"].width) == (16 + 32, 3 * 32 + 2 * 4)
    with open(tmp_path / "runs" / "tiny" / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    logged = {(step, tag): v for step, tag, v in got if isinstance(v, float)}
    assert [logged[(int(r["iteration"]), "losses/loss")] for r in rows] == \
        [pytest.approx(float(r["loss"]), rel=1e-5) for r in rows]  # the CSV keeps 6 digits


def test_missing_tensorboardx_stops_training_naming_the_extra(make_config, tmp_path, monkeypatch,
                                                             capsys):
    """srgrad-train refuses at once (exit 2, nothing written); other commands that read the
    config (srgrad-infer --config, srgrad-convert options, ...) do not need tensorboardX."""
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # import tensorboardX -> ImportError
    cfg = make_config()
    cfg.write_text(cfg.read_text().replace("  log_every: 1\n", "  log_every: 1\n  tensorboard: true\n"))
    assert train_main([str(cfg), "--no-progress"]) == 2
    assert capsys.readouterr().err == f"error: {cfg}: train.tensorboard: {MISSING}; or set it to " \
                                      f"false\n"
    assert "pip install 'srgrad[tensorboard]'" in MISSING
    assert not (tmp_path / "runs").exists()
    assert load_config(cfg)["train"]["tensorboard"] is True  # validation alone is fine
    with pytest.raises(ModuleNotFoundError, match=re.escape(MISSING)):
        SummaryWriter(tmp_path / "tb")
