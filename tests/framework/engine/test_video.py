"""Video SR (issue 44.1) on clips made here with PyAV (12 frames of 32x24, H.264 yuv420p tagged
BT.709 limited range, with an AAC stream): frame count and timestamps kept, audio packets copied
bit for bit, colour within a level through a nearest x2 model, the colour tags and pixel format
kept, resume after an interruption equal to one run, and srgrad-infer on a clip."""
from __future__ import annotations

import numpy as np
import pytest

av = pytest.importorskip("av", reason="video needs PyAV (pip install 'srgrad[video]')")

import framework.functional as F  # noqa: E402
import models  # noqa: E402,F401  registers the architectures
from framework import nn  # noqa: E402
from framework.engine.inference import video  # noqa: E402
from framework.engine.inference.video import VideoError, upscale_video, work_folder  # noqa: E402

INFO = {"scale": 2, "model": {"type": "nearest x2"}}


class Nearest(nn.Module):
    """x2 by pixel repetition: the SR of a frame holds every source pixel exactly."""

    def forward(self, x):
        return F.interpolate(x, scale_factor=2, mode="nearest")


def make_clip(path, frames=12, w=32, h=24, fps=24, seed=0):
    rng = np.random.default_rng(seed)
    with av.open(str(path), "w") as out:
        v = out.add_stream("libx264", rate=fps)
        v.width, v.height, v.pix_fmt = w, h, "yuv420p"
        ctx = v.codec_context
        ctx.colorspace, ctx.color_range, ctx.color_primaries, ctx.color_trc = 1, 1, 1, 1
        v.options = {"crf": "10"}
        a = out.add_stream("aac", rate=48000)
        a.layout = "stereo"
        base = rng.uniform(40, 215, (h, w, 3))
        for i in range(frames):
            img = np.clip(base + 20 * np.sin(i + np.arange(w) / 5)[None, :, None], 0, 255)
            f = av.VideoFrame.from_ndarray(img.astype(np.uint8), format="rgb24").reformat(
                format="yuv420p", src_colorspace="itu709", dst_colorspace="itu709",
                src_color_range="JPEG", dst_color_range="MPEG")
            f.colorspace, f.color_range, f.pts = 1, 1, i
            for p in v.encode(f):
                out.mux(p)
        for p in v.encode(None):
            out.mux(p)
        n = 48000 * frames // fps
        sig = (0.3 * np.sin(2 * np.pi * 440 * np.arange(n) / 48000)).astype(np.float32)
        for s0 in range(0, n, 1024):
            af = av.AudioFrame.from_ndarray(np.stack([sig[s0:s0 + 1024]] * 2), format="fltp",
                                            layout="stereo")
            af.sample_rate, af.pts = 48000, s0
            for p in a.encode(af):
                out.mux(p)
        for p in a.encode(None):
            out.mux(p)
    return path


def frames_of(path):
    with av.open(str(path)) as c:
        return [(f.time, f.to_ndarray(), f.format.name) for f in c.decode(video=0)]


def audio_packets(path):
    with av.open(str(path)) as c:
        return [(p.pts, bytes(p)) for p in c.demux(audio=0) if p.size]


def test_frames_timestamps_audio_colour_and_tags_are_kept(tmp_path):
    src = make_clip(tmp_path / "clip.mp4")
    dst = tmp_path / "out.mp4"
    # crf 0: x264 lossless, so what is measured below is the colour conversion, not the codec
    report = upscale_video(Nearest(), INFO, src, dst, segment=5, crf=0, progress=False)
    assert report == {"frames": 12, "resumed": 0}
    a, b = frames_of(src), frames_of(dst)
    assert [t for t, _, _ in a] == [t for t, _, _ in b] and len(b) == 12
    assert {f for _, _, f in b} == {"yuv420p"}
    for (_, x, _), (_, y, _) in zip(a, b):  # yuv420p planes stacked: Y (H rows), then U, V
        ya, yb = x[:24].astype(int), y[:48].astype(int)
        assert np.abs(yb[::2, ::2] - ya).max() <= 1  # luma within a level
        for plane in (0, 1):  # U, V: 4:2:0 chroma is interpolated to RGB and subsampled
            # again, which blurs it sample by sample; a wrong matrix or range shifts its mean
            ca = x[24 + 6 * plane:30 + 6 * plane].astype(float)
            cb = y[48 + 12 * plane:60 + 12 * plane].astype(float)
            assert abs(cb.mean() - ca.mean()) < 0.5
    assert audio_packets(dst) == audio_packets(src) != []
    with av.open(str(dst)) as c:
        v = c.streams.video[0]
        ctx = v.codec_context
        assert (v.width, v.height) == (64, 48) and v.average_rate == 24
        assert (ctx.colorspace, ctx.color_range, ctx.color_primaries, ctx.color_trc) == (1, 1, 1, 1)
    assert not work_folder(dst).exists()


def test_an_interrupted_run_resumes_and_equals_one_run(tmp_path, monkeypatch):
    src = make_clip(tmp_path / "clip.mp4", seed=1)
    upscale_video(Nearest(), INFO, src, tmp_path / "once.mp4", segment=4, progress=False)
    real, calls = video._write_segment, []

    def interrupted(*args, **kw):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(args[2])
        return real(*args, **kw)
    monkeypatch.setattr(video, "_write_segment", interrupted)
    dst = tmp_path / "resumed.mp4"
    with pytest.raises(KeyboardInterrupt):
        upscale_video(Nearest(), INFO, src, dst, segment=4, progress=False)
    folder = work_folder(dst)
    assert sorted(p.name for p in folder.glob("seg_*.mkv")) == ["seg_000000.mkv", "seg_000001.mkv"]
    assert not dst.exists()
    (folder / ".seg_000002.mkv.0badc0de-1-0123456789abcdef.srgrad.tmp").write_bytes(b"kill -9")
    monkeypatch.setattr(video, "_write_segment", real)
    report = upscale_video(Nearest(), INFO, src, dst, segment=4, progress=False)
    assert report == {"frames": 12, "resumed": 8}
    assert dst.read_bytes() == (tmp_path / "once.mp4").read_bytes()


def test_another_commands_work_folder_is_refused(tmp_path, monkeypatch):
    src = make_clip(tmp_path / "clip.mp4")
    dst = tmp_path / "out.mkv"
    monkeypatch.setattr(video, "_mux", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        upscale_video(Nearest(), INFO, src, dst, segment=6, progress=False)
    with pytest.raises(VideoError, match=r"holds the work of another command \(it differs in "
                                         r"segment\)"):
        upscale_video(Nearest(), INFO, src, dst, segment=4, progress=False)


@pytest.mark.parametrize("dst,match", [("clip.mp4", "is the input"), ("out.png", "not a video"),
                                       ("out.mp4", "needs even sizes")])
def test_refusals(tmp_path, dst, match):
    src = make_clip(tmp_path / "clip.mp4", frames=2)
    with pytest.raises(VideoError, match=match):
        upscale_video(Nearest(), INFO, src, tmp_path / dst, outscale=1.05, progress=False)


def test_srgrad_infer_on_a_clip(tmp_path, capsys):
    from framework.engine import build_model
    from framework.engine.commands.cli import infer_main
    from framework.nn import init
    from framework.weights import save_weights
    spec = {"type": "FSRCNN", "d": 8, "s": 4, "m": 1}
    init.manual_seed(0)
    weights = tmp_path / "net.safetensors"
    save_weights(weights, build_model(spec, scale=2).state_dict(), model={**spec, "scale": 2},
                 scale=2)
    src = make_clip(tmp_path / "clip.mp4", frames=6)
    dst = tmp_path / "out.mkv"
    args = ["--weights", str(weights), "-i", str(src), "-o", str(dst), "--no-progress", "--tta",
            "-t", "16", "--codec", "libx264", "--crf", "20", "--preset", "fast"]
    assert infer_main(args) == 0
    assert len(frames_of(dst)) == 6 and frames_of(dst)[0][1].shape == (72, 64)
    assert infer_main(args) == 2  # the output exists: a file run stops (--overwrite replaces it)
    assert "exists" in capsys.readouterr().err
    assert infer_main(args + ["--overwrite"]) == 0


_KILLED_RUN = """
import sys, time
import framework.functional as F
from framework import nn
from framework.engine.inference.video import upscale_video

class Slow(nn.Module):
    def forward(self, x):
        time.sleep(0.3)  # a frame batch at a time: segments finish one after another
        return F.interpolate(x, scale_factor=2, mode="nearest")

upscale_video(Slow(), {"scale": 2, "model": {"type": "nearest x2"}}, sys.argv[1], sys.argv[2],
              segment=2, batch=1, progress=False)
"""


def test_kill_9_keeps_the_finished_segments(tmp_path):
    """A real SIGKILL after the first segment: the next run continues and equals one run."""
    import os
    import signal
    import subprocess
    import sys
    import time
    src = make_clip(tmp_path / "clip.mp4", frames=8, seed=2)
    dst = tmp_path / "out.mp4"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, str(src), str(dst)],
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    folder, deadline = work_folder(dst), time.monotonic() + 120
    try:
        while not (folder / "seg_000000.mkv").exists() and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = sorted(p.name for p in folder.glob("seg_*.mkv"))
    assert done and "seg_000003.mkv" not in done and not dst.exists()
    report = upscale_video(Nearest(), INFO, src, dst, segment=2, batch=1, progress=False)
    assert report["resumed"] == 2 * len(done)
    upscale_video(Nearest(), INFO, src, tmp_path / "once.mp4", segment=2, batch=1, progress=False)
    assert dst.read_bytes() == (tmp_path / "once.mp4").read_bytes()
    assert not folder.exists()
